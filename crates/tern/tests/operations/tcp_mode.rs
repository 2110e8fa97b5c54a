//! TCP mode (issue 3, item 7): after the handshake bytes pass through, after
//! a PROXY header that real consumers understand. Every peer is on
//! 127.0.0.1, so the checks use the client's *port*: only the header can
//! tell the backend that.

use std::time::Duration;

use tern_testsupport::client::{self, HttpConn};
use tern_testsupport::haproxy::{self, Haproxy};
use tern_testsupport::proxy_protocol::PpBackend;
use tern_testsupport::tern::Served;

/// tern in TCP mode with `--proxy-protocol version` in front of `backend`,
/// with `extra` flags.
fn tcp_tern(version: &str, backend: std::net::SocketAddr, extra: &[&str]) -> Served {
    let mut args = vec!["--mode", "tcp", "--proxy-protocol", version];
    args.extend(extra);
    Served::builder().backend_addr(backend).args(&args).start()
}

/// HAProxy behind tern answers `SRC_IP SRC_PORT AUTHORITY`; the source must
/// be this client's own address, carried by a `version` header.
fn haproxy_sees_the_client(version: &str) -> String {
    if let Some(why) = haproxy::unavailable() {
        panic!("HAProxy is part of the test environment: {why}");
    }
    let haproxy = Haproxy::start_address_echo();
    let served = tcp_tern(version, haproxy.addr(), &[]);
    let tern = &served.tern;
    let mut conn = served.connect();
    let me = conn.local_addr().expect("client address");
    let response = conn
        .get("localhost", "/")
        .unwrap_or_else(|e| panic!("GET through tcp mode: {e}\n{}", tern.stderr_text()));
    assert_eq!(response.status, 200, "{}", response.text());
    let text = response.text();
    let mut fields = text.split(' ');
    assert_eq!(fields.next(), Some(me.ip().to_string().as_str()), "{text}");
    assert_eq!(
        fields.next(),
        Some(me.port().to_string().as_str()),
        "HAProxy did not get the client's port from the {version} header: {text}"
    );
    fields.next().unwrap_or("").trim().to_string()
}

#[test]
fn tcp_mode_proxy_v1_gives_haproxy_the_client_address() {
    let authority = haproxy_sees_the_client("v1");
    assert_eq!(authority, "", "v1 has no TLVs");
}

#[test]
fn tcp_mode_proxy_v2_gives_haproxy_the_client_address_and_sni() {
    let authority = haproxy_sees_the_client("v2");
    assert_eq!(authority, "localhost", "HAProxy's fc_pp_authority");
}

#[test]
fn tcp_mode_proxy_v2_carries_alpn_and_sni_tlvs() {
    let backend = PpBackend::start();
    // TCP mode offers no ALPN unless told: the backend decides what it speaks.
    let served = tcp_tern("v2", backend.addr(), &["--alpn", "h2,http/1.1"]);
    let (tern, addr) = (&served.tern, served.addr);
    let config = client::client_config_with(
        served.ca().ca_pem(),
        &[&tern_testsupport::rustls::version::TLS13],
        &[b"h2", b"http/1.1"],
    );
    let mut conn = HttpConn::connect(addr, "localhost", config)
        .unwrap_or_else(|e| panic!("connect: {e}\n{}", tern.stderr_text()));
    assert_eq!(conn.tls().alpn_protocol(), Some(&b"h2"[..]));
    let me = conn.local_addr().expect("client address");
    conn.send(b"ping\n").expect("send through the tunnel");
    let answer = conn
        .read_at_least(b"pong ".len() + 1)
        .unwrap_or_else(|e| panic!("no answer through the tunnel: {e}\n{}", tern.stderr_text()));
    assert!(
        answer.starts_with(b"pong "),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );

    let seen = backend
        .next_header(Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("{e}\n{}", tern.stderr_text()));
    assert_eq!(seen.source, me, "source address in the v2 header");
    assert_eq!(seen.destination, addr, "destination: tern's listener");
    assert_eq!(seen.alpn.as_deref(), Some(&b"h2"[..]), "PP2_TYPE_ALPN");
    assert_eq!(
        seen.authority.as_deref(),
        Some(&b"localhost"[..]),
        "PP2_TYPE_AUTHORITY (SNI)"
    );
    assert_eq!(seen.payload_line, b"ping", "client bytes follow the header");
}
