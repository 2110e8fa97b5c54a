//! Passive health: what requests learn about a server. Connect failures
//! in a row (`max_fails`) and, with outlier detection on, 5xx responses
//! or response timeouts in a row (`consecutive_5xx`) eject it. An
//! ejection lasts `fail_timeout`, one `fail_timeout` longer each time the
//! server is ejected again soon after it came back (up to
//! `max_fail_timeout`), so a flapping server costs ever fewer requests.
//! Ejections for responses never take more than `max_ejected_percent` of
//! the group out, and never the last server: a group whose servers all
//! answer 503 is not emptied by its own errors. A server back from an
//! ejection or from failing health checks ramps up its share over
//! `slow_start`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::shared::{Server, ServerSet, UpstreamShared};
use crate::config::PassiveEjection;

/// The smallest share of its weight a server in slow start gets, in tenths.
const RAMP_FLOOR_TENTHS: u32 = 1;

impl Server {
    /// Ejects it unless it is already: for `fail_timeout`, or one
    /// `fail_timeout` longer than last time when it comes soon after its
    /// last ejection (within that one's length of its end), up to
    /// `max_fail_timeout`. Logged once, naming `upstream` and `why`.
    pub(super) fn eject(&self, passive: PassiveEjection, upstream: &str, why: &str) {
        let now = self.now_ms();
        if self.ejected_until_ms.load(Ordering::Relaxed) > now {
            return;
        }
        let base = passive.fail_timeout.as_millis() as u64;
        let streak = self.ejections.load(Ordering::Relaxed);
        let back = self.back_at_ms.load(Ordering::Relaxed);
        let last = base.saturating_mul(u64::from(streak));
        let streak = if streak > 0 && now < back.saturating_add(last) {
            streak.saturating_add(1)
        } else {
            1
        };
        let length = base
            .saturating_mul(u64::from(streak))
            .min(passive.max_fail_timeout.as_millis() as u64);
        let until = now.saturating_add(length);
        self.ejections.store(streak, Ordering::Relaxed);
        self.back_at_ms.store(until, Ordering::Relaxed);
        self.ramp_from_ms.store(0, Ordering::Relaxed);
        self.ejected_until_ms.store(until, Ordering::Relaxed);
        tracing::warn!(
            %upstream,
            server = %self.addr,
            "backend ejected for {:?} after {why}",
            Duration::from_millis(length)
        );
    }

    /// Its weight for balancing now (`full`, scaled), in slow start
    /// (`slow`): from a tenth of it to all of it in proportion to the time
    /// since it came back; `None` when it is not ramping.
    fn ramped(&self, full: u32, slow: u64) -> Option<u32> {
        let from = self.ramp_from_ms.load(Ordering::Relaxed);
        if from == 0 {
            return None;
        }
        let now = self.now_ms();
        if now >= from.saturating_add(slow) {
            let _ =
                self.ramp_from_ms
                    .compare_exchange(from, 0, Ordering::Relaxed, Ordering::Relaxed);
            return None;
        }
        let part = u64::from(full) * now.saturating_sub(from) / slow.max(1);
        Some((part as u32).max(full * RAMP_FLOOR_TENTHS / 10).max(1))
    }
}

impl UpstreamShared {
    /// `server` answered a request head with `status`. Inline, as
    /// [`Backends::answered`] (once per request: the call was 16
    /// instructions, callgrind); a 5xx's count out of line.
    ///
    /// [`Backends::answered`]: super::Backends::answered
    #[inline]
    pub(crate) fn answered(&self, server: &Server, status: u16) {
        let Some(limit) = self.config.outliers.consecutive_5xx else {
            return;
        };
        if !(500..=599).contains(&status) {
            if server.errors.load(Ordering::Relaxed) != 0 {
                server.errors.store(0, Ordering::Relaxed);
            }
            return;
        }
        self.status_failed(server, limit, status);
    }

    /// [`UpstreamShared::answered`] for a 5xx.
    #[inline(never)]
    fn status_failed(&self, server: &Server, limit: u32, status: u16) {
        self.response_failed(server, limit, &format!("status {status}"));
    }

    /// `server` sent no response head within `backend_response_timeout`.
    pub(crate) fn timed_out(&self, server: &Server) {
        if let Some(limit) = self.config.outliers.consecutive_5xx {
            self.response_failed(server, limit, "response timeout");
        }
    }

    fn response_failed(&self, server: &Server, limit: u32, last: &str) {
        let errors = server
            .errors
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        if errors < limit {
            return;
        }
        // Counted afresh whatever the decision: a server kept in (the
        // share is full) is looked at again after `limit` more.
        server.errors.store(0, Ordering::Relaxed);
        let why = format!("{errors} 5xx responses or timeouts in a row (last: {last})");
        let _decide = self
            .ejecting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let set = self.servers();
        let n = set.servers.len();
        let out = set
            .servers
            .iter()
            .filter(|s| s.addr != server.addr && (s.is_ejected() || !s.is_up()))
            .count();
        if out + 1 > self.max_ejected(n) {
            tracing::warn!(
                upstream = %self.config.name,
                server = %server.addr,
                "backend not ejected after {why}: {out} of {n} servers are out already \
                 (max_ejected_percent {})",
                self.config.outliers.max_ejected_percent
            );
            return;
        }
        server.eject(self.config.passive, &self.config.name, &why);
    }

    /// Most of `n` servers that responses may keep ejected at once.
    fn max_ejected(&self, n: usize) -> usize {
        let percent = self.config.outliers.max_ejected_percent as usize;
        if n < 2 || percent == 0 {
            return 0;
        }
        (n * percent / 100).max(1).min(n - 1)
    }
}

/// The weights balancers use now, written to `out`, when some server of
/// `set` is in slow start over `slow`; false when none is (or slow start
/// is off) and `set.weights` hold. Reads a clock only for servers that
/// came back lately.
pub(super) fn ramped_weights(set: &ServerSet, slow: Duration, out: &mut Vec<u32>) -> bool {
    if slow.is_zero() {
        return false;
    }
    let slow = slow.as_millis() as u64;
    let mut any = false;
    out.clear();
    for (s, &full) in set.servers.iter().zip(&set.weights) {
        let w = match s.ramped(full, slow) {
            Some(w) => {
                any = true;
                w
            }
            None => full,
        };
        out.push(w);
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::UpstreamConfig;
    use std::net::SocketAddr;

    fn group(n: u16, consecutive_5xx: u32) -> std::sync::Arc<UpstreamShared> {
        let addrs: Vec<SocketAddr> = (0..n)
            .map(|i| SocketAddr::from(([192, 0, 2, 1], 8000 + i)))
            .collect();
        let mut config = UpstreamConfig::simple("g".into(), addrs);
        config.outliers.consecutive_5xx = Some(consecutive_5xx);
        config.passive.fail_timeout = Duration::from_secs(10);
        config.passive.max_fail_timeout = Duration::from_secs(25);
        UpstreamShared::new(config)
    }

    /// How long server `s` is ejected for from now, in whole seconds.
    fn ejected_for(s: &Server) -> u64 {
        let until = s.ejected_until_ms.load(Ordering::Relaxed);
        until.saturating_sub(s.now_ms()).div_ceil(1000)
    }

    #[test]
    fn responses_eject_within_the_share_and_never_the_last_server() {
        let g = group(3, 2);
        let set = g.servers();
        let (a, b) = (&set.servers[0], &set.servers[1]);
        g.answered(a, 503);
        assert!(!a.is_ejected(), "one 5xx of two");
        g.answered(a, 200);
        g.answered(a, 503);
        assert!(!a.is_ejected(), "a success reset the streak");
        g.answered(a, 503);
        assert!(a.is_ejected());
        // 50 % of three is one server: the second stays in.
        g.answered(b, 500);
        g.timed_out(b);
        assert!(!b.is_ejected());

        let single = group(1, 1);
        let only = &single.servers().servers[0];
        single.answered(only, 503);
        assert!(!only.is_ejected(), "the last server was ejected");
    }

    #[test]
    fn an_ejection_soon_after_the_last_lasts_longer_up_to_the_cap() {
        let g = group(2, 1);
        let s = g.servers().servers[0].clone();
        let passive = g.config.passive;
        let mut lengths = Vec::new();
        for _ in 0..4 {
            s.eject(passive, "g", "test");
            lengths.push(ejected_for(&s));
            // It comes back now, and fails again at once.
            let now = s.now_ms();
            s.ejected_until_ms.store(now, Ordering::Relaxed);
            s.back_at_ms.store(now, Ordering::Relaxed);
        }
        assert_eq!(lengths, [10, 20, 25, 25]);
    }

    #[test]
    fn a_returning_server_ramps_from_a_tenth_of_its_weight() {
        let g = group(2, 1);
        let set = g.servers();
        let mut out = Vec::new();
        assert!(!ramped_weights(&set, Duration::from_secs(60), &mut out));
        set.servers[0].set_up(false);
        set.servers[0].set_up(true);
        assert!(ramped_weights(&set, Duration::from_secs(60), &mut out));
        assert_eq!(out[1], set.weights[1]);
        assert!(
            out[0] >= set.weights[0] / 10 && out[0] < set.weights[0] / 5,
            "{out:?}"
        );
        assert!(
            !ramped_weights(&set, Duration::ZERO, &mut out),
            "slow start off"
        );
    }
}
