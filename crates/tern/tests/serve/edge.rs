//! Edge policy (docs/edge-policy.md): header rules and HSTS, request IDs,
//! the request body limit, per-client limits and access lists, against
//! the real binary, curl and the rustls test client, with the harness's
//! hyper backend counting what reached it.

use tern_testsupport::backend::echoed_header;
use tern_testsupport::client::HttpConn;
use tern_testsupport::h2client::{self, bytes::Bytes, http::StatusCode};

use tern_testsupport::tern::{log_field, wait_until, ConfigContext, Served};
use tern_testsupport::tools::curl;

use crate::LOG_WAIT;

/// A listener in front of the harness's backend, with `extra` TOML lines
/// in its `[[listener]]` table (then any sub-tables).
pub(crate) fn listener(c: &ConfigContext<'_>, extra: &str) -> String {
    format!(
        "workers = 1\n[[listener]]\nlisten = \"{}\"\nbackends = [\"{}\"]\ncert = \"{}\"\nkey = \"{}\"\n{extra}",
        c.listen,
        c.backend.as_deref().expect("a backend"),
        c.chain(),
        c.key()
    )
}

const HEADER_RULES: &str = "hsts = \"max-age=31536000; includeSubDomains\"\n\
    [listener.response_headers]\n\
    set = { \"X-Frame-Options\" = \"DENY\" }\n\
    add = { \"X-Seen-Tls\" = \"${tls_version}\" }\n\
    remove = [\"Content-Type\"]\n\
    [listener.request_headers]\n\
    set = { \"X-Env\" = \"prod\" }\n\
    add = { \"X-Client\" = \"${client_ip}\" }\n\
    remove = [\"X-Drop-Me\"]\n";

/// The response head curl printed (`-D -`), lowercase.
fn curl_head(served: &Served, proto: &str, path: &str) -> String {
    let port = served.addr.port();
    let out = curl(&[
        "-sS",
        proto,
        "-o",
        "/dev/null",
        "-D",
        "-",
        "-H",
        "X-Drop-Me: 1",
        "--cacert",
        &served.ca().ca_file().display().to_string(),
        "--resolve",
        &format!("localhost:{port}:127.0.0.1"),
        &format!("https://localhost:{port}{path}"),
    ]);
    assert!(out.success(), "curl {proto}: {}", out.all());
    out.stdout.to_ascii_lowercase()
}

#[test]
fn hsts_and_response_rules_apply_to_h1_and_h2_responses() {
    let served = Served::builder()
        .config(|c| listener(c, HEADER_RULES))
        .start();
    for proto in ["--http1.1", "--http2"] {
        let head = curl_head(&served, proto, "/echo");
        assert!(
            head.contains("strict-transport-security: max-age=31536000; includesubdomains\r\n"),
            "{proto}: {head}"
        );
        assert!(
            head.contains("x-frame-options: deny\r\n"),
            "{proto}: {head}"
        );
        assert!(head.contains("x-seen-tls: tlsv1.3\r\n"), "{proto}: {head}");
        assert!(!head.contains("content-type:"), "{proto}: {head}");
        // Also on tern's own answers (no backend response to edit).
        let own = curl_head(&served, proto, "/status/404");
        assert!(own.contains("x-frame-options: deny"), "{proto}: {own}");
    }
}

#[test]
fn request_rules_reach_the_backend_and_cannot_forge_forwarding() {
    let served = Served::builder()
        .config(|c| listener(c, HEADER_RULES))
        .start();
    let (response, _conn) =
        served.raw(b"GET /echo HTTP/1.1\r\nHost: localhost\r\nX-Env: dev\r\nX-Drop-Me: 1\r\n\r\n");
    assert_eq!(response.status, 200, "{}", response.text());
    let echo = response.json();
    assert_eq!(echoed_header(&echo, "x-env"), ["prod"], "{echo}");
    assert_eq!(echoed_header(&echo, "x-client"), ["127.0.0.1"], "{echo}");
    assert!(echoed_header(&echo, "x-drop-me").is_empty(), "{echo}");
    assert_eq!(
        echoed_header(&echo, "x-forwarded-for"),
        ["127.0.0.1"],
        "{echo}"
    );
}

#[test]
fn request_id_is_generated_sent_echoed_and_logged_and_a_forged_one_replaced() {
    let served = Served::start(&[]);
    let (response, _conn) = served
        .raw(b"GET /echo HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: forged-by-client\r\n\r\n");
    assert_eq!(response.status, 200, "{}", response.text());
    let id = response
        .header("x-request-id")
        .expect("X-Request-Id on the response")
        .to_string();
    assert_eq!(id.len(), 32, "{id}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    let echo = response.json();
    assert_eq!(
        echoed_header(&echo, "x-request-id"),
        [id.as_str()],
        "{echo}"
    );
    logged(&served, &format!("request_id={id}"), &[]);
    let (second, _conn) = served.raw(b"GET /echo HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_ne!(second.header("x-request-id"), Some(id.as_str()));
}

#[test]
fn request_id_over_h2_is_the_one_the_backend_saw() {
    let served = Served::start(&[]);
    let port = served.addr.port();
    let out = curl(&[
        "-sS",
        "--http2",
        "-D",
        "-",
        "--cacert",
        &served.ca().ca_file().display().to_string(),
        "--resolve",
        &format!("localhost:{port}:127.0.0.1"),
        &format!("https://localhost:{port}/echo"),
    ]);
    assert!(out.success(), "{}", out.all());
    let (head, body) = out
        .stdout
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no head: {}", out.all()));
    assert!(head.starts_with("HTTP/2 200"), "{head}");
    let id = head
        .lines()
        .find_map(|l| l.strip_prefix("x-request-id: "))
        .unwrap_or_else(|| panic!("no x-request-id: {head}"));
    assert_eq!(id.len(), 32, "{id}");
    let echo: serde_json::Value = serde_json::from_str(body).expect("the echo");
    assert_eq!(echoed_header(&echo, "x-request-id"), [id], "{echo}");
}

#[test]
fn request_ids_can_be_uuidv7() {
    let served = Served::start(&[
        "--request-id-format",
        "uuidv7",
        "--request-id-header",
        "X-Trace",
    ]);
    let response = served.get("/echo");
    let id = response.header("x-trace").expect("X-Trace").to_string();
    // 8-4-4-4-12 hex digits, version 7.
    assert_eq!(id.len(), 36, "{id}");
    assert_eq!(&id[14..15], "7", "{id}");
}

#[test]
fn oversized_content_length_is_413_and_the_backend_sees_nothing() {
    let served = Served::start(&["--max-request-body", "1KiB"]);
    let (response, _conn) =
        served.raw(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3000000\r\n\r\n");
    assert_eq!(response.status, 413, "{}", response.text());
    let (small, _conn) =
        served.raw(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!(small.status, 200, "{}", small.text());
    assert_eq!(
        served.backend().requests(),
        1,
        "the oversized request reached the backend"
    );
    logged(&served, "error=client:body_too_large", &["status=413"]);
}

#[test]
fn oversized_chunked_and_h2_bodies_are_413() {
    let served = Served::start(&["--max-request-body", "1KiB"]);
    let mut chunked =
        b"POST /echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    chunked
        .extend_from_slice(format!("{:x}\r\n{}\r\n0\r\n\r\n", 3000, "a".repeat(3000)).as_bytes());
    let (response, _conn) = served.raw(&chunked);
    assert_eq!(response.status, 413, "{}", response.text());
    assert_eq!(
        served.backend().requests(),
        0,
        "the chunked body reached the backend"
    );
}

/// An HTTP/2 body without content-length, over the limit, to an HTTP/1.1
/// backend (pulled piece by piece) and to an HTTP/2 one (moved whole,
/// full duplex): 413 either way.
#[tokio::test]
async fn oversized_h2_bodies_are_413_for_both_backend_protocols() {
    for served in [
        Served::builder().args(&["--max-request-body", "1KiB"]).start(),
        Served::builder()
            .backend_h2c()
            .config(|c| {
                format!(
                    "workers = 1\n[[upstream]]\nname = \"h2c\"\nprotocol = \"h2c\"\nservers = [\"{}\"]\n\
                     [[listener]]\nlisten = \"{}\"\nupstream = \"h2c\"\ncert = \"{}\"\nkey = \"{}\"\nmax_request_body = \"1KiB\"\n",
                    c.backend.as_deref().expect("a backend"),
                    c.listen,
                    c.chain(),
                    c.key()
                )
            })
            .start(),
    ] {
        let client = served.h2_client().await;
        let chunks = (0..4).map(|_| Bytes::from(vec![b'b'; 25_000])).collect();
        let response = client
            .send(h2client::request("POST", "/echo"), h2client::Body::Chunks(chunks))
            .await
            .expect("a response");
        assert_eq!(response.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", response.text());
        let line = logged(&served, "error=client:body_too_large", &["alpn=h2"]);
        assert_eq!(log_field(&line, "status"), Some("413"), "{line}");
    }
}

#[test]
fn a_client_over_its_rate_gets_429_while_another_address_is_served() {
    let served = Served::start(&["--client-rate", "1/h", "--client-burst", "1"]);
    let client = |source: [u8; 4]| {
        HttpConn::connect_from(
            source.into(),
            served.addr,
            "localhost",
            served.client.clone(),
        )
        .expect("connect to tern")
    };
    let mut conn = client([127, 0, 0, 1]);
    for _ in 0..2 {
        let r = conn.get("localhost", "/echo").expect("response");
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let limited = conn.get("localhost", "/echo").expect("response");
    assert_eq!(limited.status, 429, "{}", limited.text());
    let after: u64 = limited
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("seconds");
    assert!(after > 60, "{after}");
    // Another address (127.0.0.2 is loopback too) has its own bucket.
    let r = client([127, 0, 0, 2])
        .get("localhost", "/echo")
        .expect("response");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(served.backend().requests(), 3);
    logged(&served, "error=client:rate_limited", &["status=429"]);
}

/// The first access-log line containing `needle`, checked to contain
/// every one of `also`.
fn logged(served: &Served, needle: &str, also: &[&str]) -> String {
    let lines = served
        .tern
        .wait_stdout_lines(needle, 1, LOG_WAIT)
        .unwrap_or_else(|e| panic!("no access-log line with {needle}: {e:?}"));
    let line = lines[0].clone();
    for a in also {
        assert!(line.contains(a), "{a} not in {line}");
    }
    line
}

/// Tries a whole TLS handshake with `served` and says whether tern
/// closed the connection instead (a kept connection completes it, and a
/// completed handshake is counted).
fn closed_before_handshake(served: &Served) -> bool {
    match HttpConn::connect(served.addr, "localhost", served.client.clone()) {
        Ok(_) => false,
        Err(e) => {
            assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "no close: {e}");
            assert_ne!(e.kind(), std::io::ErrorKind::TimedOut, "no close: {e}");
            true
        }
    }
}

#[test]
fn connections_over_the_per_client_limit_are_closed_before_any_handshake() {
    let served = Served::builder()
        .admin()
        .args(&[
            "--workers",
            "1",
            "--client-max-connections",
            "2",
            "--log-rejected",
            "true",
        ])
        .start();
    let _a = served.connect();
    let _b = served.connect();
    wait_until("two handshakes counted", LOG_WAIT, || {
        served.scrape().sum("tern_tls_handshakes_total", &[]) == 2.0
    });
    let handshakes = 2.0;
    for _ in 0..5 {
        assert!(
            closed_before_handshake(&served),
            "a third connection was kept"
        );
    }
    let scrape = served.scrape();
    assert_eq!(scrape.sum("tern_tls_handshakes_total", &[]), handshakes);
    assert_eq!(
        scrape.sum(
            "tern_request_errors_total",
            &[("side", "client"), ("kind", "too_many_connections")]
        ),
        5.0
    );
    logged(
        &served,
        "error=client:too_many_connections",
        &["method=-", "status=0"],
    );
}

#[test]
fn a_denied_network_is_closed_before_the_handshake_and_logged() {
    let served = Served::builder()
        .admin()
        .args(&["--deny", "127.0.0.0/8", "--log-rejected", "true"])
        .start();
    assert!(closed_before_handshake(&served));
    let scrape = served.scrape();
    assert_eq!(scrape.sum("tern_tls_handshakes_total", &[]), 0.0);
    let line = logged(&served, "error=client:denied", &["method=-"]);
    assert_eq!(log_field(&line, "status"), Some("0"), "{line}");
}

#[test]
fn a_route_denies_with_403_and_other_hosts_are_served() {
    let served = Served::builder()
        .cert_names(&["localhost", "admin.test"])
        .config(|c| {
            format!(
                "{}\n[[upstream]]\nname = \"admin\"\nservers = [\"{}\"]\n\
                 [[listener.route]]\nhost = \"admin.test\"\nupstream = \"admin\"\ndeny = [\"127.0.0.1\"]\n",
                listener(c, ""),
                c.backend.as_deref().expect("a backend")
            )
        })
        .start();
    let (denied, _c) = served.raw(b"GET /echo HTTP/1.1\r\nHost: admin.test\r\n\r\n");
    assert_eq!(denied.status, 403, "{}", denied.text());
    let (ok, _c) = served.raw(b"GET /echo HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(served.backend().requests(), 1);
}

/// testssl.sh (`.ci/run` installs Debian's) reads the response headers as
/// an auditor would: with `hsts` and the usual security headers set, it
/// reports HSTS offered and each header, where tern without them got "HSTS
/// not offered" (issue 25).
#[test]
fn testssl_sees_hsts_and_the_security_headers() {
    if !tern_testsupport::tools::run_tool("testssl", ["--version"], b"", LOG_WAIT).success() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "testssl.sh is not installed: .ci/run installs it"
        );
        eprintln!("skipped: testssl.sh is not installed (apt-get install testssl.sh)");
        return;
    }
    let served = Served::builder()
        .config(|c| {
            listener(
                c,
                "hsts = \"max-age=31536000; includeSubDomains\"\n\
                 [listener.response_headers]\n\
                 set = { \"X-Frame-Options\" = \"DENY\", \"X-Content-Type-Options\" = \"nosniff\", \
                 \"Content-Security-Policy\" = \"default-src 'self'\" }\n",
            )
        })
        .start();
    let out = tern_testsupport::tools::run_tool(
        "testssl",
        [
            "--headers",
            "--color",
            "0",
            "--warnings",
            "off",
            "--quiet",
            &format!("https://{}/echo", served.addr),
        ],
        b"",
        std::time::Duration::from_secs(180),
    );
    let text = out.stdout;
    let line = |label: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label:?} line in testssl's output:\n{text}"))
            .to_string()
    };
    let hsts = line("Strict Transport Security");
    assert!(
        hsts.contains("365 days") && hsts.contains("includeSubDomains"),
        "{hsts}"
    );
    assert!(!text.contains("not offered"), "{text}");
    for header in [
        "X-Frame-Options: DENY",
        "X-Content-Type-Options: nosniff",
        "Content-Security-Policy",
    ] {
        assert!(
            text.contains(header),
            "{header} not seen by testssl:\n{text}"
        );
    }
}
