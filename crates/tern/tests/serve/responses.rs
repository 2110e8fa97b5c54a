//! Responses a backend should not send, or sends in an unusual but legal
//! way: the client must still get one unambiguous message, or a 502.
//! (Beyond the written contract, which names 502 for refused/reset backends:
//! these hold tern to RFC 9112 section 6 as an intermediary.)

use tern_testsupport::client::Response;
use tern_testsupport::raw_backend::RawBackend;
use tern_testsupport::tern::Served;

/// tern (certificate for `localhost`) in front of a scripted backend.
fn in_front_of(backend: &RawBackend) -> Served {
    Served::builder()
        .cert_names(&["localhost"])
        .backend_addr(backend.addr())
        .start()
}

/// GET /x through tern in front of a backend that answers with `raw`;
/// then a second request on the same client connection, if it stays open.
fn through_tern(raw: &[u8]) -> (Response, Option<Response>) {
    let backend = RawBackend::start(raw);
    let served = in_front_of(&backend);
    let mut conn = served.connect();
    let first = conn
        .get("localhost", "/x")
        .unwrap_or_else(|e| panic!("{e}\n{}", served.tern.stderr_text()));
    let second = conn.get("localhost", "/y").ok();
    (first, second)
}

fn assert_unambiguous(response: &Response) {
    let has_te = response.header("transfer-encoding").is_some();
    let has_cl = response.header("content-length").is_some();
    assert!(
        !(has_te && has_cl),
        "tern forwarded both Transfer-Encoding and Content-Length: {:?}",
        response.headers
    );
}

#[test]
fn close_delimited_backend_response_reaches_client_intact() {
    let (first, second) =
        through_tern(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end");
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), "until the end");
    assert_unambiguous(&first);
    // If tern kept the client connection, the next answer must be complete too.
    if let Some(second) = second {
        assert_eq!(second.text(), "until the end");
    }
}

#[test]
fn backend_response_with_length_and_chunked_is_not_forwarded_ambiguously() {
    let (first, _) = through_tern(
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nhello\r\n0\r\n\r\n",
    );
    assert_unambiguous(&first);
    assert!(
        first.status == 502 || (first.status == 200 && first.text() == "hello"),
        "got {} {:?}",
        first.status,
        first.text()
    );
}

#[test]
fn backend_response_with_two_lengths_gives_502() {
    let (first, _) =
        through_tern(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!(first.status, 502, "{:?} {}", first.headers, first.text());
}

#[test]
fn backend_answering_garbage_gives_502() {
    let (first, _) = through_tern(b"SSH-2.0-OpenSSH_9.2\r\n\r\n");
    assert_eq!(first.status, 502, "{}", first.text());
}

#[test]
fn informational_103_does_not_break_the_final_response() {
    let (first, second) = through_tern(
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n\
          HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    );
    // tern may forward the 103 or drop it; what follows must be the 200.
    let final_response = if first.status == 103 {
        second.expect("final response after a forwarded 103")
    } else {
        first
    };
    assert_eq!(final_response.status, 200);
    assert_eq!(final_response.text(), "ok");
}

#[test]
fn bytes_after_a_backend_response_are_not_a_second_response() {
    // A backend that sends more than its Content-Length must not be able to
    // answer the client's next request with the extra bytes.
    let (first, second) = through_tern(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok\
          HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil",
    );
    assert_eq!(first.text(), "ok");
    if let Some(second) = second {
        assert_ne!(
            second.text(),
            "evil",
            "extra backend bytes became a response"
        );
    }
}

#[test]
fn truncated_backend_response_is_not_completed() {
    let backend = RawBackend::start(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b");
    let served = in_front_of(&backend);
    let mut conn = served.connect();
    conn.set_read_timeout(std::time::Duration::from_secs(5))
        .expect("timeout");
    let result = conn.get("localhost", "/x");
    match result {
        // A 502 before any byte was sent would be fine too.
        Ok(response) => assert_eq!(response.status, 502, "a truncated body was completed"),
        Err(e) => assert!(
            e.kind() != std::io::ErrorKind::WouldBlock && e.kind() != std::io::ErrorKind::TimedOut,
            "tern left the client hanging on a truncated body: {e}"
        ),
    }
}

/// DESIGN.md: the head and a small body go to the backend in one write.
#[test]
fn small_request_reaches_backend_in_one_write() {
    let backend = RawBackend::start(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    let served = in_front_of(&backend);
    let mut conn = served.connect();
    let body = "b".repeat(100);
    conn.send(
        format!("POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{body}")
            .as_bytes(),
    )
    .expect("send");
    assert_eq!(conn.read_response(false).expect("response").text(), "ok");
    let first = backend.first_reads();
    assert_eq!(first.len(), 1);
    let text = String::from_utf8_lossy(&first[0]);
    assert!(
        text.contains("\r\n\r\n") && text.ends_with(&body),
        "the backend's first read held only {} bytes: {text:?}",
        first[0].len()
    );
}
