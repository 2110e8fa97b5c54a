//! Retries on another server, by upstream group: made after a connect
//! failure, made after a `retry_on` status, and refused by the group's
//! retry budget. An open set of groups, but these are counted only when a
//! request failed somewhere, never on the healthy path, so a lock is fine.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use super::text::{Exposition, Kind};

/// What is counted per group.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    connect: u64,
    status: u64,
    denied: u64,
}

/// Retry counters of every group (by name; kept across reloads).
#[derive(Debug, Default)]
pub(crate) struct Retries {
    groups: Mutex<BTreeMap<String, Counts>>,
}

impl Retries {
    /// Counts one request's retries on `upstream`.
    pub(crate) fn add(&self, upstream: &str, connect: u64, status: u64, denied: bool) {
        let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        if !groups.contains_key(upstream) {
            groups.insert(upstream.to_string(), Counts::default());
        }
        if let Some(c) = groups.get_mut(upstream) {
            c.connect += connect;
            c.status += status;
            c.denied += u64::from(denied);
        }
    }

    /// The two families.
    pub(crate) fn render(&self, e: &mut Exposition) {
        let groups = self
            .groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        e.family(
            "tern_upstream_retries_total",
            Kind::Counter,
            "Requests sent again to another server of the group, by why: the connect failed (\"connect\") or the server answered a retry_on status (\"status\").",
        );
        for (name, c) in &groups {
            for (reason, n) in [("connect", c.connect), ("status", c.status)] {
                let labels = [("upstream", name.as_str()), ("reason", reason)];
                e.sample("tern_upstream_retries_total", &labels, n);
            }
        }
        e.family(
            "tern_upstream_retries_denied_total",
            Kind::Counter,
            "Retries on another server the group's retry budget refused: the failure went to the client.",
        );
        for (name, c) in &groups {
            let labels = [("upstream", name.as_str())];
            e.sample("tern_upstream_retries_denied_total", &labels, c.denied);
        }
    }
}
