//! Backend groups: typed settings and their resolution from options.
//! Server addresses are parsed in [`addr`], TLS to the servers in [`tls`].

mod addr;
mod tls;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use super::options::{defaults, UpstreamOptions};
use super::resolve::{duration, key_err};
use super::upstream_policy;
pub use super::upstream_policy::{Affinity, HashKey, Outliers, Retries};
use super::KeyError;

pub use addr::{parse_server, BackendAddr, Scheme, ServerSpec};
pub use tls::BackendTls;

/// How a group spreads requests over its servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balance {
    /// Weighted round robin (smooth: weights interleave, no bursts).
    RoundRobin,
    /// The server with the fewest requests in flight (ties by weight).
    LeastConn,
    /// Consistent hashing of a request key ([`Affinity::hash_key`]).
    Hash,
    /// A cookie tern sets names the server.
    StickyCookie,
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

impl HealthCheck {
    /// What one check asks, for log lines: `GET /path` or the gRPC call.
    pub fn describe(&self) -> String {
        match &self.grpc_service {
            Some(service) => format!("grpc.health.v1.Health/Check of {service:?}"),
            None => format!("GET {}", self.path),
        }
    }
}

/// Active health checking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// Path requested with GET; 2xx or 3xx is healthy. Unused by a gRPC
    /// check.
    pub path: String,
    /// A gRPC check instead (`grpc.health.v1.Health/Check`) of this
    /// service name ("" for the server as a whole): SERVING is healthy.
    pub grpc_service: Option<String>,
    /// Time between checks.
    pub interval: Duration,
    /// Deadline of one check.
    pub timeout: Duration,
    /// Consecutive successes that mark a down server up.
    pub rise: u32,
    /// Consecutive failures that mark an up server down.
    pub fall: u32,
}

/// Passive ejection after failures seen by real requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassiveEjection {
    /// Connect failures in a row that eject a server.
    pub max_fails: u32,
    /// How long an ejected server is skipped (the first time).
    pub fail_timeout: Duration,
    /// Longest ejection, however often a server is ejected again.
    pub max_fail_timeout: Duration,
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
    pub addr: BackendAddr,
    /// Relative share of requests.
    pub weight: u32,
    /// The DNS name of a server given as `NAME:PORT` (or a URL with a
    /// name): every A and AAAA address of it becomes a server of the
    /// group, re-resolved on the records' TTL (docs/backends.md, "Servers
    /// by name").
    pub name: Option<String>,
}

impl std::fmt::Display for ServerConfig {
    /// `ADDR:PORT`, `unix:/path`, or `NAME:PORT` for a server given by name.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.name, self.addr) {
            (Some(name), BackendAddr::Tcp(a)) => write!(f, "{name}:{}", a.port()),
            _ => write!(f, "{}", self.addr),
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
    /// Ejection on responses (outlier detection), and slow start.
    pub outliers: Outliers,
    /// Affinity settings (hash key, sticky cookie).
    pub affinity: Affinity,
    /// Retries on another server.
    pub retries: Retries,
    /// TLS to the servers (`tls = true`, `https://` servers, `protocol = "h2"`).
    pub tls: Option<BackendTls>,
}

impl UpstreamConfig {
    /// A group of plain servers with default settings (the `--backend` list).
    pub fn simple<A: Into<BackendAddr>>(name: String, servers: Vec<A>) -> Self {
        UpstreamConfig {
            name,
            servers: servers
                .into_iter()
                .map(|addr| ServerConfig {
                    addr: addr.into(),
                    weight: defaults::WEIGHT,
                    name: None,
                })
                .collect(),
            balance: Balance::RoundRobin,
            protocol: BackendProtocol::Http1,
            health: None,
            passive: PassiveEjection {
                max_fails: defaults::MAX_FAILS,
                fail_timeout: defaults::FAIL_TIMEOUT,
                max_fail_timeout: defaults::MAX_FAIL_TIMEOUT,
            },
            outliers: Outliers::default(),
            affinity: Affinity::default(),
            retries: Retries::default(),
            tls: None,
        }
    }
}

pub(crate) fn parse_balance(text: Option<&str>, key: &'static str) -> Result<Balance, KeyError> {
    match text.unwrap_or(defaults::BALANCE) {
        "round_robin" => Ok(Balance::RoundRobin),
        "least_conn" => Ok(Balance::LeastConn),
        "hash" => Ok(Balance::Hash),
        "sticky_cookie" => Ok(Balance::StickyCookie),
        other => Err(key_err(
            key,
            format!(
                "unknown balance policy {other:?} (round_robin, least_conn, hash, sticky_cookie)"
            ),
        )),
    }
}

/// Longest service name a gRPC health check may ask about (one byte of
/// protobuf length prefix keeps the request a fixed, small frame).
const MAX_GRPC_SERVICE: usize = 127;

/// Health check with the given path and default timing.
pub(crate) fn default_health(path: String) -> HealthCheck {
    HealthCheck {
        path,
        grpc_service: None,
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
    resolve_group(o, base, "servers")
}

/// Resolves a group whose servers were given under `servers_key` (the
/// `servers` of an `[[upstream]]`, or a listener's `backends`).
pub(crate) fn resolve_group(
    o: &UpstreamOptions,
    base: &Path,
    servers_key: &'static str,
) -> Result<UpstreamConfig, KeyError> {
    if o.name.is_empty() {
        return Err(key_err("name", "an upstream needs a name"));
    }
    if o.servers.is_empty() {
        return Err(key_err(
            servers_key,
            format!("upstream {:?} has no servers", o.name),
        ));
    }
    let mut servers = Vec::with_capacity(o.servers.len());
    let mut specs = Vec::with_capacity(o.servers.len());
    for s in &o.servers {
        let (addr, weight) = (s.addr(), s.weight());
        if !(1..=100).contains(&weight) {
            return Err(key_err(
                servers_key,
                format!("weight {weight} of {addr:?} is outside 1..=100"),
            ));
        }
        let spec = parse_server(addr, base).map_err(|e| key_err(servers_key, e))?;
        servers.push(ServerConfig {
            addr: spec.addr,
            weight,
            name: spec.name.clone(),
        });
        specs.push(spec);
    }
    let scheme = one_scheme(&specs, servers_key)?;
    let protocol = protocol(o.protocol.as_deref(), scheme)?;
    let tls_on = tls_on(o.tls, protocol, scheme)?;
    let grpc_service = match (&o.health_check_grpc, &o.health_check_path) {
        (Some(_), Some(_)) => {
            return Err(key_err(
                "health_check_grpc",
                "give health_check_path or health_check_grpc, not both",
            ))
        }
        (Some(_), None) if !protocol.is_http2() => {
            return Err(key_err(
                "health_check_grpc",
                "gRPC needs HTTP/2: protocol = \"h2c\" or \"h2\"",
            ))
        }
        (Some(service), None) if service.len() > MAX_GRPC_SERVICE => {
            return Err(key_err(
                "health_check_grpc",
                format!("a service name longer than {MAX_GRPC_SERVICE} bytes"),
            ))
        }
        (grpc, _) => grpc.clone(),
    };
    let health = match o.health_check_path.as_ref().or(grpc_service.as_ref()) {
        None => None,
        Some(path) => {
            if grpc_service.is_none() {
                check_health_path(path, "health_check_path")?;
            }
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
                grpc_service: grpc_service.clone(),
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
    let tls = tls::backend_tls(o, protocol, tls_on, &specs, base)?;
    let max_fails = o.max_fails.unwrap_or(defaults::MAX_FAILS);
    if max_fails == 0 {
        return Err(key_err("max_fails", "must be at least 1"));
    }
    let fail_timeout = duration(
        o.fail_timeout.as_deref(),
        "fail_timeout",
        defaults::FAIL_TIMEOUT,
    )?;
    let max_fail_timeout = duration(
        o.max_fail_timeout.as_deref(),
        "max_fail_timeout",
        defaults::MAX_FAIL_TIMEOUT.max(fail_timeout),
    )?;
    if max_fail_timeout < fail_timeout {
        return Err(key_err("max_fail_timeout", "must be at least fail_timeout"));
    }
    Ok(UpstreamConfig {
        name: o.name.clone(),
        servers,
        balance: parse_balance(o.balance.as_deref(), "balance")?,
        protocol,
        health,
        passive: PassiveEjection {
            max_fails,
            fail_timeout,
            max_fail_timeout,
        },
        outliers: upstream_policy::outliers(o)?,
        affinity: upstream_policy::affinity(o)?,
        retries: upstream_policy::retries(o)?,
        tls,
    })
}

/// The scheme the group's URL servers share (`None` when none is a URL);
/// a group speaks one protocol, so schemes may not differ.
fn one_scheme(specs: &[ServerSpec], key: &'static str) -> Result<Option<Scheme>, KeyError> {
    let mut schemes = specs.iter().filter_map(|s| s.scheme);
    let Some(first) = schemes.next() else {
        return Ok(None);
    };
    match schemes.find(|s| *s != first) {
        None => Ok(Some(first)),
        Some(other) => Err(key_err(
            key,
            format!(
                "servers written {} and {} in one group: a group speaks one protocol \
                 (make two groups)",
                first.prefix(),
                other.prefix()
            ),
        )),
    }
}

/// The group's protocol: `protocol` when given (and the servers' scheme
/// agrees), else what the scheme says (`h2c://`: h2c), else HTTP/1.1.
fn protocol(given: Option<&str>, scheme: Option<Scheme>) -> Result<BackendProtocol, KeyError> {
    let given = match given {
        None => None,
        Some("http1" | "http/1.1") => Some(BackendProtocol::Http1),
        Some("h2c") => Some(BackendProtocol::H2c),
        Some("h2") => Some(BackendProtocol::H2),
        Some(other) => {
            return Err(key_err(
                "protocol",
                format!("unknown backend protocol {other:?} (http1, h2c, h2)"),
            ))
        }
    };
    let implied = match scheme {
        Some(Scheme::H2c) => BackendProtocol::H2c,
        _ => BackendProtocol::Http1,
    };
    let Some(given) = given else {
        return Ok(implied);
    };
    let agrees = match scheme {
        None => true,
        Some(Scheme::Http) => given != BackendProtocol::H2,
        Some(Scheme::Https) => given != BackendProtocol::H2c,
        Some(Scheme::H2c) => given == BackendProtocol::H2c,
    };
    if !agrees {
        let scheme = scheme.map_or("", Scheme::prefix);
        return Err(key_err(
            "protocol",
            format!("{given:?} disagrees with the servers' {scheme} (h2 is HTTP/2 over TLS: https://; h2c is cleartext: http:// or h2c://)"),
        ));
    }
    Ok(given)
}

/// Whether tern speaks TLS to the servers: `tls` when given (and the
/// protocol and scheme agree), else for `protocol = "h2"` and `https://`.
fn tls_on(
    given: Option<bool>,
    protocol: BackendProtocol,
    scheme: Option<Scheme>,
) -> Result<bool, KeyError> {
    let implied = protocol == BackendProtocol::H2 || scheme == Some(Scheme::Https);
    match given {
        None => Ok(implied),
        Some(false) if implied => Err(key_err(
            "tls",
            "tls = false, but protocol \"h2\" and https:// servers are TLS",
        )),
        Some(true) if protocol == BackendProtocol::H2c => Err(key_err(
            "tls",
            "protocol \"h2c\" is cleartext; for HTTP/2 over TLS set protocol = \"h2\"",
        )),
        Some(true) if matches!(scheme, Some(Scheme::Http | Scheme::H2c)) => Err(key_err(
            "tls",
            "tls = true, but the servers are written http:// (cleartext); write https://",
        )),
        Some(on) => Ok(on),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_health_checks_need_http2_and_exclude_a_path() {
        let resolve = |extra: &str| {
            let text = format!("name = \"g\"\nservers = [\"127.0.0.1:1\"]\n{extra}");
            let o: UpstreamOptions = toml::from_str(&text).expect("toml");
            resolve_upstream(&o, Path::new(".")).map_err(|e| (e.key, e.message))
        };
        let g = resolve("protocol = \"h2c\"\nhealth_check_grpc = \"\"").expect("h2c");
        let check = g.health.expect("a check");
        assert_eq!(check.grpc_service.as_deref(), Some(""));
        assert_eq!(check.describe(), "grpc.health.v1.Health/Check of \"\"");
        let (key, why) = resolve("health_check_grpc = \"\"").unwrap_err();
        assert_eq!(key, "health_check_grpc");
        assert!(why.contains("needs HTTP/2"), "{why}");
        let (key, why) =
            resolve("protocol = \"h2c\"\nhealth_check_grpc = \"\"\nhealth_check_path = \"/\"")
                .unwrap_err();
        assert_eq!(key, "health_check_grpc");
        assert!(why.contains("not both"), "{why}");
    }
}
