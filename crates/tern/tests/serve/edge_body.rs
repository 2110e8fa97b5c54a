//! `max_request_body` crossed after the request head already went to the
//! backend (docs/edge-policy.md): what the client gets and what the
//! backend sees, pinned for an HTTP/1.1 chunked body and an HTTP/2 body,
//! before and after the backend's response began. The backend is the
//! harness's body sink (it records whether a body ended or was cut); the
//! clients are the rustls HTTP/1.1 client and the `h2` crate.

use std::time::Duration;

use tern_testsupport::body_sink::{Arrival, BodySink};
use tern_testsupport::h2client::{self, bytes::Bytes, http::StatusCode};
use tern_testsupport::tern::Served;

use crate::LOG_WAIT;

const WAIT: Duration = Duration::from_secs(10);

/// tern with a 1 KiB body limit in front of `sink`.
fn served(sink: &BodySink) -> Served {
    Served::builder()
        .backend_addr(sink.addr())
        .args(&["--max-request-body", "1KiB"])
        .start()
}

/// The backend got the head and part of the body, then its connection was
/// closed: never a complete over-limit body.
fn assert_cut(sink: &BodySink) {
    let arrivals = sink.wait_arrivals(1, WAIT);
    let Arrival {
        body_bytes,
        complete,
        ..
    } = arrivals[0].clone();
    assert!(!complete, "the backend saw the whole body: {arrivals:?}");
    assert!(
        (500..1100).contains(&body_bytes),
        "the backend saw {body_bytes} body bytes"
    );
}

#[test]
fn a_chunked_body_over_the_limit_after_the_head_went_up_is_413_and_cut_at_the_backend() {
    let sink = BodySink::start();
    let served = served(&sink);
    let mut conn = served.connect();
    let first = format!(
        "POST /up HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n",
        600,
        "a".repeat(600)
    );
    conn.send(first.as_bytes()).expect("send head");
    sink.wait_heads(1, WAIT);
    let rest = format!("{:x}\r\n{}\r\n0\r\n\r\n", 2000, "b".repeat(2000));
    conn.send(rest.as_bytes()).expect("send the rest");
    let response = conn.read_response(false).expect("a response");
    assert_eq!(response.status, 413, "{}", response.text());
    assert_cut(&sink);
    let line = served
        .tern
        .wait_stdout_lines("error=client:body_too_large", 1, LOG_WAIT)
        .expect("a log line")[0]
        .clone();
    assert!(line.contains("status=413"), "{line}");
}

/// Also when the backend answered as soon as it had the head: tern reads
/// an HTTP/1.1 backend's response only once the request body is up, so
/// the early 200 never reaches the client, who gets the 413.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2_body_over_the_limit_after_the_head_went_up_is_413_and_cut_at_the_backend() {
    for sink in [BodySink::start(), BodySink::answer_early()] {
        let served = served(&sink);
        let client = served.h2_client().await;
        let (response, mut body) = client
            .open(h2client::request("POST", "/up"))
            .await
            .expect("open a stream");
        body.send_data(Bytes::from(vec![b'a'; 600]), false)
            .expect("first piece");
        tokio::task::block_in_place(|| sink.wait_heads(1, WAIT));
        body.send_data(Bytes::from(vec![b'b'; 2000]), true)
            .expect("second piece");
        let response = tokio::time::timeout(WAIT, response)
            .await
            .expect("an answer in time")
            .expect("a response");
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        tokio::task::block_in_place(|| assert_cut(&sink));
    }
}
