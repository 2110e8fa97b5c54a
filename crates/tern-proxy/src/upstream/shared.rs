//! Process-wide state of an upstream group: the current set of servers
//! (which DNS re-resolution changes while requests run) and, per server,
//! the active health verdict, passive ejection, the operator's admin state
//! and requests in flight.
//!
//! The set is an immutable [`ServerSet`] behind an [`ArcSwap`]: a worker
//! reads it with one atomic load per pick and never takes a lock, and a
//! change publishes a whole new set with a higher `generation`. Servers
//! are `Arc<Server>` keyed by address: a server present in both the old
//! and the new set is the same `Arc` (its counts, verdicts and admin state
//! carry over), and a request holding a removed server's `Arc` finishes on
//! it undisturbed.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use crate::config::{BackendAddr, PassiveEjection, UpstreamConfig};

/// Balancers see weights times this, so slow start can give a server a
/// fraction of a weight of 1.
pub(super) const WEIGHT_SCALE: u32 = 100;

/// Process-wide state of one upstream group: its settings and its current
/// servers. Shared by all workers, rebuilt on reload.
#[derive(Debug)]
pub struct UpstreamShared {
    /// The group's settings.
    pub config: UpstreamConfig,
    /// The servers requests may go to now.
    set: ArcSwap<ServerSet>,
    /// `set`'s generation, stored after the set: a worker asks it on every
    /// request whether its view is current, one atomic load where loading
    /// the set (`arc_swap`'s debt list) cost ~90 instructions, twice a
    /// request (callgrind).
    generation: AtomicU64,
    /// Serializes changes of `set` (control plane only: DNS, reload).
    changing: Mutex<()>,
    /// Taken to decide an ejection on responses (rare), so that two
    /// workers cannot together eject more than `max_ejected_percent`.
    pub(super) ejecting: Mutex<()>,
}

/// The servers of a group at one moment. Immutable: a change makes a new
/// one with a higher `generation`, so per-worker structures built from a
/// set (balancer scores, hash rings, pools) know when to rebuild.
#[derive(Debug)]
pub struct ServerSet {
    /// Increases by one with every change of the set (0 for the set built
    /// from the configuration).
    pub generation: u64,
    /// The servers, in configuration order (the addresses of one name in
    /// the order its records gave them). No address appears twice.
    pub servers: Vec<Arc<Server>>,
    /// `servers[i].weight` times [`WEIGHT_SCALE`], in the shape the
    /// balancers take.
    pub weights: Vec<u32>,
}

/// What the operator asked of a server on the admin listener (until the
/// next reload, which starts every server `Enabled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminState {
    /// Picked as usual.
    Enabled,
    /// No new requests from balancing; requests in flight finish. Like
    /// haproxy's `drain`, a request that affinity pins to this server may
    /// still go to it.
    Draining,
    /// No new requests at all; requests in flight finish (haproxy's
    /// `maint`).
    Disabled,
}

impl AdminState {
    /// The word used on the admin listener and in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            AdminState::Enabled => "enabled",
            AdminState::Draining => "draining",
            AdminState::Disabled => "disabled",
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            1 => AdminState::Draining,
            2 => AdminState::Disabled,
            _ => AdminState::Enabled,
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            AdminState::Enabled => 0,
            AdminState::Draining => 1,
            AdminState::Disabled => 2,
        }
    }
}

/// One server of a group and its live state, shared by all workers
/// (atomics only, because every worker reads it on every request).
#[derive(Debug)]
pub struct Server {
    /// Where it is.
    pub addr: BackendAddr,
    /// Its configured share of requests (at least 1).
    pub weight: u32,
    /// Index in `config.servers` of the entry it comes from (an address,
    /// or a name whose records gave `addr`).
    pub origin: usize,
    /// Verdict of the active health checks (true without checks).
    up: AtomicBool,
    /// Connect failures in a row seen by requests; a success resets it.
    /// It is not reset by ejection, so after `fail_timeout` a single new
    /// failure ejects the server again instead of costing `max_fails`
    /// more requests a retry each.
    pub(super) fails: AtomicU32,
    /// Skipped by requests until this time (ms since `epoch`); 0 = not
    /// ejected (set back to 0 by the first look after the ejection).
    pub(super) ejected_until_ms: AtomicU64,
    /// 5xx responses (or response timeouts) in a row.
    pub(super) errors: AtomicU32,
    /// Ejections in a row (each soon after it came back from the one
    /// before): the next lasts one `fail_timeout` longer.
    pub(super) ejections: AtomicU32,
    /// When the last ejection ends or ended (ms since `epoch`).
    pub(super) back_at_ms: AtomicU64,
    /// When it last came back (ejection over, health checks passing
    /// again), for slow start (ms since `epoch`); 0 = not ramping.
    pub(super) ramp_from_ms: AtomicU64,
    /// Requests holding a connection to this server, over all workers.
    in_flight: AtomicUsize,
    /// Requests sent to it since it joined the group (all workers).
    requests: AtomicU64,
    /// [`AdminState`] as a number.
    admin: AtomicU8,
    /// Origin of the millisecond clock stored in `ejected_until_ms`.
    epoch: Instant,
}

impl Server {
    /// A server that starts up, enabled, with nothing in flight.
    pub(crate) fn new(addr: BackendAddr, weight: u32, origin: usize) -> Self {
        Server {
            addr,
            weight: weight.max(1),
            origin,
            up: AtomicBool::new(true),
            fails: AtomicU32::new(0),
            ejected_until_ms: AtomicU64::new(0),
            errors: AtomicU32::new(0),
            ejections: AtomicU32::new(0),
            back_at_ms: AtomicU64::new(0),
            ramp_from_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            admin: AtomicU8::new(0),
            epoch: Instant::now(),
        }
    }

    /// May new requests go to it? (health checks pass, not ejected, and
    /// the operator has not drained or disabled it)
    pub fn is_live(&self) -> bool {
        if !self.up.load(Ordering::Relaxed) || self.admin.load(Ordering::Relaxed) != 0 {
            return false;
        }
        !self.is_ejected()
    }

    /// Is it ejected by passive detection right now?
    pub fn is_ejected(&self) -> bool {
        // Reading the clock costs more than the rest of a pick (a syscall
        // on some VMs): only an ejected server needs it.
        let until = self.ejected_until_ms.load(Ordering::Relaxed);
        if until == 0 {
            return false;
        }
        if until > self.now_ms() {
            return true;
        }
        // Over: the first look to see it says so once (no clock reads
        // after it), and the server's slow start begins when it ended.
        if self
            .ejected_until_ms
            .compare_exchange(until, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            self.ramp_from_ms.store(until, Ordering::Relaxed);
        }
        false
    }

    /// The active health verdict.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Records the active health verdict.
    pub(crate) fn set_up(&self, up: bool) {
        let was = self.up.swap(up, Ordering::Relaxed);
        if up && !was {
            self.ramp_from_ms.store(self.now_ms(), Ordering::Relaxed);
        }
    }

    /// Requests in flight on it, over all workers.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Requests sent to it since it joined the group.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// What the operator asked of it.
    pub fn admin(&self) -> AdminState {
        AdminState::from_u8(self.admin.load(Ordering::Relaxed))
    }

    /// Sets what the operator asked of it; returns the previous state.
    pub fn set_admin(&self, state: AdminState) -> AdminState {
        AdminState::from_u8(self.admin.swap(state.to_u8(), Ordering::Relaxed))
    }

    /// Counts a request on it until the guard drops.
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        self.clone().begin_owned()
    }

    /// [`Server::begin`] with a handle the caller has no further use for
    /// (the one a pick cloned): the guard keeps it, no second clone (an
    /// atomic increment, and a decrement when the pick's is dropped).
    pub(crate) fn begin_owned(self: Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
        InFlight {
            server: self,
            counted: true,
        }
    }

    /// A connection to it succeeded: its failure streak ends.
    pub(crate) fn connect_succeeded(&self) {
        if self.fails.load(Ordering::Relaxed) != 0 {
            self.fails.store(0, Ordering::Relaxed);
        }
    }

    /// A connection to it failed; after `max_fails` in a row it is skipped
    /// for `fail_timeout` (logged once per ejection, naming `upstream`).
    pub(crate) fn connect_failed(
        &self,
        passive: PassiveEjection,
        upstream: &str,
        error: &dyn std::fmt::Display,
    ) {
        let fails = self.fails.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if fails >= passive.max_fails {
            let why = format!("{fails} connect failures in a row: {error}");
            self.eject(passive, upstream, &why);
        }
    }

    /// Takes over the health verdict and ejection of `old` (the same
    /// address in the generation being replaced).
    fn inherit_health(&self, old: &Server) {
        self.up
            .store(old.up.load(Ordering::Relaxed), Ordering::Relaxed);
        for (to, from) in [
            (&self.fails, &old.fails),
            (&self.errors, &old.errors),
            (&self.ejections, &old.ejections),
        ] {
            to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        let until = old.ejected_until_ms.load(Ordering::Relaxed);
        if until != 0 {
            // Re-express the deadline on this server's clock.
            let deadline = old.epoch + Duration::from_millis(until);
            let left = deadline.saturating_duration_since(Instant::now());
            if !left.is_zero() {
                self.ejected_until_ms
                    .store(self.now_ms() + left.as_millis() as u64, Ordering::Relaxed);
            }
        }
    }

    /// Milliseconds since `epoch`, never 0 (0 means "not ejected").
    pub(super) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }
}

impl ServerSet {
    fn new(generation: u64, servers: Vec<Arc<Server>>) -> Self {
        let weights = servers.iter().map(|s| s.weight * WEIGHT_SCALE).collect();
        ServerSet {
            generation,
            servers,
            weights,
        }
    }

    /// The server at `addr`.
    pub fn find(&self, addr: BackendAddr) -> Option<&Arc<Server>> {
        self.servers.iter().find(|s| s.addr == addr)
    }

    /// The index of `server` in this set (`hint` is tried first: the
    /// index it had when it was picked, right unless the set changed).
    pub fn index_of(&self, server: &Arc<Server>, hint: usize) -> Option<usize> {
        match self.servers.get(hint) {
            Some(s) if Arc::ptr_eq(s, server) => Some(hint),
            _ => self.servers.iter().position(|s| Arc::ptr_eq(s, server)),
        }
    }
}

impl UpstreamShared {
    /// State for a group: the servers of its configuration given by
    /// address, every one up and enabled (names get theirs from DNS).
    pub fn new(config: UpstreamConfig) -> Arc<Self> {
        let mut servers: Vec<Arc<Server>> = Vec::with_capacity(config.servers.len());
        for (origin, s) in config.servers.iter().enumerate() {
            // A name has no address until it is resolved (or inherited).
            if s.name.is_none() && !servers.iter().any(|known| known.addr == s.addr) {
                servers.push(Arc::new(Server::new(s.addr, s.weight, origin)));
            }
        }
        Arc::new(UpstreamShared {
            config,
            set: ArcSwap::from_pointee(ServerSet::new(0, servers)),
            generation: AtomicU64::new(0),
            changing: Mutex::new(()),
            ejecting: Mutex::new(()),
        })
    }

    /// The current servers (one atomic load; hold it briefly: a set kept
    /// alive keeps its removed servers' state alive).
    pub fn servers(&self) -> arc_swap::Guard<Arc<ServerSet>> {
        self.set.load()
    }

    /// The generation of the current set: a set of this generation or a
    /// later one is stored already.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Makes `addrs` the servers that come from configuration entry
    /// `origin` (a name's addresses after a resolution): servers whose
    /// address stays keep their state, new ones start up and enabled, the
    /// others leave the set (requests in flight on them finish). An address
    /// another entry already provides is not added twice. Returns the
    /// addresses added and removed (both empty: nothing changed, and the
    /// generation stays).
    pub fn set_addresses<A: Into<BackendAddr> + Copy>(
        &self,
        origin: usize,
        addrs: &[A],
    ) -> (Vec<BackendAddr>, Vec<BackendAddr>) {
        let addrs: Vec<BackendAddr> = addrs.iter().map(|a| (*a).into()).collect();
        let Some(entry) = self.config.servers.get(origin) else {
            return (Vec::new(), Vec::new());
        };
        let _changing = self.changing.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.set.load_full();
        let removed: Vec<BackendAddr> = old
            .servers
            .iter()
            .filter(|s| s.origin == origin && !addrs.contains(&s.addr))
            .map(|s| s.addr)
            .collect();
        let mut added = Vec::new();
        let mut servers: Vec<Arc<Server>> = Vec::with_capacity(old.servers.len() + addrs.len());
        // Entries before `origin`, then its addresses, then the rest: the
        // set stays in configuration order.
        servers.extend(old.servers.iter().filter(|s| s.origin < origin).cloned());
        for &addr in &addrs {
            if servers.iter().any(|s| s.addr == addr) {
                continue;
            }
            match old.find(addr) {
                Some(s) if s.origin == origin => servers.push(s.clone()),
                Some(_) => {} // provided by a later entry, kept below
                None => {
                    added.push(addr);
                    servers.push(Arc::new(Server::new(addr, entry.weight, origin)));
                }
            }
        }
        servers.extend(old.servers.iter().filter(|s| s.origin > origin).cloned());
        if !added.is_empty() || !removed.is_empty() {
            self.set
                .store(Arc::new(ServerSet::new(old.generation + 1, servers)));
            self.generation.store(old.generation + 1, Ordering::Release);
        }
        (added, removed)
    }

    /// Takes over the health verdicts and ejections of `previous` (the
    /// group of the same name in the generation being replaced) for the
    /// servers both have, so a reload neither sends requests to a server
    /// known to be down nor forgets one that is. Admin states are not
    /// taken over: a reload ends them. Call before any request.
    pub fn inherit_health(&self, previous: &UpstreamShared) {
        let old = previous.servers();
        for server in &self.servers().servers {
            if let Some(o) = old.find(server.addr) {
                server.inherit_health(o);
            }
        }
    }

    /// (server, up?) for metrics and /health: up means new requests may be
    /// sent to it (health checks pass, it is not ejected, not drained or
    /// disabled).
    pub fn health_snapshot(&self) -> Vec<(BackendAddr, bool)> {
        self.servers()
            .servers
            .iter()
            .map(|s| (s.addr, s.is_live()))
            .collect()
    }
}

/// Counts one request against a server's in-flight total while it lives
/// (least_conn reads the totals), and keeps the server's state alive
/// even if the server leaves the set meanwhile.
#[derive(Debug)]
pub(crate) struct InFlight {
    server: Arc<Server>,
    /// False once [`InFlight::release`] took the request off the count.
    counted: bool,
}

impl InFlight {
    /// The server counted.
    pub(crate) fn server(&self) -> &Arc<Server> {
        &self.server
    }

    /// Takes the request off its server's count before the guard goes
    /// (the response has left the backend); once only.
    pub(crate) fn release(&mut self) {
        if std::mem::take(&mut self.counted) {
            self.server.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.release();
    }
}
