//! `tern probe` and `tern speed` as a user runs them: the real binary, its
//! exit status, its text and JSON output, against real servers on loopback.
//! The findings themselves are proven one by one in
//! `crates/tern-probe/tests/traps.rs`, behind a delay link.

use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tern_testsupport::backend::Backend;
use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::netlink_delay::{DelayLink, SERVER_ADDR};
use tern_testsupport::tern::{
    free_addr, log_field, run_to_exit, tern_bin, wait_accepting, Finished, Served,
};
use tern_testsupport::tools::KillOnDrop;

const RUN_LIMIT: Duration = Duration::from_secs(120);

fn tern(args: &[&str]) -> Finished {
    run_to_exit(tern_bin(), args, RUN_LIMIT)
}

fn code(f: &Finished) -> Option<i32> {
    f.status.and_then(|s| s.code())
}

fn json(f: &Finished) -> Value {
    serde_json::from_str(&f.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", f.stdout, f.stderr))
}

fn finding_ids(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .expect("findings array")
        .iter()
        .map(|f| f["id"].as_str().expect("id").to_string())
        .collect()
}

#[test]
fn probe_of_closed_port_exits_2() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let out = tern(&["probe", &format!("127.0.0.1:{port}")]);
    assert_eq!(code(&out), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("could not probe"), "{}", out.stderr);
}

#[test]
fn probe_takes_an_https_url_and_counts_no_round_trips_it_cannot_tell() {
    let served = Served::start(&[]);
    let url = format!("https://{}/", served.addr);
    let out = tern(&[
        "probe",
        &url,
        "--sni",
        "localhost",
        "--idle-wait",
        "0",
        "--samples",
        "1",
    ]);
    assert_ne!(code(&out), Some(2), "{}", out.stderr);
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains("full handshake"))
        .unwrap_or_else(|| panic!("no handshake line:\n{}", out.stdout));
    // Loopback's RTT is far below server CPU time: no "= 7.9 RTT" beside it.
    assert!(
        line.contains("RTT too small to count round trips"),
        "{line}"
    );
    assert!(!line.contains(" = "), "{line}");
    assert!(!out.stdout.contains("extra round trip"), "{}", out.stdout);
}

#[test]
fn probe_of_a_plain_http_port_says_it_speaks_plain_http() {
    let origin = tern_testsupport::python_origin::PythonOrigin::start();
    let out = tern(&[
        "probe",
        &origin.addr().to_string(),
        "--idle-wait",
        "0",
        "--samples",
        "1",
    ]);
    assert_eq!(code(&out), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("the port speaks plain HTTP, not TLS")
            && out.stderr.contains("\"HTTP/1."),
        "{}",
        out.stderr
    );
    let url = format!("http://{}/", origin.addr());
    let out = tern(&["probe", &url]);
    assert_eq!(code(&out), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("an http:// URL is plain HTTP"),
        "{}",
        out.stderr
    );
}

#[test]
fn probe_json_flags_dhe_preferring_openssl_and_exits_1() {
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["probe.test"], KeyKind::Rsa2048);
    let addr = free_addr();
    let server = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-serverpref", "-accept"])
        .arg(addr.to_string())
        .arg("-cert")
        .arg(&cert.chain)
        .arg("-key")
        .arg(&cert.key)
        .args([
            "-cipher",
            "DHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_server (package openssl)");
    let _server = KillOnDrop(server);
    wait_accepting(addr, Duration::from_secs(10));
    let target = addr.to_string();
    let out = tern(&[
        "probe",
        &target,
        "--sni",
        "probe.test",
        "--json",
        "--timeout",
        "1",
        "--samples",
        "2",
    ]);
    assert_eq!(code(&out), Some(1), "{}\n{}", out.stdout, out.stderr);
    let report = json(&out);
    assert_eq!(finding_ids(&report)[0], "dhe_selected");
    assert_eq!(
        report["negotiation"]["legacy"]["suite"],
        "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256"
    );
    assert_eq!(report["negotiation"]["legacy"]["key_exchange"], "dhe");
    assert_eq!(report["certificate"]["key"], "RSA-2048");
    assert_eq!(report["negotiation"]["versions"]["TLSv1.2"], true);
    assert_eq!(report["negotiation"]["preference"], "server");

    let text = tern(&["probe", &target, "--sni", "probe.test", "--timeout", "1"]);
    assert_eq!(code(&text), Some(1));
    assert!(
        text.stdout.contains("[HIGH] Server picks finite-field DHE"),
        "{}",
        text.stdout
    );
}

/// tern serve's defaults pass every negotiation, round-trip, resumption and
/// certificate check. (HTTP/2 and the split-write penalty are held to the
/// stricter test below.)
#[test]
fn probe_of_tern_serve_finds_no_negotiation_or_handshake_trap() {
    let served = Served::start(&[]);
    let addr = served.addr;
    let out = tern(&[
        "probe",
        &addr.to_string(),
        "--sni",
        "localhost",
        "--json",
        "--samples",
        "3",
    ]);
    assert_ne!(code(&out), Some(2), "{}", out.stderr);
    let report = json(&out);
    let unexpected: Vec<String> = finding_ids(&report)
        .into_iter()
        .filter(|id| id != "no_h2" && id != "split_write_penalty")
        .collect();
    assert!(unexpected.is_empty(), "{}", out.stdout);
    let browser = &report["negotiation"]["browser"];
    assert_eq!(browser["version"], "TLSv1.3");
    // Named by IANA (tern_tls::iana), as tern serve logs them: not rustls'
    // Debug spelling (TLS13_AES_128_GCM_SHA256, TLSv1_3).
    let suite = browser["suite"].as_str().unwrap_or("");
    assert!(
        suite.starts_with("TLS_AES_") || suite == "TLS_CHACHA20_POLY1305_SHA256",
        "{browser}"
    );
    assert_eq!(browser["key_exchange"], "tls13", "{browser}");
    assert!(
        ["X25519", "X25519MLKEM768", "secp256r1"]
            .contains(&browser["group"].as_str().unwrap_or("")),
        "{browser}"
    );
    assert_eq!(report["resumption"]["tls13_psk"], true);
    assert_eq!(report["http"]["keepalive"], true);
}

/// The acceptance test: tern serve with defaults → exit 0, no
/// finding. Needs h2 over ALPN, and no delayed ACK of a request head while
/// tern waits for the body: set TCP_QUICKACK on the client socket once a
/// head is read and a body is still expected (setting it sends the pending
/// ACK at once; Linux clears it again by itself).
#[test]
fn probe_of_tern_serve_with_defaults_exits_0() {
    let served = Served::start(&[]);
    let addr = served.addr;
    let out = tern(&["probe", &addr.to_string(), "--sni", "localhost"]);
    assert_eq!(code(&out), Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("No performance traps found"));
}

/// A 25 ms-each-way link between two network namespaces, or None (the
/// test is skipped, saying why) where they cannot be made.
fn delay_link() -> Option<DelayLink> {
    if let Some(why) = DelayLink::unavailable() {
        eprintln!("skipped: {why}");
        return None;
    }
    Some(DelayLink::new(Duration::from_millis(25)).expect("delay link"))
}

/// `tern probe LISTEN --sni localhost --idle-wait 0 EXTRA...` from the
/// client end of `link`.
fn probe_across(link: &DelayLink, listen: SocketAddr, extra: &[&str]) -> std::process::Output {
    Command::new("ip")
        .args(["netns", "exec", link.client_ns()])
        .arg(tern_bin())
        .args([
            "probe",
            &listen.to_string(),
            "--sni",
            "localhost",
            "--idle-wait",
            "0",
        ])
        .args(extra)
        .output()
        .expect("run tern probe in the client namespace")
}

/// tern serve behind a 25 ms-each-way link: a full TLS 1.3 handshake takes
/// one round trip, the first flight comes at once, and nothing but the known
/// gaps (h2, split-write penalty) is found.
#[test]
fn tern_serve_behind_delay_link_handshakes_in_one_round_trip() {
    let Some(link) = delay_link() else { return };
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["localhost"], KeyKind::EcdsaP256);
    // The backend listens on 127.0.0.1 inside the server namespace.
    let backend = link
        .spawn_in_server(Backend::start)
        .join()
        .expect("join")
        .expect("enter namespace");
    let listen = SocketAddr::from((SERVER_ADDR, 8443));
    let (backend_addr, chain, key) = (
        backend.addr().to_string(),
        cert.chain.display().to_string(),
        cert.key.display().to_string(),
    );
    let listen_arg = listen.to_string();
    let _served = link.start_tern(
        listen,
        &[
            "serve",
            "--http3",
            "--listen",
            &listen_arg,
            "--backend",
            &backend_addr,
            "--cert",
            &chain,
            "--key",
            &key,
        ],
    );
    let out = probe_across(&link, listen, &["--json", "--samples", "3"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    eprintln!("{stdout}");
    let rt = &report["round_trips"];
    assert_eq!(rt["rtt_large_enough"], true);
    assert_eq!(rt["extra_round_trips"], 0, "{rt}");
    let rtts = rt["handshake_rtts"].as_f64().expect("handshake_rtts");
    assert!((0.8..1.6).contains(&rtts), "{rt}");
    // HTTP/3 over the same link: QUIC's handshake is one round trip too,
    // with no TCP handshake before it.
    let h3 = &report["http"]["h3"];
    assert_eq!(h3["reachable"], true, "{h3}");
    let quic_rtts = h3["handshake_rtts"].as_f64().expect("h3 handshake_rtts");
    assert!((0.8..1.6).contains(&quic_rtts), "{h3}");
    let unexpected: Vec<String> = finding_ids(&report)
        .into_iter()
        .filter(|id| id != "no_h2" && id != "split_write_penalty")
        .collect();
    assert!(unexpected.is_empty(), "{stdout}");
}

/// Issue 31: a chain that overflows the initial congestion window whole
/// (a leaf with 600 names) costs a full handshake an extra round trip on
/// a 25 ms-each-way link, and none when compressed. tern warns at start-up
/// that only clients offering compression avoid it; `tern probe` reports
/// the flight with and without compression and that compression saves the
/// round trip.
#[test]
fn compressed_chain_fits_the_initial_window_that_the_whole_one_overflows() {
    let Some(link) = delay_link() else { return };
    let mut ca = TestCa::new();
    let names: Vec<String> = std::iter::once("localhost".to_string())
        .chain((0..600).map(|i| format!("service-{i:04}.cluster.example.internal")))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let cert = ca.leaf(&names, KeyKind::EcdsaP256);
    let listen = SocketAddr::from((SERVER_ADDR, 8443));
    let (chain, key, listen_arg) = (
        cert.chain.display().to_string(),
        cert.key.display().to_string(),
        listen.to_string(),
    );
    let served = link.start_tern(
        listen,
        &[
            "serve",
            "--listen",
            &listen_arg,
            "--cert",
            &chain,
            "--key",
            &key,
        ],
    );
    let stderr = served.stderr_text();
    assert!(
        stderr.contains("clients offering certificate compression get it in"),
        "{stderr}"
    );
    let out = probe_across(&link, listen, &["--json", "--samples", "2"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    let rt = &report["round_trips"];
    assert_eq!(rt["rtt_large_enough"], true, "{rt}");
    assert_eq!(rt["cert_compression"], "brotli", "{rt}");
    let window = rt["initial_window_bytes"].as_u64().expect("window");
    let whole = &rt["without_compression"];
    assert!(
        rt["flight_bytes"].as_u64().expect("flight") <= window,
        "{rt}"
    );
    assert!(
        whole["flight_bytes"].as_u64().expect("whole") > window,
        "{rt}"
    );
    assert_eq!(rt["extra_round_trips"], 0, "{rt}");
    assert_eq!(whole["extra_round_trips"], 1, "{rt}");
    let finding = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["id"] == "flight_exceeds_initial_window")
        .unwrap_or_else(|| panic!("no flight finding: {stdout}"));
    assert_eq!(finding["severity"], "low", "{finding}");

    let text = probe_across(&link, listen, &["--samples", "2"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("compression avoids the extra round trip"),
        "{text}"
    );
}

#[test]
fn speed_json_reports_every_figure_with_and_without_cpu_features() {
    let out = tern(&["speed", "--json", "--seconds", "0.05"]);
    assert_eq!(code(&out), Some(0), "{}", out.stderr);
    let report = json(&out);
    // The measuring binary's build is part of the report.
    let binary = report["binary"].as_str().expect("binary");
    assert!(
        binary.starts_with("tern 0.") && binary.contains(" build"),
        "{binary}"
    );
    let with = &report["with_features"];
    for (key, n) in [
        ("bulk_mb_per_s", 3),
        ("signatures_per_s", 3),
        ("key_agreements_per_s", 3),
        ("handshake_ceilings", 5),
    ] {
        assert_eq!(with[key].as_array().map(Vec::len), Some(n), "{key}");
    }
    let aes = with["bulk_mb_per_s"][0]["per_second"]
        .as_f64()
        .expect("rate");
    assert!(aes > 0.0);
    if cfg!(target_arch = "x86_64") {
        assert!(report["without_features"].is_object(), "{}", out.stdout);
        let features = tern_tls::cpu::CpuFeatures::detect();
        if features.aes_gcm_accelerated() {
            assert_eq!(report["mask_took_effect"], true, "{}", out.stdout);
        }
    }
}

/// The backend-leg stall seen from outside: a backend that writes its
/// response head and body apart with Nagle on (a real Python origin),
/// behind haproxy (which waits for its delayed ACK, ~40 ms a request) and
/// behind tern (which acknowledges at once). The probe flags the first
/// and not the second.
#[test]
fn probe_finds_the_backend_leg_stall_behind_haproxy_and_not_behind_tern() {
    if let Some(why) = tern_testsupport::haproxy::unavailable() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
        eprintln!("skipped: {why}");
        return;
    }
    let origin = tern_testsupport::python_origin::PythonOrigin::start();
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["localhost"], KeyKind::EcdsaP256);
    let haproxy =
        tern_testsupport::haproxy::Haproxy::start_tls_proxy(&cert.chain, &cert.key, origin.addr());
    let probe = |addr: SocketAddr| {
        let out = tern(&[
            "probe",
            &addr.to_string(),
            "--sni",
            "localhost",
            "--json",
            "--samples",
            "8",
        ]);
        assert_ne!(code(&out), Some(2), "{}", out.stderr);
        json(&out)
    };
    let behind_haproxy = probe(haproxy.addr());
    assert!(
        finding_ids(&behind_haproxy).contains(&"backend_leg_stall".to_string()),
        "{}",
        behind_haproxy["http"]
    );
    let served = Served::builder().backend_addr(origin.addr()).start();
    // Behind tern: no finding, and a median under 20 ms (a stall on every
    // request would lift the fastest too and hide from the finding). A
    // loaded machine (load average 25) can hold 3 of 8 requests 30 ms
    // each and raise the finding falsely (seen once in three runs), so
    // one clean probe in three passes; tern stalling on its backend leg
    // fails all three, as haproxy's probe above shows.
    let clean = |report: &Value| {
        let median = report["http"]["keepalive_get"]["median_ms"]
            .as_f64()
            .expect("keepalive latency measured");
        !finding_ids(report).contains(&"backend_leg_stall".to_string()) && median < 20.0
    };
    let mut behind_tern = Vec::new();
    while behind_tern.last().is_none_or(|r| !clean(r)) && behind_tern.len() < 3 {
        behind_tern.push(probe(served.addr));
    }
    assert!(
        behind_tern.last().is_some_and(clean),
        "{:?}",
        behind_tern.iter().map(|r| &r["http"]).collect::<Vec<_>>()
    );
}

/// `tern probe --json` with few samples, no idle watch and a `timeout` in
/// seconds; returns the output and the report.
fn quick_probe(addr: SocketAddr, timeout: &str) -> (Finished, Value) {
    let out = tern(&[
        "probe",
        &addr.to_string(),
        "--sni",
        "localhost",
        "--json",
        "--samples",
        "1",
        "--idle-wait",
        "0",
        "--timeout",
        timeout,
    ]);
    assert_ne!(code(&out), Some(2), "{}", out.stderr);
    let report = json(&out);
    (out, report)
}

#[test]
fn probe_of_tern_serve_with_http3_finds_it_reachable() {
    let served = Served::start(&["--http3"]);
    let (out, report) = quick_probe(served.addr, "5");
    let h3 = &report["http"]["h3"];
    assert_eq!(h3["advertised_port"], served.addr.port(), "{h3}");
    assert_eq!(h3["reachable"], true, "{h3}");
    // The probe GETs /, which the test backend answers with 404: an
    // answer from the backend, through tern, over HTTP/3.
    assert_eq!(h3["status"], 404, "{h3}");
    // What the QUIC handshake chose, as tern logged it for the same request.
    let line = served
        .tern
        .wait_stdout_lines(" alpn=h3 ", 1, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0);
    assert_eq!(
        h3["cipher"].as_str(),
        log_field(&line, "cipher"),
        "{h3}\n{line}"
    );
    assert_eq!(
        h3["group"].as_str(),
        log_field(&line, "group"),
        "{h3}\n{line}"
    );
    assert!(
        !finding_ids(&report).contains(&"alt_svc_h3_unreachable".to_string()),
        "{}",
        out.stdout
    );
}

/// A backend that advertises HTTP/3 itself (tern relays its Alt-Svc) while
/// nothing answers QUIC on that port: the probe says so.
#[test]
fn probe_flags_an_alt_svc_that_points_at_no_http3() {
    let served_port = free_addr().port();
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nAlt-Svc: h3=\":{served_port}\"; ma=3600\r\n\r\nok"
    );
    let origin = tern_testsupport::raw_backend::RawBackend::start(response.as_bytes());
    let served = Served::builder()
        .backend_addr(origin.addr())
        .listen(SocketAddr::from(([127, 0, 0, 1], served_port)))
        .start();
    let (out, report) = quick_probe(served.addr, "1");
    assert_eq!(report["http"]["h3"]["reachable"], false, "{}", out.stdout);
    assert!(
        finding_ids(&report).contains(&"alt_svc_h3_unreachable".to_string()),
        "{}",
        out.stdout
    );
}

#[test]
fn speed_text_keeps_every_row_in_its_columns() {
    let out = tern(&["speed", "--seconds", "0.02", "--no-masked"]);
    assert_eq!(code(&out), Some(0), "{}", out.stderr);
    let table: Vec<&str> = out
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("one core"))
        .take_while(|l| !l.is_empty() && !l.starts_with("note:"))
        .collect();
    assert!(table.len() > 10, "{}", out.stdout);
    // Figures are right-aligned: in line, every row ends in the same column.
    let width = table[0].chars().count();
    for row in &table {
        assert_eq!(row.chars().count(), width, "{row:?}\n{}", out.stdout);
    }
    assert!(
        table.iter().any(|r| r.contains("X25519MLKEM768 /s")),
        "{}",
        out.stdout
    );
}
