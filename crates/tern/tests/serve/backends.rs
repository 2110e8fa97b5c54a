//! Backend failures map to 502/504 without hurting later requests; several
//! backends share the load.

use std::time::{Duration, Instant};

use tern_testsupport::backend::Backend;
use tern_testsupport::client;
use tern_testsupport::tern::{free_addr, tcp_sockets, wait_until, Served, TcpSocket};

use crate::LOG_WAIT;

#[test]
fn refused_backend_gives_502_and_next_request_is_served() {
    // Nothing listens here yet: connecting is refused.
    let backend_addr = free_addr();
    let served = Served::builder()
        .cert_names(&["localhost"])
        .backend_addr(backend_addr)
        .start();

    let response = served.get("/echo");
    assert_eq!(response.status, 502, "{}", response.text());

    let backend = Backend::start_on(backend_addr);
    let response = served.get("/echo");
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(backend.requests(), 1);
}

#[test]
fn backend_slower_than_response_timeout_gives_504() {
    let served = Served::start(&["--backend-response-timeout", "1s"]);
    let started = Instant::now();
    let response = served.get("/slow/4000");
    assert_eq!(response.status, 504, "{}", response.text());
    assert!(
        started.elapsed() < Duration::from_millis(3500),
        "504 took {:?}, the timeout is 1 s",
        started.elapsed()
    );
    assert_eq!(served.get("/slow/10").status, 200);
    // The log says whose fault the 504 was.
    let lines = served
        .tern
        .wait_stdout_lines("path=/slow/4000", 1, LOG_WAIT)
        .unwrap_or_else(|stdout| panic!("no access-log line; stdout:\n{stdout}"));
    assert!(lines[0].contains(" status=504 "), "{}", lines[0]);
    assert!(lines[0].contains(" error=backend:timeout"), "{}", lines[0]);
    let ok = served
        .tern
        .wait_stdout_lines("path=/slow/10", 1, LOG_WAIT)
        .unwrap_or_else(|stdout| panic!("no access-log line; stdout:\n{stdout}"));
    assert!(ok[0].contains(" error=- "), "{}", ok[0]);
}

#[test]
fn backend_within_response_timeout_is_served() {
    let served = Served::start(&["--backend-response-timeout", "2s"]);
    assert_eq!(served.get("/slow/300").text(), "slow 300\n");
}

fn round_robin_answers(workers: &str, requests: usize) -> (Vec<String>, Backend, Backend) {
    let first = Backend::start();
    let second = Backend::start();
    let (a, b) = (first.addr().to_string(), second.addr().to_string());
    let served = Served::builder()
        .cert_names(&["localhost"])
        .no_backend()
        .args(&["--backend", &a, "--backend", &b, "--workers", workers])
        .start();
    let answered_by = (0..requests)
        .map(|_| {
            let response = served.get("/echo");
            response.json()["backend"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    (answered_by, first, second)
}

#[test]
fn one_worker_alternates_round_robin_over_backends() {
    let (answered_by, first, second) = round_robin_answers("1", 6);
    assert_eq!(first.requests(), 3, "answered by {answered_by:?}");
    assert_eq!(second.requests(), 3, "answered by {answered_by:?}");
    for pair in answered_by.windows(2) {
        assert_ne!(pair[0], pair[1], "not alternating: {answered_by:?}");
    }
}

#[test]
fn several_workers_use_every_backend() {
    // Round robin may be kept per worker; every backend still gets work.
    let (answered_by, first, second) = round_robin_answers("2", 8);
    assert!(first.requests() >= 2, "answered by {answered_by:?}");
    assert!(second.requests() >= 2, "answered by {answered_by:?}");
}

/// Not in the written contract, but in DESIGN.md ("a pooled backend connection").
#[test]
fn backend_connections_are_reused_across_client_connections() {
    let served = Served::start(&[]);
    for _ in 0..10 {
        assert_eq!(served.get("/bytes/10").status, 200);
    }
    assert!(
        served.backend().connections() < 10,
        "10 sequential requests opened {} backend connections",
        served.backend().connections()
    );
}

#[test]
fn backend_closing_without_response_gives_502() {
    let served = Served::start(&[]);
    let response = served.get("/drop");
    assert_eq!(response.status, 502, "{}", response.text());
    assert_eq!(served.get("/status/200").status, 200);
    let lines = served
        .tern
        .wait_stdout_lines("path=/drop", 1, LOG_WAIT)
        .unwrap_or_else(|stdout| panic!("no access-log line; stdout:\n{stdout}"));
    assert!(lines[0].contains(" error=backend:closed"), "{}", lines[0]);
}

#[test]
fn backend_connection_close_is_honoured_and_client_stays_connected() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    let response = conn.get("localhost", "/close").expect("response");
    assert_eq!(response.text(), "closing\n");
    // The client's connection is tern's, not the backend's: it stays usable.
    for i in 0..3 {
        let next = conn
            .get("localhost", &format!("/echo?after-close={i}"))
            .expect("request after the backend closed its connection");
        assert_eq!(next.status, 200, "{}", next.text());
    }
    assert!(
        served.backend().connections() >= 2,
        "tern reused a closed backend connection"
    );
}

#[test]
fn stale_pooled_backend_connection_is_not_used() {
    let backend = Backend::start();
    let backend_addr = backend.addr();
    let served = Served::builder()
        .cert_names(&["localhost"])
        .backend_addr(backend_addr)
        .start();
    let response = served.get("/echo");
    assert_eq!(response.status, 200);

    // The backend restarts: every connection tern pooled is now closed.
    drop(backend);
    let backend = Backend::start_on(backend_addr);
    // The old backend's close has reached tern: no connection to its
    // address is still established (tern's pooled one is in CLOSE_WAIT).
    wait_until(
        "the old backend connections to close",
        Duration::from_secs(5),
        || {
            !tcp_sockets()
                .iter()
                .any(|s| s.remote == backend_addr && s.state == TcpSocket::ESTABLISHED)
        },
    );
    for i in 0..3 {
        let response = served.get("/echo");
        assert_eq!(
            response.status,
            200,
            "request {i} after a backend restart: {}",
            response.text()
        );
    }
    assert!(backend.requests() >= 3);
}

#[test]
fn slow_backend_requests_run_concurrently() {
    let served = std::sync::Arc::new(Served::start(&["--workers", "1"]));
    let started = Instant::now();
    let clients: Vec<_> = (0..40)
        .map(|_| {
            let served = served.clone();
            std::thread::spawn(move || {
                client::get(
                    served.addr,
                    "localhost",
                    served.client.clone(),
                    "/slow/1000",
                )
                .map(|r| r.status)
            })
        })
        .collect();
    for client in clients {
        let status = client.join().expect("client thread");
        assert!(matches!(status, Ok(200)), "{status:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "40 one-second requests took {:?}: they were not run concurrently",
        started.elapsed()
    );
}
