//! `protocol = "h2c"` groups: HTTP/2 and HTTP/1.1 clients reach a real
//! HTTP/2 (prior knowledge) backend through one multiplexed session per
//! server and worker, with the same forwarding rules as HTTP/1.1 backends.

use std::time::{Duration, Instant};

use tern_testsupport::backend::{echoed_header, pattern, sha256_hex, Backend};
use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::h2client::{h2_client_config, request, Body, H2Client};
use tern_testsupport::tempdir::TempDir;
use tern_testsupport::tern::{free_addr, run_to_exit, tern_bin, wait_until, Served};
use tern_testsupport::tools::curl;

use crate::{servers, start_front};

/// tern (`workers` workers) in front of one h2c group `app` of `addrs`.
fn h2c_front(workers: usize, addrs: &[std::net::SocketAddr], extra: &str) -> Served {
    let upstreams = format!(
        "[[upstream]]\nname = \"app\"\nprotocol = \"h2c\"\n{extra}{}\n",
        servers(addrs)
    );
    start_front(workers, &upstreams, "app", "")
}

/// Forwarding fields a client forges; none may reach a backend.
pub(crate) const FORGED: [(&str, &str); 4] = [
    ("x-forwarded-for", "6.6.6.6"),
    ("x-real-ip", "6.6.6.6"),
    ("forwarded", "for=6.6.6.6"),
    ("x-forwarded-proto", "gopher"),
];

/// Checks that an HTTP/2 backend saw tern's forwarding fields only, and
/// no connection-specific ones.
pub(crate) fn assert_true_forwarding_fields(json: &serde_json::Value) {
    let text = json.to_string();
    assert!(
        !text.contains("6.6.6.6"),
        "a forged field got through: {text}"
    );
    assert!(
        !text.contains("gopher"),
        "a forged field got through: {text}"
    );
    assert_eq!(
        echoed_header(json, "x-forwarded-for"),
        ["127.0.0.1"],
        "{text}"
    );
    assert_eq!(
        echoed_header(json, "x-forwarded-proto"),
        ["https"],
        "{text}"
    );
    assert_eq!(
        echoed_header(json, "forwarded"),
        ["for=127.0.0.1;proto=https;host=\"localhost\""],
        "{text}"
    );
    assert_eq!(json["version"], "HTTP/2.0", "{text}");
    assert_eq!(json["authority"], "localhost", "{text}");
    for hop in ["connection", "keep-alive", "transfer-encoding", "host"] {
        assert!(
            echoed_header(json, hop).is_empty(),
            "{hop} reached the backend: {text}"
        );
    }
    // `te: trailers` (the one TE value HTTP/2 allows) goes on when the
    // client sent it; no other TE ever does.
    assert!(
        echoed_header(json, "te").iter().all(|v| v == "trailers"),
        "{text}"
    );
}

#[test]
fn config_accepts_h2c_and_refuses_h2_over_cleartext_naming_the_line() {
    let dir = TempDir::new("h2c-config");
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["localhost"], KeyKind::EcdsaP256);
    let check = |protocol: &str| {
        let path = dir.path().join(format!("{protocol}.toml"));
        // h2 is HTTP/2 over TLS: turning TLS off contradicts it.
        let config = format!(
            "[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:9\"]\nprotocol = \"{protocol}\"\ntls = false\n\
             [[listener]]\nlisten = \"127.0.0.1:0\"\nupstream = \"app\"\ncert = {:?}\nkey = {:?}\n",
            cert.chain.display().to_string(),
            cert.key.display().to_string(),
        );
        std::fs::write(&path, config).expect("write config");
        let path = path.display().to_string();
        run_to_exit(
            tern_bin(),
            ["serve", "--config", path.as_str(), "--check"],
            Duration::from_secs(10),
        )
    };
    let h2 = check("h2");
    assert!(
        !h2.status.is_some_and(|s| s.success()),
        "h2 was accepted: {}",
        h2.stderr
    );
    assert!(
        h2.stderr.contains("h2.toml:5:") && h2.stderr.contains("protocol \"h2\""),
        "{}",
        h2.stderr
    );
    let h2c = check("h2c");
    assert!(
        h2c.status.is_some_and(|s| s.success()),
        "{}{}",
        h2c.stdout,
        h2c.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_client_reaches_h2c_backend_with_true_forwarding_fields() {
    let backend = Backend::start_h2c();
    let front = h2c_front(1, &[backend.addr()], "");
    let client = H2Client::connect(front.addr, h2_client_config(front.ca().ca_pem()))
        .await
        .expect("h2 connect");
    let mut get = request("GET", "/echo?q=1");
    for (name, value) in FORGED {
        get.headers_mut()
            .append(name, value.parse().expect("header value"));
    }
    get.headers_mut()
        .append("te", "trailers".parse().expect("header value"));
    get.headers_mut()
        .append("cookie", "a=1".parse().expect("header value"));
    get.headers_mut()
        .append("cookie", "b=2".parse().expect("header value"));
    let response = client.send(get, Body::Empty).await.expect("GET /echo");
    assert_eq!(response.status, 200, "{}", response.text());
    let json = response.json();
    assert_true_forwarding_fields(&json);
    assert_eq!(echoed_header(&json, "te"), ["trailers"], "{json}");
    assert_eq!(json["path"], "/echo?q=1");
    assert_eq!(
        echoed_header(&json, "cookie").len(),
        2,
        "split cookies stay split"
    );

    // A 300 KB upload in pieces and a 1 MiB download, intact.
    let upload = pattern(300_000);
    let chunks = upload.chunks(7_000).map(|c| c.to_vec().into()).collect();
    let response = client
        .send(request("POST", "/sha"), Body::Chunks(chunks))
        .await
        .expect("POST /sha");
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["len"], 300_000);
    assert_eq!(response.json()["sha256"], sha256_hex(&upload));
    for path in ["/bytes/1048576", "/chunked/1048576"] {
        let response = client.get(path).await.expect("download");
        assert_eq!(response.status, 200);
        assert!(response.body == pattern(1 << 20), "{path}: body differs");
    }
    let response = client.get("/status/204").await.expect("204");
    assert_eq!(response.status, 204);
    assert!(response.body.is_empty());
    assert_eq!(backend.connections(), 1, "one session for every request");
}

#[test]
fn http1_client_reaches_h2c_backend_and_keeps_its_connection() {
    let backend = Backend::start_h2c();
    let front = h2c_front(1, &[backend.addr()], "");
    let mut conn = front.connect();
    let mut forged = String::new();
    for (name, value) in FORGED {
        forged.push_str(&format!("{name}: {value}\r\n"));
    }
    conn.send(
        format!(
            "GET /echo HTTP/1.1\r\nHost: localhost\r\n{forged}Connection: keep-alive, X-Hop\r\n\
             X-Hop: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\n\r\n"
        )
        .as_bytes(),
    )
    .expect("send");
    let response = conn.read_response(false).expect("echo response");
    assert_eq!(response.status, 200, "{}", response.text());
    let json = response.json();
    assert_true_forwarding_fields(&json);
    assert!(echoed_header(&json, "x-hop").is_empty(), "{json}");

    // The same connection carries a Content-Length upload, a HEAD, a 304
    // and a body the backend sent without a length (chunked to us).
    let body = pattern(20_000);
    let mut post = format!(
        "POST /sha HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    post.extend_from_slice(&body);
    conn.send(&post).expect("send POST");
    let response = conn.read_response(false).expect("sha response");
    assert_eq!(response.json()["sha256"], sha256_hex(&body));
    conn.send(b"HEAD /bytes/1000 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("send HEAD");
    let response = conn.read_response(true).expect("HEAD response");
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-length"), Some("1000"));
    conn.send(b"GET /status/304 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("send");
    assert_eq!(conn.read_response(false).expect("304").status, 304);
    conn.send(b"GET /chunked/100000 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("send");
    let response = conn.read_response(false).expect("chunked response");
    assert_eq!(response.header("transfer-encoding"), Some("chunked"));
    assert!(response.body == pattern(100_000), "chunked body differs");
    let response = conn.get("localhost", "/echo").expect("still open");
    assert_eq!(response.status, 200);
    assert_eq!(backend.connections(), 1);
}

#[test]
fn curl_uploads_chunked_and_downloads_a_mebibyte_through_h2c() {
    let backend = Backend::start_h2c();
    let front = h2c_front(1, &[backend.addr()], "");
    let dir = TempDir::new("h2c-curl");
    let upload = pattern(300_000);
    let upload_path = dir.path().join("upload.bin");
    std::fs::write(&upload_path, &upload).expect("write upload");
    let download_path = dir.path().join("download.bin");
    let port = front.addr.port();
    let resolve = format!("localhost:{port}:127.0.0.1");
    let ca = front.ca().ca_file().display().to_string();
    let data = format!("@{}", upload_path.display());
    let sha_url = format!("https://localhost:{port}/sha");
    let out = curl(&[
        "-sS",
        "--http1.1",
        "--cacert",
        &ca,
        "--resolve",
        &resolve,
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        &data,
        &sha_url,
    ]);
    assert!(out.success(), "{}\n{}", out.all(), front.tern.stderr_text());
    assert!(
        out.stdout.contains(&sha256_hex(&upload)) && out.stdout.contains("\"len\":300000"),
        "{}",
        out.all()
    );
    let output = download_path.display().to_string();
    let bytes_url = format!("https://localhost:{port}/bytes/1048576");
    let out = curl(&[
        "-sS",
        "--http1.1",
        "--cacert",
        &ca,
        "--resolve",
        &resolve,
        "-o",
        &output,
        &bytes_url,
    ]);
    assert!(out.success(), "{}", out.all());
    let got = std::fs::read(&download_path).expect("downloaded file");
    assert!(
        got == pattern(1 << 20),
        "download differs ({} bytes)",
        got.len()
    );
    // curl's own HTTP/2 (ALPN h2) works too.
    let out = curl(&[
        "-sS",
        "--http2",
        "--cacert",
        &ca,
        "--resolve",
        &resolve,
        "-o",
        &output,
        &bytes_url,
    ]);
    assert!(out.success(), "{}", out.all());
    let got = std::fs::read(&download_path).expect("downloaded file");
    assert!(
        got == pattern(1 << 20),
        "h2 download differs ({} bytes)",
        got.len()
    );
    assert_eq!(backend.connections(), 1);
}

/// 200 concurrent `GET /slow/20` over 4 h2 client connections to `front`;
/// every one must be answered 200.
pub(crate) async fn get_200_concurrent_streams(
    front: std::net::SocketAddr,
    config: std::sync::Arc<tern_testsupport::rustls::ClientConfig>,
) {
    let mut clients = Vec::new();
    for _ in 0..4 {
        let client = H2Client::connect(front, config.clone())
            .await
            .expect("h2 connect");
        clients.push(std::sync::Arc::new(client));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..200 {
        let client = clients[i % clients.len()].clone();
        tasks.spawn(async move { client.get("/slow/20").await.map(|r| r.status) });
    }
    let mut answered = 0;
    while let Some(joined) = tasks.join_next().await {
        let status = joined.expect("task").expect("response");
        assert_eq!(status, 200);
        answered += 1;
    }
    assert_eq!(answered, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_share_one_backend_connection() {
    let backend = Backend::start_h2c();
    let front = h2c_front(1, &[backend.addr()], "");
    let config = h2_client_config(front.ca().ca_pem());
    get_200_concurrent_streams(front.addr, config).await;
    assert_eq!(backend.requests(), 200);
    assert_eq!(
        backend.connections(),
        1,
        "200 concurrent streams from 4 clients over one backend session"
    );
}

#[test]
fn unreachable_h2c_backend_gives_502_then_503_at_once() {
    let dead = free_addr();
    let front = h2c_front(1, &[dead], "max_fails = 1\nfail_timeout = \"60s\"\n");
    let first = front.get("/echo");
    assert_eq!(first.status, 502, "{}", first.text());
    let mut conn = front.connect();
    let started = Instant::now();
    let second = conn.get("localhost", "/echo").expect("second response");
    let took = started.elapsed();
    assert_eq!(second.status, 503, "{}", second.text());
    // Generous: tern is a debug build in its own process on a shared
    // machine; the 503 itself shows the dead server was not tried.
    assert!(took < Duration::from_secs(3), "503 took {took:?}");
}

#[test]
fn http1_backend_in_an_h2c_group_is_a_failed_connect() {
    // A server that speaks only HTTP/1.1 fails the HTTP/2 preface: 502,
    // with a log line saying why.
    let http1 = Backend::start();
    let front = h2c_front(1, &[http1.addr()], "");
    let response = front.get("/echo");
    assert_eq!(response.status, 502, "{}", response.text());
    front.wait_log(
        &["HTTP/2", &http1.addr().to_string()],
        Duration::from_secs(2),
    );
}

#[test]
fn health_checks_speak_h2c() {
    let live = Backend::start_h2c();
    let dead = free_addr();
    // A check that failed on time alone would mark the live server down
    // (fall = 1): the timeout is far above what a loaded machine's stall
    // can take; the dead server fails at once, refused.
    let extra = "health_check_path = \"/status/200\"\nhealth_check_interval = \"100ms\"\n\
                 health_check_timeout = \"5s\"\nrise = 1\nfall = 1\n";
    let front = h2c_front(1, &[live.addr(), dead], extra);
    front.wait_log(&["backend down", &dead.to_string()], Duration::from_secs(3));
    // The live server passes its checks: it is never marked down, over
    // three more checks (fall = 1: one failed check would say so).
    let checked = live.requests();
    wait_until(
        "three more health checks of the live server",
        Duration::from_secs(5),
        || live.requests() >= checked + 3,
    );
    let text = front.tern.stderr_text();
    assert!(
        !text
            .lines()
            .any(|l| l.contains("backend down") && l.contains(&live.addr().to_string())),
        "{text}"
    );
    assert_eq!(front.get("/echo").status, 200);
}
