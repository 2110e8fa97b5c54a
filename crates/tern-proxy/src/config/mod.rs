//! Configuration of `tern serve`: options in (command line or TOML file),
//! typed settings out.
//!
//! Strings are parsed exactly once, here: downstream code sees a
//! `SocketAddr`, a `Duration`, a loaded certificate and a validated TLS
//! policy, never a string to re-check. Every error names where it came
//! from: `tern.toml:12: cert /etc/tern/a.pem: no such file`.

mod acme;
mod edge;
pub(crate) mod file;
mod options;
mod reference;
mod resolve;
mod upstream;
mod upstream_policy;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(crate) use edge::{admits, canonical};
pub use edge::{
    ClientIdSettings, ClientLimits, EdgePolicy, HeaderRuleOptions, HeaderRules, Part, Rate,
    RequestIdFormat, RequestIdSettings, Template, Var,
};
pub use file::load_file;
pub use options::{
    defaults, shown, AcmeOptions, CertificateOptions, GlobalOptions, ListenerOptions, RouteOptions,
    ServerOptions, UpstreamOptions,
};
pub use reference::{option_meaning, reference_markdown};
pub use resolve::from_options;
pub(crate) use resolve::{resolve_global, resolve_listener};
use tern_http::rewrite::ForwardedFields;
use tern_tls::ServerTlsSettings;
pub use upstream::{
    Affinity, BackendAddr, BackendProtocol, BackendTls, Balance, DnsSettings, HashKey, HealthCheck,
    Outliers, PassiveEjection, Retries, ServerConfig, UpstreamConfig,
};

/// A whole, validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Worker threads (one event loop each).
    pub workers: usize,
    /// How workers share the listening sockets.
    pub accept: AcceptMode,
    /// Log format for diagnostics and access log.
    pub log_format: LogFormat,
    /// Access-log destination.
    pub access_log: AccessLogTarget,
    /// Grace period for in-flight requests at shutdown.
    pub shutdown_timeout: Duration,
    /// Admin listener for /metrics and /health (loopback only), if on.
    pub admin: Option<SocketAddr>,
    /// How backends given by name are resolved.
    pub dns: DnsSettings,
    /// Where the running tern hands its sockets to a new binary, if on.
    pub upgrade_socket: Option<PathBuf>,
    /// The user (and group) to switch to after binding, if any.
    pub run_as: Option<RunAs>,
    /// Backend groups, referred to by index from listeners and routes.
    pub upstreams: Vec<UpstreamConfig>,
    /// The listeners.
    pub listeners: Vec<ListenerConfig>,
    /// The ACME CA, when some listener has ACME certificates.
    pub acme: Option<tern_acme::AcmeSettings>,
}

/// The unprivileged identity tern switches to once its sockets are open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    /// The user's name, for messages.
    pub user: String,
    /// Its numeric id.
    pub uid: u32,
    /// The group's name, for messages.
    pub group: String,
    /// The group's numeric id.
    pub gid: u32,
}

/// How worker threads accept connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptMode {
    /// One listening socket per worker (SO_REUSEPORT): the kernel balances
    /// connections and no two workers wake for the same one.
    ReusePort,
    /// One listening socket polled by every worker.
    Shared,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// `key=value` pairs.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where access-log lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLogTarget {
    /// Standard output.
    Stdout,
    /// Appended to a file.
    File(PathBuf),
    /// Not written.
    Off,
}

/// What a listener does after the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Proxy HTTP to the backends.
    Http,
    /// Pass bytes through, optionally after a PROXY protocol header.
    Tcp {
        /// PROXY protocol version sent first, if any.
        proxy_protocol: Option<ProxyProtocol>,
    },
}

/// PROXY protocol versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyProtocol {
    /// Text header.
    V1,
    /// Binary header (carries ALPN and SNI).
    V2,
}

/// Where a listener forwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// A backend group: an index into [`Config::upstreams`].
    Group(usize),
    /// tern's built-in demo origin (when no backend is configured).
    Demo,
}

/// A routing rule: requests for `host` go to another upstream group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Lowercase host name, exact (`api.example.com`) or wildcard
    /// (`*.example.com`, one label). Matched against the SNI and, for
    /// HTTP, the Host of each request (without port).
    pub host: String,
    /// Index into [`Config::upstreams`].
    pub upstream: usize,
    /// Client networks served on this route (empty: all not denied).
    pub allow: Vec<TrustedNet>,
    /// Client networks answered 403 on this route.
    pub deny: Vec<TrustedNet>,
}

/// HTTP/2 limits per client connection. Each answers a known attack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H2Limits {
    /// Streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub max_concurrent_streams: u32,
    /// Largest decoded header list (SETTINGS_MAX_HEADER_LIST_SIZE); bounds
    /// HPACK bombs and CONTINUATION floods (RUSTSEC-2024-0332).
    pub max_header_list_size: u32,
    /// HPACK dynamic table size tern keeps for the client's headers
    /// (SETTINGS_HEADER_TABLE_SIZE).
    pub header_table_size: u32,
    /// Stream resets a client may cause per second before it gets GOAWAY
    /// (rapid reset, CVE-2023-44487).
    pub max_resets_per_second: u32,
    /// Response bytes buffered per stream beyond the client's flow-control
    /// window; a slow reader cannot make tern hold more (not an option:
    /// [`H2_MAX_SEND_BUFFER`]).
    pub max_send_buffer: u32,
}

/// Response bytes buffered per HTTP/2 stream beyond the client's window.
pub const H2_MAX_SEND_BUFFER: u32 = 64 * 1024;

impl Default for H2Limits {
    fn default() -> Self {
        H2Limits {
            max_concurrent_streams: defaults::H2_MAX_CONCURRENT_STREAMS,
            max_header_list_size: defaults::H2_MAX_HEADER_LIST_SIZE,
            header_table_size: defaults::H2_HEADER_TABLE_SIZE,
            max_resets_per_second: defaults::H2_MAX_RESETS_PER_SECOND,
            max_send_buffer: H2_MAX_SEND_BUFFER,
        }
    }
}

/// HTTP/3 settings of a listener. QUIC's own bounds (amplification limit
/// before address validation, flow control) are quinn's, set from these
/// and the HTTP/2 limits so one client costs the same either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H3Settings {
    /// Request streams a client may have open at once
    /// (initial_max_streams_bidi).
    pub max_streams: u32,
    /// QUIC handshakes under way per worker past which unvalidated
    /// clients get a stateless Retry (address validation). 0: always.
    pub retry_above: u32,
    /// The Alt-Svc field value added to HTTP/1.1 and HTTP/2 responses
    /// (`h3=":PORT"; ma=N`); None when not advertised.
    pub alt_svc: Option<String>,
    /// Send with UDP GSO where the kernel has it.
    pub gso: bool,
    /// Take requests in 0-RTT (safe methods only, 425 otherwise).
    pub early_data: bool,
}

impl H3Settings {
    /// Defaults for a listener on `port`.
    pub fn new(port: u16) -> Self {
        H3Settings {
            max_streams: defaults::H3_MAX_STREAMS,
            retry_above: defaults::QUIC_RETRY_ABOVE,
            alt_svc: Some(alt_svc(port, defaults::ALT_SVC_MAX_AGE)),
            gso: defaults::QUIC_GSO,
            early_data: defaults::QUIC_EARLY_DATA,
        }
    }
}

/// The Alt-Svc value advertising HTTP/3 on `port` for `max_age` seconds.
pub fn alt_svc(port: u16, max_age: u32) -> String {
    format!("h3=\":{port}\"; ma={max_age}")
}

/// A network in CIDR form, for trusted PROXY-protocol sources.
pub type TrustedNet = ipnet::IpNet;

/// Bounds on time and memory. Each answers an attack or a failure that
/// would otherwise pin resources. Defaults: [`defaults`].
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// TLS handshake deadline (slow or silent clients).
    pub handshake_timeout: Duration,
    /// Request head deadline once it started (slowloris).
    pub header_timeout: Duration,
    /// Idle keepalive and stalled-body deadline.
    pub idle_timeout: Duration,
    /// Backend connect deadline.
    pub backend_connect_timeout: Duration,
    /// Backend response-head deadline and per-read deadline.
    pub backend_response_timeout: Duration,
    /// Open client connections across workers.
    pub max_connections: usize,
    /// Request head size bound (431 above).
    pub max_head_bytes: usize,
    /// Most idle backend connections kept per backend and worker (a
    /// ceiling; the pool follows demand below it).
    pub backend_pool_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            handshake_timeout: defaults::HANDSHAKE_TIMEOUT,
            header_timeout: defaults::HEADER_TIMEOUT,
            idle_timeout: defaults::IDLE_TIMEOUT,
            backend_connect_timeout: defaults::BACKEND_CONNECT_TIMEOUT,
            backend_response_timeout: defaults::BACKEND_RESPONSE_TIMEOUT,
            max_connections: defaults::MAX_CONNECTIONS,
            max_head_bytes: defaults::MAX_HEAD_BYTES,
            backend_pool_size: defaults::BACKEND_POOL_SIZE,
        }
    }
}

/// One validated listener.
#[derive(Debug, Clone)]
pub struct ListenerConfig {
    /// Address to accept on.
    pub listen: SocketAddr,
    /// HTTP or TCP.
    pub mode: Mode,
    /// Where requests go by default.
    pub upstream: Upstream,
    /// Host-based routes to other upstream groups, checked in order.
    pub routes: Vec<Route>,
    /// Accept a PROXY protocol (v1 or v2) header first, from these source
    /// networks only; `None` when off. Its address becomes the client's.
    pub accept_proxy: Option<Vec<TrustedNet>>,
    /// HTTP/2 limits (when h2 is offered by ALPN).
    pub h2: H2Limits,
    /// HTTP/3 over QUIC on the same port (UDP), when on.
    pub h3: Option<H3Settings>,
    /// TLS settings with certificates loaded and checked.
    pub tls: ServerTlsSettings,
    /// OCSP staple files of the certificates, watched for changes.
    pub ocsp_files: Vec<PathBuf>,
    /// Forwarding fields tern adds.
    pub forwarded: ForwardedFields,
    /// Time and size bounds.
    pub limits: Limits,
    /// Certificates obtained over ACME (their slots are made when a
    /// generation is built).
    pub acme: Vec<tern_acme::CertSpec>,
    /// Plain-HTTP listener for ACME HTTP-01 and redirects to https.
    pub http_listen: Option<SocketAddr>,
    /// Header rules, request IDs, body limit, per-client limits and
    /// access lists.
    pub edge: EdgePolicy,
}

/// A configuration error: where, and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}{message}")]
pub struct ConfigError {
    location: String,
    message: String,
}

impl ConfigError {
    /// An error with no file location (command-line options).
    pub fn new(message: impl Into<String>) -> Self {
        ConfigError {
            location: String::new(),
            message: message.into(),
        }
    }

    /// An error at `file:line`.
    pub fn at(file: &Path, line: usize, message: impl Into<String>) -> Self {
        ConfigError {
            location: format!("{}:{}: ", file.display(), line),
            message: message.into(),
        }
    }
}

/// An option that failed to resolve: which key, and why.
#[derive(Debug)]
pub(crate) struct KeyError {
    /// Config key (TOML spelling), for locating the line.
    pub key: &'static str,
    /// One-line reason.
    pub message: String,
}
