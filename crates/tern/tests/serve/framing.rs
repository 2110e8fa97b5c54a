//! Ambiguous or malformed request framing gets 400 (and the connection is
//! closed); an oversized head gets 431. Head errors must never reach the backend.

use std::time::Duration;

use tern_testsupport::tern::Served;

/// Sends `request`, expects `status`, a body saying why, and a closed connection.
fn expect_rejected(served: &Served, request: &[u8], status: u16) {
    let (response, mut conn) = served.raw(request);
    assert_eq!(
        response.status,
        status,
        "request {:?} got {} {}",
        String::from_utf8_lossy(request),
        response.status,
        response.text()
    );
    assert!(
        !response.body.is_empty(),
        "a {status} must say why in its body"
    );
    assert!(
        conn.closed_within(Duration::from_secs(3)),
        "connection stayed open after {status}"
    );
}

/// A head-level rejection: 400 and the backend never saw a request.
fn expect_head_rejected(request: &str) {
    let served = Served::start(&[]);
    expect_rejected(&served, request.as_bytes(), 400);
    assert_eq!(
        served.backend().requests(),
        0,
        "a bad request reached the backend"
    );
    // tern is still fine for the next client.
    assert_eq!(served.get("/status/200").status, 200);
}

#[test]
fn content_length_with_transfer_encoding_is_400() {
    expect_head_rejected(
        "POST /sha HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\
         Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    );
}

#[test]
fn two_different_content_lengths_are_400() {
    expect_head_rejected(
        "POST /sha HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\
         Content-Length: 6\r\n\r\nhello!",
    );
}

#[test]
fn malformed_content_length_is_400() {
    expect_head_rejected(
        "POST /sha HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5x\r\n\r\nhello",
    );
}

#[test]
fn signed_content_length_is_400() {
    expect_head_rejected(
        "POST /sha HTTP/1.1\r\nHost: localhost\r\nContent-Length: +5\r\n\r\nhello",
    );
}

#[test]
fn transfer_encoding_not_ending_in_chunked_is_400() {
    expect_head_rejected(
        "POST /sha HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked, gzip\r\n\r\n\
         5\r\nhello\r\n0\r\n\r\n",
    );
}

#[test]
fn obs_fold_is_400() {
    expect_head_rejected("GET /echo HTTP/1.1\r\nHost: localhost\r\nX-Folded: a\r\n b\r\n\r\n");
}

#[test]
fn bare_lf_in_head_is_400() {
    expect_head_rejected("GET /echo HTTP/1.1\r\nHost: localhost\nX-After-Bare-Lf: 1\r\n\r\n");
}

#[test]
fn nul_in_head_is_400() {
    expect_head_rejected("GET /echo HTTP/1.1\r\nHost: localhost\r\nX-Nul: a\0b\r\n\r\n");
}

#[test]
fn whitespace_before_colon_is_400() {
    expect_head_rejected("GET /echo HTTP/1.1\r\nHost: localhost\r\nX-Spaced : 1\r\n\r\n");
}

#[test]
fn invalid_chunk_size_is_400() {
    let served = Served::start(&[]);
    expect_rejected(
        &served,
        b"POST /sha HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
          zz\r\nhello\r\n0\r\n\r\n",
        400,
    );
}

#[test]
fn chunk_size_overflow_is_400() {
    let served = Served::start(&[]);
    expect_rejected(
        &served,
        b"POST /sha HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
          10000000000000000005\r\nhello\r\n0\r\n\r\n",
        400,
    );
}

#[test]
fn bare_lf_in_chunk_extension_is_400() {
    let served = Served::start(&[]);
    expect_rejected(
        &served,
        b"POST /sha HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
          5;ext\nhello\r\n0\r\n\r\n",
        400,
    );
}

#[test]
fn control_character_in_chunk_extension_is_400() {
    let served = Served::start(&[]);
    expect_rejected(
        &served,
        b"POST /sha HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
          5;e\x01xt=1\r\nhello\r\n0\r\n\r\n",
        400,
    );
}

#[test]
fn head_over_max_head_bytes_is_431() {
    let served = Served::start(&["--max-head-bytes", "4096"]);
    let big = "a".repeat(6000);
    let request = format!("GET /echo HTTP/1.1\r\nHost: localhost\r\nX-Big: {big}\r\n\r\n");
    expect_rejected(&served, request.as_bytes(), 431);
    assert_eq!(
        served.backend().requests(),
        0,
        "an oversized head reached the backend"
    );
}

#[test]
fn head_under_max_head_bytes_is_served() {
    let served = Served::start(&["--max-head-bytes", "4096"]);
    let big = "a".repeat(3000);
    let request = format!("GET /echo HTTP/1.1\r\nHost: localhost\r\nX-Big: {big}\r\n\r\n");
    let (response, _conn) = served.raw(request.as_bytes());
    assert_eq!(response.status, 200, "{}", response.text());
}

#[test]
fn second_transfer_encoding_field_not_ending_in_chunked_is_400() {
    expect_head_rejected(
        "POST /sha HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\
         Transfer-Encoding: identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    );
}

#[test]
fn transfer_encoding_in_http10_request_is_400() {
    // RFC 9112 section 6.1: faulty framing, since a 1.0 peer cannot mean chunked.
    expect_head_rejected(
        "POST /sha HTTP/1.0\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
         5\r\nhello\r\n0\r\n\r\n",
    );
}

#[test]
fn invalid_character_in_field_name_is_400() {
    expect_head_rejected("GET /echo HTTP/1.1\r\nHost: localhost\r\nX@Bad: 1\r\n\r\n");
}

#[test]
fn malformed_request_line_is_400() {
    expect_head_rejected("GET  /echo  HTTP/1.1\r\nHost: localhost\r\n\r\n");
}

#[test]
fn chunk_data_not_followed_by_crlf_is_400() {
    let served = Served::start(&[]);
    expect_rejected(
        &served,
        b"POST /sha HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nhelloXX0\r\n\r\n",
        400,
    );
}

#[test]
fn request_line_over_max_head_bytes_is_431() {
    let served = Served::start(&["--max-head-bytes", "4096"]);
    let long = "a".repeat(6000);
    let request = format!("GET /echo?{long} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    expect_rejected(&served, request.as_bytes(), 431);
}
