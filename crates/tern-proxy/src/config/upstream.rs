//! Backend groups: typed settings and their resolution from options.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use super::options::{ServerOptions, UpstreamOptions};
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
    /// HTTP/2 over TLS.
    H2,
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
    pub addr: SocketAddr,
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
}

impl UpstreamConfig {
    /// A group of plain servers with default settings (the `--backend` list).
    pub fn simple(name: String, servers: Vec<SocketAddr>) -> Self {
        UpstreamConfig {
            name,
            servers: servers
                .into_iter()
                .map(|addr| ServerConfig { addr, weight: 1 })
                .collect(),
            balance: Balance::RoundRobin,
            protocol: BackendProtocol::Http1,
            health: None,
            passive: PassiveEjection {
                max_fails: 3,
                fail_timeout: Duration::from_secs(10),
            },
        }
    }
}

/// Resolves `HOST:PORT` to its first address.
pub(crate) fn resolve_addr(text: &str, key: &'static str) -> Result<SocketAddr, KeyError> {
    text.to_socket_addrs()
        .map_err(|e| key_err(key, format!("backend {text:?}: {e}")))?
        .next()
        .ok_or_else(|| key_err(key, format!("backend {text:?} resolves to no address")))
}

pub(crate) fn parse_balance(text: Option<&str>, key: &'static str) -> Result<Balance, KeyError> {
    match text {
        None | Some("round_robin") => Ok(Balance::RoundRobin),
        Some("least_conn") => Ok(Balance::LeastConn),
        Some(other) => Err(key_err(
            key,
            format!("unknown balance policy {other:?} (round_robin, least_conn)"),
        )),
    }
}

/// Health check with the given path and default timing.
pub(crate) fn default_health(path: String) -> HealthCheck {
    HealthCheck {
        path,
        interval: Duration::from_secs(2),
        timeout: Duration::from_secs(1),
        rise: 2,
        fall: 3,
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

/// Resolves one `[[upstream]]` table.
pub(crate) fn resolve_upstream(o: &UpstreamOptions) -> Result<UpstreamConfig, KeyError> {
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
        let (addr, weight) = match s {
            ServerOptions::Addr(a) => (a.as_str(), 1),
            ServerOptions::Weighted { addr, weight } => (addr.as_str(), weight.unwrap_or(1)),
        };
        if !(1..=100).contains(&weight) {
            return Err(key_err(
                "servers",
                format!("weight {weight} of {addr:?} is outside 1..=100"),
            ));
        }
        servers.push(ServerConfig {
            addr: resolve_addr(addr, "servers")?,
            weight,
        });
    }
    let protocol = match o.protocol.as_deref() {
        None | Some("http1") | Some("http/1.1") => BackendProtocol::Http1,
        Some("h2c") => BackendProtocol::H2c,
        // HTTP/2 over TLS to backends needs a TLS client with its own
        // trust settings; refuse rather than silently speak something else.
        Some("h2") => {
            return Err(key_err(
                "protocol",
                "protocol \"h2\" (HTTP/2 over TLS) to backends is not supported yet; \
                 use \"h2c\" (cleartext HTTP/2) or \"http1\"",
            ))
        }
        Some(other) => {
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
    let max_fails = o.max_fails.unwrap_or(3);
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
                Duration::from_secs(10),
            )?,
        },
    })
}
