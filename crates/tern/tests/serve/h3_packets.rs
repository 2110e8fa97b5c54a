//! What a new QUIC connection costs in packets (issue 26): one that carries
//! a small request or two gets neither path MTU probes nor spare
//! connection IDs from tern (quinn-proto patches 0008 and 0009: they were
//! two thirds of its datagrams), and one that carries a large body still
//! gets the MTU search. tern's SETTINGS come with its handshake, it keeps
//! the client's first connection ID and answers no close with a close.
//! Its response heads carry plain strings, no Huffman codes, and its
//! handshake ends with one session ticket, not TCP's two. Client:
//! quinn + h3 (tern-testsupport h3client), whose counters say what tern
//! sent, and a request stream written by hand for the raw head.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use tern_testsupport::client::client_config_with;
use tern_testsupport::h3client::{qpack_literals, H3Conn};
use tern_testsupport::tern::Served;
use tern_testsupport::tickets::TicketCountingStore;

async fn connect(served: &Served) -> H3Conn {
    H3Conn::connect_from(
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        served.addr,
        served.ca().ca_pem(),
    )
    .await
    .expect("a QUIC connection")
}

async fn get_ok(conn: &mut H3Conn, path: &str, len: usize) {
    let (status, body) = conn.get(path).await.expect("an HTTP/3 response");
    assert_eq!((status, body.len()), (200, len), "GET {path}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_requests_get_no_mtu_probe_and_no_spare_connection_id() {
    let served = Served::start(&["--http3"]);
    let mut conn = connect(&served).await;
    // The client's handshake ends before tern's: whatever tern sends once
    // its own ends (a probe would go first) is counted from here.
    let at_handshake = conn.stats().udp_rx.bytes;
    // Two requests: a probe sent right after tern's handshake reaches the
    // client before the second answer does.
    get_ok(&mut conn, "/bytes/100", 100).await;
    get_ok(&mut conn, "/bytes/100", 100).await;
    let stats = conn.stats();
    assert_eq!(
        stats.frame_rx.new_connection_id, 0,
        "spare connection IDs from a server that refuses migration: {:?}",
        stats.frame_rx
    );
    // Each MTU probe is a datagram of 1326 bytes or more; the handshake's
    // tail (HANDSHAKE_DONE, tickets) and two small answers take far less.
    let after = stats.udp_rx.bytes - at_handshake;
    assert!(
        after < 1_200,
        "{after} bytes in {} datagrams after the handshake: an MTU probe among them? {:?}",
        stats.udp_rx.datagrams,
        stats.frame_rx
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_body_still_gets_the_mtu_search() {
    let served = Served::start(&["--http3"]);
    let mut conn = connect(&served).await;
    const SIZE: usize = 1 << 20;
    get_ok(&mut conn, &format!("/bytes/{SIZE}"), SIZE).await;
    // Probes sent while the body went out arrive before this answer.
    get_ok(&mut conn, "/bytes/100", 100).await;
    let stats = conn.stats();
    // An MTU probe is a PING padded to the size probed.
    assert!(
        stats.frame_rx.ping >= 1,
        "no MTU probe during a 1 MiB body: {:?}",
        stats.frame_rx
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_come_with_the_handshake_and_the_first_connection_id_is_kept() {
    let served = Served::start(&["--http3"]);
    let mut conn = connect(&served).await;
    // The client's handshake ends with the datagram of tern's first flight
    // (its Handshake packet); quinn reads the whole datagram before it says
    // so. The control stream (SETTINGS) came in that datagram: it used to
    // follow the handshake in one of its own. It came alone: tern opens no
    // QPACK encoder or decoder stream, having no dynamic table (h3 patch
    // 0022, RFC 9204 4.2).
    let at_handshake = conn.stats();
    assert_eq!(
        at_handshake.frame_rx.stream, 1,
        "{} datagrams when the handshake ended, and not the control stream alone: {:?}",
        at_handshake.udp_rx.datagrams, at_handshake.frame_rx
    );
    get_ok(&mut conn, "/bytes/100", 100).await;
    let stats = conn.close_and_drain().await;
    // quinn's server moved to a client-issued connection ID at once
    // (RETIRE_CONNECTION_ID, answered by one more NEW_CONNECTION_ID); a
    // server that refuses migration keeps the first (quinn-proto patch).
    assert_eq!(
        stats.frame_rx.retire_connection_id, 0,
        "tern retired the client's connection ID: {:?}",
        stats.frame_rx
    );
    // The client closed: tern drains without a close of its own
    // (RFC 9000 10.2.2 allows one, quinn sent it).
    assert_eq!(
        stats.frame_rx.connection_close, 0,
        "tern answered the client's close with one: {:?}",
        stats.frame_rx
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_credit_keeps_coming_to_a_client_asking_one_at_a_time() {
    // Eight streams at once: tern frees credit for a MAX_STREAMS update
    // every second request, and the update now waits for the next answer
    // while the client has half its credit left (quinn-proto patch 0014;
    // scripts::h3_datagrams_script_counts_datagrams_each_way counts the
    // datagrams it saves). The wait must never hold the client up: forty
    // requests one after another need five times the first credit.
    let served = Served::start(&["--http3", "--h3-max-streams", "8"]);
    let mut conn = connect(&served).await;
    const REQUESTS: u64 = 40;
    for _ in 0..REQUESTS {
        get_ok(&mut conn, "/bytes/100", 100).await;
    }
    let updates = conn.stats().frame_rx.max_streams_bidi;
    assert!(
        updates >= 4,
        "{updates} MAX_STREAMS updates for {REQUESTS} requests"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_heads_carry_no_huffman_coded_string() {
    // tern's QPACK encoder writes names and values as plain literals (h3
    // patch 0006, as haproxy does): Huffman coding a section sent once
    // cost ~4,100 instructions per 100 B response. Before it, each string
    // was coded when that made it shorter, so digits such as the
    // content-length "100" went Huffman-coded.
    let served = Served::start(&["--http3"]);
    let conn = connect(&served).await;
    let section = conn
        .get_raw_head("/bytes/100")
        .await
        .expect("a response head");
    let literals = qpack_literals(&section).expect("a field section tern's encoder wrote");
    assert!(
        literals.iter().any(|(_, s)| s == b"100"),
        "no content-length 100 among {literals:?}"
    );
    let coded: Vec<_> = literals.iter().filter(|(huffman, _)| *huffman).collect();
    assert!(coded.is_empty(), "Huffman-coded strings: {coded:?}");
}

/// An HTTP/3 client multiplexes one connection per origin: one ticket
/// resumes its next one (tern_tls::QUIC_TICKETS), where a TCP client gets
/// two (tern-tls tests/resumption.rs), even when it asks for more with
/// RFC 9149's ticket_request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quic_handshake_ends_with_one_session_ticket() {
    let served = Served::start(&["--http3"]);
    let store = Arc::new(TicketCountingStore::new(8));
    let mut tls =
        (*client_config_with(served.ca().ca_pem(), &[&rustls::version::TLS13], &[b"h3"])).clone();
    tls.resumption = rustls::client::Resumption::store(store.clone());
    tls.send_ticket_request = Some(rustls::client::TicketRequest {
        new_session_count: 4,
        resumption_count: 4,
    });
    let mut conn =
        H3Conn::connect_with(IpAddr::V4(Ipv4Addr::LOCALHOST), served.addr, Arc::new(tls))
            .await
            .expect("a QUIC connection");
    // tern's tickets leave with its HANDSHAKE_DONE, before any answer.
    get_ok(&mut conn, "/bytes/100", 100).await;
    store.wait_for_tickets(1, Duration::from_secs(10)).await;
    assert_eq!(store.tickets(), tern_tls::QUIC_TICKETS);
    assert_eq!(store.tickets(), 1);
}
