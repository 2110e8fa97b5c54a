//! Request hygiene beyond forwarding: hop-by-hop fields stay on their hop,
//! and heads that RFC 9112 says a server must reject are rejected.
//! (DESIGN.md asks for hop-by-hop removal; the Host rules come from RFC 9112
//! section 3.2, not from the written serve contract.)

use std::time::Duration;

use tern_testsupport::backend::echoed_header;
use tern_testsupport::tern::Served;

#[test]
fn hop_by_hop_headers_are_not_forwarded() {
    let served = Served::start(&[]);
    let (response, _conn) = served.raw(
        b"GET /echo HTTP/1.1\r\nHost: localhost\r\n\
          Connection: keep-alive, X-Secret-Hop\r\nX-Secret-Hop: 1\r\n\
          Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\n\
          X-End-To-End: kept\r\n\r\n",
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let echo = response.json();
    for name in ["x-secret-hop", "keep-alive", "proxy-connection"] {
        assert!(
            echoed_header(&echo, name).is_empty(),
            "{name} reached the backend: {echo}"
        );
    }
    assert_eq!(echoed_header(&echo, "x-end-to-end"), ["kept"], "{echo}");
}

#[test]
fn connection_close_from_client_closes_after_response() {
    let served = Served::start(&[]);
    let (response, mut conn) =
        served.raw(b"GET /bytes/10 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert_eq!(response.status, 200);
    assert!(
        conn.closed_within(Duration::from_secs(3)),
        "connection stayed open after Connection: close"
    );
}

#[test]
fn request_without_host_is_400() {
    let served = Served::start(&[]);
    let (response, _conn) = served.raw(b"GET /echo HTTP/1.1\r\nX-No-Host: 1\r\n\r\n");
    assert_eq!(response.status, 400, "{}", response.text());
    assert_eq!(served.backend().requests(), 0);
}

#[test]
fn request_with_two_hosts_is_400() {
    let served = Served::start(&[]);
    let (response, _conn) =
        served.raw(b"GET /echo HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n");
    assert_eq!(response.status, 400, "{}", response.text());
    assert_eq!(served.backend().requests(), 0);
}

#[test]
fn request_after_a_rejected_one_in_a_pipeline_is_not_served() {
    let served = Served::start(&[]);
    let (response, mut conn) = served.raw(
        b"GET /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n\
          GET /echo?smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(response.status, 400);
    let rest = conn.read_to_close().unwrap_or_default();
    assert!(
        !String::from_utf8_lossy(&rest).contains("HTTP/1.1 200"),
        "a request behind a rejected one was answered"
    );
    assert_eq!(
        served.backend().requests(),
        0,
        "the smuggled request reached the backend"
    );
}
