//! A well-behaved HTTP/2 client through tern to an HTTP/1.1 backend:
//! methods, bodies both ways, many streams on one connection, the forwarding
//! rules and the RFC 9113 mapping rules (cookies, connection-specific fields).

use tern_testsupport::backend::{echoed_header, pattern, sha256_hex};
use tern_testsupport::h2client::bytes::Bytes;
use tern_testsupport::h2client::http::{self, Request, StatusCode};
use tern_testsupport::h2client::{request, Body};
use tern_testsupport::raw_backend::RawBackend;
use tern_testsupport::tern::{log_field, Served};

use crate::{join_all, LOG_WAIT};

#[tokio::test]
async fn get_reaches_the_backend_as_http11_with_host_from_authority() {
    let served = Served::start(&[]);
    let client = served.h2_client().await;
    let response = client.get("/echo?q=1").await.expect("GET /echo");
    assert_eq!(response.status, StatusCode::OK, "{}", response.text());
    let echo = response.json();
    assert_eq!(echo["method"], "GET", "{echo}");
    assert_eq!(echo["path"], "/echo?q=1", "{echo}");
    assert_eq!(echo["version"], "HTTP/1.1", "{echo}");
    assert_eq!(echoed_header(&echo, "host"), ["localhost"], "{echo}");
    let lines = served
        .tern
        .wait_stdout_lines("path=/echo?q=1", 1, LOG_WAIT)
        .expect("an access-log line for the request");
    assert_eq!(log_field(&lines[0], "alpn"), Some("h2"), "{}", lines[0]);
    assert_eq!(log_field(&lines[0], "status"), Some("200"), "{}", lines[0]);
}

#[tokio::test]
async fn head_gets_headers_without_body() {
    let served = Served::start(&[]);
    let client = served.h2_client().await;
    let response = client
        .send(request("HEAD", "/bytes/1000"), Body::Empty)
        .await
        .expect("HEAD");
    assert_eq!(response.status, StatusCode::OK);
    assert!(response.body.is_empty(), "HEAD answered with a body");
}

/// RFC 9110 section 9.3.2: a HEAD response may carry the Content-Length a
/// GET would have; HTTP/1.1 clients of tern get it, h2 clients do not.
#[tokio::test]
async fn head_response_keeps_content_length() {
    let served = Served::start(&[]);
    let client = served.h2_client().await;
    let response = client
        .send(request("HEAD", "/bytes/1000"), Body::Empty)
        .await
        .expect("HEAD");
    assert_eq!(response.header("content-length"), Some("1000"));
}

/// tern keeps the field values a backend repeats (per worker) and carries
/// them again without making them anew: a value that changed at the same
/// place in the head is relayed as the backend sent it, never the one kept.
#[tokio::test]
async fn response_field_values_that_change_are_relayed_as_sent() {
    let served = Served::start(&[]);
    let client = served.h2_client().await;
    for n in [10usize, 10, 20, 20, 10, 300] {
        let response = client
            .get(&format!("/bytes/{n}"))
            .await
            .expect("GET /bytes");
        assert_eq!(
            response.header("content-length"),
            Some(n.to_string().as_str())
        );
        assert_eq!(response.body.len(), n);
    }
}

/// tern's worker reuses the field maps of requests it has read (h2 patch
/// 0009) and the lists of response heads it has sent: a request's fields
/// never reach the backend with a later request, on the same connection
/// or another one.
#[tokio::test]
async fn request_fields_never_reach_the_backend_with_a_later_request() {
    let served = Served::start(&[]);
    let first = served.h2_client().await;
    let mut req = request("GET", "/echo?n=1");
    for (name, value) in [("x-secret", "one"), ("cookie", "a=1"), ("x-other", "two")] {
        req.headers_mut()
            .append(name, value.parse().expect("header value"));
    }
    let echo = first
        .send(req, Body::Empty)
        .await
        .expect("GET /echo")
        .json();
    assert_eq!(echoed_header(&echo, "x-secret"), ["one"], "{echo}");
    let second = served.h2_client().await;
    for client in [&first, &second, &first] {
        let echo = client
            .send(request("GET", "/echo?n=2"), Body::Empty)
            .await
            .expect("GET /echo")
            .json();
        assert_eq!(echo["path"], "/echo?n=2", "{echo}");
        for name in ["x-secret", "cookie", "x-other"] {
            assert!(
                echoed_header(&echo, name).is_empty(),
                "{name} came back: {echo}"
            );
        }
    }
}

#[tokio::test]
async fn post_with_content_length_arrives_intact() {
    let served = Served::start(&[]);
    let client = served.h2_client().await;
    let body = pattern(300 * 1024);
    let mut req = request("POST", "/sha");
    req.headers_mut()
        .insert(http::header::CONTENT_LENGTH, body.len().into());
    // Uneven pieces, so DATA frame boundaries do not line up with anything.
    let chunks = body.chunks(7001).map(Bytes::copy_from_slice).collect();
    let response = client
        .send(req, Body::Chunks(chunks))
        .await
        .expect("POST /sha");
    assert_eq!(response.status, StatusCode::OK, "{}", response.text());
    let sha = response.json();
    assert_eq!(sha["len"], body.len(), "{sha}");
    assert_eq!(sha["sha256"], sha256_hex(&body), "{sha}");
}

/// A body of undeclared length larger than tern gathers before writing
/// the head (16 KiB; the client's flow-control window alone holds back
/// the rest) goes chunked, intact.
#[tokio::test]
async fn post_without_content_length_is_chunked_to_the_backend_intact() {
    let served = Served::start(&[]);
    let client = served.h2_client().await;
    let body = pattern(300 * 1024 + 17);
    let chunks = body.chunks(16 * 1024).map(Bytes::copy_from_slice).collect();
    let response = client
        .send(request("POST", "/sha"), Body::Chunks(chunks))
        .await
        .expect("POST /sha");
    assert_eq!(response.status, StatusCode::OK, "{}", response.text());
    let sha = response.json();
    assert_eq!(sha["len"], body.len(), "{sha}");
    assert_eq!(sha["sha256"], sha256_hex(&body), "{sha}");

    let echo = client
        .send(
            request("POST", "/echo"),
            Body::Chunks(vec![Bytes::from(pattern(64 * 1024))]),
        )
        .await
        .expect("POST /echo")
        .json();
    assert_eq!(
        echoed_header(&echo, "transfer-encoding"),
        ["chunked"],
        "{echo}"
    );
    assert_eq!(echo["body_len"], 64 * 1024, "{echo}");
}

/// A small body of undeclared length that ended with the request (HEADERS
/// and DATA with END_STREAM in one write, as clients send a form) reaches
/// an HTTP/1.1 backend with a Content-Length, as nginx sends it: backends
/// without chunked request bodies (Python's http.server) read it whole
/// instead of taking its chunks for their next request. An empty one too.
#[tokio::test]
async fn small_whole_post_without_content_length_gets_one_to_the_backend() {
    let served = Served::start(&[]);
    let client = served.h2_client().await;
    for (body, len) in [(&b"abc"[..], "3"), (&b""[..], "0")] {
        let echo = client
            .send(
                request("POST", "/echo"),
                Body::Chunks(vec![Bytes::copy_from_slice(body)]),
            )
            .await
            .expect("POST /echo")
            .json();
        assert_eq!(echoed_header(&echo, "content-length"), [len], "{echo}");
        assert!(
            echoed_header(&echo, "transfer-encoding").is_empty(),
            "{echo}"
        );
        assert_eq!(echo["body_len"], body.len(), "{echo}");
    }
}

#[tokio::test]
async fn body_longer_than_content_length_is_refused() {
    let served = Served::start(&[]);
    let client = served.h2_client().await;
    let mut req = request("POST", "/sha");
    req.headers_mut()
        .insert(http::header::CONTENT_LENGTH, 10.into());
    let outcome = client
        .send(req, Body::Chunks(vec![Bytes::from(vec![b'x'; 20])]))
        .await;
    // RFC 9113 8.1.1: malformed; a stream error or a 400, never a 200.
    if let Ok(response) = &outcome {
        assert_ne!(response.status, StatusCode::OK, "{}", response.text());
    }
}

#[tokio::test]
async fn one_mebibyte_download_is_intact() {
    let served = Served::start(&[]);
    let client = served.h2_client().await;
    for path in ["/bytes/1048576", "/chunked/1048576"] {
        let response = client.get(path).await.expect("GET 1 MiB");
        assert_eq!(response.status, StatusCode::OK, "{path}");
        assert_eq!(response.body.len(), 1 << 20, "{path}");
        assert!(response.body == pattern(1 << 20), "{path}: body differs");
    }
}

#[tokio::test]
async fn many_concurrent_streams_share_one_connection() {
    let served = Served::start(&[]);
    let client = served.h2_client().await;
    let streams = 100;
    let requests = (0..streams).map(|i| {
        let path = format!("/bytes/{}", 1000 + i * 37);
        let client = &client;
        async move { (i, client.get(&path).await) }
    });
    let answers = join_all(requests).await;
    for (i, answer) in answers {
        let response = answer.unwrap_or_else(|e| panic!("stream {i}: {e}"));
        assert_eq!(response.status, StatusCode::OK, "stream {i}");
        assert!(
            response.body == pattern(1000 + i * 37),
            "stream {i}: body differs"
        );
    }
    let port = format!(":{}", client.local_addr().port());
    let lines = served
        .tern
        .wait_stdout_lines("path=/bytes/", streams, LOG_WAIT)
        .expect("one access-log line per stream");
    assert!(
        lines
            .iter()
            .all(|l| log_field(l, "client").is_some_and(|c| c.ends_with(&port))),
        "a stream was logged for another connection"
    );
}

#[tokio::test]
async fn forged_forwarding_fields_are_replaced() {
    let served = Served::start(&[]);
    let client = served.h2_client().await;
    let mut req = request("GET", "/echo");
    let headers = req.headers_mut();
    for (name, value) in [
        ("x-forwarded-for", "6.6.6.6"),
        ("x-forwarded-proto", "http"),
        ("x-forwarded-host", "evil.example"),
        ("x-real-ip", "6.6.6.6"),
        ("forwarded", "for=6.6.6.6;proto=http"),
    ] {
        headers.append(name, value.parse().expect("header value"));
    }
    let echo = client
        .send(req, Body::Empty)
        .await
        .expect("GET /echo")
        .json();
    assert_eq!(
        echoed_header(&echo, "x-forwarded-for"),
        ["127.0.0.1"],
        "{echo}"
    );
    assert_eq!(
        echoed_header(&echo, "x-forwarded-proto"),
        ["https"],
        "{echo}"
    );
    assert!(echoed_header(&echo, "x-real-ip").is_empty(), "{echo}");
    assert!(!echo.to_string().contains("6.6.6.6"), "{echo}");
    assert!(!echo.to_string().contains("evil.example"), "{echo}");
}

#[tokio::test]
async fn cookie_fields_are_joined_into_one() {
    let served = Served::start(&[]);
    let client = served.h2_client().await;
    let mut req = request("GET", "/echo");
    // RFC 9113 8.2.3: a client may split cookies into separate fields; an
    // HTTP/1.1 hop must see them joined with "; ".
    for crumb in ["a=1", "b=2", "c=3"] {
        req.headers_mut()
            .append(http::header::COOKIE, crumb.parse().expect("cookie"));
    }
    let echo = client
        .send(req, Body::Empty)
        .await
        .expect("GET /echo")
        .json();
    assert_eq!(echoed_header(&echo, "cookie"), ["a=1; b=2; c=3"], "{echo}");
}

#[tokio::test]
async fn backend_down_is_a_502_on_the_stream_only() {
    // A port nothing listens on: bound, read, released.
    let dead = tern_testsupport::tern::free_addr().to_string();
    let served = Served::builder()
        .backend_addr(&dead)
        .args(&["--backend-connect-timeout", "2s"])
        .start();
    let client = served.h2_client().await;
    let response = client
        .get("/anything")
        .await
        .expect("a response, not a reset");
    assert!(
        response.status == StatusCode::BAD_GATEWAY
            || response.status == StatusCode::SERVICE_UNAVAILABLE,
        "status {} ({})",
        response.status,
        response.text()
    );
    // The connection survives a failed stream.
    let again = client.get("/again").await.expect("a second stream");
    assert!(again.status.is_server_error());
    assert!(!client.is_closed(), "tern closed the connection");
}

#[tokio::test]
async fn response_status_and_end_to_end_headers_are_relayed() {
    let served = Served::start(&[]);
    let client = served.h2_client().await;
    for code in [201u16, 404, 418, 503] {
        let response = client
            .get(&format!("/status/{code}"))
            .await
            .expect("GET /status");
        assert_eq!(response.status.as_u16(), code);
        assert_eq!(response.text(), format!("status {code}\n"));
    }
    let response = client.get("/status/204").await.expect("GET /status/204");
    assert_eq!(response.status, StatusCode::NO_CONTENT);
    assert!(response.body.is_empty());
}

#[tokio::test]
async fn connection_specific_response_headers_are_not_relayed() {
    let backend = RawBackend::start(
        b"HTTP/1.1 203 Non-Authoritative Information\r\n\
          Content-Length: 5\r\n\
          Connection: close\r\n\
          Keep-Alive: timeout=5\r\n\
          Proxy-Connection: keep-alive\r\n\
          X-Custom: kept\r\n\
          Set-Cookie: a=1\r\n\
          Set-Cookie: b=2\r\n\
          \r\nhello",
    );
    let served = Served::builder().backend_addr(backend.addr()).start();
    let client = served.h2_client().await;
    // The h2 client itself treats connection-specific fields in a response as
    // malformed (RFC 9113 8.2.2), so an error here means tern relayed them.
    let response = client
        .get("/")
        .await
        .unwrap_or_else(|e| panic!("response refused by the h2 client: {e}"));
    assert_eq!(response.status.as_u16(), 203);
    assert_eq!(response.text(), "hello");
    assert_eq!(response.header("x-custom"), Some("kept"));
    let cookies: Vec<_> = response.headers.get_all("set-cookie").iter().collect();
    assert_eq!(
        cookies,
        ["a=1", "b=2"],
        "set-cookie fields must stay separate"
    );
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
    ] {
        assert!(response.headers.get(name).is_none(), "{name} relayed");
    }
}

/// RFC 9113 section 8.2.2 / RFC 9110 section 7.6.1: fields the backend names
/// in its Connection header belong to that hop and must not reach the client.
#[tokio::test]
async fn response_fields_named_by_connection_are_not_relayed() {
    let backend = RawBackend::start(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: X-Hop\r\nX-Hop: secret\r\n\r\nok",
    );
    let served = Served::builder().backend_addr(backend.addr()).start();
    let client = served.h2_client().await;
    let response = client.get("/").await.expect("GET /");
    assert_eq!(response.text(), "ok");
    assert!(response.headers.get("x-hop").is_none(), "X-Hop was relayed");
}

#[tokio::test]
async fn te_trailers_from_an_h2_client_reaches_an_h1_backend_as_a_hop_field() {
    let served = Served::start(&[]);
    let client = served.h2_client().await;
    let mut req = Request::builder()
        .uri("https://localhost/echo")
        .body(())
        .expect("request");
    // `te: trailers` is the one connection-specific field h2 allows: the
    // client takes trailers, so tern tells the backend so, on this hop's
    // terms (RFC 9110 section 10.1.4: TE named in Connection).
    req.headers_mut()
        .insert("te", "trailers".parse().expect("te"));
    req.headers_mut()
        .insert("x-end-to-end", "kept".parse().expect("value"));
    let echo = client
        .send(req, Body::Empty)
        .await
        .expect("GET /echo")
        .json();
    assert_eq!(echoed_header(&echo, "x-end-to-end"), ["kept"], "{echo}");
    assert_eq!(echoed_header(&echo, "te"), ["trailers"], "{echo}");
    assert_eq!(echoed_header(&echo, "connection"), ["te"], "{echo}");
}
