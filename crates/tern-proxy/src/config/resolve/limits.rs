//! A listener's time and size bounds, and the forwarding fields it adds.

use tern_http::rewrite::ForwardedFields;

use super::super::options::defaults;
use super::super::{KeyError, Limits, ListenerOptions};
use super::{duration, key_err, positive};

/// Deadlines and sizes; zero durations and counts are refused.
pub(super) fn limits(o: &ListenerOptions) -> Result<Limits, KeyError> {
    let d = Limits::default();
    Ok(Limits {
        handshake_timeout: duration(
            o.handshake_timeout.as_deref(),
            "handshake_timeout",
            d.handshake_timeout,
        )?,
        header_timeout: duration(
            o.header_timeout.as_deref(),
            "header_timeout",
            d.header_timeout,
        )?,
        idle_timeout: duration(o.idle_timeout.as_deref(), "idle_timeout", d.idle_timeout)?,
        backend_connect_timeout: duration(
            o.backend_connect_timeout.as_deref(),
            "backend_connect_timeout",
            d.backend_connect_timeout,
        )?,
        backend_response_timeout: duration(
            o.backend_response_timeout.as_deref(),
            "backend_response_timeout",
            d.backend_response_timeout,
        )?,
        max_connections: positive(o.max_connections, "max_connections", d.max_connections)?,
        max_head_bytes: match o.max_head_bytes {
            Some(n) if n < 1024 => return Err(key_err("max_head_bytes", "must be at least 1024")),
            Some(n) => n,
            None => d.max_head_bytes,
        },
        backend_pool_size: o.backend_pool_size.unwrap_or(d.backend_pool_size),
    })
}

pub(super) fn forwarded_fields(given: &[String]) -> Result<ForwardedFields, KeyError> {
    let names: Vec<&str> = if given.is_empty() {
        defaults::FORWARDED.to_vec()
    } else {
        given.iter().map(String::as_str).collect()
    };
    let mut f = ForwardedFields {
        x_forwarded_for: false,
        x_forwarded_proto: false,
        forwarded: false,
    };
    for n in names {
        match n.to_ascii_lowercase().as_str() {
            "x-forwarded-for" => f.x_forwarded_for = true,
            "x-forwarded-proto" => f.x_forwarded_proto = true,
            "forwarded" => f.forwarded = true,
            "none" => {}
            other => {
                return Err(key_err(
                    "forwarded",
                    format!("unknown forwarding field {other:?} (x-forwarded-for, x-forwarded-proto, forwarded, none)"),
                ))
            }
        }
    }
    Ok(f)
}
