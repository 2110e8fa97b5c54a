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

use super::shared::UpstreamShared;

/// Why a server is ejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
    /// Connect failures: always ejected (it cannot serve anyway).
    Connect,
    /// 5xx responses or response timeouts: within the group's share.
    Responses,
}

/// The smallest weight share a server in slow start gets, in tenths.
const RAMP_FLOOR_TENTHS: u32 = 1;

impl UpstreamShared {
    /// A connection to server `i` succeeded: its failure streak ends.
    pub(super) fn connect_succeeded(&self, i: usize) {
        let s = &self.servers[i];
        if s.fails.load(Ordering::Relaxed) != 0 {
            s.fails.store(0, Ordering::Relaxed);
        }
    }

    /// A connection to server `i` failed; after `max_fails` in a row it is
    /// ejected. The streak is not reset by the ejection, so after it a
    /// single new failure ejects the server again instead of costing
    /// `max_fails` more requests a retry each.
    pub(super) fn connect_failed(&self, i: usize, error: &dyn std::fmt::Display) {
        let s = &self.servers[i];
        let fails = s.fails.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if fails >= self.config.passive.max_fails {
            let why = format!("{fails} connect failures in a row: {error}");
            self.eject(i, Cause::Connect, &why);
        }
    }

    /// Server `i` answered a request head with `status`.
    pub(super) fn answered(&self, i: usize, status: u16) {
        let Some(limit) = self.config.outliers.consecutive_5xx else {
            return;
        };
        let s = &self.servers[i];
        if !(500..=599).contains(&status) {
            if s.errors.load(Ordering::Relaxed) != 0 {
                s.errors.store(0, Ordering::Relaxed);
            }
            return;
        }
        self.response_failed(i, limit, &format!("status {status}"));
    }

    /// Server `i` sent no response head within `backend_response_timeout`.
    pub(super) fn timed_out(&self, i: usize) {
        if let Some(limit) = self.config.outliers.consecutive_5xx {
            self.response_failed(i, limit, "response timeout");
        }
    }

    fn response_failed(&self, i: usize, limit: u32, last: &str) {
        let s = &self.servers[i];
        let errors = s.errors.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if errors >= limit {
            // Counted afresh whatever the decision: a server kept in (the
            // share is full) is looked at again after `limit` more.
            s.errors.store(0, Ordering::Relaxed);
            let why = format!("{errors} 5xx responses or timeouts in a row (last: {last})");
            self.eject(i, Cause::Responses, &why);
        }
    }

    /// Most servers that responses may keep ejected at once.
    fn max_ejected(&self) -> usize {
        let n = self.servers.len();
        let percent = self.config.outliers.max_ejected_percent as usize;
        if n < 2 || percent == 0 {
            return 0;
        }
        (n * percent / 100).max(1).min(n - 1)
    }

    /// Ejects server `i` unless it is already, or (for responses) the
    /// group's share of ejected servers is full.
    pub(super) fn eject(&self, i: usize, cause: Cause, why: &str) {
        let _decide = self
            .eject_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = self.now_ms();
        let s = &self.servers[i];
        if s.ejected_until_ms.load(Ordering::Relaxed) > now {
            return;
        }
        if cause == Cause::Responses {
            let out = (0..self.servers.len())
                .filter(|&j| j != i && !self.is_live_at(j, now))
                .count();
            if out + 1 > self.max_ejected() {
                tracing::warn!(
                    upstream = %self.config.name,
                    server = %self.addr(i),
                    "backend not ejected after {why}: {out} of {} servers are out already \
                     (max_ejected_percent {})",
                    self.servers.len(),
                    self.config.outliers.max_ejected_percent
                );
                return;
            }
        }
        let passive = self.config.passive;
        let base = passive.fail_timeout.as_millis() as u64;
        let streak = s.ejections.load(Ordering::Relaxed);
        let back = s.back_at_ms.load(Ordering::Relaxed);
        let last = base.saturating_mul(u64::from(streak));
        // Ejected again within the length of its last ejection after it
        // came back: this one lasts longer.
        let streak = if streak > 0 && now < back.saturating_add(last) {
            streak.saturating_add(1)
        } else {
            1
        };
        let length = base
            .saturating_mul(u64::from(streak))
            .min(passive.max_fail_timeout.as_millis() as u64);
        let until = now.saturating_add(length);
        s.ejections.store(streak, Ordering::Relaxed);
        s.back_at_ms.store(until, Ordering::Relaxed);
        s.ramp_from_ms.store(0, Ordering::Relaxed);
        s.ejected_until_ms.store(until, Ordering::Relaxed);
        tracing::warn!(
            upstream = %self.config.name,
            server = %self.addr(i),
            "backend ejected for {:?} after {why}",
            std::time::Duration::from_millis(length)
        );
    }

    /// Is server `i` taking requests at `now` (no side effects)?
    fn is_live_at(&self, i: usize, now: u64) -> bool {
        let s = &self.servers[i];
        s.up.load(Ordering::Relaxed) && s.ejected_until_ms.load(Ordering::Relaxed) <= now
    }

    /// Server `i` takes requests again since `at` (ms): its slow start
    /// begins.
    pub(super) fn came_back(&self, i: usize, at: u64) {
        let slow = self.config.outliers.slow_start.as_millis() as u64;
        if slow == 0 {
            return;
        }
        self.servers[i].ramp_from_ms.store(at, Ordering::Relaxed);
        self.ramping_until_ms
            .fetch_max(at.saturating_add(slow), Ordering::Relaxed);
        tracing::info!(
            upstream = %self.config.name,
            server = %self.addr(i),
            "backend back: its share ramps up over {:?} (slow_start)",
            self.config.outliers.slow_start
        );
    }

    /// The weights balancers should use now, written to `out`, when some
    /// server is in slow start (it gets from a tenth of its weight to all
    /// of it, in proportion to the time since it came back); false when
    /// none is and the configured weights hold. Reads the clock only
    /// while a slow start may be running.
    pub(super) fn ramped_weights(&self, out: &mut Vec<u32>) -> bool {
        let until = self.ramping_until_ms.load(Ordering::Relaxed);
        if until == 0 {
            return false;
        }
        let now = self.now_ms();
        if now >= until {
            let _ = self.ramping_until_ms.compare_exchange(
                until,
                0,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            return false;
        }
        let slow = (self.config.outliers.slow_start.as_millis() as u64).max(1);
        out.clear();
        for (s, &full) in self.servers.iter().zip(&self.weights) {
            let from = s.ramp_from_ms.load(Ordering::Relaxed);
            let ramped = if from == 0 || now >= from + slow {
                full
            } else {
                let part = u64::from(full) * now.saturating_sub(from) / slow;
                (part as u32).max(full * RAMP_FLOOR_TENTHS / 10).max(1)
            };
            out.push(ramped);
        }
        true
    }
}
