//! Backends given by name (`servers = ["app.internal:8080"]`): every A
//! and AAAA address of the name is a server of the group, and the name is
//! resolved again when its records expire (their TTL, kept between
//! `resolver_min_ttl` and `resolver_max_ttl`), so a service whose
//! addresses move is followed without a reload: nginx's best-known pain
//! (it resolves once, at start).
//!
//! Resolution runs on the control-plane runtime, one task per name and
//! group, and publishes the new addresses with
//! [`UpstreamShared::set_addresses`]: workers pick from the new set on
//! their next request, requests in flight on a removed address finish. A
//! failed resolution (timeout, SERVFAIL, NXDOMAIN, no address) keeps the
//! last good addresses, is logged and counted
//! (`tern_dns_resolutions_total{result="error"}`), and is retried sooner
//! (from `resolver_min_ttl`, doubling up to `resolver_max_ttl`).
//!
//! DNS itself is hickory-resolver's (the resolver of the Hickory DNS
//! project, async on tokio): it reads /etc/resolv.conf and /etc/hosts,
//! retries over TCP on truncation and checks answers against the query;
//! tern only decides what to ask, when, and what to do with the answer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolverConfig,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::TokioResolver;
use tokio::sync::watch;
use tokio::time::Instant;

use super::UpstreamShared;
use crate::config::{BackendAddr, DnsSettings, ServerConfig};
use crate::metrics::Metrics;

/// Longest wait for one resolution (both A and AAAA, every nameserver and
/// attempt): a resolver that does not answer must not hold the last good
/// addresses hostage for long, nor stall a start.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Most addresses kept from one name: a name answering with thousands of
/// records must not make thousands of servers (pools, sessions, checks).
pub const MAX_ADDRESSES: usize = 64;

/// A resolver for backend names; shared by every group of a generation.
#[derive(Clone)]
pub struct Resolver {
    inner: TokioResolver,
    settings: DnsSettings,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("settings", &self.settings)
            .finish()
    }
}

/// What one resolution of a name gave.
#[derive(Debug)]
pub(crate) enum Resolved {
    /// Its addresses (at least one), and when they expire.
    Addresses(Vec<SocketAddr>, Duration),
    /// Why there are none this time.
    Failed(String),
}

impl Resolver {
    /// A resolver asking `settings.resolver`, or the nameservers of
    /// /etc/resolv.conf when it is `None`.
    pub fn new(settings: DnsSettings) -> Result<Self, String> {
        let provider = TokioRuntimeProvider::default();
        let mut builder = match settings.resolver {
            Some(addr) => {
                let mut server = NameServerConfig::udp_and_tcp(addr.ip());
                server.connections = vec![ConnectionConfig::udp(), ConnectionConfig::tcp()]
                    .into_iter()
                    .map(|mut c| {
                        c.port = addr.port();
                        c
                    })
                    .collect();
                TokioResolver::builder_with_config(
                    ResolverConfig::from_name_servers(vec![server]),
                    provider,
                )
            }
            None => TokioResolver::builder(provider)
                .map_err(|e| format!("reading the system's DNS configuration: {e}"))?,
        };
        let options = builder.options_mut();
        // Every address of the name, IPv4 first.
        options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        // Answers are not kept past the longest wait between resolutions,
        // and a failure not past the shortest, so each round asks again.
        options.positive_max_ttl = Some(settings.max_ttl);
        options.negative_max_ttl = Some(settings.min_ttl);
        options.timeout = RESOLVE_TIMEOUT / 2;
        options.attempts = 2;
        let inner = builder
            .build()
            .map_err(|e| format!("starting the DNS resolver: {e}"))?;
        Ok(Resolver { inner, settings })
    }

    /// Every A and AAAA address of `name` with `port` (at most
    /// [`MAX_ADDRESSES`], duplicates removed), and how long they may be
    /// used before asking again (TTL within the configured bounds).
    pub(crate) async fn resolve(&self, name: &str, port: u16) -> Resolved {
        let lookup = match tokio::time::timeout(RESOLVE_TIMEOUT, self.inner.lookup_ip(name)).await {
            Ok(Ok(lookup)) => lookup,
            Ok(Err(e)) => return Resolved::Failed(e.to_string()),
            Err(_) => return Resolved::Failed(format!("no answer within {RESOLVE_TIMEOUT:?}")),
        };
        let mut addrs: Vec<SocketAddr> = Vec::new();
        for ip in lookup.iter() {
            let addr = SocketAddr::new(ip, port);
            if !addrs.contains(&addr) && addrs.len() < MAX_ADDRESSES {
                addrs.push(addr);
            }
        }
        if addrs.is_empty() {
            return Resolved::Failed("no A or AAAA record".into());
        }
        let ttl = lookup
            .valid_until()
            .saturating_duration_since(std::time::Instant::now());
        let ttl = ttl.clamp(self.settings.min_ttl, self.settings.max_ttl);
        Resolved::Addresses(addrs, ttl)
    }
}

impl UpstreamShared {
    /// The configuration entries of this group given by name: (entry
    /// index, name, port).
    pub fn named_servers(&self) -> Vec<(usize, String, u16)> {
        self.config
            .servers
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i, s.name.clone()?, tcp_port(s)?)))
            .collect()
    }

    /// Resolves entry `origin` (`name`, `port`) once and applies the
    /// answer: the new addresses become its servers, or, on failure, the
    /// last good ones stay. Logged and counted either way. Returns how
    /// long until the next resolution (`failures`: failures in a row
    /// before this one, for the backoff).
    pub(crate) async fn resolve_once(
        &self,
        resolver: &Resolver,
        metrics: &Metrics,
        (origin, name, port): (usize, &str, u16),
        failures: &mut u32,
    ) -> Duration {
        let upstream = &self.config.name;
        match resolver.resolve(name, port).await {
            Resolved::Addresses(addrs, ttl) => {
                *failures = 0;
                metrics.dns_resolved(upstream, name, true);
                let (added, removed) = self.set_addresses(origin, &addrs);
                if !added.is_empty() || !removed.is_empty() {
                    tracing::info!(
                        %upstream,
                        "backend {name}:{port} resolved to {} (added {}, removed {}; next in {ttl:?})",
                        list(&addrs),
                        list(&added),
                        list(&removed),
                    );
                }
                ttl
            }
            Resolved::Failed(error) => {
                metrics.dns_resolved(upstream, name, false);
                let kept: Vec<BackendAddr> = self
                    .servers()
                    .servers
                    .iter()
                    .filter(|s| s.origin == origin)
                    .map(|s| s.addr)
                    .collect();
                let wait = resolver
                    .settings
                    .min_ttl
                    .saturating_mul(1 << (*failures).min(16))
                    .min(resolver.settings.max_ttl);
                *failures = failures.saturating_add(1);
                tracing::warn!(
                    %upstream,
                    "resolving backend {name}:{port} failed: {error}; keeping its last addresses ({}), retrying in {wait:?}",
                    list(&kept),
                );
                wait
            }
        }
    }

    /// Re-resolves entry `origin` on its TTL until `shutdown` turns true
    /// (the generation retires). The first resolution happens at once
    /// unless `first_wait` says the addresses are fresh.
    pub(crate) async fn run_resolution(
        self: Arc<Self>,
        resolver: Resolver,
        metrics: Arc<Metrics>,
        (origin, name, port): (usize, String, u16),
        first_wait: Duration,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut failures = 0;
        let mut next = Instant::now() + first_wait;
        loop {
            tokio::select! {
                _ = shutdown.wait_for(|s| *s) => return,
                _ = tokio::time::sleep_until(next) => {}
            }
            let round =
                self.resolve_once(&resolver, &metrics, (origin, &name, port), &mut failures);
            let wait = tokio::select! {
                _ = shutdown.wait_for(|s| *s) => return,
                wait = round => wait,
            };
            next = Instant::now() + wait;
        }
    }
}

/// The port of a server given by name (always TCP).
fn tcp_port(s: &ServerConfig) -> Option<u16> {
    match s.addr {
        BackendAddr::Tcp(a) => Some(a.port()),
        BackendAddr::Unix(_) => None,
    }
}

/// `a, b, c` or `none`.
fn list<A: std::fmt::Display>(addrs: &[A]) -> String {
    if addrs.is_empty() {
        return "none".into();
    }
    addrs
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl UpstreamShared {
    /// Gives each entry of this group given by name the addresses the same
    /// name and port has in `previous` (the group of the same name in the
    /// generation being replaced), so a reload does not leave a name
    /// without servers until its next resolution. Call before any request.
    pub fn inherit_addresses(&self, previous: &UpstreamShared) {
        let old = previous.servers();
        for (origin, name, port) in self.named_servers() {
            let Some(from) = previous.config.servers.iter().position(|s| {
                s.name.as_deref() == Some(name.as_str()) && tcp_port(s) == Some(port)
            }) else {
                continue;
            };
            let addrs: Vec<BackendAddr> = old
                .servers
                .iter()
                .filter(|s| s.origin == from)
                .map(|s| s.addr)
                .collect();
            self.set_addresses(origin, &addrs);
        }
    }
}
