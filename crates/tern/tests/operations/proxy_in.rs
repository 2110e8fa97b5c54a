//! PROXY protocol in (issue 3, item 8): an L4 balancer in front of tern
//! sends a v1 or v2 header; from a trusted network its address becomes the
//! client address (forwarding fields, access log); anything else is closed.

use std::net::SocketAddr;

use tern_testsupport::backend::echoed_header;
use tern_testsupport::proxy_protocol::{
    get_after_header, refused_after_header, v1_header, v2_header,
};
use tern_testsupport::tern::Served;

use super::LOG_WAIT;

/// tern accepting PROXY headers from `trusted`, in front of an echo backend.
fn proxied_tern(trusted: &str) -> Served {
    Served::start(&["--accept-proxy", "--trusted-proxies", trusted])
}

/// GET /echo after `header`; the backend's JSON.
fn echo_after(served: &Served, header: &[u8]) -> serde_json::Value {
    let response = get_after_header(
        served.addr,
        header,
        "localhost",
        served.client.clone(),
        "/echo",
    )
    .unwrap_or_else(|e| {
        panic!(
            "GET after a PROXY header: {e}\n{}",
            served.tern.stderr_text()
        )
    });
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()
}

fn refuses(served: &Served, header: &[u8]) -> bool {
    refused_after_header(served.addr, header, "localhost", served.client.clone())
}

/// The client named in the header reaches the backend and the access log.
fn header_client_is_the_client(header_for: fn(SocketAddr, SocketAddr) -> Vec<u8>, claimed: &str) {
    let served = proxied_tern("127.0.0.0/8");
    let claimed: SocketAddr = claimed.parse().expect("literal address");
    let echo = echo_after(&served, &header_for(claimed, served.addr));
    assert_eq!(
        echoed_header(&echo, "x-forwarded-for"),
        vec![claimed.ip().to_string()],
        "{echo}"
    );
    let lines = served
        .tern
        .wait_stdout_lines(&format!("client={claimed}"), 1, LOG_WAIT)
        .unwrap_or_else(|log| panic!("no access-log line with client={claimed}:\n{log}"));
    assert!(lines[0].contains("status=200"), "{}", lines[0]);
}

#[test]
fn proxy_v1_from_a_trusted_source_names_the_client() {
    header_client_is_the_client(v1_header, "203.0.113.9:5555");
}

#[test]
fn proxy_v2_from_a_trusted_source_names_the_client() {
    header_client_is_the_client(v2_header, "198.51.100.7:4444");
}

#[test]
fn proxy_v1_exact_bytes_from_the_issue() {
    let served = proxied_tern("127.0.0.0/8");
    let echo = echo_after(&served, b"PROXY TCP4 203.0.113.9 127.0.0.1 5555 443\r\n");
    assert_eq!(echoed_header(&echo, "x-forwarded-for"), vec!["203.0.113.9"]);
    let forwarded = echoed_header(&echo, "forwarded");
    assert!(
        forwarded.iter().any(|f| f.contains("for=203.0.113.9")),
        "{forwarded:?}"
    );
    served
        .tern
        .wait_stdout_lines("client=203.0.113.9:5555", 1, LOG_WAIT)
        .unwrap_or_else(|log| panic!("access log:\n{log}"));
}

#[test]
fn malformed_proxy_headers_are_closed() {
    let served = proxied_tern("127.0.0.0/8");
    let cases: [(&str, &[u8]); 4] = [
        ("garbage v1", b"PROXY TCP4 not-an-address 127.0.0.1 1 2\r\n"),
        (
            "port out of range",
            b"PROXY TCP4 203.0.113.9 127.0.0.1 70000 443\r\n",
        ),
        (
            "bad v2 signature",
            b"\r\n\r\n\0\r\nQUIX\n\x21\x11\x00\x0c\xcb\x00\x71\x09\x7f\x00\x00\x01\x15\xb3\x01\xbb",
        ),
        ("no header, TLS at once", b""),
    ];
    for (what, header) in cases {
        assert!(
            refuses(&served, header),
            "{what}: the connection was served"
        );
    }
    // The listener still serves well-formed headers afterwards.
    let echo = echo_after(
        &served,
        &v1_header("203.0.113.10:1000".parse().expect("literal"), served.addr),
    );
    assert_eq!(
        echoed_header(&echo, "x-forwarded-for"),
        vec!["203.0.113.10"]
    );
}

#[test]
fn proxy_header_from_an_untrusted_source_is_closed() {
    let served = proxied_tern("10.0.0.0/8");
    let claimed: SocketAddr = "203.0.113.9:5555".parse().expect("literal");
    assert!(
        refuses(&served, &v1_header(claimed, served.addr)),
        "a v1 header from 127.0.0.1 (not in 10.0.0.0/8) was accepted"
    );
    assert!(
        refuses(&served, &v2_header(claimed, served.addr)),
        "a v2 header from 127.0.0.1 (not in 10.0.0.0/8) was accepted"
    );
    assert!(
        !served.tern.stdout_text().contains("203.0.113.9"),
        "the forged address reached the access log"
    );
}
