//! `Backends::get` against real loopback listeners: retries, passive
//! ejection, `AllDown`, in-flight counting and health-check state.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;

use super::{Backends, ConnectError, Tries, UpstreamShared};
use crate::config::{Balance, UpstreamConfig};

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
        assert_eq!(conn.addr, live);
    }
    assert_eq!(
        shared.health_snapshot(),
        vec![(dead, false), (live, true)],
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
    assert_eq!(shared.health_snapshot(), vec![(dead, false)]);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(shared.health_snapshot(), vec![(dead, true)]);
    let _listener = TcpListener::bind(dead).await.expect("rebind the port");
    let conn = backends
        .get(&mut Tries::default(), CONNECT)
        .await
        .expect("server is back");
    assert_eq!(conn.addr, dead);
}

#[tokio::test]
async fn failures_below_max_fails_keep_the_server() {
    let dead = closed_port().await;
    let shared = group(vec![dead], 3, Duration::from_secs(60));
    let backends = Backends::new(shared.clone(), 4);
    assert!(backends.get(&mut Tries::default(), CONNECT).await.is_err());
    assert!(backends.get(&mut Tries::default(), CONNECT).await.is_err());
    assert_eq!(shared.health_snapshot(), vec![(dead, true)]);
    assert!(backends.get(&mut Tries::default(), CONNECT).await.is_err());
    assert_eq!(shared.health_snapshot(), vec![(dead, false)]);
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
    assert_eq!(shared.in_flight(0) + shared.in_flight(1), 2);
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
    assert_eq!(shared.in_flight(0) + shared.in_flight(1), 0);
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
    assert!(backends.connect(other, CONNECT).await.is_err());
    assert!(backends.connect(addr, CONNECT).await.is_ok());
}

#[test]
fn reload_inherits_health_by_address() {
    let a: SocketAddr = "127.0.0.1:1".parse().expect("literal");
    let b: SocketAddr = "127.0.0.1:2".parse().expect("literal");
    let c: SocketAddr = "127.0.0.1:3".parse().expect("literal");
    let old = group(vec![a, b], 1, Duration::from_secs(60));
    old.set_up(0, false);
    old.connect_failed(1, &"refused");
    let new = group(vec![b, c, a], 1, Duration::from_secs(60));
    new.inherit_health(&old);
    assert_eq!(
        new.health_snapshot(),
        vec![(b, false), (c, true), (a, false)]
    );
}

#[tokio::test]
async fn health_checks_end_when_the_generation_retires() {
    let (_l, addr) = listening().await;
    let mut config = UpstreamConfig::simple("hc".into(), vec![addr]);
    config.health = Some(crate::config::HealthCheck {
        path: "/".into(),
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
    assert_eq!(shared.health_snapshot(), vec![(addr, false)]);
    retire.send(true).expect("task listens");
    tokio::time::timeout(Duration::from_secs(1), task)
        .await
        .expect("run_health_checks returns after retirement")
        .expect("no panic");
}
