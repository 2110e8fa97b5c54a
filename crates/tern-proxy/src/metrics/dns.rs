//! Resolutions of backend names, by (upstream, name) and result. A
//! resolution happens every few seconds per name at most, on the control
//! plane, so a mutex-guarded map is cheap enough and keeps the set open.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use super::text::{Exposition, Kind};

/// Most (upstream, name) series kept: names come from the configuration,
/// and reloads may bring new ones; past this, new names are not counted.
const MAX_SERIES: usize = 4096;

/// Counts of successful and failed resolutions per (upstream, name).
#[derive(Debug, Default)]
pub(crate) struct DnsResolutions {
    counts: Mutex<BTreeMap<(String, String), [u64; 2]>>,
}

impl DnsResolutions {
    /// Counts one resolution of `name` for `upstream`.
    pub(crate) fn record(&self, upstream: &str, name: &str, ok: bool) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (upstream.to_string(), name.to_string());
        if counts.len() >= MAX_SERIES && !counts.contains_key(&key) {
            return;
        }
        let entry = counts.entry(key).or_default();
        entry[usize::from(!ok)] += 1;
    }

    pub(crate) fn render(&self, e: &mut Exposition) {
        e.family(
            "tern_dns_resolutions_total",
            Kind::Counter,
            "Resolutions of backend names by upstream, name and result (an error keeps the last good addresses).",
        );
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        for ((upstream, name), [ok, error]) in counts.iter() {
            for (result, n) in [("ok", ok), ("error", error)] {
                let labels = [
                    ("upstream", upstream.as_str()),
                    ("name", name.as_str()),
                    ("result", result),
                ];
                e.sample("tern_dns_resolutions_total", &labels, *n);
            }
        }
    }
}
