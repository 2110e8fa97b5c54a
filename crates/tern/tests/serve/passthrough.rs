//! What tern must pass through untouched: request targets, methods, header
//! order, valid chunk extensions and trailers; and every request, even a
//! rejected one, is logged.

use tern_testsupport::backend::{echoed_header, pattern, sha256_hex};
use tern_testsupport::tern::Served;

use crate::LOG_WAIT;

#[test]
fn request_target_is_forwarded_verbatim() {
    let served = Served::start(&[]);
    let target = "/echo/a%2Fb/../c?x=%20y&z=%E2%9C%93&empty=&flag";
    let (response, _conn) =
        served.raw(format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
    assert_eq!(response.json()["path"], target);
}

#[test]
fn methods_pass_through() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    for method in ["PUT", "DELETE", "OPTIONS", "PATCH", "PURGE"] {
        conn.send(
            format!("{method} /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n")
                .as_bytes(),
        )
        .expect("send");
        let response = conn.read_response(false).expect("response");
        assert_eq!(response.json()["method"], method);
    }
}

#[test]
fn many_headers_are_forwarded_in_order() {
    let served = Served::start(&[]);
    let fields: String = (0..100)
        .map(|i| format!("X-Field-{i}: value {i}\r\n"))
        .collect();
    let (response, _conn) =
        served.raw(format!("GET /echo HTTP/1.1\r\nHost: localhost\r\n{fields}\r\n").as_bytes());
    assert_eq!(response.status, 200, "{}", response.text());
    let echo = response.json();
    let names: Vec<String> = echo["headers"]
        .as_array()
        .expect("headers")
        .iter()
        .filter_map(|pair| pair[0].as_str())
        .filter(|name| name.starts_with("x-field-"))
        .map(str::to_string)
        .collect();
    let expected: Vec<String> = (0..100).map(|i| format!("x-field-{i}")).collect();
    assert_eq!(names, expected);
    assert_eq!(echoed_header(&echo, "x-field-42"), ["value 42"]);
}

#[test]
fn valid_chunk_extensions_and_trailers_keep_the_body_intact() {
    let served = Served::start(&[]);
    let body = pattern(10_000);
    let mut request =
        b"POST /sha HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for (i, chunk) in body.chunks(3_000).enumerate() {
        request.extend(format!("{:X};part={i};note=\"a b\"\r\n", chunk.len()).into_bytes());
        request.extend_from_slice(chunk);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\nX-Checksum: whatever\r\n\r\n");
    let (response, _conn) = served.raw(&request);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["sha256"], sha256_hex(&body));
}

#[test]
fn get_with_a_body_is_forwarded_whole() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    conn.send(b"GET /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello")
        .expect("send");
    let response = conn.read_response(false).expect("response");
    assert_eq!(response.json()["body_len"], 5);
    // The body was consumed as a body, not parsed as the next request.
    assert_eq!(
        conn.get("localhost", "/status/200").expect("next").status,
        200
    );
}

#[test]
fn rejected_and_failed_requests_are_logged_with_their_status() {
    let served = Served::start(&[]);
    let (response, _conn) = served.raw(
        b"POST /sha HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    assert_eq!(response.status, 400);
    served
        .tern
        .wait_stdout_lines("status=400", 1, LOG_WAIT)
        .unwrap_or_else(|stdout| panic!("no access-log line for a 400; stdout:\n{stdout}"));
    assert_eq!(served.get("/status/503").status, 503);
    served
        .tern
        .wait_stdout_lines("status=503", 1, LOG_WAIT)
        .unwrap_or_else(|stdout| panic!("no access-log line for a 503; stdout:\n{stdout}"));
}
