//! What a run does, as typed values: parsed once by the command line (or a
//! test) and never re-checked downstream.

use std::path::PathBuf;
use std::time::Duration;

use crate::target::Target;

/// Every default of `tern bench`, named once: its `--help` (clap shows
/// these as `[default: X]`), docs/bench.md's option table (generated from
/// the help) and [`BenchConfig::new`] all read them, so the command line
/// and a config built in code start from the same run.
pub mod defaults {
    use super::{ConnectionPlan, ResumptionMode, TlsVersion};

    /// `-n`: requests per target when neither `-n` nor `-z` is given (hey's).
    pub const REQUESTS: u64 = 200;
    /// `-c`: concurrent connections (hey's).
    pub const CONNECTIONS: usize = 50;
    /// `-t`: per-request timeout in seconds (hey's).
    pub const TIMEOUT_S: u64 = 20;
    /// `--method` (and `-m` given a word).
    pub const METHOD: &str = "GET";
    /// `--streams` (and `-m` given a number): concurrent streams per
    /// HTTP/2 or HTTP/3 connection.
    pub const STREAMS: usize = 1;
    /// `--rounds` when several targets are compared (interleaved).
    pub const COMPARE_ROUNDS: usize = 3;
    /// `--rounds` for one target.
    pub const ROUNDS: usize = 1;
    /// `--plan`.
    pub const PLAN: ConnectionPlan = ConnectionPlan::KeepAlive;
    /// `--resume`: TLS 1.2 resumption mechanism of `--plan resumed`.
    pub const RESUME: ResumptionMode = ResumptionMode::Tickets;
    /// `-o` of `tern bench` and of `tern report merge|diff`.
    pub const OUTPUT: &str = "text";
    /// `--tls-min`.
    pub const TLS_MIN: TlsVersion = TlsVersion::Tls12;
    /// `--tls-max`.
    pub const TLS_MAX: TlsVersion = TlsVersion::Tls13;
    /// `tern report diff --tolerance`: changes smaller than this are "same".
    pub const DIFF_TOLERANCE: &str = "5%";
    /// `--slo` of `--find-max-rate`.
    pub const SLO: &str = "p99<50ms,errors<0.1%";
    /// `--start-rate`: the first rate `--find-max-rate` tries, requests per
    /// second.
    pub const START_RATE: f64 = 100.0;
    /// `--max-rate`: the highest rate `--find-max-rate` tries.
    pub const MAX_RATE: f64 = 1_000_000.0;
    /// `--step`: how long `--find-max-rate` measures each rate.
    pub const STEP: &str = "10s";
    /// `--precision`: `--find-max-rate` ends when the last rate that met
    /// the SLO and the first that did not are this close.
    pub const PRECISION: &str = "5%";
}

/// How connections are used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnectionPlan {
    /// One connection carries many requests.
    KeepAlive,
    /// A new connection (full TLS handshake) per request; resumption is off.
    NewConnection,
    /// A new connection per request that resumes the previous TLS session.
    Resumed(ResumptionMode),
}

impl ConnectionPlan {
    /// The plan as `--plan` takes it: `keepalive`, `new`, `resumed`.
    pub const fn name(self) -> &'static str {
        match self {
            ConnectionPlan::KeepAlive => "keepalive",
            ConnectionPlan::NewConnection => "new",
            ConnectionPlan::Resumed(_) => "resumed",
        }
    }

    /// True when each request gets its own connection.
    pub fn connection_per_request(self) -> bool {
        !matches!(self, ConnectionPlan::KeepAlive)
    }
}

/// Which TLS 1.2 resumption mechanism is offered. TLS 1.3 always resumes
/// with tickets (PSK); the choice only matters for TLS 1.2 servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResumptionMode {
    /// RFC 5077 tickets (and session IDs as fallback).
    Tickets,
    /// Server-side session IDs only.
    SessionIds,
}

impl ResumptionMode {
    /// The mechanism as `--resume` takes it: `tickets`, `session-ids`.
    pub const fn name(self) -> &'static str {
        match self {
            ResumptionMode::Tickets => "tickets",
            ResumptionMode::SessionIds => "session-ids",
        }
    }
}

/// HTTP version spoken on each connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum HttpVersion {
    /// HTTP/1.1, one request at a time per connection.
    #[serde(rename = "HTTP/1.1")]
    Http1,
    /// HTTP/2 with several concurrent streams per connection.
    #[serde(rename = "HTTP/2")]
    Http2,
    /// HTTP/3 over QUIC, several concurrent streams per connection.
    #[serde(rename = "HTTP/3")]
    Http3,
}

impl HttpVersion {
    /// Short name: h1, h2, h3.
    pub fn short(self) -> &'static str {
        match self {
            HttpVersion::Http1 => "h1",
            HttpVersion::Http2 => "h2",
            HttpVersion::Http3 => "h3",
        }
    }

    /// True when one connection carries several requests at once.
    pub fn multiplexed(self) -> bool {
        !matches!(self, HttpVersion::Http1)
    }
}

/// Closed or open loop.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoadModel {
    /// Each connection (stream) sends its next request when the previous
    /// one completed.
    Closed,
    /// Requests are scheduled at a fixed total rate (requests per second);
    /// latency counts from the scheduled send time, so a stalled server
    /// shows the queueing it caused (coordinated omission corrected).
    Open {
        /// Total requests per second over all connections.
        rate: f64,
    },
}

/// When a run stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCondition {
    /// After this many requests (all targets of a round share nothing:
    /// each target gets its own count).
    Requests(u64),
    /// After this long.
    Duration(Duration),
}

/// TLS version bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// TLS 1.2.
    Tls12,
    /// TLS 1.3.
    Tls13,
}

impl TlsVersion {
    /// The version as people write it: `TLS 1.2`.
    pub fn name(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "TLS 1.2",
            TlsVersion::Tls13 => "TLS 1.3",
        }
    }

    /// The version as `--tls-min` / `--tls-max` take it: `1.2`.
    pub const fn number(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "1.2",
            TlsVersion::Tls13 => "1.3",
        }
    }
}

/// Client TLS options.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// Lowest version offered ([`defaults::TLS_MIN`] when `None`).
    pub min_version: Option<TlsVersion>,
    /// Highest version offered ([`defaults::TLS_MAX`] when `None`).
    pub max_version: Option<TlsVersion>,
    /// Cipher suites offered, IANA names (`TLS_AES_128_GCM_SHA256`,
    /// `TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256`); empty for the provider's list.
    pub ciphers: Vec<String>,
    /// Key-exchange groups offered (`X25519`, `secp256r1`, `X25519MLKEM768`);
    /// empty for the provider's list.
    pub groups: Vec<String>,
    /// ALPN protocols offered; `None` picks from the HTTP version.
    pub alpn: Option<Vec<String>>,
    /// Server name sent in SNI (and verified); default the URL host.
    pub sni: Option<String>,
    /// PEM file of CA certificates; when set, the server chain is verified.
    pub ca_file: Option<PathBuf>,
    /// Skip certificate verification even when `ca_file` is set.
    pub insecure: bool,
    /// Do not offer certificate compression (RFC 8879: brotli and zlib are
    /// offered otherwise, as browsers do): the server's chain comes whole.
    pub no_cert_compression: bool,
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// One target, or several in compare mode.
    pub targets: Vec<Target>,
    /// Request method.
    pub method: String,
    /// Extra request headers, sent as given.
    pub headers: Vec<(String, String)>,
    /// Request body (may be empty).
    pub body: Vec<u8>,
    /// `Host` header override.
    pub host_header: Option<String>,
    /// HTTP proxy (`host:port`) reached with CONNECT.
    pub proxy: Option<String>,
    /// Send `Accept-Encoding: gzip` (hey's default) unless disabled.
    pub accept_compression: bool,
    /// Connection plan.
    pub plan: ConnectionPlan,
    /// HTTP version.
    pub http: HttpVersion,
    /// Concurrent streams per HTTP/2 connection (h2load `-m`).
    pub streams_per_connection: usize,
    /// Closed or open loop.
    pub load: LoadModel,
    /// Concurrent connections over all workers.
    pub connections: usize,
    /// Worker threads, each with its own single-threaded runtime.
    pub workers: usize,
    /// When to stop (per target).
    pub stop: StopCondition,
    /// Per-request timeout, connection set-up included; `None` for none.
    pub timeout: Option<Duration>,
    /// TLS options (ignored for `http://` targets).
    pub tls: TlsOptions,
    /// Rounds the run is split into, the targets interleaved in each
    /// ([`defaults::COMPARE_ROUNDS`] when there are several,
    /// [`defaults::ROUNDS`] for one): each round's figures are kept, and
    /// give comparisons and `tern report diff` their intervals.
    pub rounds: usize,
    /// Requests made for this long against each target before anything is
    /// measured, and left out of every figure.
    pub warmup: Option<Duration>,
    /// Keep one record per request (for CSV output).
    pub record_requests: bool,
    /// Draw a progress bar on stderr.
    pub progress: bool,
    /// Server processes whose CPU time is measured for every target; empty
    /// to find the owners of the listening socket of each local target.
    pub server_pids: Vec<u32>,
    /// The command line, for the disclosure.
    pub command_line: String,
    /// A request mix (`--targets FILE`) sent instead of the one request
    /// of `method`, `headers` and `body`.
    pub mix: Option<crate::mix::RequestMix>,
    /// A load shape (`--stages`): each stage run in turn, its level the
    /// rate (open loop) or the connections (closed loop); replaces the
    /// stop condition and the rounds.
    pub stages: Vec<crate::stages::Stage>,
    /// A capacity search (`--find-max-rate`) instead of a fixed load.
    pub search: Option<crate::search::SearchConfig>,
    /// This process's part of a run split over several (`--shard i/N`),
    /// already applied to the connections, rate and count.
    pub shard: Option<crate::shard::Shard>,
    /// Wall-clock moment the run (its warm-up, if any) starts.
    pub start_at: Option<std::time::SystemTime>,
    /// Source address of every TCP connection (`--laddr`); `None` lets
    /// the kernel pick.
    pub local_addr: Option<std::net::IpAddr>,
}

impl BenchConfig {
    /// A configuration with `tern bench`'s defaults ([`defaults`]: hey's
    /// `-n` and `-c`, keepalive, HTTP/1.1, closed loop, one worker per
    /// core) for the given targets.
    pub fn new(targets: Vec<Target>) -> BenchConfig {
        let rounds = if targets.len() > 1 {
            defaults::COMPARE_ROUNDS
        } else {
            defaults::ROUNDS
        };
        BenchConfig {
            targets,
            method: defaults::METHOD.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            host_header: None,
            proxy: None,
            accept_compression: true,
            plan: defaults::PLAN,
            http: HttpVersion::Http1,
            streams_per_connection: defaults::STREAMS,
            load: LoadModel::Closed,
            connections: defaults::CONNECTIONS,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            stop: StopCondition::Requests(defaults::REQUESTS),
            timeout: Some(Duration::from_secs(defaults::TIMEOUT_S)),
            tls: TlsOptions::default(),
            rounds,
            warmup: None,
            record_requests: false,
            progress: false,
            server_pids: Vec::new(),
            command_line: String::new(),
            mix: None,
            stages: Vec::new(),
            search: None,
            shard: None,
            start_at: None,
            local_addr: None,
        }
    }
}
