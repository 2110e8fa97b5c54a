//! HTTP/3 (`--http3`): clients no one here wrote over QUIC (aioquic, a
//! Python QUIC and HTTP/3 stack, and headless Chromium), the Alt-Svc
//! advertisement on HTTP/1.1 and HTTP/2, and the abuse limits: request
//! streams per connection, field-section size (address validation, Retry:
//! h3_retry.rs).

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tern_testsupport::backend::{pattern, sha256_hex};
use tern_testsupport::chromium::{alt_svc_flags, dump_dom, dump_dom_in, quic_flags};
use tern_testsupport::raw_backend::RawBackend;
use tern_testsupport::tempdir::TempDir;
use tern_testsupport::tern::{log_field, tern_bin, wait_until, Served};
use tern_testsupport::tools::{curl, run_tool, ToolOutput};

use crate::clients::{check_answers, client_connections, program, tool, BODY_LEN, CLIENT_TIMEOUT};
use crate::clients_cli::page_answers;

/// A Python with aioquic (`.ci/run` installs it with pip), or a skip (a
/// failure in CI).
pub(crate) fn python_with_aioquic() -> Option<String> {
    for python in ["python3", "/usr/bin/python3"] {
        let check = run_tool(
            python,
            ["-c", "import aioquic"],
            b"",
            Duration::from_secs(30),
        );
        if check.success() {
            return Some(python.to_string());
        }
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "aioquic is not installed: .ci/run installs it (pip install aioquic)"
    );
    eprintln!("skipped: aioquic is not installed (python3 -m pip install aioquic)");
    None
}

/// What one run of the aioquic client asked for.
pub(crate) struct H3Run<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub count: usize,
    pub body_len: u64,
    pub parallel: usize,
    pub header_bytes: usize,
    /// QUIC connections opened at once, each making `count` requests.
    pub connections: usize,
}

impl Default for H3Run<'_> {
    fn default() -> Self {
        H3Run {
            method: "GET",
            path: "/echo",
            count: 1,
            body_len: 0,
            parallel: 1,
            header_bytes: 0,
            connections: 1,
        }
    }
}

/// Runs the aioquic client (one QUIC connection) against `served`.
pub(crate) fn h3_client(python: &str, served: &Served, run: &H3Run<'_>) -> ToolOutput {
    run_tool(python, h3_client_args(served, run), b"", CLIENT_TIMEOUT)
}

/// Runs the aioquic client on a thread of its own and returns once its
/// first request reached the backend, for tests that act on tern while the
/// connection is open.
fn h3_client_in_flight(
    python: &str,
    served: &Served,
    run: &H3Run<'_>,
) -> std::thread::JoinHandle<ToolOutput> {
    let python = python.to_string();
    let args = h3_client_args(served, run);
    let client = std::thread::spawn(move || run_tool(&python, args, b"", CLIENT_TIMEOUT));
    wait_until(
        "the first request at the backend",
        Duration::from_secs(20),
        || served.backend().requests() >= 1,
    );
    client
}

pub(crate) fn h3_client_args(served: &Served, run: &H3Run<'_>) -> Vec<String> {
    let ca = served.ca().ca_file().display().to_string();
    h3_client_args_named(served, &ca, "localhost", run)
}

/// Like [`h3_client_args`], trusting `ca` (a PEM file) and sending
/// `name` as SNI and in `:authority`.
pub(crate) fn h3_client_args_named(
    served: &Served,
    ca: &str,
    name: &str,
    run: &H3Run<'_>,
) -> Vec<String> {
    let script = program("h3_client.py").display().to_string();
    let port = served.addr.port().to_string();
    [
        script,
        "127.0.0.1".to_string(),
        port,
        ca.to_string(),
        name.to_string(),
        run.method.to_string(),
        run.path.to_string(),
        run.count.to_string(),
        run.body_len.to_string(),
        run.parallel.to_string(),
        run.header_bytes.to_string(),
        run.connections.to_string(),
    ]
    .to_vec()
}

pub(crate) fn answers(out: &ToolOutput) -> Vec<Value> {
    assert!(out.success(), "h3 client failed:\n{}", out.all());
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn aioquic_posts_on_one_quic_connection() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    let served = Served::start(&["--http3"]);
    let out = h3_client(
        &python,
        &served,
        &H3Run {
            method: "POST",
            path: "/echo?client=aioquic",
            count: 3,
            body_len: BODY_LEN,
            ..H3Run::default()
        },
    );
    let lines = answers(&out);
    check_answers("aioquic", &lines, "h3");
    assert_eq!(client_connections(&served, "aioquic", 3), 1);
    let logged = served
        .tern
        .wait_stdout_lines("path=/echo?client=aioquic", 3, crate::LOG_WAIT)
        .unwrap_or_default();
    for line in &logged {
        assert!(line.contains(" alpn=h3 "), "{line}");
        assert!(line.contains(" sni=localhost "), "{line}");
        assert!(line.contains(" tls=TLSv1.3 "), "{line}");
        for field in ["cipher", "group"] {
            assert_ne!(log_field(line, field).unwrap_or("-"), "-", "{line}");
        }
    }
}

/// The header rules and HSTS apply to HTTP/3 responses as to the others
/// (docs/edge-policy.md), and the rate limit counts HTTP/3 requests.
#[test]
fn header_rules_and_hsts_apply_to_h3_responses() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    let served = Served::builder()
        .config(|c| {
            format!(
                "workers = 1\n[[listener]]\nlisten = \"{}\"\nbackends = [\"{}\"]\ncert = \"{}\"\nkey = \"{}\"\n\
                 http3 = true\nhsts = \"max-age=600\"\nclient_rate = \"1/h\"\nclient_burst = 1\n\
                 [listener.response_headers]\nset = {{ \"X-Frame-Options\" = \"DENY\" }}\nremove = [\"content-type\"]\n",
                c.listen,
                c.backend.as_deref().expect("a backend"),
                c.chain(),
                c.key()
            )
        })
        .start();
    let out = h3_client(
        &python,
        &served,
        &H3Run {
            count: 3,
            ..H3Run::default()
        },
    );
    let lines = answers(&out);
    assert_eq!(lines.len(), 3, "{}", out.all());
    for line in &lines[..2] {
        assert_eq!(line["status"], 200, "{line}");
        let headers = &line["headers"];
        assert_eq!(
            headers["strict-transport-security"], "max-age=600",
            "{line}"
        );
        assert_eq!(headers["x-frame-options"], "DENY", "{line}");
        assert!(headers.get("content-type").is_none(), "{line}");
        assert_eq!(
            headers["x-request-id"].as_str().map(str::len),
            Some(32),
            "{line}"
        );
    }
    assert_eq!(lines[2]["status"], 429, "{}", lines[2]);
    assert!(
        lines[2]["headers"].get("retry-after").is_some(),
        "{}",
        lines[2]
    );
}

/// Responses larger than the client's flow-control windows (aioquic's are
/// 1 MiB) leave in full GSO batches and as pieces quinn holds without a
/// copy (vendor/README.md); writes wait for credit mid-piece. Every byte
/// must still arrive, in order, on each of two streams at once.
#[test]
fn large_responses_arrive_whole_past_the_clients_windows() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    const SIZE: usize = 3_000_000;
    let served = Served::start(&["--http3"]);
    let path = format!("/bytes/{SIZE}");
    let out = h3_client(
        &python,
        &served,
        &H3Run {
            path: &path,
            count: 4,
            parallel: 2,
            ..H3Run::default()
        },
    );
    assert_whole_pattern_bodies(&out, 4, SIZE);
}

/// A backend that ends its response by closing (no Content-Length): tern
/// reads the body in pieces of their own until the close, and the HTTP/3
/// client gets every byte and a clean end of stream.
#[test]
fn a_close_delimited_response_arrives_whole() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    const SIZE: usize = 700_000;
    let mut raw = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
    raw.extend_from_slice(&pattern(SIZE));
    let backend = RawBackend::start(&raw);
    let served = Served::builder()
        .backend_addr(backend.addr())
        .args(&["--http3"])
        .start();
    let out = h3_client(
        &python,
        &served,
        &H3Run {
            path: "/until-close",
            count: 2,
            ..H3Run::default()
        },
    );
    assert_whole_pattern_bodies(&out, 2, SIZE);
}

/// `count` answers, each a 200 whose body is the test pattern of `size`
/// bytes (length and SHA-256 as the client saw them).
fn assert_whole_pattern_bodies(out: &ToolOutput, count: usize, size: usize) {
    let lines = answers(out);
    assert_eq!(lines.len(), count, "{}", out.all());
    let expected = sha256_hex(&pattern(size));
    for line in &lines {
        assert_eq!(line["status"], 200, "{line}");
        assert_eq!(line["length"], size, "{line}");
        assert_eq!(line["sha256"], expected.as_str(), "{line}");
    }
}

fn expected_alt_svc(served: &Served) -> String {
    format!("h3=\":{}\"; ma=86400", served.addr.port())
}

fn h2_alt_svc(served: &Served) -> Option<String> {
    let resolve = format!("localhost:{}:127.0.0.1", served.addr.port());
    let url = format!("https://localhost:{}/echo", served.addr.port());
    let ca = served.ca().ca_file().display().to_string();
    let out = curl(&[
        "-sS",
        "--http2",
        "-o",
        "/dev/null",
        "-D",
        "-",
        "--cacert",
        &ca,
        "--resolve",
        &resolve,
        &url,
    ]);
    assert!(out.success(), "{}", out.all());
    assert!(out.stdout.starts_with("HTTP/2 200"), "{}", out.all());
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix("alt-svc: "))
        .map(|v| v.trim().to_string())
}

#[test]
fn alt_svc_advertises_h3_over_http11_and_h2_only_when_it_is_on() {
    let served = Served::start(&["--http3"]);
    let want = expected_alt_svc(&served);
    assert_eq!(served.get("/echo").header("alt-svc"), Some(want.as_str()));
    assert_eq!(h2_alt_svc(&served).as_deref(), Some(want.as_str()));

    let plain = Served::start(&[]);
    assert_eq!(plain.get("/echo").header("alt-svc"), None);
    assert_eq!(h2_alt_svc(&plain), None);

    let quiet = Served::start(&["--http3", "--alt-svc-max-age", "0"]);
    assert_eq!(quiet.get("/echo").header("alt-svc"), None);
}

#[test]
fn alt_svc_is_sent_over_h3_too() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    let served = Served::start(&["--http3", "--alt-svc-max-age", "600"]);
    let lines = answers(&h3_client(&python, &served, &H3Run::default()));
    let want = format!("h3=\":{}\"; ma=600", served.addr.port());
    assert_eq!(lines[0]["alt_svc"], want.as_str(), "{lines:?}");
}

#[test]
fn streams_beyond_the_limit_wait_for_credit() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    let served = Served::start(&["--http3", "--h3-max-streams", "2"]);
    // Six requests at once on one connection, each held 300 ms by the
    // backend: QUIC stream credit lets the client have two open.
    let lines = answers(&h3_client(
        &python,
        &served,
        &H3Run {
            path: "/slow/300",
            count: 6,
            parallel: 6,
            ..H3Run::default()
        },
    ));
    assert_eq!(lines.len(), 6);
    assert!(lines.iter().all(|l| l["status"] == 200), "{lines:?}");
    assert_eq!(served.backend().max_in_flight(), 2);
}

#[test]
fn oversized_field_section_gets_431_and_the_next_request_is_served() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    let served = Served::start(&["--http3", "--h2-max-header-list-size", "8192"]);
    let big = answers(&h3_client(
        &python,
        &served,
        &H3Run {
            header_bytes: 20_000,
            ..H3Run::default()
        },
    ));
    assert_eq!(big[0]["status"], 431, "{big:?}");
    let small = answers(&h3_client(&python, &served, &H3Run::default()));
    assert_eq!(small[0]["status"], 200, "{small:?}");
}

#[test]
fn a_connection_kept_alive_by_pings_alone_is_closed_at_the_idle_timeout() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    let served = Served::start(&["--http3", "--idle-timeout", "1s"]);
    // One request, then only QUIC PINGs every 0.2 s for up to 8 s: QUIC's
    // own idle timer never fires; tern's request-idle rule must.
    let mut command = std::process::Command::new(&python);
    command
        .args(h3_client_args(&served, &H3Run::default()))
        .env("HOLD_S", "8");
    let out = tern_testsupport::tools::run_command(command, b"", CLIENT_TIMEOUT);
    let lines = answers(&out);
    assert_eq!(lines[0]["status"], 200, "{}", out.all());
    let closed = &lines[1]["closed_after_s"];
    assert!(
        closed.as_f64().is_some_and(|s| s < 8.0),
        "the idle connection stayed open: {}",
        out.all()
    );
}

#[test]
fn reloads_keep_an_open_quic_connection() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    let mut served = Served::start(&["--http3"]);
    // Twenty requests one after another on one connection, each held
    // 100 ms by the backend: two reloads happen while it is open.
    let client = h3_client_in_flight(
        &python,
        &served,
        &H3Run {
            path: "/slow/100",
            count: 20,
            ..H3Run::default()
        },
    );
    served.reload();
    served.reload();
    let out = client.join().expect("client thread");
    let lines = answers(&out);
    assert_eq!(lines.len(), 20, "{}", out.all());
    assert!(lines.iter().all(|l| l["status"] == 200), "{lines:?}");
    // And new connections are served by the new generation.
    let after = answers(&h3_client(&python, &served, &H3Run::default()));
    assert_eq!(after[0]["status"], 200);
}

#[test]
fn sigterm_lets_an_h3_request_in_flight_finish() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    let mut served = Served::start(&["--http3"]);
    let client = h3_client_in_flight(
        &python,
        &served,
        &H3Run {
            path: "/slow/1000",
            ..H3Run::default()
        },
    );
    served.tern.terminate();
    let out = client.join().expect("client thread");
    let lines = answers(&out);
    assert_eq!(lines[0]["status"], 200, "{}", out.all());
    let status = served.tern.wait_exit(Duration::from_secs(20));
    assert!(
        status.is_some_and(|s| s.success()),
        "tern did not exit cleanly: {status:?}\n{}",
        served.tern.stderr_text()
    );
}

#[test]
fn chromium_posts_over_h3() {
    let Some(chromium) = tool(
        &["chromium", "chromium-browser", "google-chrome"],
        "chromium",
    ) else {
        return;
    };
    let served = Served::start(&["--http3"]);
    let page = format!(
        "https://localhost:{}/post-page?n=3&len={BODY_LEN}",
        served.addr.port()
    );
    let flags = quic_flags(served.addr.port(), &served.cert.leaf_der);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let out = dump_dom(Path::new(&chromium), &page, &flags, Duration::from_secs(60));
    let answers = page_answers(&out);
    check_answers("chromium", &answers, "h3");
    assert_eq!(client_connections(&served, "chromium", 3), 1);
}

/// Chromium finds HTTP/3 the way browsers do: its first visit goes over
/// TCP (h2), the Alt-Svc header on that response names tern's UDP port,
/// and its next visit (same profile) goes over h3. Without the
/// advertisement (`--alt-svc-max-age 0`) the next visit stays on h2: the
/// switch is the header's doing, not the flags'.
#[test]
fn chromium_moves_from_h2_to_h3_on_alt_svc() {
    let Some(chromium) = tool(
        &["chromium", "chromium-browser", "google-chrome"],
        "chromium",
    ) else {
        return;
    };
    let cases: [(&[&str], &str); 2] = [
        (&["--http3"], "h3"),
        (&["--http3", "--alt-svc-max-age", "0"], "h2"),
    ];
    for (args, second_visit) in cases {
        let served = Served::start(args);
        let profile = TempDir::new("chromium-alt-svc");
        let flags = alt_svc_flags(&served.cert.leaf_der);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        for (visit, want) in [(1, "h2"), (2, second_visit)] {
            let path = format!("/echo?visit={visit}");
            let url = format!("https://localhost:{}{path}", served.addr.port());
            let out = dump_dom_in(
                Path::new(&chromium),
                profile.path(),
                &url,
                &flags,
                Duration::from_secs(60),
            );
            assert!(out.success(), "{args:?}, visit {visit}:\n{}", out.all());
            let logged = served
                .tern
                .wait_stdout_lines(&format!(" path={path} "), 1, crate::LOG_WAIT)
                .unwrap_or_else(|e| panic!("{args:?}, visit {visit}: {e}\n{}", out.all()));
            assert!(
                logged[0].contains(&format!(" alpn={want} ")),
                "{args:?}, visit {visit} should be {want}: {}",
                logged[0]
            );
            // What the handshake chose is logged for QUIC as for TCP.
            for field in ["cipher", "group"] {
                let value = log_field(&logged[0], field).unwrap_or("-");
                assert_ne!(value, "-", "{field} missing: {}", logged[0]);
            }
        }
    }
}

#[test]
fn http3_settings_are_checked() {
    let cases: [(&[&str], &str); 3] = [
        (&["--h3-max-streams", "10"], "has no effect without http3"),
        (
            &["--http3", "--tls-versions", "TLSv1.2"],
            "HTTP/3 (QUIC) needs TLSv1.3",
        ),
        (
            &["--http3", "--ciphers", "TLS_AES_256_GCM_SHA384"],
            "needs TLS_AES_128_GCM_SHA256",
        ),
    ];
    for (args, want) in cases {
        let mut all = vec!["serve", "--check"];
        all.extend_from_slice(args);
        let out = run_tool(
            &tern_bin().display().to_string(),
            all,
            b"",
            Duration::from_secs(30),
        );
        assert!(!out.success(), "{args:?} accepted:\n{}", out.all());
        assert!(out.stderr.contains(want), "{args:?}:\n{}", out.all());
    }
}
