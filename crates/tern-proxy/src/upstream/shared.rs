//! Process-wide state of an upstream group: per server, the active health
//! verdict, passive ejection and requests in flight. Atomics only, because
//! every worker thread reads it on every request.

use crate::config::BackendAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::config::UpstreamConfig;

/// Process-wide state of one upstream group: its settings and, per
/// server, what health checks and passive ejection decided. Shared by all
/// workers (atomics only), rebuilt on reload.
#[derive(Debug)]
pub struct UpstreamShared {
    /// The group's settings.
    pub config: UpstreamConfig,
    /// Parallel to `config.servers`.
    pub(super) servers: Vec<ServerState>,
    /// Weights of `config.servers`, in the shape the balancers take.
    pub(super) weights: Vec<u32>,
    /// Origin of the millisecond clock stored in the atomics.
    epoch: Instant,
}

/// One server's live state.
#[derive(Debug)]
pub(super) struct ServerState {
    /// Verdict of the active health checks (true without checks).
    up: AtomicBool,
    /// Connect failures in a row seen by requests; a success resets it.
    /// It is not reset by ejection, so after `fail_timeout` a single new
    /// failure ejects the server again instead of costing `max_fails`
    /// more requests a retry each.
    fails: AtomicU32,
    /// Skipped by requests until this time (ms since `epoch`); 0 = never.
    ejected_until_ms: AtomicU64,
    /// Requests holding a connection to this server, over all workers.
    in_flight: AtomicUsize,
}

impl UpstreamShared {
    /// State for a group, every server initially up.
    pub fn new(config: UpstreamConfig) -> Arc<Self> {
        let servers = config
            .servers
            .iter()
            .map(|_| ServerState {
                up: AtomicBool::new(true),
                fails: AtomicU32::new(0),
                ejected_until_ms: AtomicU64::new(0),
                in_flight: AtomicUsize::new(0),
            })
            .collect();
        let weights = config.servers.iter().map(|s| s.weight.max(1)).collect();
        Arc::new(UpstreamShared {
            config,
            servers,
            weights,
            epoch: Instant::now(),
        })
    }

    /// Takes over the health verdicts and ejections of `previous` (the
    /// group of the same name in the generation being replaced) for the
    /// servers both have, so a reload neither sends requests to a server
    /// known to be down nor forgets one that is. Call before any request.
    #[allow(dead_code)] // the reload hook in generation.rs calls it (docs/backends.md)
    pub fn inherit_health(&self, previous: &UpstreamShared) {
        let now = Instant::now();
        for (i, server) in self.config.servers.iter().enumerate() {
            let Some(j) = previous.index_of(server.addr) else {
                continue;
            };
            let (old, new) = (&previous.servers[j], &self.servers[i]);
            new.up
                .store(old.up.load(Ordering::Relaxed), Ordering::Relaxed);
            new.fails
                .store(old.fails.load(Ordering::Relaxed), Ordering::Relaxed);
            let until = old.ejected_until_ms.load(Ordering::Relaxed);
            if until != 0 {
                // Re-express the deadline on this group's clock.
                let deadline = previous.epoch + std::time::Duration::from_millis(until);
                let left = deadline.saturating_duration_since(now);
                if !left.is_zero() {
                    new.ejected_until_ms
                        .store(self.now_ms() + left.as_millis() as u64, Ordering::Relaxed);
                }
            }
        }
    }

    /// (server, up?) for metrics and /health: up means new requests may be
    /// sent to it (health checks pass and it is not ejected).
    pub fn health_snapshot(&self) -> Vec<(BackendAddr, bool)> {
        self.config
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| (s.addr, self.is_live(i)))
            .collect()
    }

    /// Index of the server at `addr`.
    pub(super) fn index_of(&self, addr: BackendAddr) -> Option<usize> {
        self.config.servers.iter().position(|s| s.addr == addr)
    }

    /// Address of server `i`.
    pub(super) fn addr(&self, i: usize) -> BackendAddr {
        self.config.servers[i].addr
    }

    /// May new requests go to server `i`?
    pub(super) fn is_live(&self, i: usize) -> bool {
        let s = &self.servers[i];
        if !s.up.load(Ordering::Relaxed) {
            return false;
        }
        // Reading the clock costs more than the rest of a pick (a syscall
        // on some VMs): only an ejected server needs it.
        let until = s.ejected_until_ms.load(Ordering::Relaxed);
        until == 0 || until <= self.now_ms()
    }

    /// The active health verdict of server `i`.
    pub(super) fn is_up(&self, i: usize) -> bool {
        self.servers[i].up.load(Ordering::Relaxed)
    }

    /// Requests in flight on server `i`.
    pub(super) fn in_flight(&self, i: usize) -> usize {
        self.servers[i].in_flight.load(Ordering::Relaxed)
    }

    /// Counts a request on server `i` until the guard drops.
    pub(super) fn begin(self: &Arc<Self>, i: usize) -> InFlight {
        self.servers[i].in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight {
            shared: self.clone(),
            server: i,
        }
    }

    /// A connection to server `i` succeeded: its failure streak ends.
    pub(super) fn connect_succeeded(&self, i: usize) {
        let s = &self.servers[i];
        if s.fails.load(Ordering::Relaxed) != 0 {
            s.fails.store(0, Ordering::Relaxed);
        }
    }

    /// A connection to server `i` failed; after `max_fails` in a row it is
    /// skipped for `fail_timeout`.
    pub(super) fn connect_failed(&self, i: usize, error: &dyn std::fmt::Display) {
        let passive = self.config.passive;
        let s = &self.servers[i];
        let fails = s.fails.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if fails < passive.max_fails {
            return;
        }
        let now = self.now_ms();
        let until = now.saturating_add(passive.fail_timeout.as_millis() as u64);
        let before = s.ejected_until_ms.swap(until, Ordering::Relaxed);
        if before <= now {
            tracing::warn!(
                upstream = %self.config.name,
                server = %self.addr(i),
                "backend ejected for {:?} after {fails} connect failures in a row: {error}",
                passive.fail_timeout
            );
        }
    }

    /// Records the active health verdict of server `i`.
    pub(super) fn set_up(&self, i: usize, up: bool) {
        self.servers[i].up.store(up, Ordering::Relaxed);
    }

    /// Milliseconds since `epoch`, never 0 (0 means "not ejected").
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }
}

/// Counts one request against a server's in-flight total while it lives
/// (least_conn reads the totals).
#[derive(Debug)]
pub(super) struct InFlight {
    shared: Arc<UpstreamShared>,
    server: usize,
}

impl InFlight {
    /// The server counted.
    pub(super) fn server(&self) -> usize {
        self.server
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.shared.servers[self.server]
            .in_flight
            .fetch_sub(1, Ordering::Relaxed);
    }
}
