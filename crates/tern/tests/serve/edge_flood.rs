//! A client that keeps sending past its rate (docs/edge-policy.md,
//! `client_rate_close_after`): its 429s leave an HTTP/1.1 connection open
//! until it has been refused that many times in a row; then the
//! connection is closed (HTTP/2: GOAWAY) and the client's new connections
//! are closed before the TLS handshake until its Retry-After has passed,
//! while another address is served. Clients: the rustls HTTP/1.1 client
//! and the h2 crate, from chosen loopback addresses, and curl.

use tern_testsupport::client::HttpConn;
use tern_testsupport::h2client::{H2Client, H2Response};
use tern_testsupport::tern::{wait_until, Served};
use tern_testsupport::tools::curl;

use crate::LOG_WAIT;

/// tern (one worker) with a rate of one request an hour, no burst,
/// closing after `close_after` refusals in a row, and `extra` arguments;
/// admin listener and rejected-connection lines on.
pub(crate) fn limited(close_after: &str, extra: &[&str]) -> Served {
    let mut args = vec![
        "--workers",
        "1",
        "--client-rate",
        "1/h",
        "--client-burst",
        "0",
        "--client-rate-close-after",
        close_after,
        "--log-rejected",
        "true",
    ];
    args.extend_from_slice(extra);
    Served::builder().admin().args(&args).start()
}

fn from(served: &Served, source: [u8; 4]) -> std::io::Result<HttpConn> {
    HttpConn::connect_from(
        source.into(),
        served.addr,
        "localhost",
        served.client.clone(),
    )
}

fn kept_sending(served: &Served) -> f64 {
    served.scrape().sum(
        "tern_request_errors_total",
        &[("side", "client"), ("kind", "kept_sending")],
    )
}

#[test]
fn an_h1_client_refused_three_times_in_a_row_is_closed_then_shut_out_before_the_handshake() {
    let served = limited("3", &[]);
    let mut conn = from(&served, [127, 0, 0, 1]).expect("connect");
    let ok = conn.get("localhost", "/echo").expect("response");
    assert_eq!(ok.status, 200, "{}", ok.text());
    // The first two 429s keep the connection: no close announced, and the
    // next request on it is read and answered.
    for _ in 0..2 {
        let r = conn
            .get("localhost", "/echo")
            .expect("a 429 on the same connection");
        assert_eq!(r.status, 429, "{}", r.text());
        assert!(r.header("retry-after").is_some(), "no Retry-After");
        assert_eq!(r.header("connection"), None, "a 429 closed the connection");
    }
    let third = conn.get("localhost", "/echo").expect("the third 429");
    assert_eq!(third.status, 429, "{}", third.text());
    assert_eq!(third.header("connection"), Some("close"));
    assert!(
        conn.closed_within(LOG_WAIT),
        "kept open after three refusals in a row"
    );
    wait_until("the close counted", LOG_WAIT, || {
        kept_sending(&served) == 1.0
    });
    let handshakes = served.scrape().sum("tern_tls_handshakes_total", &[]);
    // Shut out for its Retry-After (about an hour): closed before any TLS
    // work, the handshake counter does not move.
    assert!(
        from(&served, [127, 0, 0, 1]).is_err(),
        "a new connection of the client was kept"
    );
    let scrape = served.scrape();
    assert_eq!(scrape.sum("tern_tls_handshakes_total", &[]), handshakes);
    assert_eq!(
        scrape.sum(
            "tern_request_errors_total",
            &[("side", "client"), ("kind", "kept_sending")]
        ),
        2.0
    );
    // Another address is served.
    let r = from(&served, [127, 0, 0, 2])
        .expect("another address connects")
        .get("localhost", "/echo")
        .expect("response");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(served.backend().requests(), 2);
    let lines = served
        .tern
        .wait_stdout_lines("error=client:kept_sending", 2, LOG_WAIT)
        .expect("the close and the refused connection logged");
    assert!(lines.iter().all(|l| l.contains("status=0")), "{lines:?}");
}

/// curl, four requests on one connection (`--http1.1`, keepalive): the
/// 429 that reaches `client_rate_close_after` says `Connection: close`, so
/// the client knows the connection ends with it; the 429s before it do
/// not.
#[test]
fn the_h1_429_that_closes_the_connection_says_connection_close() {
    let served = limited("3", &[]);
    let url = format!("https://localhost:{}/echo", served.addr.port());
    let trust = served.curl_trust();
    let mut args = vec![
        "-sS",
        "--http1.1",
        "-w",
        "%{http_code} %{num_connects} [%header{connection}]\\n",
    ];
    args.extend(trust.iter().map(String::as_str));
    for _ in 0..4 {
        args.extend_from_slice(&["-o", "/dev/null", &url]);
    }
    let out = curl(&args);
    assert!(out.success(), "{}", out.all());
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        ["200 1 []", "429 0 []", "429 0 []", "429 0 [close]"],
        "status, new connections, Connection field of each response"
    );
    wait_until("the close counted", LOG_WAIT, || {
        kept_sending(&served) == 1.0
    });
}

#[test]
fn refusals_are_counted_in_a_row_per_connection() {
    let served = limited("2", &[]);
    let mut a = from(&served, [127, 0, 0, 1]).expect("connect");
    let mut b = from(&served, [127, 0, 0, 1]).expect("connect");
    assert_eq!(a.get("localhost", "/echo").expect("response").status, 200);
    // One refusal on each of the client's connections: neither has two in
    // a row, both carry the next request.
    assert_eq!(a.get("localhost", "/echo").expect("response").status, 429);
    assert_eq!(b.get("localhost", "/echo").expect("response").status, 429);
    assert_eq!(b.get("localhost", "/echo").expect("response").status, 429);
    assert!(b.closed_within(LOG_WAIT), "kept open after two in a row");
    wait_until("the close counted", LOG_WAIT, || {
        kept_sending(&served) == 1.0
    });
}

async fn h2_get(client: &H2Client) -> Result<H2Response, String> {
    client.get("/echo").await.map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2_connection_that_keeps_sending_past_its_rate_gets_goaway() {
    let served = tokio::task::block_in_place(|| limited("3", &[]));
    let config = served.h2_config.clone();
    let client = H2Client::connect(served.addr, config.clone())
        .await
        .expect("h2 connection");
    assert_eq!(
        h2_get(&client).await.expect("a response").status.as_u16(),
        200
    );
    for i in 0..3 {
        let r = h2_get(&client).await.expect("a 429");
        assert_eq!(r.status.as_u16(), 429, "request {i}");
        assert!(r.header("retry-after").is_some(), "no Retry-After");
    }
    // GOAWAY (ENHANCE_YOUR_CALM) after the third: the connection ends (a
    // stream that crossed the GOAWAY on the wire may still be answered).
    let mut answered = 0;
    while h2_get(&client).await.is_ok() {
        answered += 1;
        assert!(answered < 3, "the connection was kept");
    }
    tokio::task::block_in_place(|| {
        wait_until("the connection to end", LOG_WAIT, || client.is_closed());
        wait_until("the close counted", LOG_WAIT, || {
            kept_sending(&served) == 1.0
        });
    });
    // The client's new connections are closed before the handshake.
    let again = H2Client::connect(served.addr, config).await;
    assert!(
        again.is_err(),
        "a new connection of a shut-out client was kept"
    );
}
