//! Per-client state of one worker: connections open and a request token
//! bucket per client address (IPv6 grouped by prefix), for
//! `client_max_connections` and `client_rate`.
//!
//! Counts are per worker (each worker has its table, no locks): with N
//! workers, a client whose connections the kernel spreads over all of them
//! may get up to N times a limit. The table is bounded ([`MAX_CLIENTS`]):
//! an attacker cycling source addresses cannot grow it. When it is full,
//! entries that hold nothing (no open connection, a full bucket) go first;
//! should that not free a quarter of it, every entry without an open
//! connection goes (those clients' buckets start full again). Entries with
//! open connections are bounded by `max_connections`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::config::{canonical, ClientLimits};

/// Clients one worker tracks at most.
pub(crate) const MAX_CLIENTS: usize = 65_536;

/// A client as the limits count it: an IPv4 address, or an IPv6 prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ClientKey(IpAddr);

impl ClientKey {
    /// The key of `ip` with IPv6 addresses cut to `v6_prefix` bits.
    pub(crate) fn of(ip: IpAddr, v6_prefix: u8) -> ClientKey {
        match canonical(ip) {
            IpAddr::V6(v6) => {
                let bits = u128::from(v6);
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(v6_prefix))
                    .unwrap_or(0);
                ClientKey(IpAddr::V6(Ipv6Addr::from(bits & mask)))
            }
            v4 => ClientKey(v4),
        }
    }
}

#[derive(Debug)]
struct Entry {
    connections: u32,
    /// Tokens left at `at` (fractional: refilled continuously).
    tokens: f64,
    at: Instant,
}

/// One worker's clients.
#[derive(Debug, Default)]
pub(crate) struct Clients {
    map: RefCell<HashMap<ClientKey, Entry>>,
}

/// Why a client was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Over `client_max_connections`.
    Connections,
    /// Over `client_rate`: retry after this many seconds.
    Rate(u32),
}

impl Clients {
    /// Counts a new connection of `key`, or refuses it when the client has
    /// `limits.max_connections` open. The guard uncounts it.
    pub(crate) fn connect(
        self: &Rc<Self>,
        key: ClientKey,
        limits: &ClientLimits,
    ) -> Result<Option<ConnSlot>, Refused> {
        let Some(max) = limits.max_connections else {
            return Ok(None);
        };
        let mut map = self.map.borrow_mut();
        let Some(entry) = entry(&mut map, key, limits) else {
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

    /// Takes a token for one request of `key`, or says when to retry.
    pub(crate) fn request(&self, key: ClientKey, limits: &ClientLimits) -> Result<(), Refused> {
        let Some(rate) = limits.rate else {
            return Ok(());
        };
        let mut map = self.map.borrow_mut();
        let Some(entry) = entry(&mut map, key, limits) else {
            return Ok(());
        };
        let per_token = rate.per.as_secs_f64() / f64::from(rate.count);
        let capacity = capacity(limits);
        let now = Instant::now();
        let refill = now.saturating_duration_since(entry.at).as_secs_f64() / per_token;
        entry.tokens = (entry.tokens + refill).min(capacity);
        entry.at = now;
        if entry.tokens >= 1.0 {
            entry.tokens -= 1.0;
            return Ok(());
        }
        let wait = (1.0 - entry.tokens) * per_token;
        Err(Refused::Rate(wait.ceil().max(1.0) as u32))
    }

    /// Clients tracked now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.borrow().len()
    }
}

/// Bucket size: the rate's one token plus the burst.
fn capacity(limits: &ClientLimits) -> f64 {
    1.0 + f64::from(limits.burst)
}

/// The entry of `key`, made when missing (None when the table is full of
/// clients with open connections: such a client is not limited).
fn entry<'m>(
    map: &'m mut HashMap<ClientKey, Entry>,
    key: ClientKey,
    limits: &ClientLimits,
) -> Option<&'m mut Entry> {
    if !map.contains_key(&key) && map.len() >= MAX_CLIENTS {
        make_room(map, limits);
        if map.len() >= MAX_CLIENTS {
            return None;
        }
    }
    Some(map.entry(key).or_insert_with(|| Entry {
        connections: 0,
        tokens: capacity(limits),
        at: Instant::now(),
    }))
}

fn make_room(map: &mut HashMap<ClientKey, Entry>, limits: &ClientLimits) {
    let now = Instant::now();
    let full_after = limits.rate.map_or(Duration::ZERO, |r| {
        r.per.mul_f64(capacity(limits) / f64::from(r.count))
    });
    map.retain(|_, e| e.connections > 0 || now.saturating_duration_since(e.at) < full_after);
    if map.len() > MAX_CLIENTS - MAX_CLIENTS / 4 {
        map.retain(|_, e| e.connections > 0);
    }
}

/// A counted connection; dropping it uncounts it.
#[derive(Debug)]
pub(crate) struct ConnSlot {
    clients: Rc<Clients>,
    key: ClientKey,
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        let mut map = self.clients.map.borrow_mut();
        if let Some(e) = map.get_mut(&self.key) {
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
    fn a_client_over_its_burst_is_told_when_to_retry() {
        let clients = Clients::default();
        let l = limits(1, 2);
        let key = ClientKey::of("192.0.2.1".parse().unwrap(), 64);
        for _ in 0..3 {
            assert_eq!(clients.request(key, &l), Ok(()));
        }
        match clients.request(key, &l) {
            Err(Refused::Rate(s)) => assert!(s > 3000, "{s}"),
            other => panic!("{other:?}"),
        }
        let other = ClientKey::of("192.0.2.2".parse().unwrap(), 64);
        assert_eq!(clients.request(other, &l), Ok(()));
    }

    #[test]
    fn connections_are_counted_until_dropped() {
        let clients = Rc::new(Clients::default());
        let l = limits(1, 0);
        let key = ClientKey::of("192.0.2.1".parse().unwrap(), 64);
        let a = clients.connect(key, &l).unwrap();
        let _b = clients.connect(key, &l).unwrap();
        assert_eq!(clients.connect(key, &l).unwrap_err(), Refused::Connections);
        drop(a);
        assert!(clients.connect(key, &l).is_ok());
    }

    #[test]
    fn cycling_addresses_cannot_grow_the_table() {
        let clients = Clients::default();
        let l = limits(1, 0);
        for i in 0..(MAX_CLIENTS as u32 + 1000) {
            let key = ClientKey::of(IpAddr::from(i.to_be_bytes()), 64);
            let _ = clients.request(key, &l);
        }
        assert!(clients.len() <= MAX_CLIENTS, "{}", clients.len());
    }
}
