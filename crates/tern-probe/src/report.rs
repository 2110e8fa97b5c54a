//! The probe's result: measurements per area, findings worst first, and the
//! text rendering. JSON is the serde form of [`Report`].

use std::fmt::{self, Write as _};

use serde::Serialize;

use crate::certinfo::CertReport;

/// How much a finding costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth fixing when convenient.
    Low,
    /// Costs latency or CPU on a share of connections.
    Medium,
    /// Costs on every connection or request.
    High,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Low => "LOW",
            Severity::Medium => "MEDIUM",
            Severity::High => "HIGH",
        })
    }
}

/// One trap found, in plain words, with the fix.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// Stable identifier for machines, e.g. `dhe_selected`.
    pub id: &'static str,
    pub title: String,
    pub detail: String,
    pub fix: String,
}

/// A negotiated result of one offer.
#[derive(Debug, Clone, Serialize)]
pub struct Negotiated {
    pub version: String,
    pub suite: String,
    /// Key exchange (`ecdhe`, `dhe`, `rsa`, `tls13`) for hand-built offers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_exchange: Option<crate::wire::KeyExchange>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alpn: Option<String>,
}

/// Which versions and groups the server accepts and what it picks.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Negotiation {
    /// `(version, accepted)`; `None` when the probe could not tell.
    /// In JSON, an object: `{"TLSv1.2": true, "TLSv1.0": false, ...}`.
    #[serde(serialize_with = "as_object")]
    pub versions: Vec<(String, Option<bool>)>,
    /// What a browser-like rustls offer (TLS 1.3 + 1.2, h2) got.
    pub browser: Option<Negotiated>,
    /// What an old client's TLS 1.2 offer (ECDHE, then DHE, then RSA) got.
    pub legacy: Option<Negotiated>,
    /// The same suites with DHE listed first.
    pub legacy_dhe_first: Option<Negotiated>,
    /// `server`, `client` or `unknown`: whose suite order decides.
    pub preference: String,
    /// TLS 1.3 groups: `(group, accepted)`; in JSON an object like
    /// `versions`.
    #[serde(serialize_with = "as_object")]
    pub groups: Vec<(String, Option<bool>)>,
}

/// Handshake round trips and the server's first flight.
#[derive(Debug, Clone, Serialize)]
pub struct RoundTrips {
    /// TCP connect time, the probe's measure of one round trip.
    pub rtt_ms: f64,
    pub handshake_ms: f64,
    /// From our ClientHello to the first byte of the server's answer: one
    /// round trip plus the server's handshake work (signature, key share).
    pub first_byte_ms: f64,
    /// Handshake time in round trips (TLS 1.3 needs 1, TLS 1.2 needs 2).
    pub handshake_rtts: f64,
    /// Time from the first to the last byte of the server's first flight.
    pub flight_spread_ms: f64,
    /// Round trips lost inside the first flight (0 when it came at once).
    pub extra_round_trips: u32,
    /// The server answered the browser-like offer with a HelloRetryRequest
    /// (it wanted a key share for another group): one more round trip.
    pub hello_retry: bool,
    pub flight_bytes: usize,
    pub chain_bytes: usize,
    pub ocsp_bytes: usize,
    pub other_bytes: usize,
    /// The initial congestion window the flight is compared with.
    pub initial_window_bytes: usize,
    /// Round trips are only counted when the RTT is large enough to tell
    /// them from server CPU time.
    pub rtt_large_enough: bool,
}

/// Session resumption.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Resumption {
    pub tls13_psk: Option<bool>,
    /// TLS 1.2 resumption by session ID alone (no ticket offered).
    pub tls12_session_id: Option<bool>,
    /// TLS 1.2 resumption when both tickets and session IDs are offered
    /// (a yes here with a no for session IDs means tickets).
    pub tls12_ticket_or_id: Option<bool>,
    pub full_handshake_ms: Option<f64>,
    pub resumed_handshake_ms: Option<f64>,
}

/// The split-write measurement.
#[derive(Debug, Clone, Serialize)]
pub struct SplitWrite {
    pub one_write_ms: f64,
    pub split_write_ms: f64,
    pub penalty_ms: f64,
    /// Requests timed per variant (medians are reported).
    pub samples: usize,
}

/// Small GETs, back to back on one warm keepalive connection.
#[derive(Debug, Clone, Serialize)]
pub struct KeepaliveLatency {
    /// Median request time.
    pub median_ms: f64,
    /// Fastest request.
    pub min_ms: f64,
    /// Requests timed (after warm-up).
    pub samples: usize,
    /// Each request's time, in order.
    pub times_ms: Vec<f64>,
}

/// HTTP over the endpoint.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Http {
    pub alpn: Option<String>,
    pub h2: bool,
    pub keepalive: Option<bool>,
    /// `Keep-Alive: timeout=N` as announced by the server.
    pub keepalive_timeout_s: Option<u64>,
    /// The idle timeout as observed on an idle keepalive connection.
    pub idle: Option<IdleTimeout>,
    pub split_write: Option<SplitWrite>,
    /// GET latency on a warm keepalive connection (the backend-leg stall).
    pub keepalive_get: Option<KeepaliveLatency>,
    /// The Alt-Svc field of `GET /` (HTTP/3 advertised there).
    pub alt_svc: Option<String>,
    /// HTTP/3, when Alt-Svc advertises it on this host.
    pub h3: crate::h3::H3Check,
}

/// What happened to a keepalive connection left idle.
#[derive(Debug, Clone, Serialize)]
pub struct IdleTimeout {
    /// How long the probe watched.
    pub watched_s: f64,
    /// When the server closed it; `None` when it was still open at the end.
    pub closed_after_s: Option<f64>,
}

/// Everything `probe` learned about one endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub target: String,
    pub address: String,
    pub server_name: String,
    /// Worst first.
    pub findings: Vec<Finding>,
    pub negotiation: Negotiation,
    pub round_trips: Option<RoundTrips>,
    pub resumption: Resumption,
    pub http: Http,
    pub certificate: Option<CertReport>,
    /// Checks that could not run, and why.
    pub notes: Vec<String>,
}

impl Report {
    /// Process exit status: 0 nothing wrong, 1 at least one finding.
    pub fn exit_code(&self) -> u8 {
        if self.findings.is_empty() {
            0
        } else {
            1
        }
    }

    /// Sorts findings worst first (stable, so equal ones keep probe order).
    pub fn sort_findings(&mut self) {
        self.findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    }

    /// The report as pretty JSON (the serde form of this struct).
    pub fn to_json(&self) -> String {
        // Serializing plain structs of strings and numbers cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The human report: findings first, then the measurements.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "tern probe {} ({}, SNI {})",
            self.target, self.address, self.server_name
        );
        if self.findings.is_empty() {
            let _ = writeln!(o, "\nNo performance traps found.");
        } else {
            let _ = writeln!(o, "\n{} finding(s), worst first:", self.findings.len());
            for f in &self.findings {
                let _ = writeln!(
                    o,
                    "\n[{}] {}\n  {}\n  Fix: {}",
                    f.severity, f.title, f.detail, f.fix
                );
            }
        }
        let n = &self.negotiation;
        let _ = writeln!(o, "\nNegotiation");
        let versions: Vec<String> = n
            .versions
            .iter()
            .map(|(v, a)| format!("{v} {}", yes_no(*a)))
            .collect();
        let _ = writeln!(o, "  versions:        {}", versions.join(", "));
        for (label, neg) in [
            ("browser offer:  ", &n.browser),
            ("legacy offer:   ", &n.legacy),
            ("DHE-first offer:", &n.legacy_dhe_first),
        ] {
            if let Some(neg) = neg {
                let extra = [neg.group.as_deref(), neg.alpn.as_deref().map(|a| a.trim())]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(" ");
                let line = format!("  {label} {} {} {extra}", neg.version, neg.suite);
                let _ = writeln!(o, "{}", line.trim_end());
            }
        }
        let _ = writeln!(o, "  suite order:     {}", n.preference);
        let groups: Vec<String> = n
            .groups
            .iter()
            .map(|(g, a)| format!("{g} {}", yes_no(*a)))
            .collect();
        if !groups.is_empty() {
            let _ = writeln!(o, "  TLS 1.3 groups:  {}", groups.join(", "));
        }
        if let Some(r) = &self.round_trips {
            let _ = writeln!(o, "\nRound trips");
            // Round trips are counted only when the RTT dwarfs server CPU
            // time; otherwise a count would be noise dressed as a figure.
            let in_rtts = if r.rtt_large_enough {
                format!(" = {:.1} RTT", r.handshake_rtts)
            } else {
                " (RTT too small to count round trips)".to_string()
            };
            let _ = writeln!(
                o,
                "  RTT (TCP connect) {:.2} ms; full handshake {:.2} ms{in_rtts}",
                r.rtt_ms, r.handshake_ms
            );
            let _ = writeln!(
                o,
                "  server answered the ClientHello after {:.2} ms ({:.2} ms beyond one RTT)",
                r.first_byte_ms,
                (r.first_byte_ms - r.rtt_ms).max(0.0)
            );
            if r.hello_retry {
                let _ = writeln!(
                    o,
                    "  the server asked for another key share (HelloRetryRequest)"
                );
            }
            let _ = writeln!(
                o,
                "  first flight {} bytes (chain {}, OCSP {}, rest {}) vs initial window {}; \
                 arrived over {:.2} ms{}",
                r.flight_bytes,
                r.chain_bytes,
                r.ocsp_bytes,
                r.other_bytes,
                r.initial_window_bytes,
                r.flight_spread_ms,
                if r.rtt_large_enough {
                    format!(" ({} extra round trip(s))", r.extra_round_trips)
                } else {
                    String::new()
                }
            );
        }
        let s = &self.resumption;
        let _ = writeln!(o, "\nResumption");
        let _ = writeln!(
            o,
            "  TLS 1.3 PSK {}, TLS 1.2 session ID {}, TLS 1.2 ticket or ID {}",
            yes_no(s.tls13_psk),
            yes_no(s.tls12_session_id),
            yes_no(s.tls12_ticket_or_id)
        );
        if let (Some(f), Some(r)) = (s.full_handshake_ms, s.resumed_handshake_ms) {
            let _ = writeln!(o, "  full handshake {f:.2} ms, resumed {r:.2} ms");
        }
        let h = &self.http;
        let _ = writeln!(o, "\nHTTP");
        let _ = writeln!(
            o,
            "  ALPN {} (h2 {}), keepalive {}{}",
            h.alpn.as_deref().unwrap_or("none"),
            if h.h2 { "yes" } else { "no" },
            yes_no(h.keepalive),
            h.keepalive_timeout_s
                .map(|t| format!(", idle timeout {t} s"))
                .unwrap_or_default()
        );
        if let Some(idle) = &h.idle {
            let _ = match idle.closed_after_s {
                Some(t) => writeln!(
                    o,
                    "  idle keepalive connection closed by the server after {t:.1} s"
                ),
                None => writeln!(
                    o,
                    "  idle keepalive connection still open after {:.1} s",
                    idle.watched_s
                ),
            };
        }
        if let Some(kl) = &h.keepalive_get {
            let _ = writeln!(
                o,
                "  GET latency on a warm keepalive connection: median {:.2} ms, fastest {:.2} ms ({} requests)",
                kl.median_ms, kl.min_ms, kl.samples
            );
        }
        if let Some(sw) = &h.split_write {
            let _ = writeln!(
                o,
                "  POST latency: one write {:.2} ms, head and body in two writes {:.2} ms, \
                 penalty {:.2} ms (median of {})",
                sw.one_write_ms, sw.split_write_ms, sw.penalty_ms, sw.samples
            );
        }
        let q = &h.h3;
        match (q.advertised_port, q.reachable) {
            (None, _) => {
                let _ = writeln!(o, "  HTTP/3 not advertised (no h3 in Alt-Svc)");
            }
            (Some(port), true) => {
                let _ = writeln!(
                    o,
                    "  HTTP/3 on UDP {port}: QUIC handshake {:.2} ms{} ({} {}), GET / {} in {:.2} ms",
                    q.handshake_ms.unwrap_or_default(),
                    q.handshake_rtts
                        .map(|r| format!(" ({r:.1} round trips)"))
                        .unwrap_or_default(),
                    q.cipher.as_deref().unwrap_or("cipher unknown"),
                    q.group.as_deref().unwrap_or("group unknown"),
                    q.status.map_or("failed".to_string(), |s| s.to_string()),
                    q.response_ms.unwrap_or_default()
                );
            }
            (Some(port), false) => {
                let _ = writeln!(
                    o,
                    "  HTTP/3 advertised on UDP {port} but unreachable: {}",
                    q.error.as_deref().unwrap_or("no handshake")
                );
            }
        }
        if let Some(c) = &self.certificate {
            let _ = writeln!(o, "\nCertificate");
            let _ = writeln!(
                o,
                "  {} ({}), expires {} ({} days)",
                c.subject, c.key, c.not_after, c.days_left
            );
            let _ = writeln!(
                o,
                "  chain of {} ({} bytes), {}; OCSP staple {}; trust not checked",
                c.chain_len,
                c.chain_bytes,
                if c.chain_in_order {
                    "in order"
                } else {
                    "OUT OF ORDER"
                },
                match (&c.ocsp, c.ocsp_fresh) {
                    (Some(st), Some(fresh)) => format!(
                        "{} bytes, {}, {}",
                        c.ocsp_bytes,
                        st.status,
                        if fresh { "fresh" } else { "STALE" }
                    ),
                    _ if c.ocsp_bytes > 0 => format!("{} bytes, unreadable", c.ocsp_bytes),
                    _ => "none".into(),
                }
            );
        }
        if !self.notes.is_empty() {
            let _ = writeln!(o, "\nNot measured");
            for note in &self.notes {
                let _ = writeln!(o, "  - {note}");
            }
        }
        o
    }
}

/// `[(name, value)]` as a JSON object keyed by name (null: not measured).
fn as_object<S: serde::Serializer>(
    pairs: &[(String, Option<bool>)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(severity: Severity, id: &'static str) -> Finding {
        Finding {
            severity,
            id,
            title: id.into(),
            detail: String::new(),
            fix: String::new(),
        }
    }

    #[test]
    fn findings_sort_worst_first_and_set_exit_code() {
        let mut r = Report {
            target: "t".into(),
            address: "a".into(),
            server_name: "s".into(),
            findings: vec![],
            negotiation: Negotiation::default(),
            round_trips: None,
            resumption: Resumption::default(),
            http: Http::default(),
            certificate: None,
            notes: vec![],
        };
        assert_eq!(r.exit_code(), 0);
        assert!(r.to_text().contains("No performance traps found"));
        r.findings = vec![
            finding(Severity::Low, "a"),
            finding(Severity::High, "b"),
            finding(Severity::Medium, "c"),
        ];
        r.sort_findings();
        let ids: Vec<_> = r.findings.iter().map(|f| f.id).collect();
        assert_eq!(ids, ["b", "c", "a"]);
        assert_eq!(r.exit_code(), 1);
        let text = r.to_text();
        assert!(text.find("[HIGH]").unwrap() < text.find("[LOW]").unwrap());
    }
}
