//! Edge policy over HTTP/3 (docs/edge-policy.md): the listener's deny list
//! and the per-client connection limit act on a QUIC Initial before any
//! handshake, one client's QUIC and TCP connections count together, and
//! HTTP/3 requests draw on the same rate bucket. Clients: quinn + h3 from
//! a chosen loopback address (tern-testsupport h3client), and the rustls
//! HTTP/1.1 client.

use std::net::IpAddr;

use tern_testsupport::client::HttpConn;
use tern_testsupport::h3client::{H3Conn, H3ConnectError};
use tern_testsupport::tern::Served;

use crate::LOG_WAIT;

const LOOPBACK: [u8; 4] = [127, 0, 0, 1];
const OTHER: [u8; 4] = [127, 0, 0, 2];

async fn h3_from(served: &Served, source: [u8; 4]) -> Result<H3Conn, H3ConnectError> {
    H3Conn::connect_from(IpAddr::from(source), served.addr, served.ca().ca_pem()).await
}

async fn status(conn: &mut H3Conn) -> u16 {
    conn.get("/echo").await.expect("an HTTP/3 response").0
}

fn count(served: &Served, metric: &str, labels: &[(&str, &str)]) -> f64 {
    tokio::task::block_in_place(|| served.scrape().sum(metric, labels))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_address_gets_no_quic_answer_and_others_are_served() {
    let served = Served::builder()
        .admin()
        .args(&["--http3", "--deny", "127.0.0.2/32"])
        .start();
    match h3_from(&served, OTHER).await {
        Err(H3ConnectError::NoAnswer) => {}
        Err(e) => panic!("a denied client got an answer: {e:?}"),
        Ok(_) => panic!("a denied client got a connection"),
    }
    let mut allowed = h3_from(&served, LOOPBACK).await.expect("an allowed client");
    assert_eq!(status(&mut allowed).await, 200);
    let denied = [("side", "client"), ("kind", "denied")];
    assert!(count(&served, "tern_request_errors_total", &denied) >= 1.0);
    assert_eq!(count(&served, "tern_tls_handshakes_total", &[]), 1.0);
}

/// Two workers, so the QUIC and TCP connections of one client may land
/// on different workers: the limit holds over all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quic_and_tcp_connections_of_a_client_count_together_and_share_its_rate() {
    let served = Served::builder()
        .admin()
        .args(&[
            "--http3",
            "--workers",
            "2",
            "--client-max-connections",
            "1",
            "--client-rate",
            "1/h",
            "--client-burst",
            "1",
            "--log-rejected",
            "true",
        ])
        .start();
    let mut first = h3_from(&served, LOOPBACK)
        .await
        .expect("a first connection");
    assert_eq!(status(&mut first).await, 200);
    match h3_from(&served, LOOPBACK).await {
        Err(H3ConnectError::Closed(_)) => {}
        Err(e) => panic!("a second QUIC connection was not refused: {e:?}"),
        Ok(_) => panic!("a second QUIC connection was kept"),
    }
    let tcp = tokio::task::block_in_place(|| {
        HttpConn::connect_from(
            IpAddr::from(LOOPBACK),
            served.addr,
            "localhost",
            served.client.clone(),
        )
    });
    assert!(tcp.is_err(), "a TCP connection next to a QUIC one was kept");
    assert_eq!(status(&mut first).await, 200);
    assert_eq!(status(&mut first).await, 429);
    let mut other = h3_from(&served, OTHER).await.expect("another client");
    assert_eq!(status(&mut other).await, 200);
    let refused = [("side", "client"), ("kind", "too_many_connections")];
    // At least the QUIC and the TCP attempt. A QUIC client that hears
    // nothing within its probe timeout (a loaded machine) sends its
    // Initial again, and tern, which keeps no state for a connection it
    // refused, refuses and counts the copy too.
    let refusals = count(&served, "tern_request_errors_total", &refused);
    assert!(refusals >= 2.0, "{refusals} refusals counted");
    let lines = tokio::task::block_in_place(|| {
        served
            .tern
            .wait_stdout_lines("error=client:too_many_connections", 2, LOG_WAIT)
            .expect("a log line per refusal, QUIC and TCP")
    });
    assert!(lines.iter().all(|l| l.contains("method=-")), "{lines:?}");
}

/// `client_rate_close_after` over HTTP/3: after three refusals in a row
/// the QUIC connection is closed (H3_EXCESSIVE_LOAD) once the third 429
/// has reached the client, and the client's new QUIC connections are
/// refused before the handshake, while another address is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h3_client_that_keeps_sending_past_its_rate_is_closed_and_shut_out() {
    let served = tokio::task::block_in_place(|| crate::edge_flood::limited("3", &["--http3"]));
    let mut conn = h3_from(&served, LOOPBACK).await.expect("a connection");
    assert_eq!(status(&mut conn).await, 200);
    // Every 429 is read, the third too: the close waits until the client
    // has it (a close drops stream data not yet sent). The request after
    // it fails, on the GOAWAY or the close.
    let mut refused = 0;
    let why = loop {
        match conn.get("/echo").await {
            Ok((status, _)) => {
                assert_eq!(status, 429);
                refused += 1;
                assert!(refused <= 3, "the connection was kept");
            }
            Err(e) => break e,
        }
    };
    assert_eq!(refused, 3, "closed after {refused} refusals: {why}");
    let closed = tokio::time::timeout(LOG_WAIT, conn.closed())
        .await
        .expect("the connection closed");
    match closed {
        quinn::ConnectionError::ApplicationClosed(c) => {
            assert_eq!(
                c.error_code,
                quinn::VarInt::from_u32(0x107),
                "H3_EXCESSIVE_LOAD: {c}"
            )
        }
        other => panic!("closed otherwise than by tern's H3_EXCESSIVE_LOAD: {other}"),
    }
    match h3_from(&served, LOOPBACK).await {
        Err(H3ConnectError::Closed(_)) => {}
        Err(e) => panic!("a new QUIC connection was not refused: {e:?}"),
        Ok(_) => panic!("a new QUIC connection of a shut-out client was kept"),
    }
    // The close and the refused connection; as in the test above, a
    // client that hears nothing within its probe timeout sends its Initial
    // again, and each copy is refused and counted.
    let kept_sending = [("side", "client"), ("kind", "kept_sending")];
    let refusals = count(&served, "tern_request_errors_total", &kept_sending);
    assert!(refusals >= 2.0, "{refusals} kept_sending refusals counted");
    let mut other = h3_from(&served, OTHER).await.expect("another client");
    assert_eq!(status(&mut other).await, 200);
}
