//! Integration tests of `tern serve --admin`: the real binary in front of a
//! real backend, real TLS clients, and /metrics scraped over a plain TCP
//! socket and read with a strict Prometheus text parser. Each test starts
//! its own tern, so the counters it reads move only by what it did.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use tern_testsupport::client::HttpConn;
use tern_testsupport::prometheus::Scrape;
use tern_testsupport::rustls::HandshakeKind;
use tern_testsupport::tern::{free_addr, Served};
use tern_testsupport::tools;

/// The admin listener's head-read deadline (`admin::READ_TIMEOUT`).
const ADMIN_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections the admin listener serves at once (`admin::MAX_CONNECTIONS`).
const ADMIN_MAX_CONNECTIONS: usize = 32;

/// tern with `--backend`, `--cert` (for `localhost`) and `--admin` on
/// the command line.
fn admin_tern() -> Served {
    admin_tern_with(&[])
}

/// Like [`admin_tern`], with `extra` flags.
fn admin_tern_with(extra: &[&str]) -> Served {
    Served::builder()
        .cert_names(&["localhost"])
        .admin()
        .args(extra)
        .start()
}

/// tern from a config file: one listener forwarding to the group named
/// `upstream`, which `upstream_toml` (given the test backend's address)
/// defines as an `[[upstream]]` table.
fn admin_tern_config(upstream: &str, upstream_toml: impl Fn(SocketAddr) -> String) -> Served {
    Served::builder()
        .cert_names(&["localhost"])
        .admin()
        .config(move |c| {
            let backend = c
                .backend
                .as_deref()
                .and_then(|b| b.parse().ok())
                .expect("the harness's backend address");
            format!(
                "admin = \"{admin}\"\n\
                 [[listener]]\nlisten = \"{addr}\"\nupstream = {upstream:?}\n\
                 cert = {:?}\nkey = {:?}\n\n{}\n",
                c.chain(),
                c.key(),
                upstream_toml(backend),
                admin = c.admin(),
                addr = c.listen,
            )
        })
        .start()
}

fn get_closing(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
}

/// The counter's change between two scrapes (summed over series matching `labels`).
fn delta(before: &Scrape, after: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    after.sum(name, labels) - before.sum(name, labels)
}

#[test]
fn scrape_counts_connections_requests_bytes_and_backend_latency() {
    let t = admin_tern();
    let before = t.scrape_when_idle();

    let requests = [get_closing("/bytes/100"), get_closing("/status/404")];
    let mut bytes_written = 0;
    for request in &requests {
        let (bytes, _) = t.exchange(request);
        assert!(!bytes.is_empty(), "no response to {request:?}");
        bytes_written += bytes.len();
    }
    let after = t.scrape_when_idle();

    let d = |name, labels: &[(&str, &str)]| delta(&before, &after, name, labels);
    assert_eq!(after.get("tern_connections_open", &[]), Some(0.0));
    assert_eq!(d("tern_connections_total", &[]), 2.0);
    let h1 = ("protocol", "http/1.1");
    assert_eq!(d("tern_http_requests_total", &[h1, ("code", "200")]), 1.0);
    assert_eq!(d("tern_http_requests_total", &[h1, ("code", "404")]), 1.0);
    assert_eq!(d("tern_http_requests_total", &[]), 2.0);
    let read: usize = requests.iter().map(String::len).sum();
    assert_eq!(d("tern_http_received_bytes_total", &[h1]), read as f64);
    assert_eq!(d("tern_http_sent_bytes_total", &[h1]), bytes_written as f64);

    // One backend, answering twice; it is up.
    let server = t.backend().addr().to_string();
    let at_backend = [("server", server.as_str())];
    let count = "tern_backend_response_duration_seconds_count";
    assert_eq!(d(count, &at_backend), 2.0);
    let series: Vec<_> = after.samples.iter().filter(|s| s.name == count).collect();
    assert_eq!(series.len(), 1, "one backend series: {series:?}");
    let upstream = series[0]
        .labels
        .get("upstream")
        .cloned()
        .unwrap_or_default();
    assert!(!upstream.is_empty(), "backend series has an upstream name");
    let up = [("upstream", upstream.as_str()), ("server", server.as_str())];
    assert_eq!(after.get("tern_backend_up", &up), Some(1.0));
    let slow_bucket = [up[0], up[1], ("le", "60")];
    assert_eq!(
        after.get(
            "tern_backend_response_duration_seconds_bucket",
            &slow_bucket
        ),
        Some(2.0),
        "both responses in the 60 s bucket"
    );

    // tern's own process figures, read from /proc.
    assert!(after.get("process_cpu_seconds_total", &[]).is_some());
    assert!(
        after
            .get("process_resident_memory_bytes", &[])
            .unwrap_or(0.0)
            > 1e6
    );
    let open_fds = after.get("process_open_fds", &[]).unwrap_or(0.0);
    let max_fds = after.get("process_max_fds", &[]).unwrap_or(0.0);
    assert!(
        open_fds >= 3.0 && open_fds <= max_fds,
        "{open_fds} of {max_fds}"
    );

    let started = after.get("process_start_time_seconds", &[]).unwrap_or(0.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    assert!(
        started <= now && now - started < 300.0,
        "start time {started}, now {now}"
    );
}

#[test]
fn scrape_counts_full_resumed_and_failed_handshakes() {
    let t = admin_tern();
    let before = t.scrape_when_idle();

    let (_, full) = t.exchange(&get_closing("/echo"));
    let (_, resumed) = t.exchange(&get_closing("/status/404"));
    assert_ne!(full.tls().handshake_kind(), Some(HandshakeKind::Resumed));
    assert_eq!(resumed.tls().handshake_kind(), Some(HandshakeKind::Resumed));
    // Not TLS at all: the handshake fails.
    let mut junk = TcpStream::connect(t.addr).expect("connect");
    junk.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    junk.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write junk");
    let _ = junk.read_to_end(&mut Vec::new());
    // A client that gives up before finishing its ClientHello.
    let mut quitter = TcpStream::connect(t.addr).expect("connect");
    quitter
        .write_all(&[0x16, 0x03, 0x01])
        .expect("write a record header");
    drop(quitter);
    // tern may not have accepted the quitter yet when it looks idle: wait
    // (bounded) until all four connections and both failures are counted.
    // Both, because one scrape reads tern_connections_total before the
    // failure counters: a quitter accepted and refused in between shows
    // in the second and not in the first.
    let failures = "tern_tls_handshake_failures_total";
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let after = t.scrape_when_idle();
        let counted = delta(&before, &after, failures, &[]) >= 2.0
            && delta(&before, &after, "tern_connections_total", &[]) >= 4.0;
        if counted || Instant::now() > deadline {
            break after;
        }
        std::thread::sleep(Duration::from_millis(20));
    };

    let d = |name, labels: &[(&str, &str)]| delta(&before, &after, name, labels);
    let labels = |conn: &HttpConn, resumed| {
        let tls = conn.tls();
        let cipher = tls
            .negotiated_cipher_suite()
            .and_then(|s| tern_tls::iana::suite(s.suite().into()))
            .map_or("", |s| s.name);
        let group = tls
            .negotiated_key_exchange_group()
            .and_then(|g| tern_tls::iana::group(g.name().into()))
            .unwrap_or("none");
        [
            ("version", "TLSv1.3"),
            ("cipher", cipher),
            ("group", group),
            ("resumed", resumed),
        ]
    };
    let handshakes = "tern_tls_handshakes_total";
    assert_eq!(d(handshakes, &labels(&full, "false")), 1.0);
    assert_eq!(d(handshakes, &labels(&resumed, "true")), 1.0);
    assert_eq!(d(handshakes, &[]), 2.0);
    assert_eq!(d(failures, &[("reason", "not_tls")]), 1.0);
    assert_eq!(d(failures, &[("reason", "closed")]), 1.0);
    assert_eq!(d(failures, &[]), 2.0);
    let count = "tern_tls_handshake_duration_seconds_count";
    assert_eq!(d(count, &[("resumed", "false")]), 1.0);
    assert_eq!(d(count, &[("resumed", "true")]), 1.0);
    assert_eq!(d("tern_connections_total", &[]), 4.0);
}

#[test]
fn connections_over_the_limit_are_counted_as_refused() {
    let t = admin_tern_with(&["--max-connections", "1"]);
    let before = t.scrape_when_idle();
    let mut held = t.connect();
    let response = held
        .get("localhost", "/echo")
        .expect("first connection served");
    assert_eq!(response.status, 200);
    let (over, _) = t.exchange(&get_closing("/echo"));
    assert!(
        over.starts_with(b"HTTP/1.1 503"),
        "{}",
        String::from_utf8_lossy(&over)
    );
    let after = t.scrape();
    let d = |name| delta(&before, &after, name, &[]);
    assert_eq!(d("tern_connections_refused_total"), 1.0);
    assert_eq!(d("tern_connections_total"), 1.0);
    assert_eq!(after.get("tern_connections_open", &[]), Some(1.0));
    drop(held);
}

#[test]
fn h2_requests_are_counted_under_their_protocol() {
    let t = admin_tern();
    let before = t.scrape_when_idle();
    let port = t.addr.port();
    let resolve = format!("localhost:{port}:127.0.0.1");
    let url = |path| format!("https://localhost:{port}{path}");
    let (ok, missing) = (url("/echo"), url("/status/404"));
    let ca = t.ca().ca_file().display().to_string();
    // Two requests on one h2 connection.
    let out = tools::curl(&[
        "--silent",
        "--http2",
        "--cacert",
        &ca,
        "--resolve",
        &resolve,
        "--write-out",
        "%{http_version} %{response_code}\n",
        "--output",
        "/dev/null",
        &ok,
        "--output",
        "/dev/null",
        &missing,
    ]);
    assert!(out.success(), "{}", out.all());
    assert_eq!(out.stdout, "2 200\n2 404\n", "{}", out.all());
    let after = t.scrape_when_idle();

    let d = |name, labels: &[(&str, &str)]| delta(&before, &after, name, labels);
    let h2 = ("protocol", "h2");
    assert_eq!(d("tern_http_requests_total", &[h2, ("code", "200")]), 1.0);
    assert_eq!(d("tern_http_requests_total", &[h2, ("code", "404")]), 1.0);
    assert_eq!(
        d("tern_http_requests_total", &[("protocol", "http/1.1")]),
        0.0
    );
    assert_eq!(d("tern_connections_total", &[]), 1.0);
    assert!(d("tern_http_sent_bytes_total", &[h2]) > 0.0);
    let server = t.backend().addr().to_string();
    let count = "tern_backend_response_duration_seconds_count";
    assert_eq!(d(count, &[("server", server.as_str())]), 2.0);
}

#[test]
fn backend_up_follows_health_checks_per_upstream_and_server() {
    // Nothing listens on `dead`; the upstream name needs escaping.
    let dead = free_addr();
    let name = "api \"v2\"";
    let t = admin_tern_config(name, |backend| {
        format!(
            "[[upstream]]\nname = {name:?}\nservers = [\"{backend}\", \"{dead}\"]\n\
             health_check_path = \"/echo\"\nhealth_check_interval = \"100ms\"\n\
             health_check_timeout = \"5s\"\nrise = 1\nfall = 1\n"
        )
    });
    let good = t.backend().addr().to_string();
    let dead = dead.to_string();
    let up = |s: &Scrape, server: &str| {
        s.get("tern_backend_up", &[("upstream", name), ("server", server)])
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let scrape = loop {
        let scrape = t.scrape();
        if up(&scrape, &dead) == Some(0.0) || Instant::now() > deadline {
            break scrape;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(up(&scrape, &dead), Some(0.0), "dead server marked down");
    assert_eq!(up(&scrape, &good), Some(1.0), "live server up");

    // Requests go to the live server only, and its latency series carries
    // the group's name.
    let before = scrape;
    for _ in 0..3 {
        let (bytes, _) = t.exchange(&get_closing("/echo"));
        assert!(
            bytes.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
    }
    let after = t.scrape_when_idle();
    let count = "tern_backend_response_duration_seconds_count";
    let at_good = [("upstream", name), ("server", good.as_str())];
    let at_dead = [("upstream", name), ("server", dead.as_str())];
    assert_eq!(delta(&before, &after, count, &at_good), 3.0);
    assert_eq!(after.get(count, &at_dead), None);
}

#[test]
fn health_answers_ok_head_has_no_body_and_other_paths_are_404() {
    let t = admin_tern();
    let health = t.admin_get("/health");
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));

    let head = t.admin_raw(b"HEAD /metrics HTTP/1.1\r\nHost: admin\r\n\r\n");
    assert_eq!(head.status, 200);
    assert_eq!(head.body, "", "HEAD carries no body");
    let length: usize = head
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(length > 0, "HEAD announces the body length: {}", head.head);
    assert!(head
        .header("content-type")
        .is_some_and(|v| v.starts_with("text/plain; version=0.0.4")));

    let with_query = t.admin_get("/metrics?name[]=tern_connections_open");
    assert_eq!(with_query.status, 200);
    for path in ["/", "/metrics/", "/healthz", "/../metrics", "*"] {
        assert_eq!(t.admin_get(path).status, 404, "{path}");
    }
    let post = t.admin_raw(b"POST /metrics HTTP/1.1\r\nHost: admin\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(post.status, 405);
    assert_eq!(post.header("allow"), Some("get, head"));
}

#[test]
fn admin_refuses_oversized_malformed_and_stalled_requests() {
    let t = admin_tern();
    let big = format!(
        "GET /metrics HTTP/1.1\r\nHost: admin\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(9 * 1024)
    );
    assert_eq!(t.admin_raw(big.as_bytes()).status, 431);
    assert_eq!(t.admin_raw(b"GET /metrics\r\n\r\n").status, 400);
    assert_eq!(
        t.admin_raw(b"GET /metrics HTTP/1.1\nHost: a\n\n").status,
        400
    );

    // Half a head, then nothing, on as many connections as the listener
    // serves at once: each is closed at the read deadline, not held open,
    // and one more connection meanwhile is closed at once.
    let started = Instant::now();
    let mut stalled: Vec<TcpStream> = (0..ADMIN_MAX_CONNECTIONS)
        .map(|_| {
            let mut s = TcpStream::connect(t.admin_addr()).expect("connect to admin");
            s.write_all(b"GET /metr").expect("write");
            s.set_read_timeout(Some(ADMIN_READ_TIMEOUT + Duration::from_secs(5)))
                .expect("timeout");
            s
        })
        .collect();
    // The listener has accepted them all once a probe is refused; until
    // then a probe may still be taking the last free slot.
    let deadline = Instant::now() + Duration::from_secs(3);
    let refused = loop {
        let mut probe = TcpStream::connect(t.admin_addr()).expect("connect to admin");
        probe
            .set_read_timeout(Some(Duration::from_secs(1)))
            .expect("timeout");
        // Sends nothing (so no reset races the close): a served connection
        // waits for a head and the read times out; a refused one reads EOF.
        let mut answer = Vec::new();
        let closed_at_once = probe.read_to_end(&mut answer).is_ok() && answer.is_empty();
        if closed_at_once || Instant::now() > deadline {
            break closed_at_once;
        }
    };
    assert!(
        refused,
        "a connection over the limit is closed without an answer"
    );
    for s in &mut stalled {
        let mut rest = Vec::new();
        let closed = s.read_to_end(&mut rest).is_ok();
        assert!(closed && rest.is_empty(), "closed without an answer");
    }
    assert!(
        started.elapsed() < ADMIN_READ_TIMEOUT + Duration::from_secs(3),
        "stalled connections closed after {:?}",
        started.elapsed()
    );
    // And the listener still serves.
    assert_eq!(t.admin_get("/health").status, 200);
}

#[test]
fn health_says_draining_while_in_flight_requests_finish_after_sigterm() {
    let mut t = admin_tern_with(&["--shutdown-timeout", "10s"]);
    assert_eq!(t.admin_get("/health").status, 200);
    let mut conn = t.connect();
    // Slow enough to outlast the SIGTERM and the admin requests below on
    // a loaded machine (once it ends, tern exits and they fail).
    let in_flight = std::thread::spawn(move || conn.get("localhost", "/slow/4000"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while t.backend().requests() < 1 {
        assert!(
            Instant::now() < deadline,
            "the request never reached the backend"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    t.tern.terminate();

    // A load balancer polling /health sees tern leave while it drains.
    let deadline = Instant::now() + Duration::from_secs(3);
    let health = loop {
        let health = t.admin_get("/health");
        if health.status != 200 || Instant::now() > deadline {
            break health;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        (health.status, health.body.as_str()),
        (503, "draining\n"),
        "{}",
        t.tern.stderr_text()
    );
    assert_eq!(
        t.admin_get("/metrics").status,
        200,
        "metrics while draining"
    );

    let response = in_flight
        .join()
        .expect("client thread")
        .expect("the in-flight request was lost on SIGTERM");
    assert_eq!(response.status, 200);
    let status = t.tern.wait_exit(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "exit status {status:?}\n{}",
        t.tern.stderr_text()
    );
}
