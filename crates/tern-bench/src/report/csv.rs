//! One line per request, as hey's `-o csv` (same first columns, in
//! seconds), plus the TLS handshake time and whether it resumed.

use std::fmt::Write;

use crate::stats::Stats;

/// hey's header, extended at the end.
pub const HEADER: &str =
    "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset,TLS-handshake,resumed";

/// Renders the per-request records of `stats` (empty when they were not kept).
pub fn render(stats: &Stats) -> String {
    let mut out = String::with_capacity(64 * (stats.records.len() + 1));
    out.push_str(HEADER);
    out.push('\n');
    let mut records = stats.records.clone();
    records.sort_by_key(|r| r.offset);
    for r in records {
        let s = |d: std::time::Duration| d.as_secs_f64();
        let _ = writeln!(
            out,
            "{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{},{:.5},{:.4},{}",
            s(r.total),
            s(r.dns + r.connect + r.tls),
            s(r.dns),
            0.0,
            s(r.ttfb),
            s(r.body),
            r.status,
            s(r.offset),
            s(r.tls),
            u8::from(r.resumed)
        );
    }
    out
}
