//! Per-client state of the whole process: connections open and a request
//! token bucket per client, for `client_max_connections` and
//! `client_rate`. A client is its address (IPv6 grouped by prefix), or the
//! identity a trusted proxy gave it (`client_id_header`).
//!
//! One table for every worker, so a limit holds whichever worker the
//! kernel hands a client's connections to. It is cut into [`SHARDS`]
//! shards, each behind its own mutex, picked by a hash of the key: two
//! workers meet on a lock only when their clients fall in the same shard
//! at the same instant, and each holds it for one map lookup.
//!
//! A connection keeps a handle on its client's bucket ([`Bucket`]), taken
//! from the table at its first request: its requests then take their
//! tokens without a hash or a table lock, one token-bucket update each.
//! Only a client a trusted proxy names, which may change from request to
//! request, is looked up per request.
//!
//! The table is bounded ([`MAX_CLIENTS`] in all, an equal share per
//! shard): an attacker cycling source addresses cannot grow it. When a
//! shard is full, entries that hold nothing (no open connection, a full
//! bucket) go first; should that not free a quarter of it, every entry
//! without an open connection goes (those clients' buckets start full
//! again). Entries with open connections are bounded by `max_connections`;
//! an entry whose bucket a connection holds stays, so a client's
//! connections never draw on two buckets.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::config::{canonical, ClientLimits};

/// Clients the process tracks at most (about 128 bytes each: the table's
/// slot and the bucket).
pub(crate) const MAX_CLIENTS: usize = 65_536;

/// Shards of the table: enough that workers rarely meet on one lock.
const SHARDS: usize = 64;

/// Clients one shard tracks at most.
const SHARD_CLIENTS: usize = MAX_CLIENTS / SHARDS;

/// A client as the limits count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ClientKey {
    /// An IPv4 address, or an IPv6 prefix.
    Ip(IpAddr),
    /// An identity a trusted proxy sent that is not an address, kept as a
    /// keyed hash (fixed size whatever the client sent; the key is random
    /// per process, so no one can aim two identities at one entry).
    Id(u64),
}

impl ClientKey {
    /// The key of `ip` with IPv6 addresses cut to `v6_prefix` bits.
    pub(crate) fn of(ip: IpAddr, v6_prefix: u8) -> ClientKey {
        match canonical(ip) {
            IpAddr::V6(v6) => {
                let bits = u128::from(v6);
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(v6_prefix))
                    .unwrap_or(0);
                ClientKey::Ip(IpAddr::V6(Ipv6Addr::from(bits & mask)))
            }
            v4 => ClientKey::Ip(v4),
        }
    }

    /// The key of an identity a trusted proxy sent: an address (the same
    /// key as a direct connection from it) or any other token.
    pub(crate) fn of_id(id: &[u8], v6_prefix: u8) -> ClientKey {
        let text = std::str::from_utf8(id).ok().map(str::trim);
        match text.and_then(|t| t.parse::<IpAddr>().ok()) {
            Some(ip) => ClientKey::of(ip, v6_prefix),
            None => ClientKey::Id(id_hasher().hash_one(id)),
        }
    }
}

fn id_hasher() -> &'static RandomState {
    static HASHER: OnceLock<RandomState> = OnceLock::new();
    HASHER.get_or_init(RandomState::new)
}

#[derive(Debug)]
struct Entry {
    connections: u32,
    /// Shared with the connections that draw on it.
    bucket: Arc<Bucket>,
    /// Until when new connections are closed before the handshake: the
    /// client kept sending on a connection after `close_after` refusals.
    shut_until: Option<Instant>,
}

/// One client's request token bucket (`client_rate`, `client_burst`).
#[derive(Debug)]
pub(crate) struct Bucket(Mutex<Tokens>);

#[derive(Debug, Clone, Copy)]
struct Tokens {
    /// Tokens left at `at` (fractional: refilled continuously).
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(limits: &ClientLimits, now: Instant) -> Self {
        Bucket(Mutex::new(Tokens {
            tokens: capacity(limits),
            at: now,
        }))
    }

    fn tokens(&self) -> MutexGuard<'_, Tokens> {
        // A panic never happens while a bucket is held (arithmetic only),
        // so a poisoned lock still holds a whole count.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a token for one request begun at `now`, or says when to
    /// retry.
    pub(crate) fn take(&self, limits: &ClientLimits, now: Instant) -> Result<(), Refused> {
        let Some(rate) = limits.rate else {
            return Ok(());
        };
        let per_token = rate.per.as_secs_f64() / f64::from(rate.count);
        let mut b = self.tokens();
        // `at` never moves back when connections on other workers race
        // with requests begun a little earlier.
        if now > b.at {
            let refill = (now - b.at).as_secs_f64() / per_token;
            b.tokens = (b.tokens + refill).min(capacity(limits));
            b.at = now;
        }
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return Ok(());
        }
        let wait = (1.0 - b.tokens) * per_token;
        Err(Refused::Rate(wait.ceil().max(1.0) as u32))
    }

    /// True when the bucket is full again by `now` (it holds nothing
    /// worth keeping).
    fn full_by(&self, now: Instant, full_after: Duration) -> bool {
        now.saturating_duration_since(self.tokens().at) >= full_after
    }
}

type Shard = HashMap<ClientKey, Entry>;

/// The process's clients, shared by every worker.
#[derive(Debug)]
pub(crate) struct Clients {
    shards: Box<[Mutex<Shard>]>,
    pick: RandomState,
}

impl Default for Clients {
    fn default() -> Self {
        Clients {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            pick: RandomState::new(),
        }
    }
}

/// Why a client was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Over `client_max_connections`.
    Connections,
    /// Over `client_rate`: retry after this many seconds.
    Rate(u32),
    /// Shut out for kept sending past `client_rate` (until the Retry-After
    /// it was given has passed).
    Shut,
}

impl Refused {
    /// The fault a refused connection is counted and logged as.
    pub(crate) fn kind(self) -> crate::fault::Kind {
        match self {
            Refused::Connections => crate::fault::Kind::TooManyConnections,
            Refused::Rate(_) => crate::fault::Kind::RateLimited,
            Refused::Shut => crate::fault::Kind::KeptSending,
        }
    }
}

impl Clients {
    fn shard(&self, key: &ClientKey) -> MutexGuard<'_, Shard> {
        let i = (self.pick.hash_one(key) % SHARDS as u64) as usize;
        // A panic never happens while a shard is held (plain arithmetic
        // and map operations), so a poisoned lock still holds whole counts.
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a new connection of `key`, or refuses it when the client has
    /// `limits.max_connections` open. The guard uncounts it.
    pub(crate) fn connect(
        self: &Arc<Self>,
        key: ClientKey,
        limits: &ClientLimits,
    ) -> Result<Option<ConnSlot>, Refused> {
        let shuts = limits.rate.is_some() && limits.close_after > 0;
        if limits.max_connections.is_none() && !shuts {
            return Ok(None);
        }
        let mut shard = self.shard(&key);
        if shuts {
            // Looked up, not made: a client never refused is not shut.
            if let Some(until) = shard.get(&key).and_then(|e| e.shut_until) {
                if Instant::now() < until {
                    return Err(Refused::Shut);
                }
            }
        }
        let Some(max) = limits.max_connections else {
            return Ok(None);
        };
        let Some(entry) = entry(&mut shard, key, limits) else {
            return Ok(None);
        };
        if entry.connections >= max.get() {
            return Err(Refused::Connections);
        }
        entry.connections += 1;
        Ok(Some(ConnSlot {
            clients: self.clone(),
            key,
        }))
    }

    /// The request bucket of `key`, made when missing, for a connection
    /// to keep while it lives (None when the shard is full of clients
    /// with open connections: such a client is not limited).
    pub(crate) fn bucket(&self, key: ClientKey, limits: &ClientLimits) -> Option<Arc<Bucket>> {
        let mut shard = self.shard(&key);
        entry(&mut shard, key, limits).map(|e| e.bucket.clone())
    }

    /// Takes a token for one request of `key` begun at `now`, or says
    /// when to retry.
    pub(crate) fn request(
        &self,
        key: ClientKey,
        limits: &ClientLimits,
        now: Instant,
    ) -> Result<(), Refused> {
        if limits.rate.is_none() {
            return Ok(());
        }
        match self.bucket(key, limits) {
            Some(bucket) => bucket.take(limits, now),
            None => Ok(()),
        }
    }

    /// Closes `key`'s new connections before the handshake for `seconds`
    /// (it kept sending on a connection past `client_rate`).
    pub(crate) fn shut(&self, key: ClientKey, seconds: u32, limits: &ClientLimits) {
        let mut shard = self.shard(&key);
        if let Some(entry) = entry(&mut shard, key, limits) {
            entry.shut_until = Some(Instant::now() + Duration::from_secs(u64::from(seconds)));
        }
    }

    /// Clients tracked now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.len()))
            .sum()
    }
}

/// Bucket size: the rate's one token plus the burst.
fn capacity(limits: &ClientLimits) -> f64 {
    1.0 + f64::from(limits.burst)
}

/// The entry of `key`, made when missing (None when the shard is full of
/// clients with open connections: such a client is not limited).
fn entry<'m>(shard: &'m mut Shard, key: ClientKey, limits: &ClientLimits) -> Option<&'m mut Entry> {
    if !shard.contains_key(&key) && shard.len() >= SHARD_CLIENTS {
        make_room(shard, limits);
        if shard.len() >= SHARD_CLIENTS {
            return None;
        }
    }
    Some(shard.entry(key).or_insert_with(|| Entry {
        connections: 0,
        bucket: Arc::new(Bucket::full(limits, Instant::now())),
        shut_until: None,
    }))
}

impl Entry {
    /// A connection is counted on it or draws on its bucket: forgetting
    /// it would split the client in two.
    fn held(&self) -> bool {
        self.connections > 0 || Arc::strong_count(&self.bucket) > 1
    }
}

fn make_room(shard: &mut Shard, limits: &ClientLimits) {
    let now = Instant::now();
    let full_after = limits.rate.map_or(Duration::ZERO, |r| {
        r.per.mul_f64(capacity(limits) / f64::from(r.count))
    });
    shard.retain(|_, e| {
        e.held() || !e.bucket.full_by(now, full_after) || e.shut_until.is_some_and(|t| t > now)
    });
    if shard.len() > SHARD_CLIENTS - SHARD_CLIENTS / 4 {
        shard.retain(|_, e| e.held());
    }
}

/// A counted connection; dropping it uncounts it.
#[derive(Debug)]
pub(crate) struct ConnSlot {
    clients: Arc<Clients>,
    key: ClientKey,
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        let mut shard = self.clients.shard(&self.key);
        if let Some(e) = shard.get_mut(&self.key) {
            e.connections = e.connections.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Rate;
    use std::num::NonZeroU32;

    fn limits(rate: u32, burst: u32) -> ClientLimits {
        ClientLimits {
            rate: Some(Rate {
                count: rate,
                per: Duration::from_secs(3600),
            }),
            burst,
            max_connections: NonZeroU32::new(2),
            ..ClientLimits::default()
        }
    }

    #[test]
    fn ipv6_clients_are_grouped_by_prefix() {
        let a = ClientKey::of("2001:db8:1:2::1".parse().unwrap(), 64);
        let b = ClientKey::of("2001:db8:1:2:ffff::9".parse().unwrap(), 64);
        let c = ClientKey::of("2001:db8:1:3::1".parse().unwrap(), 64);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let v4 = ClientKey::of("::ffff:192.0.2.1".parse().unwrap(), 64);
        assert_eq!(v4, ClientKey::of("192.0.2.1".parse().unwrap(), 64));
    }

    #[test]
    fn an_identity_that_is_an_address_is_that_address() {
        let direct = ClientKey::of("2001:db8::1".parse().unwrap(), 64);
        assert_eq!(ClientKey::of_id(b" 2001:db8::2 ", 64), direct);
        let a = ClientKey::of_id(b"tenant-a", 64);
        assert_eq!(a, ClientKey::of_id(b"tenant-a", 64));
        assert_ne!(a, ClientKey::of_id(b"tenant-b", 64));
        assert!(matches!(a, ClientKey::Id(_)));
    }

    #[test]
    fn a_client_over_its_burst_is_told_when_to_retry() {
        let clients = Clients::default();
        let l = limits(1, 2);
        let key = ClientKey::of("192.0.2.1".parse().unwrap(), 64);
        for _ in 0..3 {
            assert_eq!(clients.request(key, &l, Instant::now()), Ok(()));
        }
        match clients.request(key, &l, Instant::now()) {
            Err(Refused::Rate(s)) => assert!(s > 3000, "{s}"),
            other => panic!("{other:?}"),
        }
        let other = ClientKey::of("192.0.2.2".parse().unwrap(), 64);
        assert_eq!(clients.request(other, &l, Instant::now()), Ok(()));
    }

    #[test]
    fn connections_are_counted_until_dropped() {
        let clients = Arc::new(Clients::default());
        let l = limits(1, 0);
        let key = ClientKey::of("192.0.2.1".parse().unwrap(), 64);
        let a = clients.connect(key, &l).unwrap();
        let _b = clients.connect(key, &l).unwrap();
        assert_eq!(clients.connect(key, &l).unwrap_err(), Refused::Connections);
        drop(a);
        assert!(clients.connect(key, &l).is_ok());
    }

    #[test]
    fn a_shut_client_is_refused_until_its_time_is_up() {
        let clients = Arc::new(Clients::default());
        let l = ClientLimits {
            max_connections: None,
            ..limits(1, 0)
        };
        let key = ClientKey::of("192.0.2.1".parse().unwrap(), 64);
        let other = ClientKey::of("192.0.2.2".parse().unwrap(), 64);
        assert!(clients.connect(key, &l).unwrap().is_none());
        clients.shut(key, 3600, &l);
        assert_eq!(clients.connect(key, &l).unwrap_err(), Refused::Shut);
        assert!(clients.connect(other, &l).is_ok());
        clients.shut(other, 0, &l);
        assert!(clients.connect(other, &l).is_ok(), "a shut of 0 s is over");
        let never = ClientLimits {
            close_after: 0,
            ..l
        };
        assert!(
            clients.connect(key, &never).is_ok(),
            "close_after 0 never shuts"
        );
    }

    #[test]
    fn threads_share_one_bucket_per_client() {
        let clients = Arc::new(Clients::default());
        let l = limits(1, 99);
        let key = ClientKey::of("192.0.2.1".parse().unwrap(), 64);
        let granted: usize = std::thread::scope(|s| {
            let runs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..100)
                            .filter(|_| clients.request(key, &l, Instant::now()).is_ok())
                            .count()
                    })
                })
                .collect();
            runs.into_iter().map(|r| r.join().unwrap()).sum()
        });
        assert_eq!(granted, 100);
    }

    #[test]
    fn a_held_bucket_is_the_clients_bucket_while_others_come_and_go() {
        let clients = Clients::default();
        let l = limits(1, 1);
        let key = ClientKey::of("192.0.2.1".parse().unwrap(), 64);
        let held = clients.bucket(key, &l).expect("a bucket");
        let now = Instant::now();
        assert_eq!(held.take(&l, now), Ok(()));
        // Addresses cycling through the table do not push out a client
        // whose bucket a connection holds: a new connection of it draws
        // on the same bucket, which has one token left.
        for i in 0..(MAX_CLIENTS as u32 + 1000) {
            let other = ClientKey::of(IpAddr::from(i.to_be_bytes()), 64);
            let _ = clients.request(other, &l, now);
        }
        let again = clients.bucket(key, &l).expect("a bucket");
        assert!(Arc::ptr_eq(&held, &again));
        assert_eq!(again.take(&l, now), Ok(()));
        assert!(matches!(held.take(&l, now), Err(Refused::Rate(_))));
    }

    #[test]
    fn cycling_addresses_cannot_grow_the_table() {
        let clients = Clients::default();
        let l = limits(1, 0);
        for i in 0..(MAX_CLIENTS as u32 + 1000) {
            let key = ClientKey::of(IpAddr::from(i.to_be_bytes()), 64);
            let _ = clients.request(key, &l, Instant::now());
        }
        assert!(clients.len() <= MAX_CLIENTS, "{}", clients.len());
    }
}
