//! A listener's options: the flags of `tern serve` that say where one
//! listener accepts, how it speaks TLS and HTTP, and where it forwards,
//! and its `[[listener]]` table in `tern.toml` (the same fields).

use serde::Deserialize;
use tern_tls::TlsPolicy;

use super::{defaults, shown, CertificateOptions, RouteOptions};

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
    pub request_headers: crate::config::edge::HeaderRuleOptions,

    /// Rules for response fields sent to clients (TOML
    /// `[listener.response_headers]`: set, add, remove).
    #[arg(skip)]
    #[serde(default)]
    pub response_headers: crate::config::edge::HeaderRuleOptions,
}

/// Accepts `key = "x"` as well as `key = ["x", "y"]`.
pub(super) fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
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
