//! Backend failures map to 502/504 without hurting later requests; several
//! backends share the load.

use std::time::{Duration, Instant};

use tern_testsupport::backend::Backend;
use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::client;
use tern_testsupport::tern::{free_addr, TernProcess};

use crate::{cert_args, serve_args, tern_bin, Served};

#[test]
fn refused_backend_gives_502_and_next_request_is_served() {
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["localhost"], KeyKind::EcdsaP256);
    // Nothing listens here yet: connecting is refused.
    let backend_addr = free_addr();
    let addr = free_addr();
    let mut args = serve_args(addr, &[backend_addr.to_string().as_str()]);
    args.extend(cert_args(&cert));
    let tern = TernProcess::start(tern_bin(), addr, args);
    let config = client::client_config(ca.ca_pem());

    let response = client::get(addr, "localhost", config.clone(), "/echo").expect("response");
    assert_eq!(response.status, 502, "{}", response.text());

    let backend = Backend::start_on(backend_addr);
    let response = client::get(addr, "localhost", config, "/echo")
        .unwrap_or_else(|e| panic!("after a 502: {e}\n{}", tern.stderr_text()));
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
}

#[test]
fn backend_within_response_timeout_is_served() {
    let served = Served::start(&["--backend-response-timeout", "2s"]);
    assert_eq!(served.get("/slow/300").text(), "slow 300\n");
}

#[test]
fn requests_are_spread_round_robin_over_backends() {
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["localhost"], KeyKind::EcdsaP256);
    let first = Backend::start();
    let second = Backend::start();
    let addr = free_addr();
    let mut args = serve_args(
        addr,
        &[
            first.addr().to_string().as_str(),
            second.addr().to_string().as_str(),
        ],
    );
    args.extend(cert_args(&cert));
    let _tern = TernProcess::start(tern_bin(), addr, args);
    let config = client::client_config(ca.ca_pem());
    let mut answered_by = Vec::new();
    for _ in 0..6 {
        let response = client::get(addr, "localhost", config.clone(), "/echo").expect("response");
        answered_by.push(
            response.json()["backend"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        );
    }
    assert_eq!(first.requests(), 3, "answered by {answered_by:?}");
    assert_eq!(second.requests(), 3, "answered by {answered_by:?}");
}

/// Not in the written contract, but in DESIGN.md ("a pooled backend connection").
#[test]
fn backend_connections_are_reused_across_client_connections() {
    let served = Served::start(&[]);
    for _ in 0..10 {
        assert_eq!(served.get("/bytes/10").status, 200);
    }
    assert!(
        served.backend.connections() < 10,
        "10 sequential requests opened {} backend connections",
        served.backend.connections()
    );
}

#[test]
fn backend_closing_without_response_gives_502() {
    let served = Served::start(&[]);
    let response = served.get("/drop");
    assert_eq!(response.status, 502, "{}", response.text());
    assert_eq!(served.get("/status/200").status, 200);
}
