//! Bodies and message framing through tern: large and chunked bodies both
//! ways, keepalive, pipelining, 100-continue, bodiless responses, upgrades,
//! and small responses sent in one TLS record.

use std::time::Duration;

use tern_testsupport::backend::{pattern, sha256_hex};
use tern_testsupport::client::{self, count_response_records};
use tern_testsupport::rustls;
use tern_testsupport::tern::Served;

#[test]
fn download_of_1_mib_is_intact() {
    let served = Served::start(&[]);
    let response = served.get("/bytes/1048576");
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-length"), Some("1048576"));
    assert!(response.body == pattern(1 << 20), "1 MiB body corrupted");
}

#[test]
fn chunked_download_is_intact() {
    let served = Served::start(&[]);
    let response = served.get("/chunked/300000");
    assert_eq!(response.status, 200);
    assert!(response.body == pattern(300_000), "chunked body corrupted");
}

#[test]
fn chunked_upload_of_300_kb_is_intact() {
    let served = Served::start(&[]);
    let body = pattern(300_000);
    let mut conn = served.connect();
    conn.send(b"POST /sha HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n")
        .expect("send head");
    for chunk in body.chunks(7_001) {
        let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
        framed.extend_from_slice(chunk);
        framed.extend_from_slice(b"\r\n");
        conn.send(&framed).expect("send chunk");
    }
    conn.send(b"0\r\n\r\n").expect("send last chunk");
    let response = conn.read_response(false).expect("response");
    assert_eq!(response.status, 200, "{}", response.text());
    let json = response.json();
    assert_eq!(json["len"], 300_000);
    assert_eq!(json["sha256"], sha256_hex(&body));
}

#[test]
fn content_length_upload_of_1_mib_is_intact() {
    let served = Served::start(&[]);
    let body = pattern(1 << 20);
    let mut conn = served.connect();
    let mut request = format!(
        "POST /sha HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    conn.send(&request).expect("send");
    let response = conn.read_response(false).expect("response");
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["sha256"], sha256_hex(&body));
}

#[test]
fn keepalive_connection_serves_many_requests() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    for i in 0..20 {
        let response = conn
            .get("localhost", &format!("/bytes/{}", 100 + i))
            .unwrap_or_else(|e| panic!("request {i} on a kept-alive connection: {e}"));
        assert_eq!(response.status, 200);
        assert_eq!(response.body, pattern(100 + i));
    }
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    conn.send(
        b"GET /echo?n=1 HTTP/1.1\r\nHost: localhost\r\n\r\n\
          GET /slow/200 HTTP/1.1\r\nHost: localhost\r\n\r\n\
          GET /bytes/7 HTTP/1.1\r\nHost: localhost\r\n\r\n\
          GET /echo?n=4 HTTP/1.1\r\nHost: localhost\r\n\r\n",
    )
    .expect("send pipeline");
    let first = conn.read_response(false).expect("response 1");
    assert_eq!(first.json()["path"], "/echo?n=1");
    let second = conn.read_response(false).expect("response 2");
    assert_eq!(second.text(), "slow 200\n");
    let third = conn.read_response(false).expect("response 3");
    assert_eq!(third.body, pattern(7));
    let fourth = conn.read_response(false).expect("response 4");
    assert_eq!(fourth.json()["path"], "/echo?n=4");
}

#[test]
fn expect_100_continue_gets_interim_response_before_body() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    conn.send(
        b"POST /sha HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n",
    )
    .expect("send head");
    conn.set_read_timeout(Duration::from_secs(3))
        .expect("timeout");
    let interim = conn
        .read_response(false)
        .expect("no 100 Continue within 3 s of a head with Expect: 100-continue");
    assert_eq!(interim.status, 100);
    conn.send(b"0123456789").expect("send body");
    let response = conn.read_response(false).expect("final response");
    assert_eq!(response.status, 200);
    assert_eq!(response.json()["len"], 10);
}

#[test]
fn head_response_has_no_body_and_connection_stays_usable() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    conn.send(b"HEAD /bytes/100 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("send HEAD");
    let head = conn.read_response(true).expect("HEAD response");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("100"));
    // Had tern sent a body after the HEAD response, this would parse garbage.
    let next = conn
        .get("localhost", "/echo?after=head")
        .expect("next response");
    assert_eq!(next.json()["path"], "/echo?after=head");
}

#[test]
fn status_204_and_304_have_no_body() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    for code in [204, 304] {
        let response = conn
            .get("localhost", &format!("/status/{code}"))
            .expect("bodiless response");
        assert_eq!(response.status, code);
        assert!(
            response.header("transfer-encoding").is_none(),
            "{code} must not be chunked"
        );
        let next = conn
            .get("localhost", &format!("/echo?after={code}"))
            .expect("next response");
        assert_eq!(next.json()["path"], format!("/echo?after={code}"));
    }
}

#[test]
fn upgrade_tunnel_carries_bytes_both_ways() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    conn.send(
        b"GET /upgrade HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    )
    .expect("send upgrade");
    let response = conn.read_response(false).expect("101 response");
    assert_eq!(response.status, 101);
    assert!(response
        .header("upgrade")
        .is_some_and(|u| u.eq_ignore_ascii_case("websocket")));
    for message in [&b"hello tunnel"[..], &pattern(20_000)[..]] {
        conn.send(message).expect("send through tunnel");
        let echoed = conn.read_at_least(message.len()).expect("read from tunnel");
        assert_eq!(echoed, message, "tunnel did not echo the bytes");
    }
}

fn assert_one_record(served: &Served, config: std::sync::Arc<rustls::ClientConfig>) {
    let count = count_response_records(
        served.addr,
        "localhost",
        config,
        b"GET /bytes/100 HTTP/1.1\r\nHost: localhost\r\n\r\n",
    )
    .expect("response");
    assert!(count.plaintext.ends_with(&pattern(100)), "wrong body");
    assert_eq!(
        count.data_records, 1,
        "a 100-byte response came in {} TLS records",
        count.data_records
    );
}

#[test]
fn small_response_arrives_in_one_tls_record() {
    let served = Served::start(&["--no-tickets"]);
    assert_one_record(&served, served.client.clone());
    let tls12 = client::client_config_with(
        served.ca().ca_pem(),
        &[&rustls::version::TLS12],
        &[b"http/1.1"],
    );
    assert_one_record(&served, tls12);
}

/// Sends `request` (which ends the connection) over a fresh connection,
/// reads to the end, and returns the plaintext, whether the server ended
/// with close_notify, and the data-carrying TCP segments the server sent.
fn closing_exchange(served: &Served, request: &[u8]) -> (Vec<u8>, bool, u32) {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(served.addr).expect("connect");
    tcp.set_read_timeout(Some(client::IO_TIMEOUT)).unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(served.client.clone(), name).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).expect("handshake");
    }
    conn.writer().write_all(request).unwrap();
    conn.complete_io(&mut tcp).expect("send");
    let mut plaintext = Vec::new();
    let close_notify = loop {
        if conn.read_tls(&mut tcp).expect("read") == 0 {
            break false; // TCP closed without close_notify
        }
        conn.process_new_packets().expect("records");
        match conn.reader().read_to_end(&mut plaintext) {
            Ok(_) => break true, // close_notify received
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("read: {e}"),
        }
    };
    let segments = tern_testsupport::split_backend::data_segments_in(&tcp).expect("TCP_INFO");
    (plaintext, close_notify, segments)
}

/// The last response of a connection and its close_notify leave in one
/// write: one TCP segment after the server's handshake flight (without
/// tickets), not two (issue 14: a write and a packet fewer per closed
/// connection).
#[test]
fn last_response_and_close_notify_leave_in_one_segment() {
    // No resumption at all, so no ticket write after the handshake.
    let served = Served::start(&["--no-tickets", "--session-cache", "0"]);
    for (request, expect) in [
        (
            &b"GET /bytes/100 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"[..],
            "HTTP/1.1 200",
        ),
        // Refused by tern itself (no Host): 400, then close.
        (&b"GET / HTTP/1.1\r\n\r\n"[..], "HTTP/1.1 400"),
    ] {
        let (plaintext, close_notify, segments) = closing_exchange(&served, request);
        assert!(
            plaintext.starts_with(expect.as_bytes()),
            "{}",
            String::from_utf8_lossy(&plaintext)
        );
        assert!(close_notify, "no close_notify after {expect}");
        assert_eq!(
            segments, 2,
            "{expect}: the server flight and the response with close_notify are 2 segments"
        );
    }
    let ok = served.get("/bytes/100");
    assert!(ok.body.ends_with(&pattern(100)));
}

#[test]
fn fifty_pipelined_requests_in_one_write_are_answered_in_order() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    let pipeline: String = (0..50)
        .map(|i| format!("GET /echo?n={i} HTTP/1.1\r\nHost: localhost\r\n\r\n"))
        .collect();
    conn.send(pipeline.as_bytes()).expect("send pipeline");
    for i in 0..50 {
        let response = conn
            .read_response(false)
            .unwrap_or_else(|e| panic!("response {i}: {e}"));
        assert_eq!(response.json()["path"], format!("/echo?n={i}"));
    }
}

#[test]
fn head_of_chunked_resource_has_no_body() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    conn.send(b"HEAD /chunked/1000 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("send HEAD");
    let head = conn.read_response(true).expect("HEAD response");
    assert_eq!(head.status, 200);
    let next = conn
        .get("localhost", "/echo?after=head")
        .expect("next response");
    assert_eq!(next.json()["path"], "/echo?after=head");
}

#[test]
fn http10_request_is_answered_and_closed() {
    let served = Served::start(&[]);
    let (response, mut conn) = served.raw(b"GET /bytes/10 HTTP/1.0\r\nHost: localhost\r\n\r\n");
    assert_eq!(response.status, 200);
    assert_eq!(response.body, pattern(10));
    assert!(
        conn.closed_within(Duration::from_secs(3)),
        "HTTP/1.0 without keep-alive must be closed after the response"
    );
}

#[test]
fn client_offering_h2_gets_h2_by_default_and_http11_when_configured() {
    let served = Served::start(&[]);
    let config = client::client_config_with(
        served.ca().ca_pem(),
        &[&rustls::version::TLS13],
        &[b"h2", b"http/1.1"],
    );
    let conn =
        tern_testsupport::client::HttpConn::connect(served.addr, "localhost", config.clone())
            .expect("connect");
    assert_eq!(conn.tls().alpn_protocol(), Some(&b"h2"[..]));

    let served = Served::start(&["--alpn", "http/1.1"]);
    let config = client::client_config_with(
        served.ca().ca_pem(),
        &[&rustls::version::TLS13],
        &[b"h2", b"http/1.1"],
    );
    let mut conn = tern_testsupport::client::HttpConn::connect(served.addr, "localhost", config)
        .expect("connect");
    assert_eq!(conn.tls().alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(
        conn.get("localhost", "/status/200").expect("get").status,
        200
    );
}

#[test]
fn post_with_empty_body_is_forwarded() {
    let served = Served::start(&[]);
    let (response, _conn) =
        served.raw(b"POST /sha HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(response.status, 200);
    assert_eq!(response.json()["len"], 0);
}

#[test]
fn request_split_into_one_byte_tls_records_is_served() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    let request = b"POST /sha HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello";
    // Each send is flushed on its own, so each byte travels in its own record.
    for byte in request {
        conn.send(std::slice::from_ref(byte))
            .expect("send one byte");
    }
    let response = conn.read_response(false).expect("response");
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["sha256"], sha256_hex(b"hello"));
}

/// DESIGN.md: the whole server handshake flight goes out in one write.
#[test]
fn server_handshake_flight_arrives_in_one_read() {
    let served = Served::start(&[]);
    for (label, config) in [
        (
            "TLS 1.3",
            client::client_config_with(
                served.ca().ca_pem(),
                &[&rustls::version::TLS13],
                &[b"http/1.1"],
            ),
        ),
        (
            "TLS 1.2",
            client::client_config_with(
                served.ca().ca_pem(),
                &[&rustls::version::TLS12],
                &[b"http/1.1"],
            ),
        ),
    ] {
        let flight = client::first_flight(served.addr, "localhost", config).expect("handshake");
        assert!(
            flight.complete,
            "{label}: the first read held {} bytes, not the whole server flight",
            flight.bytes
        );
    }
}
