//! Backends given by name, against a real DNS server the test changes on
//! the fly (`pebble-challtestsrv`, its records have TTL 0 so tern asks
//! again after `resolver_min_ttl`): every address is a server, a moved
//! name is followed under load without a failed request, a resolver
//! outage keeps the last addresses.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tern_testsupport::backend::Backend;
use tern_testsupport::challdns::ChallDns;
use tern_testsupport::tern::{free_addr_v6, wait_until, Served};

use super::{echo_answers, start_with_admin};

/// How long a test waits for tern to act on a DNS change: many times
/// `resolver_max_ttl` below, for a loaded machine.
const FOLLOW: Duration = Duration::from_secs(20);

/// tern whose default group is `servers = ["app.test:PORT"]`, resolved by
/// `dns`, with the admin listener on.
fn start(dns: &ChallDns, port: u16) -> Served {
    start_with_admin(
        &format!(
            "resolver = \"{}\"\nresolver_min_ttl = \"100ms\"\nresolver_max_ttl = \"500ms\"",
            dns.dns
        ),
        &format!("[[upstream]]\nname = \"app\"\nservers = [\"app.test:{port}\"]"),
    )
}

/// A backend on `ip` at `port` (the port of one on 127.0.0.1, so that one
/// name with one port can point at either).
fn backend_at(ip: &str, port: u16) -> Backend {
    Backend::start_on(SocketAddr::new(ip.parse().expect("literal"), port))
}

#[test]
fn every_address_of_a_name_becomes_a_server() {
    let Some(dns) = ChallDns::start() else { return };
    let a = Backend::start();
    let port = a.addr().port();
    let b = backend_at("127.0.0.2", port);
    // An AAAA record too, where this machine has IPv6 loopback.
    let v6 = free_addr_v6().map(|_| backend_at("::1", port));
    dns.set_a("app.test", &["127.0.0.1", "127.0.0.2"]);
    if v6.is_some() {
        dns.set_aaaa("app.test", &["::1"]);
    }
    let front = start(&dns, port);
    let answers = echo_answers(&front, 30, 3);
    let mut expected = vec![a.addr().to_string(), b.addr().to_string()];
    expected.extend(v6.as_ref().map(|v6| v6.addr().to_string()));
    for backend in &expected {
        assert!(
            answers.get(backend).copied().unwrap_or(0) >= 5,
            "{backend} is a server of the group: {answers:?}\n{}",
            front.tern.stderr_text()
        );
    }
    assert_eq!(answers.len(), expected.len(), "{answers:?}");
}

#[test]
fn a_moved_name_is_followed_under_load_without_a_failed_request() {
    let Some(dns) = ChallDns::start() else { return };
    let old = Backend::start();
    let port = old.addr().port();
    let new = backend_at("127.0.0.2", port);
    dns.set_a("app.test", &["127.0.0.1"]);
    let front = start(&dns, port);

    let stop = AtomicBool::new(false);
    let (ok, failed) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let followed = std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let mut conn = front.connect();
                    for _ in 0..20 {
                        match conn.get("localhost", "/echo") {
                            Ok(r) if r.status == 200 => ok.fetch_add(1, Ordering::Relaxed),
                            _ => failed.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                }
            });
        }
        wait_until("load on the old address", FOLLOW, || old.requests() >= 50);
        let moved = Instant::now();
        dns.set_a("app.test", &["127.0.0.2"]);
        wait_until("the new address taking requests", FOLLOW, || {
            new.requests() >= 50
        });
        let followed = moved.elapsed();
        // Once followed, the old address gets nothing more.
        let old_total = old.requests();
        let target = new.requests() + 200;
        wait_until("more load on the new address", FOLLOW, || {
            new.requests() >= target
        });
        assert_eq!(
            old.requests(),
            old_total,
            "the old address still gets requests"
        );
        stop.store(true, Ordering::Relaxed);
        followed
    });
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "failed requests of {}\n{}",
        ok.load(Ordering::Relaxed),
        front.tern.stderr_text()
    );
    front.wait_log(
        &["app.test", "resolved to 127.0.0.2:", "removed 127.0.0.1:"],
        FOLLOW,
    );
    eprintln!(
        "followed the move in {followed:?} (resolver_max_ttl 500ms), {} requests, 0 failed",
        ok.load(Ordering::Relaxed)
    );
}

#[test]
fn a_resolver_outage_keeps_the_last_addresses() {
    let Some(mut dns) = ChallDns::start() else {
        return;
    };
    let backend = Backend::start();
    dns.set_a("app.test", &["127.0.0.1"]);
    let front = start(&dns, backend.addr().port());
    assert_eq!(front.get("/echo").status, 200);
    dns.stop();
    let errors = |front: &Served| {
        front.scrape().sum(
            "tern_dns_resolutions_total",
            &[("name", "app.test"), ("result", "error")],
        )
    };
    wait_until("a failed resolution", FOLLOW, || errors(&front) >= 2.0);
    front.wait_log(
        &[
            "resolving backend app.test:",
            "keeping its last addresses (127.0.0.1:",
        ],
        FOLLOW,
    );
    let before = backend.requests();
    for _ in 0..10 {
        assert_eq!(
            front.get("/echo").status,
            200,
            "{}",
            front.tern.stderr_text()
        );
    }
    assert_eq!(backend.requests(), before + 10);
}
