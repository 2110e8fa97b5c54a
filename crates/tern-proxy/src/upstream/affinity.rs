//! Affinity: which server a request *belongs* to, for `balance = "hash"`
//! (a consistent-hash ring of the group's servers, with bounded loads)
//! and `balance = "sticky_cookie"` (a cookie tern sets, an opaque keyed
//! hash of the server's address).
//!
//! The ring's points and the key hashes are SipHash-2-4 under a fixed
//! key: every worker, every reload and every tern instance of a fleet
//! maps a key to the same server, and a point depends only on its
//! server's address, so a server that comes or goes moves only the keys
//! it owned (about 1/n of them). The sticky cookie is SipHash-2-4 of the
//! address under a key drawn at start: a client cannot read the address
//! out of it, and a forged value names no server (it is looked up among
//! the group's own), so the request is balanced as if it had none.

use std::net::IpAddr;
use std::sync::OnceLock;

use siphasher::sip::SipHasher24;

use crate::config::{canonical, BackendAddr, HashKey};
use crate::message::{Request, RequestView};

/// Ring points per unit of weight (ketama's 160): enough that four
/// equal servers own within a few percent of a quarter each.
const POINTS_PER_WEIGHT: usize = 160;

/// Most points of one ring, whatever the weights (a bounded memory and
/// build time for large groups; per-weight points shrink to fit).
const MAX_POINTS: usize = 1 << 16;

/// Fixed SipHash key of the ring: the same in every tern.
const RING_KEY: (u64, u64) = (0x7465_726e_2d72_696e, 0x672d_6166_6669_6e74);

/// Hash of a request key on the ring.
pub(crate) fn key_hash(bytes: &[u8]) -> u64 {
    SipHasher24::new_with_keys(RING_KEY.0, RING_KEY.1).hash(bytes)
}

/// A consistent-hash ring: points sorted by hash, each naming a server.
#[derive(Debug, Default)]
pub(crate) struct Ring {
    points: Vec<(u64, u32)>,
}

impl Ring {
    /// The ring of `servers` (address, weight), indexed as given.
    pub(crate) fn new(servers: &[(BackendAddr, u32)]) -> Ring {
        let total: usize = servers.iter().map(|&(_, w)| w.max(1) as usize).sum();
        let per_weight = (MAX_POINTS / total.max(1)).clamp(1, POINTS_PER_WEIGHT);
        let mut points = Vec::with_capacity(total * per_weight);
        let mut name = String::with_capacity(64);
        for (i, &(addr, weight)) in servers.iter().enumerate() {
            for n in 0..weight.max(1) as usize * per_weight {
                name.clear();
                use std::fmt::Write as _;
                let _ = write!(name, "{addr}-{n}");
                points.push((key_hash(name.as_bytes()), i as u32));
            }
        }
        points.sort_unstable();
        Ring { points }
    }

    /// Server indices met walking clockwise from `hash`, one per point,
    /// once around the ring.
    pub(crate) fn walk(&self, hash: u64) -> impl Iterator<Item = usize> + '_ {
        let start = self.points.partition_point(|&(p, _)| p < hash);
        let (after, before) = self.points.split_at(start);
        before.iter().chain(after).map(|&(_, s)| s as usize)
    }
}

/// The server of `hash`: the first one clockwise that is `eligible` and,
/// with bounded loads (`factor` percent), holds fewer requests than its
/// weighted share of the average allows; if every eligible server is
/// full (counts move under our feet), the first eligible one.
pub(crate) fn pick(
    ring: &Ring,
    hash: u64,
    weights: &[u32],
    factor: Option<u32>,
    in_flight: impl Fn(usize) -> usize,
    eligible: impl Fn(usize) -> bool,
) -> Option<usize> {
    let bound = factor.map(|f| {
        let (mut load, mut weight) = (0u128, 0u128);
        for i in (0..weights.len()).filter(|&i| eligible(i)) {
            load += in_flight(i) as u128;
            weight += u128::from(weights[i]);
        }
        // Mirrokni et al.: capacity ceil(c * (m + 1) / n), weighted; the
        // new request counts in m + 1.
        (u128::from(f), load + 1, weight.max(1))
    });
    let fits = |i: usize| match bound {
        None => true,
        Some((f, load, weight)) => {
            (in_flight(i) as u128) * 100 * weight < f * load * u128::from(weights[i])
        }
    };
    let mut first = None;
    for i in ring.walk(hash) {
        if !eligible(i) {
            continue;
        }
        if fits(i) {
            return Some(i);
        }
        first.get_or_insert(i);
    }
    first
}

/// What picks the server of one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Target {
    /// The group's policy alone.
    #[default]
    Any,
    /// The owner of this hash on the ring.
    Hash(u64),
    /// The server a sticky cookie names (its value, when the request had one).
    Sticky(Option<u64>),
}

/// The target of `req` from `client` under a hash key.
pub(crate) fn hash_target(key: &HashKey, req: Option<&Request<'_>>, client: IpAddr) -> Target {
    let hashed = match (key, req) {
        (HashKey::ClientIp, _) => match canonical(client) {
            IpAddr::V4(v4) => key_hash(&v4.octets()),
            IpAddr::V6(v6) => key_hash(&v6.octets()),
        },
        (HashKey::Header(name), Some(req)) => match header(req, name) {
            Some(v) => key_hash(v),
            None => return Target::Any,
        },
        (HashKey::Cookie(name), Some(req)) => match request_cookie(req, name) {
            Some(v) => key_hash(v),
            None => return Target::Any,
        },
        // TCP mode has no request to read a header or cookie from.
        (_, None) => return Target::Any,
    };
    Target::Hash(hashed)
}

/// The target of `req` under a sticky cookie called `name`.
pub(crate) fn sticky_target(name: &str, req: &Request<'_>) -> Target {
    Target::Sticky(request_cookie(req, name).and_then(parse_cookie_value))
}

/// The first value of request field `name` (lowercase).
fn header<'r>(req: &Request<'r>, name: &str) -> Option<&'r [u8]> {
    match req.head {
        RequestView::H1(head) => head.fields.get(name),
        RequestView::H2(parts) => parts.headers.get(name).map(|v| v.as_bytes()),
    }
}

/// The value of cookie `name` in the request's `Cookie` fields (HTTP/2
/// and HTTP/3 may split them into several).
fn request_cookie<'r>(req: &Request<'r>, name: &str) -> Option<&'r [u8]> {
    match req.head {
        RequestView::H1(head) => head
            .fields
            .get_all("cookie")
            .find_map(|field| cookie(field, name)),
        RequestView::H2(parts) => parts
            .headers
            .get_all(http::header::COOKIE)
            .iter()
            .find_map(|v| cookie(v.as_bytes(), name)),
    }
}

/// The value of cookie `name` in one `Cookie` field (`a=1; b=2`, RFC 6265
/// section 4.2.1; surrounding double quotes removed). Untrusted input:
/// never panics, whatever the bytes.
pub fn cookie<'f>(field: &'f [u8], name: &str) -> Option<&'f [u8]> {
    field.split(|&b| b == b';').find_map(|pair| {
        let pair = tern_http::head::trim_ows(pair);
        let eq = pair.iter().position(|&b| b == b'=')?;
        let (n, v) = (&pair[..eq], &pair[eq + 1..]);
        if tern_http::head::trim_ows(n) != name.as_bytes() {
            return None;
        }
        let v = tern_http::head::trim_ows(v);
        Some(
            v.strip_prefix(b"\"")
                .and_then(|v| v.strip_suffix(b"\""))
                .unwrap_or(v),
        )
    })
}

/// The process's sticky-cookie key: drawn once, kept across reloads (so
/// cookies survive them), never written anywhere.
fn sticky_key() -> (u64, u64) {
    static KEY: OnceLock<(u64, u64)> = OnceLock::new();
    *KEY.get_or_init(rand::random)
}

/// The sticky-cookie value naming `addr`.
pub(crate) fn cookie_value(addr: BackendAddr) -> u64 {
    let (k0, k1) = sticky_key();
    SipHasher24::new_with_keys(k0, k1).hash(addr.to_string().as_bytes())
}

/// The `Set-Cookie` value naming `addr`: a session cookie for the whole
/// site, never sent in clear, never read by scripts.
pub(crate) fn set_cookie(name: &str, addr: BackendAddr) -> Box<str> {
    format!(
        "{name}={:016x}; Path=/; Secure; HttpOnly; SameSite=Lax",
        cookie_value(addr)
    )
    .into()
}

/// A sticky-cookie value as tern writes it (16 hex digits).
fn parse_cookie_value(v: &[u8]) -> Option<u64> {
    if v.len() != 16 {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(v).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn addrs(n: u16) -> Vec<(BackendAddr, u32)> {
        (0..n)
            .map(|i| (SocketAddr::from(([10, 0, 0, 1], 8000 + i)).into(), 1))
            .collect()
    }

    /// The server of each of `keys` keys on `servers`.
    fn owners(servers: &[(BackendAddr, u32)], keys: usize) -> Vec<BackendAddr> {
        let ring = Ring::new(servers);
        let weights: Vec<u32> = servers.iter().map(|s| s.1).collect();
        (0..keys)
            .map(|k| {
                let h = key_hash(format!("user-{k}").as_bytes());
                let i = pick(&ring, h, &weights, None, |_| 0, |_| true).expect("a server");
                servers[i].0
            })
            .collect()
    }

    #[test]
    fn removing_one_of_four_moves_only_its_keys() {
        let four = addrs(4);
        let before = owners(&four, 10_000);
        let three: Vec<_> = four[..3].to_vec();
        let after = owners(&three, 10_000);
        let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        // Exactly the keys the removed server owned move.
        let owned = before.iter().filter(|&&a| a == four[3].0).count();
        assert_eq!(moved, owned);
        assert!((1_500..=3_500).contains(&owned), "{owned} of 10000");
    }

    #[test]
    fn equal_servers_own_about_equal_shares() {
        let four = addrs(4);
        let owners = owners(&four, 20_000);
        for (addr, _) in &four {
            let n = owners.iter().filter(|&a| a == addr).count();
            assert!((3_500..=6_500).contains(&n), "{addr}: {n} of 20000");
        }
    }

    #[test]
    fn an_ineligible_server_passes_its_keys_on_and_takes_them_back() {
        let four = addrs(4);
        let ring = Ring::new(&four);
        let w = [1, 1, 1, 1];
        let h = key_hash(b"k");
        let home = pick(&ring, h, &w, None, |_| 0, |_| true).expect("home");
        let away = pick(&ring, h, &w, None, |_| 0, |i| i != home).expect("away");
        assert_ne!(home, away);
        assert_eq!(pick(&ring, h, &w, None, |_| 0, |_| true), Some(home));
        assert_eq!(pick(&ring, h, &w, None, |_| 0, |_| false), None);
    }

    #[test]
    fn bounded_loads_send_a_hot_key_elsewhere() {
        let four = addrs(4);
        let ring = Ring::new(&four);
        let w = [1, 1, 1, 1];
        let h = key_hash(b"hot");
        let home = pick(&ring, h, &w, Some(125), |_| 0, |_| true).expect("home");
        // The home server holds 4 of 4 requests in flight: 4 >= 1.25 * 5 / 4.
        let load = |i: usize| if i == home { 4 } else { 0 };
        let next = pick(&ring, h, &w, Some(125), load, |_| true).expect("next");
        assert_ne!(next, home);
        // Without a bound the key stays home.
        assert_eq!(pick(&ring, h, &w, None, load, |_| true), Some(home));
    }

    #[test]
    fn cookies_are_found_among_others_and_odd_bytes_do_not_panic() {
        assert_eq!(
            cookie(b"a=1; session=xyz; b=2", "session"),
            Some(&b"xyz"[..])
        );
        assert_eq!(cookie(b"session=\"q\"", "session"), Some(&b"q"[..]));
        assert_eq!(cookie(b"sessions=1;session", "session"), None);
        assert_eq!(cookie(b";;=;\xff=\x00", "session"), None);
        assert_eq!(cookie(b"", ""), None);
    }

    #[test]
    fn sticky_values_are_opaque_and_parse_back() {
        let a = SocketAddr::from(([10, 0, 0, 1], 80)).into();
        let set = set_cookie("srv", a);
        assert!(!set.contains("10.0.0.1"), "{set}");
        let value = set
            .strip_prefix("srv=")
            .and_then(|v| v.split(';').next())
            .expect("value");
        assert_eq!(parse_cookie_value(value.as_bytes()), Some(cookie_value(a)));
        assert_eq!(parse_cookie_value(b"10.0.0.1:80"), None);
    }
}
