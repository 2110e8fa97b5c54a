//! A listener's HTTP/2 limits and HTTP/3 settings.

use tern_tls::ServerTlsSettings;

use super::super::{H2Limits, H3Settings, KeyError, ListenerOptions, Mode};
use super::{key_err, nonzero_u32};

/// HTTP/2 limits; each bound must be at least 1 where 0 would stall clients.
pub(super) fn h2_limits(o: &ListenerOptions) -> Result<H2Limits, KeyError> {
    let hd = H2Limits::default();
    Ok(H2Limits {
        max_concurrent_streams: nonzero_u32(
            o.h2_max_concurrent_streams,
            "h2_max_concurrent_streams",
            hd.max_concurrent_streams,
        )?,
        max_header_list_size: nonzero_u32(
            o.h2_max_header_list_size,
            "h2_max_header_list_size",
            hd.max_header_list_size,
        )?,
        header_table_size: o.h2_header_table_size.unwrap_or(hd.header_table_size),
        max_resets_per_second: nonzero_u32(
            o.h2_max_resets_per_second,
            "h2_max_resets_per_second",
            hd.max_resets_per_second,
        )?,
        max_send_buffer: hd.max_send_buffer,
    })
}

/// HTTP/3 settings, when `http3` is on; the other `h3_*` keys without it
/// are an error (a setting that silently does nothing is a trap).
pub(super) fn h3_settings(
    o: &ListenerOptions,
    port: u16,
    mode: Mode,
    tls: &ServerTlsSettings,
) -> Result<Option<H3Settings>, KeyError> {
    if !o.http3 {
        for (set, key) in [
            (o.h3_max_streams.is_some(), "h3_max_streams"),
            (o.quic_retry_above.is_some(), "quic_retry_above"),
            (o.alt_svc_max_age.is_some(), "alt_svc_max_age"),
            (o.quic_gso.is_some(), "quic_gso"),
            (o.quic_early_data.is_some(), "quic_early_data"),
        ] {
            if set {
                return Err(key_err(key, "has no effect without http3 = true"));
            }
        }
        return Ok(None);
    }
    if matches!(mode, Mode::Tcp { .. }) {
        return Err(key_err("http3", "HTTP/3 needs mode = \"http\""));
    }
    if let Some(problem) = tls.policy.quic_problem() {
        return Err(key_err("http3", problem));
    }
    let d = H3Settings::new(port);
    Ok(Some(H3Settings {
        max_streams: nonzero_u32(o.h3_max_streams, "h3_max_streams", d.max_streams)?,
        retry_above: o.quic_retry_above.unwrap_or(d.retry_above),
        alt_svc: match o.alt_svc_max_age {
            Some(0) => None,
            Some(age) => Some(super::super::alt_svc(port, age)),
            None => d.alt_svc,
        },
        gso: o.quic_gso.unwrap_or(d.gso),
        early_data: o.quic_early_data.unwrap_or(d.early_data),
    }))
}
