//! The TOML-only tables of `tern serve`'s options: a listener's
//! `[[listener.certificate]]` and `[[listener.route]]`, and
//! `[[upstream]]` with its servers. They derive `clap::Args` only so that
//! their docs and defaults are read as the flags' are.

use serde::Deserialize;

use super::{defaults, one_or_many, shown};

/// One certificate of a listener (TOML `[[listener.certificate]]`). The
/// "flag" of each key is the listener flag that says the same for the
/// command line's certificates.
#[derive(Debug, Default, Clone, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertificateOptions {
    /// Certificate chain (PEM, leaf first).
    #[arg(long, value_name = "FILE")]
    pub cert: Option<String>,
    /// Private key (PEM: PKCS#8, SEC1 or PKCS#1).
    #[arg(long, value_name = "FILE")]
    pub key: Option<String>,
    /// DER OCSP response to staple.
    #[arg(long, value_name = "FILE")]
    pub ocsp: Option<String>,
    /// Instead of `cert` and `key`: DNS names to obtain one certificate for
    /// over ACME (see `[acme]`).
    #[arg(long, value_name = "NAMES")]
    #[serde(default)]
    pub acme: Vec<String>,
    /// With `acme`: "ecdsa" (P-256), "rsa" (2048) or both, one certificate each.
    #[arg(long = "acme-key-types", value_name = "LIST", default_values = defaults::ACME_KEY_TYPES)]
    #[serde(default)]
    pub key_types: Vec<String>,
    /// Client certificates for this certificate's names (SNI): "none",
    /// "optional" or "required"; a request whose Host falls under another
    /// policy than its connection's SNI gets 421 [default: the listener's]
    #[arg(long = "client-auth", value_name = "MODE")]
    pub client_auth: Option<String>,
    /// CA bundles (PEM) for this certificate's names [default: the listener's]
    #[arg(long = "client-ca", value_name = "FILE")]
    #[serde(default, deserialize_with = "one_or_many")]
    pub client_ca: Vec<String>,
    /// CRL files for this certificate's names [default: the listener's]
    #[arg(long = "client-crl", value_name = "FILE")]
    #[serde(default, deserialize_with = "one_or_many")]
    pub client_crl: Vec<String>,
}

/// A host-based route (TOML `[[listener.route]]`; no flags).
#[derive(Debug, Default, Clone, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteOptions {
    /// Host name, exact (`api.example.com`) or one-label wildcard
    /// (`*.example.com`), matched against each request's Host (port
    /// removed), or the SNI when there is no Host.
    #[arg(long)]
    pub host: String,
    /// Name of the `[[upstream]]` group those requests go to.
    #[arg(long)]
    pub upstream: String,
    /// Client networks (CIDR) served on this route; others get 403.
    /// Empty: everyone not denied.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    #[serde(default)]
    pub allow: Vec<String>,
    /// Client networks (CIDR) answered 403 on this route.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    #[serde(default)]
    pub deny: Vec<String>,
}

/// A backend group (TOML `[[upstream]]`; no flags).
#[derive(Debug, Default, Clone, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOptions {
    /// Name listeners and routes refer to.
    #[arg(long)]
    pub name: String,
    /// Servers: "HOST:PORT", "unix:/path" (a Unix socket), a URL
    /// ("http://HOST[:PORT]", "https://HOST[:PORT]" for TLS,
    /// "h2c://HOST:PORT"), or { addr = "…", weight = N }, the weight being
    /// a relative share of requests in 1..=100 (a server without one gets
    /// the smallest). One scheme per group.
    #[arg(long, value_name = "SERVER")]
    #[serde(default)]
    pub servers: Vec<ServerOptions>,
    /// "round_robin" (smooth weighted), "least_conn", "hash" (consistent
    /// hashing of `hash_key`) or "sticky_cookie" (tern sets a cookie
    /// naming the server; see `sticky_cookie`).
    #[arg(long, default_value = defaults::BALANCE)]
    pub balance: Option<String>,
    /// balance = "hash": what a request is hashed on: "client_ip",
    /// "header:NAME" or "cookie:NAME". A request without that header or
    /// cookie is balanced by weighted round robin.
    #[arg(long, default_value = defaults::HASH_KEY)]
    pub hash_key: Option<String>,
    /// balance = "hash": bounded loads, in percent (above 100, e.g. 125):
    /// a server already holding this share of the group's average
    /// requests in flight (relative to its weight) passes a key on to the
    /// next server on the ring, so one hot key cannot overload a server.
    /// 0: off (every key stays on its server).
    #[arg(long, default_value = shown(defaults::HASH_BALANCE_FACTOR))]
    pub hash_balance_factor: Option<u32>,
    /// balance = "sticky_cookie": name of the cookie tern sets to name the
    /// server (an opaque keyed hash of its address).
    #[arg(long, default_value = defaults::STICKY_COOKIE)]
    pub sticky_cookie: Option<String>,
    /// "http1" (HTTP/1.1, pooled keepalive), "h2c" (HTTP/2 over cleartext
    /// with prior knowledge) or "h2" (HTTP/2 over TLS, ALPN h2). HTTP/2
    /// groups keep one multiplexed session per server and worker; their
    /// health checks speak the same protocol. [default: what the servers'
    /// scheme says (h2c:// is h2c), else http1]
    #[arg(long)]
    pub protocol: Option<String>,
    /// TLS to the servers (TLS 1.2/1.3, certificate checked against
    /// `tls_ca` or the system's CAs, sessions resumed). A failed handshake
    /// is a backend fault (502, error=backend:tls) and fails health
    /// checks. [default: true for https:// servers and protocol "h2"]
    #[arg(long)]
    pub tls: Option<bool>,
    /// PEM bundle of the CA certificates the servers' certificates must
    /// chain to (relative to the config file; re-read on reload).
    /// [default: the system's CA certificates]
    #[arg(long)]
    pub tls_ca: Option<String>,
    /// DNS name (sent as SNI) or IP address the servers' certificates must
    /// carry. [default: the host each server is written with; a Unix
    /// socket needs this]
    #[arg(long)]
    pub tls_server_name: Option<String>,
    /// Send the server name as SNI (an IP address is never sent).
    #[arg(long, default_value = shown(defaults::TLS_SNI))]
    pub tls_sni: Option<bool>,
    /// ALPN protocol ids offered to HTTP/1.1 servers, in order, or
    /// ["none"]; never h2 (protocol "h2" offers h2 alone).
    #[arg(long, default_values = defaults::TLS_ALPN)]
    #[serde(default)]
    pub tls_alpn: Vec<String>,
    /// Certificate chain (PEM, leaf first) tern shows servers that ask
    /// for one (mTLS to the backend); needs `tls_client_key`.
    #[arg(long)]
    pub tls_client_cert: Option<String>,
    /// Private key (PEM: PKCS#8, SEC1 or PKCS#1) of `tls_client_cert`.
    #[arg(long)]
    pub tls_client_key: Option<String>,
    /// HTTP path for active health checks (GET; 2xx/3xx is healthy). Off
    /// when absent.
    #[arg(long)]
    pub health_check_path: Option<String>,
    /// h2c and h2 groups: gRPC health checks instead
    /// (`grpc.health.v1.Health/Check`) for this service name, "" for the
    /// server as a whole; SERVING is healthy, anything else (or no answer)
    /// a failure. Off when absent.
    #[arg(long)]
    pub health_check_grpc: Option<String>,
    /// Time between health checks.
    #[arg(long, default_value = shown(defaults::HEALTH_CHECK_INTERVAL))]
    pub health_check_interval: Option<String>,
    /// Deadline of one health check.
    #[arg(long, default_value = shown(defaults::HEALTH_CHECK_TIMEOUT))]
    pub health_check_timeout: Option<String>,
    /// Consecutive successes that mark a server up.
    #[arg(long, default_value = shown(defaults::RISE))]
    pub rise: Option<u32>,
    /// Consecutive failures that mark a server down.
    #[arg(long, default_value = shown(defaults::FALL))]
    pub fall: Option<u32>,
    /// Connect failures in a row that eject a server passively.
    #[arg(long, default_value = shown(defaults::MAX_FAILS))]
    pub max_fails: Option<u32>,
    /// How long a passively ejected server is skipped; a server ejected
    /// again soon after it came back is skipped one fail_timeout longer
    /// each time, up to max_fail_timeout.
    #[arg(long, default_value = shown(defaults::FAIL_TIMEOUT))]
    pub fail_timeout: Option<String>,
    /// Longest passive ejection of a server that keeps failing.
    #[arg(long, default_value = shown(defaults::MAX_FAIL_TIMEOUT))]
    pub max_fail_timeout: Option<String>,
    /// Outlier detection: responses with a 5xx status (or no response
    /// head within backend_response_timeout) in a row that eject a
    /// server passively, as max_fails does for connect failures. Off when
    /// absent.
    #[arg(long)]
    pub consecutive_5xx: Option<u32>,
    /// Largest share of a group's servers, in percent, that 5xx responses
    /// and timeouts may keep ejected at once (rounded down, yet at least
    /// one server of two or more, and never every server).
    #[arg(long, default_value = shown(defaults::MAX_EJECTED_PERCENT))]
    pub max_ejected_percent: Option<u32>,
    /// Time over which a server that comes back (ejection over, health
    /// checks passing again) ramps from a tenth of its weight to all of
    /// it (round_robin and least_conn). 0s: at once.
    #[arg(long, default_value = shown(defaults::SLOW_START))]
    pub slow_start: Option<String>,
    /// Response statuses after which an idempotent request (GET, HEAD,
    /// OPTIONS, TRACE, PUT, DELETE) that was sent whole is retried once on
    /// another server; the response is not relayed. Empty: none.
    #[arg(long, value_delimiter = ',', default_values = defaults::RETRY_ON)]
    pub retry_on: Option<Vec<u16>>,
    /// Retries on another server (after a connect failure or a retry_on
    /// status) a group may add, in percent of its requests, with a burst
    /// of 10 per worker; past it the failure goes to the client. 0: no
    /// retries on another server.
    #[arg(long, default_value = shown(defaults::RETRY_BUDGET))]
    pub retry_budget: Option<u32>,
}

/// One server of an upstream group.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ServerOptions {
    /// "HOST:PORT", weight [`defaults::WEIGHT`].
    Addr(String),
    /// With a weight.
    Weighted {
        /// HOST:PORT.
        addr: String,
        /// Relative share of requests (1..=100); [`defaults::WEIGHT`] when absent.
        weight: Option<u32>,
    },
}

impl ServerOptions {
    /// Its `HOST:PORT`.
    pub fn addr(&self) -> &str {
        match self {
            ServerOptions::Addr(addr) | ServerOptions::Weighted { addr, .. } => addr,
        }
    }

    /// Its weight.
    pub fn weight(&self) -> u32 {
        match self {
            ServerOptions::Addr(_) => defaults::WEIGHT,
            ServerOptions::Weighted { weight, .. } => weight.unwrap_or(defaults::WEIGHT),
        }
    }
}

/// `HOST:PORT` with the default weight (lets `UpstreamOptions` derive
/// `clap::Args` for its docs; no command line parses servers).
impl std::str::FromStr for ServerOptions {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(ServerOptions::Addr(s.to_string()))
    }
}
