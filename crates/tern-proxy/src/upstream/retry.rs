//! Retries on another server, and the budget that bounds them.
//!
//! A request whose connect failed goes to the next live server (nothing
//! was sent: safe for any method); an idempotent request sent whole that
//! got a `retry_on` status goes once to another server. Each such retry
//! takes a token from the group's budget; each request to the group adds
//! `retry_budget` hundredths of one, up to [`BURST`] tokens. So over any
//! stretch retries are at most `retry_budget` percent of requests plus a
//! burst, and an outage of every server cannot multiply the load on them
//! (Envoy's retry budgets, Finagle's `RetryBudget`). The budget is per
//! worker (no shared counter on the request path): with W workers, up to
//! W bursts.
//!
//! Retries of a stale pooled connection on the same server, and of an
//! HTTP/2 stream the server refused, are not counted here: the server
//! never saw the request.

use crate::config::BackendAddr;
use std::cell::Cell;
use std::fmt::Write as _;

use super::affinity::Target;

/// Tokens a worker's budget holds at most (and starts with).
pub const BURST: u32 = 10;

/// One token, in the budget's unit (a hundredth of a token per percent).
const TOKEN: u32 = 100;

/// One worker's retry budget for one group.
#[derive(Debug)]
pub(super) struct Budget {
    /// Hundredths of a token.
    tokens: Cell<u32>,
    /// `retry_budget`: hundredths of a token each request adds.
    percent: u32,
}

impl Budget {
    /// A full budget adding `percent` hundredths per request (0: none ever).
    pub(super) fn new(percent: u32) -> Budget {
        Budget {
            tokens: Cell::new(if percent == 0 { 0 } else { BURST * TOKEN }),
            percent,
        }
    }

    /// One request to the group.
    pub(super) fn deposit(&self) {
        let t = self.tokens.get();
        if t < BURST * TOKEN {
            self.tokens.set((t + self.percent).min(BURST * TOKEN));
        }
    }

    /// Takes a token for one retry, if there is one.
    pub(super) fn withdraw(&self) -> bool {
        let t = self.tokens.get();
        if t < TOKEN {
            return false;
        }
        self.tokens.set(t - TOKEN);
        true
    }
}

/// One request's dealings with its group: what picks its server, the
/// servers it tried, and its retries (for the access log and metrics).
#[derive(Debug, Default)]
pub struct Tries {
    /// What picks the server (the affinity key).
    pub(crate) target: Target,
    /// Servers that failed this request (by address, which outlives any
    /// index into a changing server set).
    pub(super) tried: Vec<BackendAddr>,
    /// Retries on another server after a connect failure.
    pub connect_retries: u8,
    /// The status that made the request go to another server, if one did.
    pub status_retry: Option<u16>,
    /// A retry was wanted but the budget had no token for it.
    pub denied: bool,
}

impl Tries {
    /// Did `addr` fail this request already?
    pub(super) fn tried(&self, addr: BackendAddr) -> bool {
        self.tried.contains(&addr)
    }

    /// True when the request went to another server or wanted to.
    pub fn any(&self) -> bool {
        self.connect_retries > 0 || self.status_retry.is_some() || self.denied
    }

    /// The access log's `retry=` value: `connect` per connect failure
    /// retried, the status retried, `budget` when the budget refused one
    /// (e.g. `connect,503` or `503,budget`); `None` when nothing was.
    pub fn log_value(&self) -> Option<String> {
        if !self.any() {
            return None;
        }
        let mut v = String::new();
        for _ in 0..self.connect_retries {
            v.push_str("connect,");
        }
        if let Some(status) = self.status_retry {
            let _ = write!(v, "{status},");
        }
        if self.denied {
            v.push_str("budget,");
        }
        v.pop();
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_stay_within_the_percentage_plus_the_burst() {
        let budget = Budget::new(20);
        let mut retries = 0;
        for _ in 0..1000 {
            budget.deposit();
            if budget.withdraw() {
                retries += 1;
            }
        }
        // 20% of 1000 requests, and the burst the budget started with.
        assert!((200..=200 + BURST as usize).contains(&retries), "{retries}");
        let none = Budget::new(0);
        none.deposit();
        assert!(!none.withdraw());
    }

    #[test]
    fn log_values_name_each_retry() {
        let mut t = Tries::default();
        assert_eq!(t.log_value(), None);
        t.connect_retries = 1;
        t.status_retry = Some(503);
        t.denied = true;
        assert_eq!(t.log_value().as_deref(), Some("connect,503,budget"));
    }
}
