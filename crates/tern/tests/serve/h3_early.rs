//! HTTP/3 0-RTT (`quic_early_data`): a resuming client's requests sent
//! before its handshake ends are forwarded only when safe (GET, HEAD,
//! OPTIONS), marked `Early-Data: 1` for the backend (RFC 8470); others get
//! 425 Too Early and go through once the handshake is over.
//!
//! Loopback would race the client's Finished against tern reading the early
//! requests; behind a 25 ms-each-way link (root only, network namespaces the
//! test creates) the early requests are read a round trip before it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Buf;
use serde_json::Value;
use tern_testsupport::backend::{echoed_header, Backend};
use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::client::client_config_with;
use tern_testsupport::netlink_delay::{DelayLink, SERVER_ADDR};
use tern_testsupport::tern::tern_bin;
use tern_testsupport::tickets::TicketCountingStore;

/// One request's answer: status, and the backend's `/echo` JSON if any.
type Answer = (u16, Option<Value>);

async fn request(
    send: &mut h3::client::SendRequest<h3_quinn::OpenStreams, bytes::Bytes>,
    method: &str,
    body: &[u8],
) -> Answer {
    let req = http::Request::builder()
        .method(method)
        .uri("https://localhost/echo")
        .body(())
        .expect("request");
    let mut stream = send.send_request(req).await.expect("send request");
    if !body.is_empty() {
        stream
            .send_data(bytes::Bytes::copy_from_slice(body))
            .await
            .expect("send body");
    }
    stream.finish().await.expect("finish request");
    let response = stream.recv_response().await.expect("response head");
    let mut got = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.expect("response body") {
        got.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
    }
    (
        response.status().as_u16(),
        serde_json::from_slice(&got).ok(),
    )
}

/// Over one endpoint: a full connection (GET, keeps the ticket), then a
/// resumed one sending a GET and a POST in 0-RTT, then the POST again
/// after its handshake. Returns (early GET, early POST, whether tern took
/// the 0-RTT data, POST after).
async fn early_run(addr: SocketAddr, ca_pem: &str) -> (Answer, Answer, bool, Answer) {
    let mut tls = (*client_config_with(ca_pem, &[&rustls::version::TLS13], &[b"h3"])).clone();
    tls.enable_early_data = true;
    let store = Arc::new(TicketCountingStore::new(8));
    tls.resumption = rustls::client::Resumption::store(store.clone());
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(Arc::new(tls)).expect("QUIC TLS");
    let mut endpoint =
        quinn::Endpoint::client(SocketAddr::from(([0, 0, 0, 0], 0))).expect("client endpoint");
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));

    let first = endpoint
        .connect(addr, "localhost")
        .expect("connect")
        .await
        .expect("first handshake");
    let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(first.clone()))
        .await
        .expect("h3 client");
    let drive = tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    let (status, _) = request(&mut send, "GET", b"").await;
    assert_eq!(status, 200, "first connection");
    // The session ticket follows the handshake by a round trip.
    store.wait_for_tickets(1, Duration::from_secs(10)).await;
    first.close(0u32.into(), b"");
    drive.abort();

    let connecting = endpoint.connect(addr, "localhost").expect("connect again");
    let (conn, accepted) = match connecting.into_0rtt() {
        Ok(pair) => pair,
        Err(_) => panic!("the client had no ticket allowing 0-RTT"),
    };
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .expect("h3 client in 0-RTT");
    let drive = tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    let (mut get_send, mut post_send) = (send.clone(), send.clone());
    let (get, post) = tokio::join!(
        request(&mut get_send, "GET", b""),
        request(&mut post_send, "POST", &[b'x'; 100])
    );
    let took_0rtt = accepted.await;
    let mut after_send = send;
    let after = request(&mut after_send, "POST", &[b'x'; 100]).await;
    drive.abort();
    (get, post, took_0rtt, after)
}

#[test]
fn early_data_forwards_safe_requests_marked_and_answers_others_425() {
    if let Some(why) = DelayLink::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let link = DelayLink::new(Duration::from_millis(25)).expect("delay link");
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["localhost"], KeyKind::EcdsaP256);
    let backend = link
        .spawn_in_server(Backend::start)
        .join()
        .expect("join")
        .expect("enter namespace");
    let listen = SocketAddr::from((SERVER_ADDR, 8443));
    let (backend_addr, chain, key) = (
        backend.addr().to_string(),
        cert.chain.display().to_string(),
        cert.key.display().to_string(),
    );
    let listen_arg = listen.to_string();
    let served = link.start_tern(
        listen,
        &[
            "serve",
            "--http3",
            "--quic-early-data",
            "true",
            "--listen",
            &listen_arg,
            "--backend",
            &backend_addr,
            "--cert",
            &chain,
            "--key",
            &key,
        ],
    );
    let ca_pem = ca.ca_pem().to_string();
    let (get, post, took_0rtt, after) = link
        .in_client(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(early_run(listen, &ca_pem))
        })
        .expect("enter the client namespace");
    assert!(took_0rtt, "tern refused the 0-RTT data");
    assert_eq!(get.0, 200, "early GET: {:?}", get.1);
    let echo = get.1.expect("the backend's echo of the early GET");
    assert_eq!(echoed_header(&echo, "early-data"), ["1"], "{echo}");
    assert_eq!(post.0, 425, "an early POST must not reach the backend");
    assert_eq!(after.0, 200, "the POST after the handshake");
    let echo = after.1.expect("the backend's echo of the later POST");
    assert!(echoed_header(&echo, "early-data").is_empty(), "{echo}");
    // The backend saw the early GET and the later POST, not the early one.
    let posts = backend
        .echoes()
        .iter()
        .filter(|e| e["method"] == "POST")
        .count();
    assert_eq!(posts, 1, "the early POST reached the backend");
    // The access log says which requests came early: the GET and the 425.
    let early = served
        .wait_stdout_lines("early=yes", 2, Duration::from_secs(5))
        .unwrap_or_else(|out| panic!("no two early=yes lines:\n{out}"));
    assert!(
        early
            .iter()
            .any(|l| l.contains("method=GET") && l.contains("status=200")),
        "{early:?}"
    );
    assert!(
        early
            .iter()
            .any(|l| l.contains("method=POST") && l.contains("status=425")),
        "{early:?}"
    );
    let later = served
        .wait_stdout_lines(
            "method=POST path=/echo status=200",
            1,
            Duration::from_secs(5),
        )
        .unwrap_or_else(|out| panic!("no log line of the later POST:\n{out}"));
    assert!(!later[0].contains("early="), "{later:?}");
    // The second connection resumed the first one's session, and the log
    // says so; the first was a full handshake.
    for line in early.iter().chain(&later) {
        assert!(line.contains(" resumed=yes "), "{line}");
    }
    let gets = served
        .wait_stdout_lines(
            "method=GET path=/echo status=200",
            2,
            Duration::from_secs(5),
        )
        .unwrap_or_else(|out| panic!("no log lines of the two GETs:\n{out}"));
    let full: Vec<&String> = gets.iter().filter(|l| !l.contains("early=")).collect();
    assert_eq!(full.len(), 1, "{gets:?}");
    assert!(full[0].contains(" resumed=no "), "{full:?}");
}

#[test]
fn early_data_needs_http3() {
    let out = tern_testsupport::tern::run_to_exit(
        tern_bin(),
        ["serve", "--check", "--quic-early-data", "true"],
        Duration::from_secs(20),
    );
    assert_eq!(out.status.and_then(|s| s.code()), Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("quic-early-data") && out.stderr.contains("without http3"),
        "{}",
        out.stderr
    );
}
