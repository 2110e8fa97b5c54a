//! Process-wide state of an upstream group: per server, the active health
//! verdict, passive ejection and requests in flight. Atomics only, because
//! every worker thread reads it on every request.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::affinity::{self, Ring};
use crate::config::{Balance, UpstreamConfig};

/// Balancers see weights times this, so slow start can give a server a
/// fraction of a weight of 1.
pub(super) const WEIGHT_SCALE: u32 = 100;

/// Process-wide state of one upstream group: its settings and, per
/// server, what health checks and passive ejection decided. Shared by all
/// workers (atomics only), rebuilt on reload.
#[derive(Debug)]
pub struct UpstreamShared {
    /// The group's settings.
    pub config: UpstreamConfig,
    /// Parallel to `config.servers`.
    pub(super) servers: Vec<ServerState>,
    /// Weights of `config.servers` times [`WEIGHT_SCALE`], in the shape
    /// the balancers take.
    pub(super) weights: Vec<u32>,
    /// `balance = "hash"`: the consistent-hash ring (empty otherwise).
    pub(super) ring: Ring,
    /// `balance = "sticky_cookie"`: per server, its cookie's value and
    /// its whole `Set-Cookie` field value (empty otherwise).
    pub(super) cookies: Vec<(u64, Box<str>)>,
    /// Until when (ms since `epoch`) some server may still be in slow
    /// start; 0: none is, the configured weights hold.
    pub(super) ramping_until_ms: AtomicU64,
    /// Taken to decide an ejection (rare), so that two workers cannot
    /// together eject more than `max_ejected_percent` allows.
    pub(super) eject_lock: Mutex<()>,
    /// Origin of the millisecond clock stored in the atomics.
    epoch: Instant,
}

/// One server's live state.
#[derive(Debug)]
pub(super) struct ServerState {
    /// Verdict of the active health checks (true without checks).
    pub(super) up: AtomicBool,
    /// Connect failures in a row seen by requests; a success resets it.
    /// It is not reset by ejection, so after `fail_timeout` a single new
    /// failure ejects the server again instead of costing `max_fails`
    /// more requests a retry each.
    pub(super) fails: AtomicU32,
    /// Skipped by requests until this time (ms since `epoch`); 0 = not
    /// ejected (set back to 0 by the first pick after it).
    pub(super) ejected_until_ms: AtomicU64,
    /// Requests holding a connection to this server, over all workers.
    in_flight: AtomicUsize,
    /// 5xx responses (or response timeouts) in a row.
    pub(super) errors: AtomicU32,
    /// Ejections in a row (each one soon after the server came back from
    /// the one before): the next lasts one `fail_timeout` longer.
    pub(super) ejections: AtomicU32,
    /// When the last ejection ended (ms since `epoch`).
    pub(super) back_at_ms: AtomicU64,
    /// When its slow start began (ms since `epoch`); 0 = none.
    pub(super) ramp_from_ms: AtomicU64,
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
                errors: AtomicU32::new(0),
                ejections: AtomicU32::new(0),
                back_at_ms: AtomicU64::new(0),
                ramp_from_ms: AtomicU64::new(0),
            })
            .collect();
        let weights = config
            .servers
            .iter()
            .map(|s| s.weight.max(1) * WEIGHT_SCALE)
            .collect();
        let ring = match config.balance {
            Balance::Hash => Ring::new(
                &config
                    .servers
                    .iter()
                    .map(|s| (s.addr, s.weight))
                    .collect::<Vec<_>>(),
            ),
            _ => Ring::default(),
        };
        let cookies = match config.balance {
            Balance::StickyCookie => config
                .servers
                .iter()
                .map(|s| {
                    (
                        affinity::cookie_value(s.addr),
                        affinity::set_cookie(&config.affinity.sticky_cookie, s.addr),
                    )
                })
                .collect(),
            _ => Vec::new(),
        };
        Arc::new(UpstreamShared {
            config,
            servers,
            weights,
            ring,
            cookies,
            ramping_until_ms: AtomicU64::new(0),
            eject_lock: Mutex::new(()),
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
            for (to, from) in [
                (&new.fails, &old.fails),
                (&new.errors, &old.errors),
                (&new.ejections, &old.ejections),
            ] {
                to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            // Re-express times on this group's clock.
            let rebase = |ms: u64| {
                let at = previous.epoch + std::time::Duration::from_millis(ms);
                match at.checked_duration_since(now) {
                    Some(ahead) => self.now_ms() + ahead.as_millis() as u64,
                    None => self
                        .now_ms()
                        .saturating_sub(now.duration_since(at).as_millis() as u64)
                        .max(1),
                }
            };
            let until = old.ejected_until_ms.load(Ordering::Relaxed);
            if until != 0 && rebase(until) > self.now_ms() {
                new.ejected_until_ms.store(rebase(until), Ordering::Relaxed);
            }
            let back = old.back_at_ms.load(Ordering::Relaxed);
            if back != 0 {
                new.back_at_ms.store(rebase(back), Ordering::Relaxed);
            }
        }
    }

    /// (server, up?) for metrics and /health: up means new requests may be
    /// sent to it (health checks pass and it is not ejected).
    pub fn health_snapshot(&self) -> Vec<(SocketAddr, bool)> {
        self.config
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| (s.addr, self.is_live(i)))
            .collect()
    }

    /// Index of the server at `addr`.
    pub(super) fn index_of(&self, addr: SocketAddr) -> Option<usize> {
        self.config.servers.iter().position(|s| s.addr == addr)
    }

    /// Address of server `i`.
    pub(super) fn addr(&self, i: usize) -> SocketAddr {
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
        if until == 0 {
            return true;
        }
        if until > self.now_ms() {
            return false;
        }
        // The ejection is over: the first pick to see it says so, once.
        if s.ejected_until_ms
            .compare_exchange(until, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            self.came_back(i, until);
        }
        true
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

    /// Records the active health verdict of server `i`.
    pub(super) fn set_up(&self, i: usize, up: bool) {
        let was = self.servers[i].up.swap(up, Ordering::Relaxed);
        if up && !was {
            self.came_back(i, self.now_ms());
        }
    }

    /// Milliseconds since `epoch`, never 0 (0 means "not ejected").
    pub(super) fn now_ms(&self) -> u64 {
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

    /// The server answered with `status` (outlier detection).
    pub(super) fn answered(&self, status: u16) {
        self.shared.answered(self.server, status);
    }

    /// The server sent no response head in time (outlier detection).
    pub(super) fn timed_out(&self) {
        self.shared.timed_out(self.server);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.shared.servers[self.server]
            .in_flight
            .fetch_sub(1, Ordering::Relaxed);
    }
}
