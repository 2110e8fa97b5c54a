//! The report of a run: the disclosure, one section per target, and the raw
//! measurements (HDR histograms serialized) so runs can be merged.

pub mod diff;
pub mod interval;
mod merge;
mod serde_stats;

pub mod csv;
pub mod html;
pub mod svg;
pub mod text;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::{ConnectionPlan, HttpVersion, LoadModel};
use crate::env::{Address, Machine};
use crate::error::BenchError;
use crate::server::ServerCpu;
use crate::stats::Stats;
use crate::tls::Negotiated;

/// Identifies the JSON format; bumped on incompatible changes.
pub const FORMAT: &str = "tern-bench-report/1";

/// A whole run (or several merged runs).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Always [`FORMAT`].
    pub format: String,
    /// `tern <version>`.
    pub tool: String,
    /// The full command line of each run merged into this report.
    pub command_lines: Vec<String>,
    /// The plan the targets ran under.
    pub plan: PlanInfo,
    /// Load machines (one per merged run).
    pub machines: Vec<Machine>,
    /// One entry per target, in command-line order.
    pub targets: Vec<TargetReport>,
    /// Ctrl-C cut the run short.
    pub interrupted: bool,
    /// Warnings to print first (compare mode mismatches, merges).
    pub warnings: Vec<String>,
    /// Wall-clock time the measured part of the run started (after any
    /// warm-up), milliseconds since the Unix epoch; `None` in reports
    /// written before it was recorded. Merge uses it to see whether runs
    /// overlapped.
    #[serde(default)]
    pub started_unix_ms: Option<u64>,
    /// Wall-clock time the run ended, milliseconds since the Unix epoch.
    #[serde(default)]
    pub ended_unix_ms: Option<u64>,
    /// `--threshold` gates, checked per target.
    #[serde(default)]
    pub thresholds: Vec<crate::threshold::ThresholdResult>,
    /// This run's part of a run split over several processes (`--shard`);
    /// `None` after a merge or when not split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::shard::Shard>,
    /// The wall-clock moment asked with `--start-at`, ms since the Unix
    /// epoch: merge compares it with `started_unix_ms` to find late shards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at_unix_ms: Option<u64>,
    /// How long after `start_at_unix_ms` the run really started, ms: a
    /// process launched after the moment had passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_late_ms: Option<u64>,
    /// The target's clock minus this machine's, read from its `Date`
    /// header after the run of a shard (`--shard`, `--start-at`): merge
    /// compares the shards' readings to find clocks that disagree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset: Option<crate::clock::ClockOffset>,
}

/// The plan, as disclosed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanInfo {
    /// keepalive, new-connection or resumed.
    pub connection_plan: ConnectionPlan,
    /// Keepalive on or off.
    pub keepalive: bool,
    /// Resumption the client asked for: `no`, `tickets`, `session-ids`
    /// (keepalive runs still offer resumption on reconnects).
    pub resumption_asked: String,
    /// HTTP version.
    pub http: HttpVersion,
    /// Closed or open loop.
    pub load: LoadModel,
    /// Concurrent connections.
    pub connections: usize,
    /// HTTP/2 streams per connection.
    pub streams_per_connection: usize,
    /// Stop condition, readable (`200 requests`, `10s`).
    pub stop: String,
    /// Interleaved rounds (compare mode).
    pub rounds: usize,
    /// Method.
    pub method: String,
    /// Request body bytes.
    pub request_body_bytes: usize,
    /// Certificate verification: `CA file ...` or `off`.
    pub verification: String,
    /// TLS offer restrictions given on the command line.
    pub tls_offer: String,
    /// Warm-up before the measured part (`--warmup`), readable (`2.0s`):
    /// requests made and left out of every figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<String>,
    /// Every target is `http://`: no TLS, so no offer, verification or
    /// resumption to disclose.
    #[serde(default)]
    pub plain_http: bool,
    /// The request mix (`--targets FILE`), readable: file and each entry
    /// with its weight and checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_mix: Option<String>,
    /// `--stages`: each stage's level, in order (a rate in an open loop,
    /// connections in a closed one); `load`'s rate and `connections` are
    /// then the largest, which the run's connections are opened for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stage_levels: Vec<f64>,
    /// Each round (and search step) measured its requests alone: its
    /// connections were set up (handshake done, HTTP/2 and HTTP/3 settings
    /// exchanged) before its clock and its server CPU reading started, and
    /// closed after both ended. False for a connection per request, whose
    /// set-up is the measured work, for a load shape, and in reports of
    /// older versions (whose kept-alive rounds held their set-up).
    #[serde(default)]
    pub measured_after_set_up: bool,
}

/// Figures of one target in one round (compare mode spread).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RoundFigures {
    /// Completed requests per second.
    pub rps: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// Failed requests.
    pub errors: u64,
}

/// One target's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetReport {
    /// URL as given.
    pub url: String,
    /// Resolved addresses.
    pub addresses: Vec<Address>,
    /// Figures derived from `stats` (recomputed after a merge).
    pub summary: Summary,
    /// Per-round figures.
    pub rounds: Vec<RoundFigures>,
    /// Raw measurements.
    #[serde(with = "serde_stats")]
    pub stats: Stats,
    /// CPU time of the server processes during this target's rounds;
    /// `None` in reports written before it was measured.
    #[serde(default)]
    pub server_cpu: Option<ServerCpu>,
    /// The protocol this target ran with, when it is not the plan's (a
    /// protocol comparison).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpVersion>,
    /// Where each round of this target sat in the run's wall-clock time,
    /// with its own per-second series: time charts place rounds where they
    /// ran instead of joining them end to end.
    #[serde(default)]
    pub timeline: Vec<RoundSpan>,
    /// Each stage of a load shape (`--stages`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<crate::stages::StageFigures>,
    /// The capacity search (`--find-max-rate`): the highest rate that met
    /// the SLO and every step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<crate::search::Capacity>,
}

/// One round of one target on the run's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundSpan {
    /// Start, seconds since the measured part of the run started.
    pub start_s: f64,
    /// How long the round ran, seconds.
    pub elapsed_s: f64,
    /// Completions and errors per second of the round, from its start;
    /// the last bucket covers only what is left of `elapsed_s`.
    pub series: Vec<crate::stats::SecondBucket>,
}

/// Completions and errors per second of the run's wall clock, gathered from
/// the rounds' spans: each round's second `i` lands in the run's second
/// nearest `start_s + i`. This is `stats.series` once rounds were
/// interleaved or runs merged, so it lines up with the timeline instead of
/// adding up runs that did not run at the same time.
pub(crate) fn series_on_the_clock(timeline: &[RoundSpan]) -> Vec<crate::stats::SecondBucket> {
    let mut series: Vec<crate::stats::SecondBucket> = Vec::new();
    for span in timeline {
        for (i, b) in span.series.iter().enumerate() {
            let at = (span.start_s.max(0.0) + i as f64).round() as usize;
            if series.len() <= at {
                series.resize(at + 1, crate::stats::SecondBucket::default());
            }
            series[at].completed += b.completed;
            series[at].errors += b.errors;
        }
    }
    series
}

/// Summary of one phase histogram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PhaseSummary {
    /// Samples.
    pub count: u64,
    /// Mean, ms.
    pub mean_ms: f64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Maximum, ms.
    pub max_ms: f64,
}

/// Derived figures of a target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Requests with a response.
    pub completed: u64,
    /// Requests that failed.
    pub failed: u64,
    /// Wall time, seconds.
    pub elapsed_s: f64,
    /// Completed requests per second.
    pub rps: f64,
    /// Latency mean/min/max/stdev, ms.
    pub mean_ms: f64,
    /// Fastest, ms.
    pub min_ms: f64,
    /// Slowest, ms.
    pub max_ms: f64,
    /// Standard deviation, ms.
    pub stdev_ms: f64,
    /// Percentile (as text, e.g. "99.9") to latency in ms.
    pub percentiles_ms: BTreeMap<String, f64>,
    /// Body bytes received.
    pub body_bytes: u64,
    /// Connections opened.
    pub connections: u64,
    /// Of those, set up before their round's clock started (a round that
    /// keeps its connections alive): no figure but the counts holds their
    /// set-up. 0 in reports of older versions, whose rounds held it.
    #[serde(default)]
    pub connections_set_up: u64,
    /// Connections that failed or timed out while being set up before
    /// their round's clock (their slots opened another inside the round).
    #[serde(default)]
    pub set_up_failed: u64,
    /// TLS handshakes.
    pub handshakes: u64,
    /// Resumed handshakes.
    pub resumed: u64,
    /// resumed / handshakes (0 when none).
    pub resumed_fraction: f64,
    /// Mean bytes received per handshake.
    pub handshake_bytes_mean: f64,
    /// TLS 1.3 session tickets the server sent, per handshake: each costs
    /// the server work a client that offers no resumption (hey) never
    /// causes.
    #[serde(default)]
    pub tickets_per_handshake: f64,
    /// Phases: dns, connect, tls, ttfb, body.
    pub phases: BTreeMap<String, PhaseSummary>,
    /// What handshakes negotiated, most frequent first.
    pub negotiated: Vec<NegotiatedCount>,
    /// Full handshakes whose certificate chain came compressed (RFC 8879),
    /// per algorithm; TLS over TCP only.
    #[serde(default)]
    pub cert_compressed: BTreeMap<String, u64>,
    /// QUIC transport figures, for HTTP/3 runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<crate::http3::QuicStats>,
}

/// A negotiated parameter set and how many handshakes got it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NegotiatedCount {
    /// Parameters.
    #[serde(flatten)]
    pub negotiated: Negotiated,
    /// Handshakes.
    pub count: u64,
}

/// Percentiles reported everywhere.
pub const PERCENTILES: [f64; 9] = [10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99];

fn ms(us: f64) -> f64 {
    us / 1000.0
}

fn phase(h: &hdrhistogram::Histogram<u64>) -> PhaseSummary {
    PhaseSummary {
        count: h.len(),
        mean_ms: ms(h.mean()),
        p50_ms: ms(h.value_at_quantile(0.5) as f64),
        p99_ms: ms(h.value_at_quantile(0.99) as f64),
        max_ms: ms(h.max() as f64),
    }
}

impl Summary {
    /// Derives the figures from raw stats.
    pub fn from_stats(s: &Stats) -> Summary {
        let elapsed = s.elapsed.as_secs_f64();
        let completed = s.completed();
        let mut negotiated: Vec<NegotiatedCount> = s
            .negotiated
            .iter()
            .map(|(n, c)| NegotiatedCount {
                negotiated: n.clone(),
                count: *c,
            })
            .collect();
        negotiated.sort_by_key(|n| std::cmp::Reverse(n.count));
        let phases = [
            ("dns", &s.dns),
            ("connect", &s.connect),
            ("tls", &s.tls),
            ("ttfb", &s.ttfb),
            ("body", &s.body),
        ]
        .into_iter()
        // A phase no connection went through (DNS and TCP over QUIC, TLS
        // on http://) is absent, not a row of zeros that reads as measured.
        .filter(|(_, h)| !h.is_empty())
        .map(|(k, h)| (k.to_string(), phase(h)))
        .collect();
        let empty = s.total.is_empty();
        Summary {
            completed,
            failed: s.failed(),
            elapsed_s: elapsed,
            rps: if elapsed > 0.0 {
                completed as f64 / elapsed
            } else {
                0.0
            },
            mean_ms: ms(s.total.mean()),
            min_ms: if empty { 0.0 } else { ms(s.total.min() as f64) },
            max_ms: ms(s.total.max() as f64),
            stdev_ms: ms(s.total.stdev()),
            percentiles_ms: PERCENTILES
                .iter()
                .map(|p| (p.to_string(), ms(s.total.value_at_percentile(*p) as f64)))
                .collect(),
            body_bytes: s.body_bytes,
            connections: s.connections,
            connections_set_up: s.set_up,
            set_up_failed: s.set_up_failed,
            handshakes: s.handshakes,
            resumed: s.resumed,
            cert_compressed: s.cert_compressed.clone(),
            resumed_fraction: if s.handshakes > 0 {
                s.resumed as f64 / s.handshakes as f64
            } else {
                0.0
            },
            handshake_bytes_mean: if s.handshakes > 0 {
                s.handshake_bytes as f64 / s.handshakes as f64
            } else {
                0.0
            },
            tickets_per_handshake: if s.handshakes > 0 {
                s.tickets as f64 / s.handshakes as f64
            } else {
                0.0
            },
            phases,
            negotiated,
            quic: (s.quic.connections > 0).then(|| s.quic.clone()),
        }
    }

    /// Latency at percentile `p` (one of [`PERCENTILES`]), ms.
    pub fn percentile(&self, p: f64) -> f64 {
        self.percentiles_ms
            .get(&p.to_string())
            .copied()
            .unwrap_or(0.0)
    }

    /// The most frequent negotiated parameter set.
    pub fn dominant(&self) -> Option<&Negotiated> {
        self.negotiated.first().map(|n| &n.negotiated)
    }
}

impl TargetReport {
    /// Builds a target's section from its stats.
    pub fn new(
        url: String,
        addresses: Vec<Address>,
        rounds: Vec<RoundFigures>,
        stats: Stats,
    ) -> Self {
        TargetReport {
            url,
            addresses,
            summary: Summary::from_stats(&stats),
            rounds,
            stats,
            server_cpu: None,
            http: None,
            timeline: Vec::new(),
            stages: Vec::new(),
            capacity: None,
        }
    }
}

impl Report {
    /// Serializes to pretty JSON.
    pub fn to_json(&self) -> Result<String, BenchError> {
        serde_json::to_string_pretty(self)
            .map_err(|e| BenchError::Config(format!("JSON report: {e}")))
    }

    /// Parses a JSON report; `path` is for the error message.
    pub fn from_json(text: &str, path: &str) -> Result<Report, BenchError> {
        let report: Report = serde_json::from_str(text).map_err(|e| BenchError::BadReport {
            path: path.to_string(),
            reason: e.to_string(),
        })?;
        if report.format != FORMAT {
            return Err(BenchError::BadReport {
                path: path.to_string(),
                reason: format!("format {:?}, expected {FORMAT:?}", report.format),
            });
        }
        Ok(report)
    }

    /// Reads a JSON report file.
    pub fn read(path: &str) -> Result<Report, BenchError> {
        let text = std::fs::read_to_string(path).map_err(|source| BenchError::File {
            path: path.to_string(),
            source,
        })?;
        Report::from_json(&text, path)
    }

    /// True when a target got no response at all and some request failed:
    /// the run measured nothing but its failures.
    pub fn every_request_failed(&self) -> bool {
        self.targets
            .iter()
            .any(|t| t.summary.completed == 0 && t.summary.failed > 0)
    }

    /// The most frequent error of the targets that got no response, with
    /// its count, for the one-line failure message.
    pub fn main_failure(&self) -> Option<(String, u64)> {
        self.targets
            .iter()
            .filter(|t| t.summary.completed == 0)
            .flat_map(|t| t.stats.errors.iter())
            .max_by_key(|(_, n)| **n)
            .map(|(k, n)| (k.clone(), *n))
    }
}

/// Warnings when compared targets did not negotiate the same things: a
/// comparison across different ciphers, groups, key types, ALPN or
/// resumption measures the difference in conditions, not in servers.
pub fn negotiation_warnings(targets: &[TargetReport]) -> Vec<String> {
    let mut out = Vec::new();
    let Some(first) = targets.first() else {
        return out;
    };
    for t in targets {
        if t.summary.negotiated.len() > 1 {
            out.push(format!(
                "{} negotiated {} different parameter sets across handshakes",
                t.url,
                t.summary.negotiated.len()
            ));
        }
    }
    let Some(base) = first.summary.dominant() else {
        return out;
    };
    for t in &targets[1..] {
        let Some(other) = t.summary.dominant() else {
            continue;
        };
        // In a protocol comparison the ALPN is the variable under test.
        let alpn_varies = t.http.is_some() && t.http != first.http;
        let fields = [
            ("TLS version", &base.version, &other.version),
            ("cipher", &base.cipher, &other.cipher),
            ("group", &base.group, &other.group),
            ("server key", &base.server_key, &other.server_key),
            ("ALPN", &base.alpn, &other.alpn),
        ];
        for (what, a, b) in fields {
            if a != b && !(what == "ALPN" && alpn_varies) {
                out.push(format!(
                    "targets negotiated different {what}: {} got {a}, {} got {b}",
                    first.url, t.url
                ));
            }
        }
        // A server that closes keepalive connections turns a keepalive
        // plan into a handshake benchmark for that target only.
        let per_request =
            |s: &Summary| s.connections as f64 / (s.completed + s.failed).max(1) as f64;
        let (ca, cb) = (per_request(&first.summary), per_request(&t.summary));
        if (ca - cb).abs() > 0.1 && (ca.max(cb) > 2.0 * ca.min(cb)) {
            out.push(format!(
                "targets negotiated different connection reuse: {} opened {} connections for {} requests, {} opened {} for {}",
                first.url,
                first.summary.connections,
                first.summary.completed + first.summary.failed,
                t.url,
                t.summary.connections,
                t.summary.completed + t.summary.failed
            ));
        }
        let (fa, fb) = (first.summary.resumed_fraction, t.summary.resumed_fraction);
        if (fa - fb).abs() > 0.1 {
            out.push(format!(
                "targets negotiated different resumption: {} resumed {:.0}% of handshakes, {} {:.0}%",
                first.url,
                fa * 100.0,
                t.url,
                fb * 100.0
            ));
        }
    }
    out
}
