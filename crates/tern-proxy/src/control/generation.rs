//! A generation: everything built from one configuration that workers
//! share (TLS configs, upstream group state). A reload builds a new
//! generation next to the old one; new connections use the new one while
//! established connections finish on the one they started with.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use tern_acme::Challenge;

use crate::config::{Config, DnsSettings, ListenerConfig, Upstream, UpstreamConfig};
use crate::control::acme::AcmeRegistry;
use crate::error::ServeError;
use crate::metrics::Metrics;
use crate::upstream::{dns, UpstreamShared};

/// Certificates expiring sooner than this are warned about at start-up
/// and on every reload.
const CERT_EXPIRY_WARNING: std::time::Duration = std::time::Duration::from_secs(14 * 24 * 3600);

/// One listener of a generation.
#[derive(Debug)]
pub(crate) struct ListenerShared {
    /// Validated settings.
    pub config: Arc<ListenerConfig>,
    /// TLS configuration (session cache and ticket keys carried across reloads).
    pub tls: Arc<rustls::ServerConfig>,
    /// Configurations of names whose client-certificate policy differs
    /// from the listener's, chosen by SNI.
    pub by_name: Option<Arc<tern_tls::NameConfigs>>,
    /// Index into [`Generation::upstreams`] of the default group.
    pub default_upstream: usize,
    /// The QUIC endpoint configuration, when HTTP/3 is on.
    pub quic: Option<quinn::ServerConfig>,
}

/// What one configuration produced.
#[derive(Debug)]
pub(crate) struct Generation {
    /// Counts reloads; 0 at start.
    pub id: u64,
    /// The listeners, in configuration order.
    pub listeners: Vec<ListenerShared>,
    /// Upstream groups (the demo origin, if used, is one of them).
    pub upstreams: Vec<Arc<UpstreamShared>>,
    /// Turns true when this generation is replaced or tern stops: its
    /// health checks end.
    pub retired: watch::Sender<bool>,
    /// ACME certificates kept for this configuration.
    pub acme: Vec<Arc<tern_acme::CertStatus>>,
}

impl Generation {
    /// Builds a generation from `config`. With `previous`, TLS session
    /// caches and in-process ticket keys of listeners on the same address
    /// are kept, so clients resume across a reload. `demo` is the address
    /// of the built-in origin, started on first need. ACME certificates
    /// get their slots from `acme` (kept across reloads).
    pub(crate) fn build(
        config: &Config,
        previous: Option<&Generation>,
        demo: &mut Option<SocketAddr>,
        acme: &mut AcmeRegistry,
    ) -> Result<Self, ServeError> {
        let mut upstream_configs: Vec<UpstreamConfig> = config.upstreams.clone();
        let mut demo_index = None;
        let mut listeners = Vec::with_capacity(config.listeners.len());
        let mut acme_statuses: Vec<Arc<tern_acme::CertStatus>> = Vec::new();
        for l in &config.listeners {
            let before =
                previous.and_then(|p| p.listeners.iter().find(|pl| pl.config.listen == l.listen));
            let mut settings = l.tls.clone();
            let mut statuses = Vec::new();
            if let (false, Some(ca)) = (l.acme.is_empty(), &config.acme) {
                let managed = acme.managed_for(ca, &l.acme)?;
                settings.managed = managed.iter().map(|m| m.cert.clone()).collect();
                statuses.extend(managed.iter().map(|m| m.status.clone()));
                if l.acme.iter().any(|s| s.challenge == Challenge::TlsAlpn01) {
                    settings.acme_tls_alpn = Some(acme.challenges().tls_alpn.clone());
                }
            }
            for status in statuses {
                if !acme_statuses.iter().any(|s| Arc::ptr_eq(s, &status)) {
                    acme_statuses.push(status);
                }
            }
            let configs = match before {
                Some(old) => tern_tls::build_server_configs_reusing(&settings, &old.tls),
                None => tern_tls::build_server_configs(&settings),
            }
            .map_err(|source| ServeError::Tls {
                listen: l.listen,
                source,
            })?;
            let (tls, quic_tls) = (configs.default, configs.quic);
            for cert in &l.tls.certs {
                let warnings = [
                    tern_tls::initcwnd_warning(cert, l.tls.cert_compression),
                    tern_tls::server::expiry_warning(cert, CERT_EXPIRY_WARNING),
                    tern_tls::server::policy_warning(&l.tls.policy, cert),
                    cert.ocsp_warning.clone(),
                ];
                for warning in warnings.into_iter().flatten() {
                    tracing::warn!("{warning}");
                }
            }
            let default_upstream = match l.upstream {
                Upstream::Group(i) => i,
                Upstream::Demo => match demo_index {
                    Some(i) => i,
                    None => {
                        let addr = match *demo {
                            Some(a) => a,
                            None => {
                                let a = crate::control::demo::start().map_err(|source| {
                                    ServeError::Io {
                                        context: "starting the demo origin",
                                        source,
                                    }
                                })?;
                                *demo = Some(a);
                                a
                            }
                        };
                        upstream_configs.push(UpstreamConfig::simple("demo".into(), vec![addr]));
                        demo_index = Some(upstream_configs.len() - 1);
                        upstream_configs.len() - 1
                    }
                },
            };
            let quic = match &l.h3 {
                Some(h3) => Some(crate::front::h3::server_config(l, h3, &quic_tls).map_err(
                    |message| ServeError::Quic {
                        listen: l.listen,
                        message,
                    },
                )?),
                None => None,
            };
            listeners.push(ListenerShared {
                config: Arc::new(l.clone()),
                tls,
                by_name: configs.by_name,
                default_upstream,
                quic,
            });
        }
        let (retired, _) = watch::channel(false);
        Ok(Generation {
            id: previous.map_or(0, |p| p.id + 1),
            listeners,
            upstreams: upstream_configs
                .into_iter()
                .map(|config| {
                    let group = UpstreamShared::new(config);
                    // A reload must not forget that a server is down (or
                    // bring an ejected one back early).
                    if let Some(old) = previous.and_then(|p| {
                        p.upstreams
                            .iter()
                            .find(|u| u.config.name == group.config.name)
                    }) {
                        // Names keep their addresses until re-resolved,
                        // and those servers their health.
                        group.inherit_addresses(old);
                        group.inherit_health(old);
                    }
                    group
                })
                .collect(),
            retired,
            acme: acme_statuses,
        })
    }

    /// Starts this generation's health checks on the current runtime.
    pub(crate) fn start_health_checks(&self) {
        for u in &self.upstreams {
            tokio::spawn(u.clone().run_health_checks(self.retired.subscribe()));
        }
    }

    /// Starts the re-resolution of every backend given by name, on the
    /// current runtime, until this generation retires. The first
    /// resolution of each name happens at once.
    pub(crate) fn start_resolvers(&self, dns: DnsSettings, metrics: &Arc<Metrics>) {
        let Some(resolver) = self.resolver(dns) else {
            return;
        };
        for u in &self.upstreams {
            for entry in u.named_servers() {
                tokio::spawn(u.clone().run_resolution(
                    resolver.clone(),
                    metrics.clone(),
                    entry,
                    Duration::ZERO,
                    self.retired.subscribe(),
                ));
            }
        }
    }

    /// Resolves every backend name once, all at once (each bounded by
    /// [`dns::RESOLVE_TIMEOUT`]): at start, so that the first requests
    /// find their servers.
    pub(crate) async fn resolve_names(&self, dns: DnsSettings, metrics: &Metrics) {
        let Some(resolver) = self.resolver(dns) else {
            return;
        };
        let rounds = self.upstreams.iter().flat_map(|u| {
            let resolver = &resolver;
            u.named_servers()
                .into_iter()
                .map(move |(i, name, port)| async move {
                    u.resolve_once(resolver, metrics, (i, &name, port), &mut 0)
                        .await;
                })
        });
        futures_util::future::join_all(rounds).await;
    }

    /// A resolver for the backend names of this generation (`None`, logged,
    /// when there are none or the resolver cannot start).
    fn resolver(&self, dns: DnsSettings) -> Option<dns::Resolver> {
        if self.upstreams.iter().all(|u| u.named_servers().is_empty()) {
            return None;
        }
        match dns::Resolver::new(dns) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::error!("{e}: backends given by name get no addresses");
                None
            }
        }
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        let _ = self.retired.send(true);
    }
}
