//! The options of `tern serve`, defined once for both the command line and
//! the TOML file: clap reads the doc comments for `--help`, serde reads the
//! same fields from `tern.toml`. Values stay strings here; `config::resolve`
//! turns them into typed settings in one place.

use serde::Deserialize;

/// Process-wide options (top level of the TOML file).
#[derive(Debug, Default, Clone, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobalOptions {
    /// Worker threads, each with its own listener socket (SO_REUSEPORT) and
    /// event loop. [default: number of CPU cores]
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,

    /// How workers accept: "reuseport" (one listening socket per worker, the
    /// kernel spreads connections) or "shared" (one socket polled by all).
    /// [default: reuseport]
    #[arg(long, value_name = "MODE", hide = true)]
    pub accept: Option<String>,

    /// Log format for diagnostics and the access log: "text" or "json". [default: text]
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<String>,

    /// Where access-log lines go: a file path, "-" for standard output, or
    /// "off". [default: -]
    #[arg(long, value_name = "PATH")]
    pub access_log: Option<String>,

    /// On SIGTERM/SIGINT, how long in-flight requests may take to finish
    /// before tern exits anyway. [default: 30s]
    #[arg(long, value_name = "DURATION")]
    pub shutdown_timeout: Option<String>,

    /// Admin listener serving Prometheus /metrics and /health, ADDR:PORT.
    /// Off by default; only loopback addresses are accepted.
    #[arg(long, value_name = "ADDR:PORT")]
    pub admin: Option<String>,

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
    #[serde(default)]
    pub upstream: Vec<UpstreamOptions>,

    /// Listeners (TOML `[[listener]]` tables; the command line describes one).
    #[arg(skip)]
    #[serde(default)]
    pub listener: Vec<ListenerOptions>,
}

/// The ACME CA certificates are obtained from, and where they are kept
/// (TOML `[acme]`; used by certificates with `acme` names).
#[derive(Debug, Default, Clone, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcmeOptions {
    /// ACME directory: "letsencrypt", "letsencrypt-staging" or a URL.
    /// [default: letsencrypt]
    #[arg(long = "acme-directory", value_name = "URL")]
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
    /// to 6h, with jitter. [default: 1m]
    #[arg(long = "acme-retry", value_name = "DURATION")]
    pub retry: Option<String>,
}

/// One listener: where it accepts, how it speaks TLS, where it forwards.
#[derive(Debug, Default, Clone, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerOptions {
    /// Address to accept TLS connections on. [default: 127.0.0.1:8443]
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,

    /// "http" (terminate TLS, proxy HTTP) or "tcp" (terminate TLS, pass bytes). [default: http]
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,

    /// Backend to forward to, HOST:PORT; repeat for several (round robin).
    /// Without any, tern answers from a built-in demo origin.
    #[arg(long = "backend", value_name = "HOST:PORT")]
    #[serde(default)]
    pub backends: Vec<String>,

    /// Name of the `[[upstream]]` group to forward to (instead of --backend).
    #[arg(long, value_name = "NAME")]
    pub upstream: Option<String>,

    /// Host-based routes to other upstream groups (TOML `[[listener.route]]`).
    #[arg(skip)]
    #[serde(default)]
    pub route: Vec<RouteOptions>,

    /// How the --backend list is balanced: "round_robin" or "least_conn". [default: round_robin]
    #[arg(long, value_name = "POLICY")]
    pub balance: Option<String>,

    /// Active health check for the --backend list: HTTP path requested
    /// every 2s (2 successes mark a backend up, 3 failures down). Off by default.
    #[arg(long, value_name = "PATH")]
    pub health_check: Option<String>,

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

    /// HTTP/2: streams a client may have open at once. [default: 128]
    #[arg(long, value_name = "N")]
    pub h2_max_concurrent_streams: Option<u32>,

    /// HTTP/2: largest decoded header list, bounding HPACK bombs and
    /// CONTINUATION floods. [default: 65536]
    #[arg(long, value_name = "BYTES")]
    pub h2_max_header_list_size: Option<u32>,

    /// HTTP/2: HPACK dynamic table size for the client's headers. [default: 4096]
    #[arg(long, value_name = "BYTES")]
    pub h2_header_table_size: Option<u32>,

    /// HTTP/2: stream resets a client may cause per second before it gets
    /// GOAWAY (rapid reset, CVE-2023-44487). [default: 200]
    #[arg(long, value_name = "N")]
    pub h2_max_resets_per_second: Option<u32>,

    /// Serve HTTP/3 (QUIC) too, on the UDP port of the listen address, and
    /// advertise it with Alt-Svc on HTTP/1.1 and HTTP/2 responses. Needs
    /// TLSv1.3 and TLS_AES_128_GCM_SHA256 (QUIC's Initial packets use it).
    #[arg(long)]
    #[serde(default)]
    pub http3: bool,

    /// HTTP/3: request streams a client may have open at once. [default: 100]
    #[arg(long, value_name = "N")]
    pub h3_max_streams: Option<u32>,

    /// HTTP/3: new QUIC connections per second and worker past which
    /// clients must first prove their address (a stateless Retry, one more
    /// round trip), so a flood of spoofed Initials costs no handshakes.
    /// 0: always. [default: 200]
    #[arg(long, value_name = "N")]
    pub quic_retry_above: Option<u32>,

    /// HTTP/3: send with UDP generic segmentation offload (GSO) where the
    /// kernel has it: one system call and one pass through the stack for
    /// several packets. Off only to measure what it saves. [default: true]
    #[arg(long, value_name = "BOOL")]
    pub quic_gso: Option<bool>,

    /// HTTP/3: take requests a resuming client sends in 0-RTT, before the
    /// handshake ends (one round trip saved). Early data can be replayed
    /// by anyone who captured it: only GET, HEAD and OPTIONS are forwarded
    /// (with `Early-Data: 1`, RFC 8470), others get 425 Too Early and the
    /// client retries after the handshake. [default: false]
    #[arg(long, value_name = "BOOL")]
    pub quic_early_data: Option<bool>,

    /// HTTP/3: how long clients may remember the Alt-Svc advertisement, in
    /// seconds; 0 advertises nothing (HTTP/3 is then found only by clients
    /// told some other way). [default: 86400]
    #[arg(long, value_name = "SECONDS")]
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
    /// (2048), or both (one certificate each). [default: ecdsa]
    #[arg(long = "acme-key-types", value_name = "LIST", value_delimiter = ',')]
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

    /// TLS versions, narrowing the default "TLSv1.3,TLSv1.2". Older ones are refused.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    #[serde(default)]
    pub tls_versions: Vec<String>,

    /// Cipher suites by IANA name, in preference order, narrowing the
    /// default AEAD-only list. DHE, RSA key exchange, CBC and RC4 are refused.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    #[serde(default)]
    pub ciphers: Vec<String>,

    /// Key-exchange groups in preference order, narrowing the default
    /// "X25519MLKEM768,X25519,secp256r1,secp384r1". Finite-field groups are refused.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    #[serde(default)]
    pub groups: Vec<String>,

    /// ALPN protocols offered, in preference order: h2, http/1.1. [default: h2,http/1.1]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    #[serde(default)]
    pub alpn: Vec<String>,

    /// Entries in the TLS session cache (TLS 1.2 session IDs, and TLS 1.3
    /// when tickets are off); 0 turns it off. [default: 20480]
    #[arg(long, value_name = "N")]
    pub session_cache: Option<usize>,

    /// Turn session tickets off (TOML: `tickets = false`).
    #[arg(long = "no-tickets")]
    #[serde(skip)]
    pub no_tickets: bool,

    /// Session tickets on or off. [default: true]
    #[arg(skip)]
    pub tickets: Option<bool>,

    /// How often in-process ticket keys rotate; a ticket is accepted for
    /// at most twice this. [default: 12h]
    #[arg(long, value_name = "DURATION")]
    pub ticket_rotation: Option<String>,

    /// File of ticket keys shared by several tern instances, so a client
    /// resumes on any of them (see docs/config.md for the format).
    #[arg(long, value_name = "FILE")]
    pub ticket_keys_file: Option<String>,

    /// Forwarding fields tern adds: any of x-forwarded-for,
    /// x-forwarded-proto, forwarded, or "none". Client-sent ones are always
    /// removed. [default: all three]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    #[serde(default)]
    pub forwarded: Vec<String>,

    /// tcp mode: send a PROXY protocol header ("v1" or "v2") to the backend.
    #[arg(long, value_name = "VERSION")]
    pub proxy_protocol: Option<String>,

    /// Deadline for the TLS handshake. [default: 10s]
    #[arg(long, value_name = "DURATION")]
    pub handshake_timeout: Option<String>,

    /// Deadline for a whole request head once its first byte arrived. [default: 10s]
    #[arg(long, value_name = "DURATION")]
    pub header_timeout: Option<String>,

    /// How long an idle keepalive connection (or a stalled body) is kept. [default: 60s]
    #[arg(long, value_name = "DURATION")]
    pub idle_timeout: Option<String>,

    /// Deadline for connecting to a backend. [default: 5s]
    #[arg(long, value_name = "DURATION")]
    pub backend_connect_timeout: Option<String>,

    /// Deadline for a backend's response head, and for each later read. [default: 60s]
    #[arg(long, value_name = "DURATION")]
    pub backend_response_timeout: Option<String>,

    /// Most client connections open at once (all workers); more are closed
    /// at accept. [default: 10000]
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,

    /// Largest request head (request line and fields); more gets 431. [default: 65536]
    #[arg(long, value_name = "BYTES")]
    pub max_head_bytes: Option<usize>,

    /// Idle backend connections kept per backend and worker. [default: 64]
    #[arg(long, value_name = "N")]
    pub backend_pool_size: Option<usize>,
}

/// One certificate of a listener (TOML `[[listener.certificate]]`).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertificateOptions {
    /// Certificate chain (PEM, leaf first).
    pub cert: Option<String>,
    /// Private key (PEM).
    pub key: Option<String>,
    /// DER OCSP response to staple.
    pub ocsp: Option<String>,
    /// Instead of cert and key: DNS names to obtain a certificate for over ACME.
    #[serde(default)]
    pub acme: Vec<String>,
    /// With acme: "ecdsa", "rsa" or both. [default: ecdsa]
    #[serde(default)]
    pub key_types: Vec<String>,
}

/// A host-based route (TOML `[[listener.route]]`).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteOptions {
    /// Host name, exact or `*.example.com`; matched against SNI and Host.
    pub host: String,
    /// Name of the `[[upstream]]` group.
    pub upstream: String,
}

/// A backend group (TOML `[[upstream]]`).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOptions {
    /// Name listeners and routes refer to.
    pub name: String,
    /// Servers: "HOST:PORT" or { addr = "HOST:PORT", weight = N }.
    #[serde(default)]
    pub servers: Vec<ServerOptions>,
    /// "round_robin" (weighted) or "least_conn". [default: round_robin]
    pub balance: Option<String>,
    /// "http1" (default), "h2c" (HTTP/2 cleartext) or "h2" (HTTP/2 over TLS).
    pub protocol: Option<String>,
    /// `protocol = "h2"`: PEM bundle of the CA certificates the servers'
    /// certificates must chain to (required).
    pub tls_ca: Option<String>,
    /// `protocol = "h2"`: name the servers' certificates must carry.
    /// [default: the host of each server's HOST:PORT]
    pub tls_server_name: Option<String>,
    /// HTTP path for active health checks; off when absent.
    pub health_check_path: Option<String>,
    /// Time between health checks. [default: 2s]
    pub health_check_interval: Option<String>,
    /// Deadline of one health check. [default: 1s]
    pub health_check_timeout: Option<String>,
    /// Consecutive successes that mark a server up. [default: 2]
    pub rise: Option<u32>,
    /// Consecutive failures that mark a server down. [default: 3]
    pub fall: Option<u32>,
    /// Connect failures in a row that eject a server passively. [default: 3]
    pub max_fails: Option<u32>,
    /// How long a passively ejected server is skipped. [default: 10s]
    pub fail_timeout: Option<String>,
}

/// One server of an upstream group.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ServerOptions {
    /// "HOST:PORT", weight 1.
    Addr(String),
    /// With a weight.
    Weighted {
        /// HOST:PORT.
        addr: String,
        /// Relative share of requests (1..=100). [default: 1]
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
