//! How a group chooses among its servers and lives with their failures:
//! affinity (`hash`, `sticky_cookie`), outlier detection and slow start,
//! and retries on another server with their budget. Typed settings and
//! their resolution from an `[[upstream]]` table.

use std::time::Duration;

use super::options::{defaults, UpstreamOptions};
use super::resolve::{duration, key_err};
use super::KeyError;

/// What `balance = "hash"` hashes a request on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashKey {
    /// The client's address (the PROXY header's, behind a trusted proxy).
    ClientIp,
    /// The value of a request header (lowercase name).
    Header(Box<str>),
    /// The value of a request cookie.
    Cookie(Box<str>),
}

/// Affinity settings (`balance = "hash"` and `"sticky_cookie"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Affinity {
    /// What `hash` hashes.
    pub hash_key: HashKey,
    /// Bounded loads: a server may hold at most this many percent of the
    /// average requests in flight (weighted); `None`: no bound.
    pub balance_factor: Option<u32>,
    /// Name of the sticky cookie.
    pub sticky_cookie: Box<str>,
}

impl Default for Affinity {
    fn default() -> Self {
        Affinity {
            hash_key: HashKey::ClientIp,
            balance_factor: None,
            sticky_cookie: defaults::STICKY_COOKIE.into(),
        }
    }
}

/// Outlier detection on responses, and slow start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outliers {
    /// 5xx responses or response timeouts in a row that eject a server;
    /// `None`: off.
    pub consecutive_5xx: Option<u32>,
    /// Largest share (percent) of servers ejected at once for responses.
    pub max_ejected_percent: u32,
    /// Ramp of a returning server's weight; zero: none.
    pub slow_start: Duration,
}

impl Default for Outliers {
    fn default() -> Self {
        Outliers {
            consecutive_5xx: None,
            max_ejected_percent: defaults::MAX_EJECTED_PERCENT,
            slow_start: defaults::SLOW_START,
        }
    }
}

/// Retries on another server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retries {
    /// Statuses that make an idempotent request go to another server.
    pub on: Vec<u16>,
    /// Percent of the group's requests that may be retries.
    pub budget: u32,
}

impl Default for Retries {
    fn default() -> Self {
        Retries {
            on: defaults::RETRY_ON
                .iter()
                .filter_map(|s| s.parse().ok())
                .collect(),
            budget: defaults::RETRY_BUDGET,
        }
    }
}

/// The affinity settings of a table.
pub(crate) fn affinity(o: &UpstreamOptions) -> Result<Affinity, KeyError> {
    let hash_key = hash_key(o.hash_key.as_deref().unwrap_or(defaults::HASH_KEY))?;
    let factor = o
        .hash_balance_factor
        .unwrap_or(defaults::HASH_BALANCE_FACTOR);
    if factor != 0 && factor <= 100 {
        return Err(key_err(
            "hash_balance_factor",
            format!("{factor} must be above 100 (percent of the average load), or 0 for off"),
        ));
    }
    let sticky_cookie = o
        .sticky_cookie
        .as_deref()
        .unwrap_or(defaults::STICKY_COOKIE);
    if !is_token(sticky_cookie) {
        return Err(key_err(
            "sticky_cookie",
            format!("{sticky_cookie:?} is not a cookie name (letters, digits, !#$%&'*+-.^_`|~)"),
        ));
    }
    Ok(Affinity {
        hash_key,
        balance_factor: (factor != 0).then_some(factor),
        sticky_cookie: sticky_cookie.into(),
    })
}

fn hash_key(text: &str) -> Result<HashKey, KeyError> {
    let bad = |why: &str| {
        key_err(
            "hash_key",
            format!("{text:?}: {why} (client_ip, header:NAME or cookie:NAME)"),
        )
    };
    if text == "client_ip" {
        return Ok(HashKey::ClientIp);
    }
    let Some((kind, name)) = text.split_once(':') else {
        return Err(bad("unknown key"));
    };
    if !is_token(name) {
        return Err(bad("not a field or cookie name"));
    }
    match kind {
        "header" => Ok(HashKey::Header(name.to_ascii_lowercase().into())),
        "cookie" => Ok(HashKey::Cookie(name.into())),
        _ => Err(bad("unknown key")),
    }
}

/// An HTTP token (RFC 9110 section 5.6.2): what field and cookie names are.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The outlier and slow-start settings of a table.
pub(crate) fn outliers(o: &UpstreamOptions) -> Result<Outliers, KeyError> {
    if o.consecutive_5xx == Some(0) {
        return Err(key_err("consecutive_5xx", "must be at least 1"));
    }
    let max_ejected_percent = o
        .max_ejected_percent
        .unwrap_or(defaults::MAX_EJECTED_PERCENT);
    if max_ejected_percent > 100 {
        return Err(key_err("max_ejected_percent", "must be at most 100"));
    }
    Ok(Outliers {
        consecutive_5xx: o.consecutive_5xx,
        max_ejected_percent,
        slow_start: match o.slow_start.as_deref() {
            // "0s" turns it off, which `duration` (for timeouts) refuses.
            Some(t) if humantime::parse_duration(t).is_ok_and(|d| d.is_zero()) => Duration::ZERO,
            t => duration(t, "slow_start", defaults::SLOW_START)?,
        },
    })
}

/// The retry settings of a table.
pub(crate) fn retries(o: &UpstreamOptions) -> Result<Retries, KeyError> {
    let d = Retries::default();
    let on = o.retry_on.clone().unwrap_or(d.on);
    if let Some(bad) = on.iter().find(|s| !(500..=599).contains(*s)) {
        return Err(key_err(
            "retry_on",
            format!("{bad}: only 5xx statuses can be retried"),
        ));
    }
    let budget = o.retry_budget.unwrap_or(d.budget);
    if budget > 100 {
        return Err(key_err("retry_budget", "must be at most 100 (percent)"));
    }
    Ok(Retries { on, budget })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_keys_parse_and_bad_ones_are_named() {
        assert_eq!(hash_key("client_ip").ok(), Some(HashKey::ClientIp));
        assert_eq!(
            hash_key("header:X-User").ok(),
            Some(HashKey::Header("x-user".into()))
        );
        assert_eq!(
            hash_key("cookie:session").ok(),
            Some(HashKey::Cookie("session".into()))
        );
        for bad in ["ip", "header:", "cookie:a b", "query:x"] {
            let e = hash_key(bad).expect_err(bad);
            assert!(e.message.contains(bad), "{}", e.message);
        }
    }
}
