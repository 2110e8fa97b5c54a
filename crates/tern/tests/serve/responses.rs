//! Responses a backend should not send, or sends in an unusual but legal
//! way: the client must still get one unambiguous message, or a 502.
//! (Beyond the written contract, which names 502 for refused/reset backends:
//! these hold tern to RFC 9112 section 6 as an intermediary.)

use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::client::{self, Response};
use tern_testsupport::raw_backend::RawBackend;
use tern_testsupport::tern::{free_addr, TernProcess};

use crate::{cert_args, serve_args, tern_bin};

/// GET /x through tern in front of a backend that answers with `raw`;
/// then a second request on the same client connection, if it stays open.
fn through_tern(raw: &[u8]) -> (Response, Option<Response>) {
    let backend = RawBackend::start(raw);
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["localhost"], KeyKind::EcdsaP256);
    let addr = free_addr();
    let mut args = serve_args(addr, &[backend.addr().to_string().as_str()]);
    args.extend(cert_args(&cert));
    let tern = TernProcess::start(tern_bin(), addr, args);
    let mut conn = client::HttpConn::connect(addr, "localhost", client::client_config(ca.ca_pem()))
        .expect("connect");
    let first = conn
        .get("localhost", "/x")
        .unwrap_or_else(|e| panic!("{e}\n{}", tern.stderr_text()));
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
