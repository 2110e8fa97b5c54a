//! `protocol = "h2"` groups: HTTP/2 and HTTP/1.1 clients reach a real
//! HTTP/2-over-TLS backend (ALPN h2, certificate from its own test CA)
//! through one multiplexed session per server and worker. A backend whose
//! certificate does not verify, or that does not select h2, is a failed
//! connect: 502 and a log line saying why. Trust comes from `tls_ca`,
//! which a reload re-reads.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tern_testsupport::backend::{echoed_header, pattern, sha256_hex, Backend};
use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::h2client::{h2_client_config, request, Body, H2Client};
use tern_testsupport::reload::{hangup, wait_stderr_lines};
use tern_testsupport::tempdir::TempDir;
use tern_testsupport::tern::{free_addr, run_to_exit, tern_bin, wait_until, Served};

use crate::h2c::{assert_true_forwarding_fields, get_200_concurrent_streams, FORGED};

use crate::{servers, start_front};

/// An HTTP/2-over-TLS backend with a certificate for `names` from `ca`.
fn h2_backend(ca: &mut TestCa, names: &[&str]) -> Backend {
    let cert = ca.leaf(names, KeyKind::EcdsaP256);
    Backend::start_tls(&cert, &["h2"])
}

/// tern (`workers` workers) in front of one h2 group `app` of `addrs`
/// trusting the CA file `tls_ca`, with `extra` keys in the group.
fn h2_front(workers: usize, addrs: &[SocketAddr], tls_ca: &Path, extra: &str) -> Served {
    let upstreams = format!(
        "[[upstream]]\nname = \"app\"\nprotocol = \"h2\"\ntls_ca = {:?}\n{extra}{}\n",
        tls_ca.display().to_string(),
        servers(addrs)
    );
    start_front(workers, &upstreams, "app", "")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_client_reaches_h2_tls_backend_with_true_forwarding_fields() {
    let mut backend_ca = TestCa::new();
    let backend = h2_backend(&mut backend_ca, &["127.0.0.1"]);
    let front = h2_front(1, &[backend.addr()], backend_ca.ca_file(), "");
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
    let response = client.send(get, Body::Empty).await.expect("GET /echo");
    assert_eq!(
        response.status,
        200,
        "{}\n{}",
        response.text(),
        front.tern.stderr_text()
    );
    let json = response.json();
    assert_true_forwarding_fields(&json);
    assert_eq!(json["path"], "/echo?q=1");

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
    let response = client.get("/bytes/1048576").await.expect("download");
    assert_eq!(response.status, 200);
    assert!(response.body == pattern(1 << 20), "1 MiB body differs");
    assert_eq!(backend.connections(), 1, "one session for every request");
}

#[test]
fn http1_client_reaches_h2_tls_backend_checked_by_tls_server_name() {
    let mut backend_ca = TestCa::new();
    // The certificate names a service, not the address tern dials.
    let backend = h2_backend(&mut backend_ca, &["backend.internal"]);
    let front = h2_front(
        1,
        &[backend.addr()],
        backend_ca.ca_file(),
        "tls_server_name = \"backend.internal\"\n",
    );
    let mut conn = front.connect();
    let mut forged = String::new();
    for (name, value) in FORGED {
        forged.push_str(&format!("{name}: {value}\r\n"));
    }
    conn.send(
        format!(
            "GET /echo HTTP/1.1\r\nHost: localhost\r\n{forged}Connection: keep-alive, X-Hop\r\n\
             X-Hop: 1\r\nTE: trailers\r\n\r\n"
        )
        .as_bytes(),
    )
    .expect("send");
    let response = conn.read_response(false).expect("echo response");
    assert_eq!(
        response.status,
        200,
        "{}\n{}",
        response.text(),
        front.tern.stderr_text()
    );
    let json = response.json();
    assert_true_forwarding_fields(&json);
    assert!(echoed_header(&json, "x-hop").is_empty(), "{json}");

    // A POST body and a 1 MiB download on the same client connection.
    let body = pattern(200_000);
    let mut post = format!(
        "POST /sha HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    post.extend_from_slice(&body);
    conn.send(&post).expect("send POST");
    let response = conn.read_response(false).expect("sha response");
    assert_eq!(response.json()["sha256"], sha256_hex(&body));
    conn.send(b"GET /bytes/1048576 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("send");
    let response = conn.read_response(false).expect("download");
    assert_eq!(response.status, 200);
    assert!(response.body == pattern(1 << 20), "1 MiB body differs");
    assert_eq!(backend.connections(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_share_one_tls_backend_connection() {
    let mut backend_ca = TestCa::new();
    let backend = h2_backend(&mut backend_ca, &["127.0.0.1"]);
    let front = h2_front(1, &[backend.addr()], backend_ca.ca_file(), "");
    let config = h2_client_config(front.ca().ca_pem());
    get_200_concurrent_streams(front.addr, config).await;
    assert_eq!(backend.requests(), 200);
    assert_eq!(
        backend.connections(),
        1,
        "200 concurrent streams from 4 clients over one TLS backend session"
    );
}

#[test]
fn backend_certificate_from_another_ca_is_a_502_with_a_log_line() {
    let mut backend_ca = TestCa::new();
    let backend = h2_backend(&mut backend_ca, &["127.0.0.1"]);
    let other_ca = TestCa::new();
    let front = h2_front(1, &[backend.addr()], other_ca.ca_file(), "");
    let response = front.get("/echo");
    assert_eq!(response.status, 502, "{}", response.text());
    front.wait_log(
        &["WARN", "certificate", &backend.addr().to_string()],
        Duration::from_secs(2),
    );
    assert_eq!(backend.requests(), 0);
}

#[test]
fn backend_certificate_for_another_name_is_a_502() {
    let mut backend_ca = TestCa::new();
    let backend = h2_backend(&mut backend_ca, &["other.internal"]);
    let front = h2_front(1, &[backend.addr()], backend_ca.ca_file(), "");
    let response = front.get("/echo");
    assert_eq!(response.status, 502, "{}", response.text());
    front.wait_log(
        &["WARN", "certificate", &backend.addr().to_string()],
        Duration::from_secs(2),
    );
}

#[test]
fn backend_without_alpn_h2_is_a_502_with_a_log_line() {
    let mut backend_ca = TestCa::new();
    let cert = backend_ca.leaf(&["127.0.0.1"], KeyKind::EcdsaP256);
    // Offers only http/1.1: the handshake fails (no common protocol).
    let http1_only = Backend::start_tls(&cert, &["http/1.1"]);
    // Ignores ALPN: the handshake succeeds, but without h2.
    let no_alpn = Backend::start_tls(&cert, &[]);
    for (backend, needle) in [
        (&http1_only, "does not offer ALPN h2"),
        (&no_alpn, "not h2"),
    ] {
        let front = h2_front(1, &[backend.addr()], backend_ca.ca_file(), "");
        let response = front.get("/echo");
        assert_eq!(response.status, 502, "{}", response.text());
        front.wait_log(
            &["WARN", "TLS", needle, &backend.addr().to_string()],
            Duration::from_secs(2),
        );
        assert_eq!(backend.requests(), 0);
    }
}

#[test]
fn silent_tls_backend_times_out_within_the_connect_timeout() {
    // Accepts TCP (the kernel completes it) but never answers the ClientHello.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = silent.local_addr().expect("addr");
    let backend_ca = TestCa::new();
    let upstreams = format!(
        "[[upstream]]\nname = \"app\"\nprotocol = \"h2\"\ntls_ca = {:?}\n{}\n",
        backend_ca.ca_file().display().to_string(),
        servers(&[addr])
    );
    let front = start_front(
        1,
        &upstreams,
        "app",
        "backend_connect_timeout = \"300ms\"\n",
    );
    let started = std::time::Instant::now();
    let response = front.get("/echo");
    let took = started.elapsed();
    assert_eq!(response.status, 504, "{}", response.text());
    assert!(took < Duration::from_secs(2), "504 took {took:?}");
    drop(silent);
}

#[test]
fn failed_tls_counts_towards_passive_ejection() {
    let mut backend_ca = TestCa::new();
    let backend = h2_backend(&mut backend_ca, &["127.0.0.1"]);
    let other_ca = TestCa::new();
    let front = h2_front(
        1,
        &[backend.addr()],
        other_ca.ca_file(),
        "max_fails = 1\nfail_timeout = \"60s\"\n",
    );
    assert_eq!(front.get("/echo").status, 502);
    // Ejected after one failure: the next request is refused at once.
    assert_eq!(front.get("/echo").status, 503);
    front.wait_log(&["backend ejected"], Duration::from_secs(2));
}

#[test]
fn health_checks_speak_h2_over_tls() {
    let mut backend_ca = TestCa::new();
    let live = h2_backend(&mut backend_ca, &["127.0.0.1"]);
    let untrusted = h2_backend(&mut TestCa::new(), &["127.0.0.1"]);
    // fall = 1: a check timed out on a loaded machine would mark the live
    // server down, so the timeout is far above such a stall; the
    // untrusted server fails at once, on its certificate.
    let extra = "health_check_path = \"/status/200\"\nhealth_check_interval = \"100ms\"\n\
                 health_check_timeout = \"5s\"\nrise = 1\nfall = 1\n";
    let front = h2_front(
        1,
        &[live.addr(), untrusted.addr()],
        backend_ca.ca_file(),
        extra,
    );
    front.wait_log(
        &["backend down", "certificate", &untrusted.addr().to_string()],
        Duration::from_secs(3),
    );
    // Three more checks of the live server (fall = 1: one failed check
    // would mark it down).
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
    assert!(live.requests() > 0, "the live server was never checked");
    assert_eq!(front.get("/echo").status, 200);
}

#[test]
fn reload_rereads_tls_ca() {
    let mut backend_ca = TestCa::new();
    let backend = h2_backend(&mut backend_ca, &["127.0.0.1"]);
    let dir = TempDir::new("h2-tls-reload");
    let ca_path = dir.path().join("backend-ca.pem");
    std::fs::write(&ca_path, TestCa::new().ca_pem()).expect("write a CA that does not fit");
    let mut front = h2_front(1, &[backend.addr()], &ca_path, "");
    assert_eq!(front.get("/echo").status, 502);
    std::fs::write(&ca_path, backend_ca.ca_pem()).expect("write the backend's CA");
    hangup(&mut front.tern);
    if let Err(stderr) = wait_stderr_lines(&front.tern, "reloaded", 1, Duration::from_secs(5)) {
        panic!("no reload:\n{stderr}");
    }
    let response = front.get("/echo");
    assert_eq!(response.status, 200, "{}", response.text());
}

/// Runs `tern serve --check` on a config with one upstream group made of
/// `group` keys (after its name and servers) and returns (exit code, stderr).
pub(crate) fn check_config(dir: &Path, group: &str) -> (Option<i32>, String) {
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["localhost"], KeyKind::EcdsaP256);
    let path = dir.join("tern.toml");
    let config = format!(
        "[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:9\"]\n{group}\n\
         [[listener]]\nlisten = \"{}\"\nupstream = \"app\"\ncert = {:?}\nkey = {:?}\n",
        free_addr(),
        cert.chain.display().to_string(),
        cert.key.display().to_string(),
    );
    std::fs::write(&path, config).expect("write config");
    let path = path.display().to_string();
    let done = run_to_exit(
        tern_bin(),
        ["serve", "--config", path.as_str(), "--check"],
        Duration::from_secs(10),
    );
    (done.status.and_then(|s| s.code()), done.stderr)
}

#[test]
fn config_errors_name_the_line_and_exit_1() {
    let dir = TempDir::new("h2-tls-config");
    let not_pem = dir.path().join("not-a-ca.pem");
    std::fs::write(&not_pem, "just text\n").expect("write");
    let ca = TestCa::new();
    let ca_file = format!("{:?}", ca.ca_file().display().to_string());
    let cases = [
        (
            "protocol = \"h2\"\ntls = false\n".to_string(),
            "tern.toml:5:",
            "tls = false",
        ),
        (
            "protocol = \"h2\"\ntls_ca = \"/nonexistent/ca.pem\"\n".to_string(),
            "tern.toml:5:",
            "/nonexistent/ca.pem",
        ),
        (
            format!(
                "protocol = \"h2\"\ntls_ca = {:?}\n",
                not_pem.display().to_string()
            ),
            "tern.toml:5:",
            "no CERTIFICATE",
        ),
        (
            format!("protocol = \"h2c\"\ntls_ca = {ca_file}\n"),
            "tern.toml:5:",
            "only applies with TLS to the servers",
        ),
        (
            format!("protocol = \"h2\"\ntls_ca = {ca_file}\ntls_server_name = \"bad name!\"\n"),
            "tern.toml:6:",
            "neither a DNS name nor an IP address",
        ),
    ];
    for (group, line, reason) in cases {
        let (code, stderr) = check_config(dir.path(), &group);
        assert_eq!(code, Some(1), "{group}: {stderr}");
        let error = stderr
            .lines()
            .find(|l| l.contains(line))
            .unwrap_or_else(|| panic!("{group}: no line naming {line}: {stderr}"));
        assert!(error.contains(reason), "{group}: {error}");
    }
    let (code, stderr) = check_config(
        dir.path(),
        &format!("protocol = \"h2\"\ntls_ca = {ca_file}\n"),
    );
    assert_eq!(code, Some(0), "a valid h2 group was refused: {stderr}");
}
