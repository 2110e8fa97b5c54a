//! The options of `tern serve`, each declared once: one field of one of
//! the structs below is the option's command-line flag, its TOML key, its
//! `--help` text and its row in docs/config.md, and its default is a named
//! constant in [`defaults`] that the help, the docs and the resolution all
//! read. Values stay strings here (so that "was it given?" is `is_some()`);
//! `config::resolve` turns them into typed settings in one place.
//!
//! How the pieces fit:
//! - clap reads the doc comment of a field for `--help`, and its
//!   `default_value` / `default_values` for the `[default: X]` there;
//!   serde reads the same field from `tern.toml` (the key is the field name).
//! - `tern serve` clears the values clap filled in from a default before
//!   handing the options over, so `None` (or an empty list) means "not
//!   given" on both paths and resolution applies the constant itself.
//! - docs/config.md's reference is generated from these structs
//!   (`reference.rs`; `tern serve --config-reference` prints it, a test
//!   compares). TOML-only tables (`[[upstream]]`, `[[listener.route]]`,
//!   `[[listener.certificate]]`) derive `clap::Args` too, only so that their
//!   docs and defaults are read the same way; they are never parsed from a
//!   command line.
//! - With `--config`, every [`ListenerOptions`] flag given on the command
//!   line is refused by name: `tern serve` finds them with clap's
//!   `ArgMatches::value_source`, so a new field is covered without a list;
//!   every top-level and `[acme]` flag given replaces the file's value
//!   (`file.rs` lays the given options over the file's through serde,
//!   also without a list).
//!
//! # How to add an option
//!
//! 1. Add a field to the table it belongs to: a doc comment (one paragraph:
//!    what it does, units and bounds, never the default), `#[arg(long,
//!    value_name = "…")]` (`#[arg(skip)]` for a TOML-only key of a flag
//!    table), and an `Option<T>` type (`Vec<String>` for lists; `bool` for
//!    a listener switch that is off by default, `Option<bool>` at the top
//!    level). Nothing else is needed for `--config` to refuse a listener
//!    flag or to let a top-level flag override the file.
//! 2. If it has a default, add a constant to [`defaults`] (typed: `u32`,
//!    `usize`, `bool`, `&str`, `Duration`; `[&str; N]` for a list) and
//!    name it in the attribute: `default_value = shown(defaults::X)`, or
//!    `default_values = defaults::X` for a list. A default that is not one
//!    value (e.g. "number of CPU cores") stays prose in the doc comment.
//! 3. Resolve it in `resolve.rs` (or `upstream.rs`, `acme.rs`) with
//!    `o.x.unwrap_or(defaults::X)` into the typed settings of `mod.rs`;
//!    errors name the key with `key_err("x", …)`.
//! 4. Regenerate docs/config.md: `cargo run -p tern -- serve
//!    --config-reference` and paste it between the markers (the test
//!    `docs_config_md_carries_the_generated_reference` says when to).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tern_tls::TlsPolicy;

/// Every default of `tern serve`, named once: `--help`, docs/config.md and
/// the resolution of a missing option all read these.
pub mod defaults {
    use std::time::Duration;

    /// `accept`: one listening socket per worker.
    pub const ACCEPT: &str = "reuseport";
    /// `log_format`.
    pub const LOG_FORMAT: &str = "text";
    /// `access_log`: standard output.
    pub const ACCESS_LOG: &str = "-";
    /// `shutdown_timeout`.
    pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

    /// `[acme] directory`.
    pub const ACME_DIRECTORY: &str = "letsencrypt";
    /// `[acme] retry`: first wait after a failed order.
    pub const ACME_RETRY: Duration = Duration::from_secs(60);

    /// `listen`.
    pub const LISTEN: &str = "127.0.0.1:8443";
    /// `mode`.
    pub const MODE: &str = "http";
    /// `balance` of a listener's backends and of an `[[upstream]]`.
    pub const BALANCE: &str = "round_robin";
    /// `h2_max_concurrent_streams`.
    pub const H2_MAX_CONCURRENT_STREAMS: u32 = 128;
    /// `h2_max_header_list_size`.
    pub const H2_MAX_HEADER_LIST_SIZE: u32 = 64 * 1024;
    /// `h2_header_table_size`.
    pub const H2_HEADER_TABLE_SIZE: u32 = 4096;
    /// `h2_max_resets_per_second`.
    pub const H2_MAX_RESETS_PER_SECOND: u32 = 200;
    /// `h3_max_streams`.
    pub const H3_MAX_STREAMS: u32 = 100;
    /// `quic_retry_above`.
    pub const QUIC_RETRY_ABOVE: u32 = 100;
    /// `quic_gso`.
    pub const QUIC_GSO: bool = true;
    /// `quic_early_data`.
    pub const QUIC_EARLY_DATA: bool = false;
    /// `alt_svc_max_age`, in seconds.
    pub const ALT_SVC_MAX_AGE: u32 = 86400;
    /// `acme_key_types` of a listener, `key_types` of a certificate table.
    pub const ACME_KEY_TYPES: [&str; 1] = ["ecdsa"];
    /// `alpn` in http mode (tcp mode offers none unless given).
    pub const ALPN: [&str; 2] = ["h2", "http/1.1"];
    /// `client_auth`: no client certificate asked for.
    pub const CLIENT_AUTH: &str = "none";
    /// `session_cache` entries.
    pub const SESSION_CACHE: usize = 20_480;
    /// `tickets`.
    pub const TICKETS: bool = true;
    /// `ticket_rotation`.
    pub const TICKET_ROTATION: Duration = Duration::from_secs(12 * 3600);
    /// `forwarded`: all three fields.
    pub const FORWARDED: [&str; 3] = ["x-forwarded-for", "x-forwarded-proto", "forwarded"];
    /// `handshake_timeout`.
    pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
    /// `header_timeout`.
    pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
    /// `idle_timeout`.
    pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
    /// `backend_connect_timeout`.
    pub const BACKEND_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    /// `backend_response_timeout`.
    pub const BACKEND_RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
    /// `max_connections`.
    pub const MAX_CONNECTIONS: usize = 10_000;
    /// `max_head_bytes`.
    pub const MAX_HEAD_BYTES: usize = tern_http::head::DEFAULT_MAX_HEAD_BYTES;
    /// `backend_pool_size`.
    pub const BACKEND_POOL_SIZE: usize = 1024;
    /// `request_id_header`.
    pub const REQUEST_ID_HEADER: &str = "X-Request-Id";
    /// `request_id_format`.
    pub const REQUEST_ID_FORMAT: &str = "random";
    /// `client_burst`.
    pub const CLIENT_BURST: u32 = 10;
    /// `client_rate_close_after`: far more than a browser's burst of
    /// subresources that overshoots a rate, few enough that a flooding
    /// connection is cut within milliseconds.
    pub const CLIENT_RATE_CLOSE_AFTER: u32 = 20;
    /// `client_ipv6_prefix`: a host is usually given a /64.
    pub const CLIENT_IPV6_PREFIX: u8 = 64;
    /// `log_rejected`.
    pub const LOG_REJECTED: bool = false;

    /// `[[upstream]] tls_sni`.
    pub const TLS_SNI: bool = true;
    /// `[[upstream]] tls_alpn` of an HTTP/1.1 group.
    pub const TLS_ALPN: [&str; 1] = ["http/1.1"];
    /// `[[upstream]] health_check_interval` (also for `--health-check`).
    pub const HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(2);
    /// `[[upstream]] health_check_timeout` (also for `--health-check`).
    pub const HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(1);
    /// `[[upstream]] rise` (also for `--health-check`).
    pub const RISE: u32 = 2;
    /// `[[upstream]] fall` (also for `--health-check`).
    pub const FALL: u32 = 3;
    /// `[[upstream]] max_fails` (also for `--backend` lists).
    pub const MAX_FAILS: u32 = 3;
    /// `[[upstream]] fail_timeout` (also for `--backend` lists).
    pub const FAIL_TIMEOUT: Duration = Duration::from_secs(10);
    /// `resolver_min_ttl`.
    pub const RESOLVER_MIN_TTL: Duration = Duration::from_secs(1);
    /// `resolver_max_ttl`.
    pub const RESOLVER_MAX_TTL: Duration = Duration::from_secs(60);
    /// Weight of a server given without one.
    pub const WEIGHT: u32 = 1;
    /// `[[upstream]] hash_key`.
    pub const HASH_KEY: &str = "client_ip";
    /// `[[upstream]] hash_balance_factor`: off (pure affinity).
    pub const HASH_BALANCE_FACTOR: u32 = 0;
    /// `[[upstream]] sticky_cookie`.
    pub const STICKY_COOKIE: &str = "tern_server";
    /// `[[upstream]] max_ejected_percent`.
    pub const MAX_EJECTED_PERCENT: u32 = 50;
    /// `[[upstream]] max_fail_timeout`.
    pub const MAX_FAIL_TIMEOUT: Duration = Duration::from_secs(300);
    /// `[[upstream]] slow_start`: off.
    pub const SLOW_START: Duration = Duration::ZERO;
    /// `[[upstream]] retry_on`.
    pub const RETRY_ON: [&str; 2] = ["502", "503"];
    /// `[[upstream]] retry_budget`, in percent of requests.
    pub const RETRY_BUDGET: u32 = 20;
}

/// A default as an option spells it (`128`, `true`, `10s`), for `--help`
/// and docs/config.md: `#[arg(default_value = shown(defaults::X))]`.
pub fn shown(value: impl Shown) -> String {
    value.option_text()
}

/// A value that can be shown as an option's text.
pub trait Shown {
    /// The text an option would be given to mean this value.
    fn option_text(&self) -> String;
}

macro_rules! shown_as_display {
    ($($t:ty),*) => {$(
        impl Shown for $t {
            fn option_text(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
shown_as_display!(u8, u32, usize, bool, &str);

impl Shown for Duration {
    fn option_text(&self) -> String {
        humantime::format_duration(*self).to_string()
    }
}

/// Process-wide options (top level of the TOML file). Serialize lets
/// `load_file` lay the command line's values over the file's without a
/// list of fields; so that a switch given on the command line can be told
/// from an absent one, top-level options take values (`Option<bool>`,
/// never a bare `bool`; a test checks).
#[derive(Debug, Default, Clone, clap::Args, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GlobalOptions {
    /// Worker threads, each with its own listener socket (SO_REUSEPORT) and
    /// event loop. [default: number of CPU cores]
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,

    /// How workers accept: "reuseport" (one listening socket per worker, the
    /// kernel spreads connections) or "shared" (one socket polled by all).
    #[arg(long, value_name = "MODE", hide = true, default_value = defaults::ACCEPT)]
    pub accept: Option<String>,

    /// Log format for diagnostics and the access log: "text" or "json".
    #[arg(long, value_name = "FORMAT", default_value = defaults::LOG_FORMAT)]
    pub log_format: Option<String>,

    /// Where access-log lines go: a file path, "-" for standard output, or
    /// "off".
    #[arg(long, value_name = "PATH", default_value = defaults::ACCESS_LOG)]
    pub access_log: Option<String>,

    /// On SIGTERM/SIGINT, how long in-flight requests may take to finish
    /// before tern exits anyway.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::SHUTDOWN_TIMEOUT))]
    pub shutdown_timeout: Option<String>,

    /// Admin listener serving Prometheus /metrics and /health, ADDR:PORT.
    /// Off by default; only loopback addresses are accepted.
    #[arg(long, value_name = "ADDR:PORT")]
    pub admin: Option<String>,

    /// DNS server that resolves backends given by name, IP or IP:PORT (port
    /// 53 when absent). [default: the nameservers of /etc/resolv.conf]
    #[arg(long, value_name = "ADDR:PORT")]
    pub resolver: Option<String>,

    /// Shortest time between two resolutions of a backend name: a record
    /// with a shorter TTL (or 0) is re-resolved after this long.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::RESOLVER_MIN_TTL))]
    pub resolver_min_ttl: Option<String>,

    /// Longest time between two resolutions of a backend name, whatever
    /// the TTL; also the wait before retrying a name whose resolution
    /// failed is at most this long.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::RESOLVER_MAX_TTL))]
    pub resolver_max_ttl: Option<String>,

    /// Unix socket on which the running tern hands its listening sockets to
    /// a new binary started with `tern serve --upgrade` (docs/upgrade.md).
    /// Off by default.
    #[arg(long, value_name = "PATH")]
    pub upgrade_socket: Option<String>,

    /// User to run as once the listening sockets are open and the keys
    /// read (e.g. "nobody"); tern must start as root for it. Off by
    /// default: tern keeps the user it was started as.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,

    /// Group to run as with `user`. [default: the user's primary group]
    #[arg(long, value_name = "NAME")]
    pub group: Option<String>,

    /// Where certificates named by `acme` come from (TOML `[acme]` table).
    #[command(flatten)]
    #[serde(default)]
    pub acme: AcmeOptions,

    /// Backend groups (TOML `[[upstream]]` tables).
    #[arg(skip)]
    #[serde(default, skip_serializing)]
    pub upstream: Vec<UpstreamOptions>,

    /// Listeners (TOML `[[listener]]` tables; the command line describes one).
    #[arg(skip)]
    #[serde(default, skip_serializing)]
    pub listener: Vec<ListenerOptions>,
}

/// The ACME CA certificates are obtained from, and where they are kept
/// (TOML `[acme]`; used by certificates with `acme` names).
#[derive(Debug, Default, Clone, clap::Args, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AcmeOptions {
    /// ACME directory: "letsencrypt", "letsencrypt-staging" or a URL.
    #[arg(long = "acme-directory", value_name = "URL", default_value = defaults::ACME_DIRECTORY)]
    pub directory: Option<String>,

    /// Account contact, e.g. mailto:ops@example.com; repeat for several.
    #[arg(long = "acme-contact", value_name = "URI")]
    #[serde(default)]
    pub contact: Vec<String>,

    /// Directory for the ACME account, certificates, keys and locks (mode
    /// 0700); instances sharing it order each certificate once.
    /// [default: $XDG_DATA_HOME/tern/acme, ~/.local/share/tern/acme or /var/lib/tern/acme]
    #[arg(long = "acme-state-dir", value_name = "DIR")]
    pub state_dir: Option<String>,

    /// Root certificate (PEM) trusted for the ACME directory's HTTPS
    /// instead of the system's: for private and test CAs.
    #[arg(long = "acme-ca-root", value_name = "FILE")]
    pub ca_root: Option<String>,

    /// External Account Binding key identifier, for CAs that require one.
    #[arg(long = "acme-eab-kid", value_name = "KID")]
    pub eab_kid: Option<String>,

    /// External Account Binding HMAC key, base64url as the CA gives it.
    #[arg(long = "acme-eab-hmac-key", value_name = "KEY")]
    pub eab_hmac_key: Option<String>,

    /// First wait after a failed order; doubles on each further failure up
    /// to 6h, with jitter.
    #[arg(long = "acme-retry", value_name = "DURATION", default_value = shown(defaults::ACME_RETRY))]
    pub retry: Option<String>,
}

/// One listener: where it accepts, how it speaks TLS, where it forwards.
#[derive(Debug, Default, Clone, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerOptions {
    /// Address to accept TLS connections on: ADDR:PORT, [V6]:PORT, or
    /// :PORT for every IPv4 address.
    #[arg(long, value_name = "ADDR:PORT", default_value = defaults::LISTEN)]
    pub listen: Option<String>,

    /// "http" (terminate TLS, proxy HTTP) or "tcp" (terminate TLS, pass bytes).
    #[arg(long, value_name = "MODE", default_value = defaults::MODE)]
    pub mode: Option<String>,

    /// Backend to forward to: HOST:PORT, unix:/path, or a URL
    /// (http://HOST[:PORT], https://HOST[:PORT] for TLS checked against
    /// the system's CAs, h2c://HOST:PORT); repeat for several (round
    /// robin, one scheme). Without any, tern answers from a built-in demo
    /// origin.
    #[arg(long = "backend", value_name = "SERVER")]
    #[serde(default)]
    pub backends: Vec<String>,

    /// Name of the `[[upstream]]` group to forward to (instead of --backend).
    #[arg(long, value_name = "NAME")]
    pub upstream: Option<String>,

    /// Host-based routes to other upstream groups (TOML `[[listener.route]]`).
    #[arg(skip)]
    #[serde(default)]
    pub route: Vec<RouteOptions>,

    /// How the --backend list is balanced: "round_robin" or "least_conn".
    #[arg(long, value_name = "POLICY", default_value = defaults::BALANCE)]
    pub balance: Option<String>,

    /// Active health check for the --backend list: HTTP path requested with
    /// the interval, timeout, rise and fall defaults of `[[upstream]]`. Off
    /// by default.
    #[arg(long, value_name = "PATH")]
    pub health_check: Option<String>,

    /// PEM bundle of the CA certificates the --backend servers'
    /// certificates must chain to, for https:// backends (the
    /// `[[upstream]]` key `tls_ca`). [default: the system's CA
    /// certificates]
    #[arg(long, value_name = "FILE")]
    pub backend_tls_ca: Option<String>,

    /// Certificate chain (PEM, leaf first) tern shows https:// --backend
    /// servers that ask for one (mTLS to the backend; the `[[upstream]]`
    /// key `tls_client_cert`); needs --backend-tls-client-key.
    #[arg(long, value_name = "FILE")]
    pub backend_tls_client_cert: Option<String>,

    /// Private key (PEM: PKCS#8, SEC1 or PKCS#1) of
    /// --backend-tls-client-cert.
    #[arg(long, value_name = "FILE")]
    pub backend_tls_client_key: Option<String>,

    /// Expect a PROXY protocol header (v1 or v2) from an L4 balancer before
    /// the TLS handshake; its client address is used for forwarding fields
    /// and logs. Needs --trusted-proxies.
    #[arg(long)]
    #[serde(default)]
    pub accept_proxy: bool,

    /// Source networks (CIDR) allowed to send PROXY headers; connections
    /// from elsewhere are closed.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    #[serde(default)]
    pub trusted_proxies: Vec<String>,

    /// HTTP/2: streams a client may have open at once.
    #[arg(long, value_name = "N", default_value = shown(defaults::H2_MAX_CONCURRENT_STREAMS))]
    pub h2_max_concurrent_streams: Option<u32>,

    /// HTTP/2: largest decoded header list, bounding HPACK bombs and
    /// CONTINUATION floods.
    #[arg(long, value_name = "BYTES", default_value = shown(defaults::H2_MAX_HEADER_LIST_SIZE))]
    pub h2_max_header_list_size: Option<u32>,

    /// HTTP/2: HPACK dynamic table size for the client's headers.
    #[arg(long, value_name = "BYTES", default_value = shown(defaults::H2_HEADER_TABLE_SIZE))]
    pub h2_header_table_size: Option<u32>,

    /// HTTP/2: stream resets a client may cause per second before it gets
    /// GOAWAY (rapid reset, CVE-2023-44487).
    #[arg(long, value_name = "N", default_value = shown(defaults::H2_MAX_RESETS_PER_SECOND))]
    pub h2_max_resets_per_second: Option<u32>,

    /// Serve HTTP/3 (QUIC) too, on the UDP port of the listen address, and
    /// advertise it with Alt-Svc on HTTP/1.1 and HTTP/2 responses. Needs
    /// TLSv1.3 and TLS_AES_128_GCM_SHA256 (QUIC's Initial packets use it).
    #[arg(long)]
    #[serde(default)]
    pub http3: bool,

    /// HTTP/3: request streams a client may have open at once.
    #[arg(long, value_name = "N", default_value = shown(defaults::H3_MAX_STREAMS))]
    pub h3_max_streams: Option<u32>,

    /// HTTP/3: QUIC handshakes under way (begun, not yet over) per worker
    /// past which new clients must first prove their address (a stateless
    /// Retry, one more round trip), so a flood of spoofed Initials, whose
    /// handshakes never end, costs no more handshakes. 0: always.
    #[arg(long, value_name = "N", default_value = shown(defaults::QUIC_RETRY_ABOVE))]
    pub quic_retry_above: Option<u32>,

    /// HTTP/3: send with UDP generic segmentation offload (GSO) where the
    /// kernel has it: one system call and one pass through the stack for
    /// several packets. Off only to measure what it saves.
    #[arg(long, value_name = "BOOL", default_value = shown(defaults::QUIC_GSO))]
    pub quic_gso: Option<bool>,

    /// HTTP/3: take requests a resuming client sends in 0-RTT, before the
    /// handshake ends (one round trip saved). Early data can be replayed
    /// by anyone who captured it: only GET, HEAD and OPTIONS are forwarded
    /// (with `Early-Data: 1`, RFC 8470), others get 425 Too Early and the
    /// client retries after the handshake.
    #[arg(long, value_name = "BOOL", default_value = shown(defaults::QUIC_EARLY_DATA))]
    pub quic_early_data: Option<bool>,

    /// HTTP/3: how long clients may remember the Alt-Svc advertisement, in
    /// seconds; 0 advertises nothing (HTTP/3 is then found only by clients
    /// told some other way).
    #[arg(long, value_name = "SECONDS", default_value = shown(defaults::ALT_SVC_MAX_AGE))]
    pub alt_svc_max_age: Option<u32>,

    /// Certificate chain (PEM, leaf first); repeat together with --key for
    /// several certificates chosen by SNI. The first is the default.
    /// Without any, tern makes a self-signed certificate for localhost.
    #[arg(long = "cert", value_name = "FILE")]
    #[serde(default, deserialize_with = "one_or_many")]
    pub cert: Vec<String>,

    /// Private key (PEM: PKCS#8, SEC1 or PKCS#1) for the --cert at the same position.
    #[arg(long = "key", value_name = "FILE")]
    #[serde(default, deserialize_with = "one_or_many")]
    pub key: Vec<String>,

    /// DER OCSP response stapled to the --cert at the same position.
    #[arg(long = "ocsp", value_name = "FILE")]
    #[serde(default, deserialize_with = "one_or_many")]
    pub ocsp: Vec<String>,

    /// Obtain and renew a certificate for these DNS names over ACME (see
    /// --acme-directory); comma-separated, one certificate for all.
    #[arg(long = "acme", value_name = "NAMES", value_delimiter = ',')]
    #[serde(default)]
    pub acme: Vec<String>,

    /// Key types of the --acme certificate: "ecdsa" (P-256), "rsa"
    /// (2048), or both (one certificate each).
    #[arg(
        long = "acme-key-types",
        value_name = "LIST",
        value_delimiter = ',',
        default_values = defaults::ACME_KEY_TYPES
    )]
    #[serde(default)]
    pub acme_key_types: Vec<String>,

    /// Also accept plain HTTP on this address: ACME HTTP-01 challenges are
    /// answered there (instead of TLS-ALPN-01 on the TLS port), every other
    /// request is redirected to https with 308.
    #[arg(long, value_name = "ADDR:PORT")]
    pub http_listen: Option<String>,

    /// More certificates (TOML `[[listener.certificate]]` tables).
    #[arg(skip)]
    #[serde(default)]
    pub certificate: Vec<CertificateOptions>,

    /// Ask clients for a certificate (mutual TLS): "none", "optional" (a
    /// client without one is served; a bad one is refused) or "required".
    /// A `[[listener.certificate]]` table may set its own for its names
    /// (SNI).
    #[arg(long, value_name = "MODE", default_value = shown(defaults::CLIENT_AUTH))]
    pub client_auth: Option<String>,

    /// PEM bundle of the CAs client certificates must chain to; repeat for
    /// several. Needed by client_auth "optional" and "required"; re-read on
    /// reload.
    #[arg(long = "client-ca", value_name = "FILE")]
    #[serde(default, deserialize_with = "one_or_many")]
    pub client_ca: Vec<String>,

    /// Certificate revocation list (PEM or DER) of a client CA; repeat for
    /// several. A client certificate it revokes is refused
    /// (certificate_revoked), and so is one whose issuer has no CRL among
    /// them once any is given. Re-read on reload.
    #[arg(long = "client-crl", value_name = "FILE")]
    #[serde(default, deserialize_with = "one_or_many")]
    pub client_crl: Vec<String>,

    /// TLS versions, a subset of the default. Older ones are refused.
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          default_values = TlsPolicy::default_fast().version_names())]
    #[serde(default)]
    pub tls_versions: Vec<String>,

    /// Cipher suites by IANA name, in preference order, a subset of the
    /// default (AEAD only). DHE, RSA key exchange, CBC and RC4 are refused.
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          default_values = TlsPolicy::default_fast().suite_names())]
    #[serde(default)]
    pub ciphers: Vec<String>,

    /// Key-exchange groups in preference order, a subset of the default.
    /// Finite-field groups are refused.
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          default_values = TlsPolicy::default_fast().group_names())]
    #[serde(default)]
    pub groups: Vec<String>,

    /// ALPN protocols offered, in preference order: h2, http/1.1. In tcp
    /// mode none is offered unless given (any protocol name may be).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_values = defaults::ALPN)]
    #[serde(default)]
    pub alpn: Vec<String>,

    /// Entries in the TLS session cache (TLS 1.2 session IDs, and TLS 1.3
    /// when tickets are off); 0 turns it off.
    #[arg(long, value_name = "N", default_value = shown(defaults::SESSION_CACHE))]
    pub session_cache: Option<usize>,

    /// Turn session tickets off (TOML: `tickets = false`).
    #[arg(long = "no-tickets")]
    #[serde(skip)]
    pub no_tickets: bool,

    /// Session tickets on or off (TOML only; `--no-tickets` turns them off).
    #[arg(skip)]
    pub tickets: Option<bool>,

    /// Send the certificate chain whole even to TLS 1.3 clients that offer
    /// certificate compression (RFC 8879; brotli or zlib, each chain
    /// compressed once and cached). Compression saves a round trip when
    /// the chain overflows the initial congestion window.
    #[arg(long)]
    #[serde(default)]
    pub no_cert_compression: bool,

    /// How often in-process ticket keys rotate; a ticket is accepted for
    /// at most twice this.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::TICKET_ROTATION))]
    pub ticket_rotation: Option<String>,

    /// File of ticket keys shared by several tern instances, so a client
    /// resumes on any of them (see docs/config.md for the format).
    #[arg(long, value_name = "FILE")]
    pub ticket_keys_file: Option<String>,

    /// Forwarding fields tern adds: any of x-forwarded-for,
    /// x-forwarded-proto, forwarded, or "none". Client-sent ones are always
    /// removed.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_values = defaults::FORWARDED)]
    #[serde(default)]
    pub forwarded: Vec<String>,

    /// tcp mode: send a PROXY protocol header ("v1" or "v2") to the backend.
    #[arg(long, value_name = "VERSION")]
    pub proxy_protocol: Option<String>,

    /// Deadline for the TLS handshake.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::HANDSHAKE_TIMEOUT))]
    pub handshake_timeout: Option<String>,

    /// Deadline for a whole request head once its first byte arrived.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::HEADER_TIMEOUT))]
    pub header_timeout: Option<String>,

    /// How long an idle keepalive connection (or a stalled body) is kept.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::IDLE_TIMEOUT))]
    pub idle_timeout: Option<String>,

    /// Deadline for connecting to a backend.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::BACKEND_CONNECT_TIMEOUT))]
    pub backend_connect_timeout: Option<String>,

    /// Deadline for a backend's response head, and for each later read.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::BACKEND_RESPONSE_TIMEOUT))]
    pub backend_response_timeout: Option<String>,

    /// Most client connections open at once (all workers); more are closed
    /// at accept.
    #[arg(long, value_name = "N", default_value = shown(defaults::MAX_CONNECTIONS))]
    pub max_connections: Option<usize>,

    /// Largest request head (request line and fields); more gets 431.
    #[arg(long, value_name = "BYTES", default_value = shown(defaults::MAX_HEAD_BYTES))]
    pub max_head_bytes: Option<usize>,

    /// Most idle backend connections kept per backend and worker: a
    /// ceiling, the pool keeps what the recent peak had in use and closes
    /// those unused for 30 s.
    #[arg(long, value_name = "N", default_value = shown(defaults::BACKEND_POOL_SIZE))]
    pub backend_pool_size: Option<usize>,

    /// Strict-Transport-Security sent on every response: browsers then
    /// refuse plain HTTP to this host (downgrade and cookie theft), e.g.
    /// "max-age=31536000; includeSubDomains". Off when not given.
    #[arg(long, value_name = "VALUE")]
    pub hsts: Option<String>,

    /// Field carrying the request ID generated for every request, to the
    /// backend and back to the client; a client's own is replaced unless
    /// a trusted proxy sent it (the listener takes PROXY headers, or the
    /// client is in client_id_from). "off":
    /// no request IDs.
    #[arg(long, value_name = "NAME", default_value = shown(defaults::REQUEST_ID_HEADER))]
    pub request_id_header: Option<String>,

    /// Request IDs: "random" (128 random bits, 32 hex digits) or "uuidv7"
    /// (time-ordered, sorts by arrival).
    #[arg(long, value_name = "FORMAT", default_value = shown(defaults::REQUEST_ID_FORMAT))]
    pub request_id_format: Option<String>,

    /// Largest request body forwarded (e.g. "1MiB"); more gets 413, before
    /// anything is forwarded when Content-Length says so; a body without
    /// one is counted as it goes. Unlimited when not given.
    #[arg(long, value_name = "SIZE")]
    pub max_request_body: Option<String>,

    /// Connections one client address may have open at once (counted over
    /// all workers); more are closed before the TLS handshake. Unlimited
    /// when not given.
    #[arg(long, value_name = "N")]
    pub client_max_connections: Option<u32>,

    /// Requests per client (counted over all workers), e.g. "20/s", "600/m";
    /// HTTP/2 and HTTP/3 streams count as requests; more get 429 with
    /// Retry-After. Unlimited when not given.
    #[arg(long, value_name = "RATE")]
    pub client_rate: Option<String>,

    /// Requests a client may send at once above client_rate.
    #[arg(long, value_name = "N", default_value = shown(defaults::CLIENT_BURST))]
    pub client_burst: Option<u32>,

    /// Requests of one connection refused for client_rate in a row (429s
    /// with no request served between them) after which tern closes the
    /// connection (HTTP/1.1: closed after the 429, HTTP/2
    /// GOAWAY ENHANCE_YOUR_CALM, HTTP/3 H3_EXCESSIVE_LOAD) and closes the
    /// client's new connections before the TLS handshake until the
    /// Retry-After it was given has passed. 0: never close.
    #[arg(long, value_name = "N", default_value = shown(defaults::CLIENT_RATE_CLOSE_AFTER))]
    pub client_rate_close_after: Option<u32>,

    /// IPv6 clients are one client per prefix of this length for the
    /// client_ limits (a host is usually given a /64).
    #[arg(long, value_name = "BITS", default_value = shown(defaults::CLIENT_IPV6_PREFIX))]
    pub client_ipv6_prefix: Option<u8>,

    /// Field naming the client when a trusted proxy (client_id_from) sent
    /// the request, e.g. "CF-Connecting-IP" or "X-Forwarded-For" (its last
    /// element): client_rate counts that client instead of the proxy. An
    /// address is grouped like a direct client's; any other value (up to
    /// 128 visible characters) is an opaque identity. Off when not given.
    #[arg(long, value_name = "NAME")]
    pub client_id_header: Option<String>,

    /// Client addresses (CIDR) whose client_id_header is believed (and
    /// whose request ID is kept); needed by client_id_header.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    #[serde(default)]
    pub client_id_from: Vec<String>,

    /// Client networks (CIDR) let in; empty: everyone not denied. Others
    /// are closed before the TLS handshake.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    #[serde(default)]
    pub allow: Vec<String>,

    /// Client networks (CIDR) closed before the TLS handshake.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    #[serde(default)]
    pub deny: Vec<String>,

    /// Connections that end before a request (denied, over a limit, failed
    /// handshake, head timeout) leave an access-log line.
    #[arg(long, value_name = "BOOL", default_value = shown(defaults::LOG_REJECTED))]
    pub log_rejected: Option<bool>,

    /// Rules for request fields sent to backends (TOML
    /// `[listener.request_headers]`: set, add, remove).
    #[arg(skip)]
    #[serde(default)]
    pub request_headers: super::edge::HeaderRuleOptions,

    /// Rules for response fields sent to clients (TOML
    /// `[listener.response_headers]`: set, add, remove).
    #[arg(skip)]
    #[serde(default)]
    pub response_headers: super::edge::HeaderRuleOptions,
}

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

/// Accepts `key = "x"` as well as `key = ["x", "y"]`.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}
