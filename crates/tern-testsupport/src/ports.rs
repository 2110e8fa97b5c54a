//! Free ports for the servers tests start, picked where nothing else picks
//! them.
//!
//! A port probed with `bind(127.0.0.1:0)` and released comes from the
//! kernel's ephemeral range, which the kernel hands out again to every
//! `bind(…:0)` and as the source port of every outgoing connection. Between
//! the probe and the test's server binding it, a client of another test, a
//! backend or Pebble can take it, and the server exits with "address in
//! use" (seen in the ACME tests). The ports here come from below that range,
//! where the kernel assigns none, each one at most once per process (and
//! from a per-process starting point, so two test processes walk different
//! ports), and are probed free for TCP and UDP (HTTP/3 listens on the TCP
//! port's number).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// The lowest port handed out: above the ports daemons commonly listen on.
const LOWEST: u16 = 10_000;

/// How many ports this process has tried so far.
static TRIED: AtomicU32 = AtomicU32::new(0);

/// A free port on 127.0.0.1 (TCP and UDP), given to no other caller in this
/// process.
pub fn free_addr() -> SocketAddr {
    pick(IpAddr::V4(Ipv4Addr::LOCALHOST))
        .or_else(|| probed(IpAddr::V4(Ipv4Addr::LOCALHOST)))
        .expect("a free port on 127.0.0.1")
}

/// A free port on `[::1]`, or `None` when this machine has no IPv6 loopback.
pub fn free_addr_v6() -> Option<SocketAddr> {
    TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).ok()?;
    pick(IpAddr::V6(Ipv6Addr::LOCALHOST)).or_else(|| probed(IpAddr::V6(Ipv6Addr::LOCALHOST)))
}

/// The start of the ephemeral range, when `LOWEST..start` leaves room.
fn ephemeral_start() -> Option<u16> {
    static START: OnceLock<Option<u16>> = OnceLock::new();
    *START.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
        let start: u16 = text.split_whitespace().next()?.parse().ok()?;
        (start >= LOWEST + 1_000).then_some(start)
    })
}

fn pick(ip: IpAddr) -> Option<SocketAddr> {
    let span = u32::from(ephemeral_start()? - LOWEST);
    // Knuth's multiplicative hash spreads neighbouring process ids apart.
    let start = std::process::id().wrapping_mul(2_654_435_761) % span;
    for _ in 0..span {
        let n = TRIED.fetch_add(1, Ordering::Relaxed);
        let offset = u16::try_from((start + n % span) % span).ok()?;
        let addr = SocketAddr::new(ip, LOWEST + offset);
        if TcpListener::bind(addr).is_ok() && UdpSocket::bind(addr).is_ok() {
            return Some(addr);
        }
    }
    None
}

/// The kernel's pick (an ephemeral port: bound, read, released), where no
/// range below the ephemeral one is left.
fn probed(ip: IpAddr) -> Option<SocketAddr> {
    TcpListener::bind((ip, 0)).ok()?.local_addr().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_from_below_the_ephemeral_range_and_never_twice() {
        let Some(start) = ephemeral_start() else {
            return;
        };
        // Whether a port is still free after it was given depends on every
        // other process on the machine, so that is not asserted here.
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let addr = free_addr();
            assert!((LOWEST..start).contains(&addr.port()), "{addr}");
            assert!(seen.insert(addr.port()), "{addr} given twice");
        }
    }
}
