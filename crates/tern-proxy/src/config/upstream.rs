//! Backend groups: typed settings and their resolution from options.
//! Server addresses are parsed in [`addr`], TLS to the servers in [`tls`].

mod addr;
mod tls;

use std::path::Path;
use std::time::Duration;

use super::options::{defaults, UpstreamOptions};
use super::resolve::{duration, key_err};
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

/// One server of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerConfig {
    /// Its address.
    pub addr: BackendAddr,
    /// Relative share of requests.
    pub weight: u32,
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
                })
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
        });
        specs.push(spec);
    }
    let scheme = one_scheme(&specs, servers_key)?;
    let protocol = protocol(o.protocol.as_deref(), scheme)?;
    let tls_on = tls_on(o.tls, protocol, scheme)?;
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
    let tls = tls::backend_tls(o, protocol, tls_on, &specs, base)?;
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
