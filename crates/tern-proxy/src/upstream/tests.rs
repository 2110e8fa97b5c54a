//! `Backends::get` against real loopback listeners: retries, passive
//! ejection, `AllDown`, in-flight counting and health-check state.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;

use super::{AdminState, Backends, ConnectError, Tries, UpstreamShared};
use crate::config::{BackendAddr, Balance, UpstreamConfig};

const CONNECT: Duration = Duration::from_secs(2);

/// An address on which nothing listens (connecting is refused).
async fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    listener.local_addr().expect("addr")
}

async fn listening() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    (listener, addr)
}

fn group(servers: Vec<SocketAddr>, max_fails: u32, fail_timeout: Duration) -> Arc<UpstreamShared> {
    let mut config = UpstreamConfig::simple("test".into(), servers);
    config.passive.max_fails = max_fails;
    config.passive.fail_timeout = fail_timeout;
    UpstreamShared::new(config)
}

#[tokio::test]
async fn refused_server_is_retried_on_the_next_and_then_ejected() {
    let dead = closed_port().await;
    let (_live_listener, live) = listening().await;
    let shared = group(vec![dead, live], 2, Duration::from_secs(60));
    let backends = Backends::new(shared.clone(), 4);
    for _ in 0..6 {
        let conn = backends
            .get(&mut Tries::default(), CONNECT)
            .await
            .expect("a live server");
        assert_eq!(conn.addr, live.into());
    }
    assert_eq!(
        shared.health_snapshot(),
        vec![(dead.into(), false), (live.into(), true)],
        "two refusals in a row eject the dead server"
    );
}

#[tokio::test]
async fn every_server_refusing_gives_the_last_connect_error() {
    let shared = group(
        vec![closed_port().await, closed_port().await],
        5,
        Duration::from_secs(60),
    );
    let backends = Backends::new(shared, 4);
    let result = backends.get(&mut Tries::default(), CONNECT).await;
    assert!(matches!(result, Err(ConnectError::Io(..))), "{result:?}");
}

#[tokio::test]
async fn no_live_server_is_all_down_at_once() {
    let shared = group(vec![closed_port().await], 1, Duration::from_secs(60));
    let backends = Backends::new(shared, 4);
    assert!(matches!(
        backends.get(&mut Tries::default(), CONNECT).await,
        Err(ConnectError::Io(..))
    ));
    // "At once" in tokio's paused clock, not the machine's: the paused
    // clock moves only when a timer is awaited (auto-advance), so any wait
    // (the 2 s connect timeout) would show, and a busy machine would not.
    tokio::time::pause();
    let started = tokio::time::Instant::now();
    let result = backends.get(&mut Tries::default(), CONNECT).await;
    assert!(
        matches!(result, Err(ConnectError::AllDown(ref n)) if n == "test"),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(50));
}

#[tokio::test]
async fn ejection_ends_after_fail_timeout_and_a_success_resets_it() {
    let dead = closed_port().await;
    let shared = group(vec![dead], 1, Duration::from_millis(100));
    let backends = Backends::new(shared.clone(), 4);
    assert!(backends.get(&mut Tries::default(), CONNECT).await.is_err());
    assert_eq!(shared.health_snapshot(), vec![(dead.into(), false)]);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(shared.health_snapshot(), vec![(dead.into(), true)]);
    let _listener = TcpListener::bind(dead).await.expect("rebind the port");
    let conn = backends
        .get(&mut Tries::default(), CONNECT)
        .await
        .expect("server is back");
    assert_eq!(conn.addr, dead.into());
}

#[tokio::test]
async fn failures_below_max_fails_keep_the_server() {
    let dead = closed_port().await;
    let shared = group(vec![dead], 3, Duration::from_secs(60));
    let backends = Backends::new(shared.clone(), 4);
    assert!(backends.get(&mut Tries::default(), CONNECT).await.is_err());
    assert!(backends.get(&mut Tries::default(), CONNECT).await.is_err());
    assert_eq!(shared.health_snapshot(), vec![(dead.into(), true)]);
    assert!(backends.get(&mut Tries::default(), CONNECT).await.is_err());
    assert_eq!(shared.health_snapshot(), vec![(dead.into(), false)]);
}

#[tokio::test]
async fn connections_count_in_flight_until_returned() {
    let (_a, a) = listening().await;
    let (_b, b) = listening().await;
    let mut config = UpstreamConfig::simple("lc".into(), vec![a, b]);
    config.balance = Balance::LeastConn;
    let shared = UpstreamShared::new(config);
    let backends = Backends::new(shared.clone(), 4);
    let first = backends
        .get(&mut Tries::default(), CONNECT)
        .await
        .expect("first");
    let second = backends
        .get(&mut Tries::default(), CONNECT)
        .await
        .expect("second");
    assert_ne!(first.addr, second.addr, "least_conn spreads two requests");
    let in_flight =
        |s: &UpstreamShared| -> usize { s.servers().servers.iter().map(|s| s.in_flight()).sum() };
    assert_eq!(in_flight(&shared), 2);
    // Hold the first; returned or dropped connections stop counting.
    let busy = first.addr;
    backends.put(second);
    for _ in 0..3 {
        let conn = backends
            .get(&mut Tries::default(), CONNECT)
            .await
            .expect("next");
        assert_ne!(conn.addr, busy, "the busy server is avoided");
        drop(conn);
    }
    drop(first);
    assert_eq!(in_flight(&shared), 0);
}

#[tokio::test]
async fn pooled_connection_is_reused() {
    let (_l, addr) = listening().await;
    let backends = Backends::new(group(vec![addr], 3, Duration::from_secs(10)), 4);
    let conn = backends
        .get(&mut Tries::default(), CONNECT)
        .await
        .expect("connect");
    assert!(!conn.reused);
    backends.put(conn);
    let again = backends
        .get(&mut Tries::default(), CONNECT)
        .await
        .expect("reuse");
    assert!(again.reused);
}

#[tokio::test]
async fn connect_refuses_an_address_outside_the_group() {
    let (_l, addr) = listening().await;
    let (_o, other) = listening().await;
    let backends = Backends::new(group(vec![addr], 3, Duration::from_secs(10)), 4);
    assert!(backends.connect(other.into(), CONNECT).await.is_err());
    assert!(backends.connect(addr.into(), CONNECT).await.is_ok());
}

#[test]
fn reload_inherits_health_by_address() {
    let a: SocketAddr = "127.0.0.1:1".parse().expect("literal");
    let b: SocketAddr = "127.0.0.1:2".parse().expect("literal");
    let c: SocketAddr = "127.0.0.1:3".parse().expect("literal");
    let old = group(vec![a, b], 1, Duration::from_secs(60));
    let servers = old.servers();
    servers.servers[0].set_up(false);
    servers.servers[1].connect_failed(old.config.passive, "test", &"refused");
    let new = group(vec![b, c, a], 1, Duration::from_secs(60));
    new.inherit_health(&old);
    assert_eq!(
        new.health_snapshot(),
        vec![(b.into(), false), (c.into(), true), (a.into(), false)]
    );
}

#[tokio::test]
async fn health_checks_end_when_the_generation_retires() {
    let (_l, addr) = listening().await;
    let mut config = UpstreamConfig::simple("hc".into(), vec![addr]);
    config.health = Some(crate::config::HealthCheck {
        path: "/".into(),
        grpc_service: None,
        interval: Duration::from_millis(50),
        timeout: Duration::from_millis(50),
        rise: 1,
        fall: 1,
    });
    let shared = UpstreamShared::new(config);
    let (retire, retired) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(shared.clone().run_health_checks(retired));
    // The listener never answers: one failed check marks it down.
    let deadline = Instant::now() + Duration::from_secs(3);
    while shared.health_snapshot()[0].1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(shared.health_snapshot(), vec![(addr.into(), false)]);
    retire.send(true).expect("task listens");
    tokio::time::timeout(Duration::from_secs(1), task)
        .await
        .expect("run_health_checks returns after retirement")
        .expect("no panic");
}

#[tokio::test]
async fn a_changed_set_is_followed_and_keeps_what_stays() {
    let (_a, a) = listening().await;
    let (_b, b) = listening().await;
    let (_c, c) = listening().await;
    let shared = group(vec![a], 3, Duration::from_secs(10));
    let (a, b, c) = (
        BackendAddr::from(a),
        BackendAddr::from(b),
        BackendAddr::from(c),
    );
    let backends = Backends::new(shared.clone(), 4);
    let on_a = backends
        .get(&mut Tries::default(), CONNECT)
        .await
        .expect("a");
    assert_eq!(on_a.addr, a);
    let kept = shared.servers().servers[0].clone();

    assert_eq!(shared.set_addresses(0, &[a, b]), (vec![b], vec![]));
    assert_eq!(shared.servers().generation, 1);
    assert!(
        Arc::ptr_eq(&shared.servers().servers[0], &kept),
        "a keeps its state"
    );
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(
            backends
                .get(&mut Tries::default(), CONNECT)
                .await
                .expect("a or b")
                .addr,
        );
    }
    assert!(seen.contains(&a) && seen.contains(&b), "{seen:?}");

    // a leaves while a request holds a connection to it: the request
    // keeps its server's count, and the connection is closed on return.
    assert_eq!(shared.set_addresses(0, &[b, c]), (vec![c], vec![a]));
    assert_eq!(kept.in_flight(), 1);
    for _ in 0..4 {
        assert_ne!(
            backends
                .get(&mut Tries::default(), CONNECT)
                .await
                .expect("b or c")
                .addr,
            a
        );
    }
    backends.put(on_a);
    assert_eq!(kept.in_flight(), 0);
    assert_eq!(
        shared.set_addresses(0, &[b, c]),
        (vec![], vec![]),
        "no change, no new generation"
    );
    assert_eq!(shared.servers().generation, 2);
}

#[tokio::test]
async fn pooled_connections_follow_their_server_to_its_new_place() {
    let (_a, a) = listening().await;
    let (_b, b) = listening().await;
    let shared = group(vec![a], 3, Duration::from_secs(10));
    let (a, b) = (BackendAddr::from(a), BackendAddr::from(b));
    let backends = Backends::new(shared.clone(), 4);
    let conn = backends
        .get(&mut Tries::default(), CONNECT)
        .await
        .expect("a");
    let local = conn.stream.local_addr().expect("local");
    backends.put(conn);
    // b now comes first; a's idle connection moves with a.
    shared.set_addresses(0, &[b, a]);
    let mut reused = None;
    for _ in 0..2 {
        let conn = backends
            .get(&mut Tries::default(), CONNECT)
            .await
            .expect("a or b");
        if conn.addr == a {
            reused = Some((conn.reused, conn.stream.local_addr().expect("local")));
        }
    }
    assert_eq!(reused, Some((true, local)));
}

#[tokio::test]
async fn drained_and_disabled_servers_get_no_new_requests() {
    let (_a, a) = listening().await;
    let (_b, b) = listening().await;
    let shared = group(vec![a, b], 3, Duration::from_secs(10));
    let (a, b) = (BackendAddr::from(a), BackendAddr::from(b));
    let backends = Backends::new(shared.clone(), 4);
    let server_a = shared.servers().find(a).cloned().expect("a");
    for state in [AdminState::Draining, AdminState::Disabled] {
        server_a.set_admin(state);
        for _ in 0..4 {
            assert_eq!(
                backends
                    .get(&mut Tries::default(), CONNECT)
                    .await
                    .expect("b")
                    .addr,
                b
            );
        }
        assert_eq!(shared.health_snapshot(), vec![(a, false), (b, true)]);
    }
    assert_eq!(
        server_a.set_admin(AdminState::Enabled),
        AdminState::Disabled
    );
    let mut picks = Vec::new();
    for _ in 0..2 {
        picks.push(
            backends
                .get(&mut Tries::default(), CONNECT)
                .await
                .expect("a or b")
                .addr,
        );
    }
    assert!(picks.contains(&a), "{picks:?}");
}

#[tokio::test]
async fn a_lone_server_is_picked_while_eligible_and_counted_in_flight() {
    let (_l, addr) = listening().await;
    for balance in [Balance::RoundRobin, Balance::LeastConn] {
        let mut config = UpstreamConfig::simple("one".into(), vec![addr]);
        config.balance = balance;
        let shared = UpstreamShared::new(config);
        let backends = Backends::new(shared.clone(), 4);
        let server = shared.servers().find(addr.into()).cloned().expect("server");
        let conn = backends
            .get(&mut Tries::default(), CONNECT)
            .await
            .expect("the lone server");
        assert_eq!(conn.addr, addr.into());
        assert_eq!(server.in_flight(), 1, "{balance:?}");
        drop(conn);
        assert_eq!(server.in_flight(), 0, "{balance:?}");
        server.set_admin(AdminState::Draining);
        let drained = backends.get(&mut Tries::default(), CONNECT).await;
        assert!(
            matches!(drained, Err(ConnectError::AllDown(_))),
            "{balance:?}: {drained:?}"
        );
        server.set_admin(AdminState::Enabled);
        let mut tried = Tries::default();
        tried.tried.push(addr.into());
        let again = backends.get(&mut tried, CONNECT).await;
        assert!(
            matches!(again, Err(ConnectError::AllDown(_))),
            "{balance:?}: a server already tried is not picked again: {again:?}"
        );
        assert!(backends.get(&mut Tries::default(), CONNECT).await.is_ok());
    }
}
