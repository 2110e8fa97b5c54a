//! Backend groups: typed settings and their resolution from options.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

use super::options::{defaults, UpstreamOptions};
use super::resolve::{duration, key_err};
use super::KeyError;

/// How a group spreads requests over its servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balance {
    /// Weighted round robin (smooth: weights interleave, no bursts).
    RoundRobin,
    /// The server with the fewest requests in flight (ties by weight).
    LeastConn,
}

/// The protocol tern speaks to a group's servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendProtocol {
    /// HTTP/1.1 over TCP, pooled keepalive connections.
    Http1,
    /// HTTP/2 over cleartext TCP (prior knowledge).
    H2c,
    /// HTTP/2 over TLS (ALPN `h2`).
    H2,
}

impl BackendProtocol {
    /// True for the HTTP/2 protocols (one multiplexed session per server
    /// and worker instead of a pool of HTTP/1.1 connections).
    pub fn is_http2(self) -> bool {
        matches!(self, BackendProtocol::H2c | BackendProtocol::H2)
    }

    /// The `:scheme` of requests sent to the group's servers: the scheme
    /// of the hop from tern to the backend.
    pub fn scheme(self) -> &'static str {
        match self {
            BackendProtocol::H2 => "https",
            BackendProtocol::Http1 | BackendProtocol::H2c => "http",
        }
    }
}

/// How tern speaks TLS to the servers of a `protocol = "h2"` group.
#[derive(Debug, Clone)]
pub struct BackendTls {
    /// The `tls_ca` file, read when the configuration is (start and reload).
    pub ca_file: PathBuf,
    /// The name each server's certificate must carry (and the SNI sent),
    /// parallel to [`UpstreamConfig::servers`].
    pub server_names: Vec<ServerName<'static>>,
    /// Client settings: tern's TLS policy (TLS 1.2/1.3, ECDHE, AEAD),
    /// ALPN `h2` only, the `tls_ca` certificates as the only roots.
    pub client: Arc<rustls::ClientConfig>,
    /// The CA certificates, so that two configurations compare equal only
    /// when they trust the same ones.
    roots: Vec<CertificateDer<'static>>,
}

impl PartialEq for BackendTls {
    fn eq(&self, other: &Self) -> bool {
        self.ca_file == other.ca_file
            && self.server_names == other.server_names
            && self.roots == other.roots
    }
}

impl Eq for BackendTls {}

/// Active health checking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// Path requested with GET; 2xx or 3xx is healthy.
    pub path: String,
    /// Time between checks.
    pub interval: Duration,
    /// Deadline of one check.
    pub timeout: Duration,
    /// Consecutive successes that mark a down server up.
    pub rise: u32,
    /// Consecutive failures that mark an up server down.
    pub fall: u32,
}

/// Passive ejection after connect failures seen by real requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassiveEjection {
    /// Connect failures in a row that eject a server.
    pub max_fails: u32,
    /// How long an ejected server is skipped.
    pub fail_timeout: Duration,
}

/// How backends given by name are resolved (top-level `resolver*` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DnsSettings {
    /// The DNS server asked; `None`: those of /etc/resolv.conf.
    pub resolver: Option<SocketAddr>,
    /// Shortest time between two resolutions of a name.
    pub min_ttl: Duration,
    /// Longest time between two resolutions of a name.
    pub max_ttl: Duration,
}

impl Default for DnsSettings {
    fn default() -> Self {
        DnsSettings {
            resolver: None,
            min_ttl: defaults::RESOLVER_MIN_TTL,
            max_ttl: defaults::RESOLVER_MAX_TTL,
        }
    }
}

/// The `resolver*` keys, checked: an IP with an optional port, and
/// `0 < resolver_min_ttl <= resolver_max_ttl`.
pub(crate) fn dns_settings(
    resolver: Option<&str>,
    min_ttl: Option<&str>,
    max_ttl: Option<&str>,
) -> Result<DnsSettings, KeyError> {
    let resolver = match resolver {
        None => None,
        Some(text) => Some(
            text.parse::<SocketAddr>()
                .or_else(|_| text.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 53)))
                .map_err(|_| {
                    key_err(
                        "resolver",
                        format!("{text:?} is not an IP address or IP:PORT"),
                    )
                })?,
        ),
    };
    let min_ttl = duration(min_ttl, "resolver_min_ttl", defaults::RESOLVER_MIN_TTL)?;
    let max_ttl = duration(max_ttl, "resolver_max_ttl", defaults::RESOLVER_MAX_TTL)?;
    if min_ttl.is_zero() {
        return Err(key_err("resolver_min_ttl", "must be more than 0"));
    }
    if max_ttl < min_ttl {
        return Err(key_err(
            "resolver_max_ttl",
            format!("{max_ttl:?} is less than resolver_min_ttl ({min_ttl:?})"),
        ));
    }
    Ok(DnsSettings {
        resolver,
        min_ttl,
        max_ttl,
    })
}

/// One server of a group, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Its address. For a server given by name only the port counts (the
    /// IP is unspecified): its addresses come from resolving `name`.
    pub addr: SocketAddr,
    /// Relative share of requests.
    pub weight: u32,
    /// The DNS name of a server given as `NAME:PORT`: every A and AAAA
    /// address of it becomes a server of the group, re-resolved on the
    /// records' TTL (docs/backends.md, "Servers by name").
    pub name: Option<String>,
}

impl ServerConfig {
    /// A server at a fixed address.
    pub fn at(addr: SocketAddr, weight: u32) -> Self {
        ServerConfig {
            addr,
            weight,
            name: None,
        }
    }
}

impl std::fmt::Display for ServerConfig {
    /// `ADDR:PORT`, or `NAME:PORT` for a server given by name.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.name {
            Some(name) => write!(f, "{name}:{}", self.addr.port()),
            None => write!(f, "{}", self.addr),
        }
    }
}

/// A validated backend group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// Name for logs, metrics and references.
    pub name: String,
    /// Its servers (at least one).
    pub servers: Vec<ServerConfig>,
    /// Balancing policy.
    pub balance: Balance,
    /// Protocol to the servers.
    pub protocol: BackendProtocol,
    /// Active health checks, if configured.
    pub health: Option<HealthCheck>,
    /// Passive ejection (always on).
    pub passive: PassiveEjection,
    /// TLS to the servers (`protocol = "h2"` only).
    pub tls: Option<BackendTls>,
}

impl UpstreamConfig {
    /// A group of plain servers with default settings (the `--backend` list).
    pub fn simple(name: String, servers: Vec<SocketAddr>) -> Self {
        UpstreamConfig {
            name,
            servers: servers
                .into_iter()
                .map(|addr| ServerConfig::at(addr, defaults::WEIGHT))
                .collect(),
            balance: Balance::RoundRobin,
            protocol: BackendProtocol::Http1,
            health: None,
            passive: PassiveEjection {
                max_fails: defaults::MAX_FAILS,
                fail_timeout: defaults::FAIL_TIMEOUT,
            },
            tls: None,
        }
    }
}

/// A server from its `IP:PORT` or `NAME:PORT` (a name is not resolved
/// here: the group's resolver does it, and again on the records' TTL).
pub(crate) fn parse_server(
    text: &str,
    weight: u32,
    key: &'static str,
) -> Result<ServerConfig, KeyError> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(ServerConfig::at(addr, weight));
    }
    let bad = |why: &str| key_err(key, format!("backend {text:?}: {why}"));
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(bad("expected HOST:PORT"));
    };
    let port: u16 = port
        .parse()
        .map_err(|_| bad("the port is not a number in 0..=65535"))?;
    if host.starts_with('[') || host.parse::<IpAddr>().is_ok() {
        return Err(bad("not an IP address (write [v6]:PORT for IPv6)"));
    }
    if !is_dns_name(host) {
        return Err(bad("not a DNS name"));
    }
    Ok(ServerConfig {
        addr: SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), port),
        weight,
        name: Some(host.trim_end_matches('.').to_ascii_lowercase()),
    })
}

/// A host name as DNS carries it: dot-separated labels of 1 to 63
/// letters, digits, `-` or `_`, not starting or ending with `-`, 253
/// characters at most (a final dot allowed).
fn is_dns_name(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

pub(crate) fn parse_balance(text: Option<&str>, key: &'static str) -> Result<Balance, KeyError> {
    match text.unwrap_or(defaults::BALANCE) {
        "round_robin" => Ok(Balance::RoundRobin),
        "least_conn" => Ok(Balance::LeastConn),
        other => Err(key_err(
            key,
            format!("unknown balance policy {other:?} (round_robin, least_conn)"),
        )),
    }
}

/// Health check with the given path and default timing.
pub(crate) fn default_health(path: String) -> HealthCheck {
    HealthCheck {
        path,
        interval: defaults::HEALTH_CHECK_INTERVAL,
        timeout: defaults::HEALTH_CHECK_TIMEOUT,
        rise: defaults::RISE,
        fall: defaults::FALL,
    }
}

pub(crate) fn check_health_path(path: &str, key: &'static str) -> Result<(), KeyError> {
    if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(key_err(
            key,
            format!("health check path {path:?} must start with / and contain no spaces"),
        ));
    }
    Ok(())
}

/// Resolves one `[[upstream]]` table; relative file names are taken from `base`.
pub(crate) fn resolve_upstream(
    o: &UpstreamOptions,
    base: &Path,
) -> Result<UpstreamConfig, KeyError> {
    if o.name.is_empty() {
        return Err(key_err("name", "an upstream needs a name"));
    }
    if o.servers.is_empty() {
        return Err(key_err(
            "servers",
            format!("upstream {:?} has no servers", o.name),
        ));
    }
    let mut servers = Vec::with_capacity(o.servers.len());
    for s in &o.servers {
        let (addr, weight) = (s.addr(), s.weight());
        if !(1..=100).contains(&weight) {
            return Err(key_err(
                "servers",
                format!("weight {weight} of {addr:?} is outside 1..=100"),
            ));
        }
        servers.push(parse_server(addr, weight, "servers")?);
    }
    let protocol = match o.protocol.as_deref().unwrap_or(defaults::PROTOCOL) {
        "http1" | "http/1.1" => BackendProtocol::Http1,
        "h2c" => BackendProtocol::H2c,
        "h2" => BackendProtocol::H2,
        other => {
            return Err(key_err(
                "protocol",
                format!("unknown backend protocol {other:?} (http1, h2c, h2)"),
            ))
        }
    };
    let health = match &o.health_check_path {
        None => None,
        Some(path) => {
            check_health_path(path, "health_check_path")?;
            let d = default_health(path.clone());
            let rise = o.rise.unwrap_or(d.rise);
            let fall = o.fall.unwrap_or(d.fall);
            if rise == 0 || fall == 0 {
                return Err(key_err(
                    if rise == 0 { "rise" } else { "fall" },
                    "must be at least 1",
                ));
            }
            Some(HealthCheck {
                path: path.clone(),
                interval: duration(
                    o.health_check_interval.as_deref(),
                    "health_check_interval",
                    d.interval,
                )?,
                timeout: duration(
                    o.health_check_timeout.as_deref(),
                    "health_check_timeout",
                    d.timeout,
                )?,
                rise,
                fall,
            })
        }
    };
    let tls = backend_tls(o, protocol, base)?;
    let max_fails = o.max_fails.unwrap_or(defaults::MAX_FAILS);
    if max_fails == 0 {
        return Err(key_err("max_fails", "must be at least 1"));
    }
    Ok(UpstreamConfig {
        name: o.name.clone(),
        servers,
        balance: parse_balance(o.balance.as_deref(), "balance")?,
        protocol,
        health,
        passive: PassiveEjection {
            max_fails,
            fail_timeout: duration(
                o.fail_timeout.as_deref(),
                "fail_timeout",
                defaults::FAIL_TIMEOUT,
            )?,
        },
        tls,
    })
}

/// The TLS settings of a group: `Some` for `protocol = "h2"` (which needs
/// `tls_ca`), `None` otherwise (where the `tls_*` keys are refused, since
/// they would silently do nothing).
fn backend_tls(
    o: &UpstreamOptions,
    protocol: BackendProtocol,
    base: &Path,
) -> Result<Option<BackendTls>, KeyError> {
    if protocol != BackendProtocol::H2 {
        for (key, set) in [
            ("tls_ca", o.tls_ca.is_some()),
            ("tls_server_name", o.tls_server_name.is_some()),
        ] {
            if set {
                return Err(key_err(key, "only applies to protocol = \"h2\""));
            }
        }
        return Ok(None);
    }
    let Some(ca) = &o.tls_ca else {
        return Err(key_err(
            "protocol",
            "protocol \"h2\" (HTTP/2 over TLS) needs tls_ca: the PEM file of the CA \
             certificates the servers' certificates chain to",
        ));
    };
    let ca_file = base.join(ca);
    let roots = load_ca(&ca_file)?;
    let server_names = match &o.tls_server_name {
        Some(name) => {
            let name = ServerName::try_from(name.as_str())
                .map(|n| n.to_owned())
                .map_err(|_| {
                    key_err(
                        "tls_server_name",
                        format!("{name:?} is neither a DNS name nor an IP address"),
                    )
                })?;
            vec![name; o.servers.len()]
        }
        None => o
            .servers
            .iter()
            .map(|s| default_server_name(s.addr()))
            .collect::<Result<_, _>>()?,
    };
    let mut store = rustls::RootCertStore::empty();
    for cert in &roots {
        store.add(cert.clone()).map_err(|e| {
            key_err(
                "tls_ca",
                format!("{}: unusable CA certificate: {e}", ca_file.display()),
            )
        })?;
    }
    // tern's own policy (no CBC, no DHE, TLS 1.2 at least) holds on the
    // backend side too.
    let policy = tern_tls::TlsPolicy::default();
    let mut client =
        rustls::ClientConfig::builder_with_provider(Arc::new(policy.crypto_provider()))
            .with_protocol_versions(&policy.versions())
            .map_err(|e| key_err("protocol", format!("TLS client settings: {e}")))?
            .with_root_certificates(store)
            .with_no_client_auth();
    // Only h2: a backend that cannot speak it must fail the handshake (or
    // select nothing, which tern refuses), never fall back to HTTP/1.1.
    client.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Some(BackendTls {
        ca_file,
        server_names,
        client: Arc::new(client),
        roots,
    }))
}

/// The CA certificates in the PEM file `path` (at least one).
fn load_ca(path: &Path) -> Result<Vec<CertificateDer<'static>>, KeyError> {
    let pem =
        std::fs::read(path).map_err(|e| key_err("tls_ca", format!("{}: {e}", path.display())))?;
    let roots = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| key_err("tls_ca", format!("{}: not PEM: {e}", path.display())))?;
    if roots.is_empty() {
        return Err(key_err(
            "tls_ca",
            format!("{}: no CERTIFICATE in this PEM file", path.display()),
        ));
    }
    Ok(roots)
}

/// The name a server's certificate is checked against when no
/// `tls_server_name` is set: the host of `HOST:PORT`, which for an IP
/// address means an IP address entry of the certificate.
fn default_server_name(addr: &str) -> Result<ServerName<'static>, KeyError> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ServerName::IpAddress(ip.into()));
    }
    ServerName::try_from(host.to_string()).map_err(|_| {
        key_err(
            "servers",
            format!(
                "{host:?} is not a DNS name to check a certificate against; set tls_server_name"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_are_addresses_or_names() {
        let parse = |text: &str| parse_server(text, 1, "servers").map_err(|e| e.message);
        assert_eq!(
            parse("10.0.0.7:8080"),
            Ok(ServerConfig::at(
                "10.0.0.7:8080".parse().expect("literal"),
                1
            ))
        );
        assert_eq!(
            parse("[::1]:80").map(|s| s.addr),
            Ok("[::1]:80".parse().expect("literal"))
        );
        let named = parse("App.Internal.:8080").expect("a name");
        assert_eq!(named.name.as_deref(), Some("app.internal"));
        assert_eq!(named.addr.port(), 8080);
        assert_eq!(named.to_string(), "app.internal:8080");
        for bad in [
            "app.internal",
            "app.internal:http",
            "app.internal:70000",
            "[::1:80",
            "::1:80",
            "-app:80",
            "a..b:80",
            "a b:80",
            ":80",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn default_server_name_is_the_host_of_host_port() {
        let name = |addr: &str| default_server_name(addr).map_err(|e| e.message);
        assert_eq!(
            name("backend.internal:8443"),
            Ok(ServerName::try_from("backend.internal")
                .expect("name")
                .to_owned())
        );
        assert_eq!(
            name("10.0.0.7:8443"),
            Ok(ServerName::IpAddress(
                "10.0.0.7".parse::<IpAddr>().expect("ip").into()
            ))
        );
        assert_eq!(
            name("[::1]:8443"),
            Ok(ServerName::IpAddress(
                "::1".parse::<IpAddr>().expect("ip").into()
            ))
        );
    }
}
