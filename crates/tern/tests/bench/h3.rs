//! `tern bench -h3` and `--compare-protocols` against the real `tern serve
//! --http3`: what the report discloses (QUIC v1, ALPN h3, TLS 1.3, the
//! transport figures) and what tern serve logged agree.

use std::time::Duration;

use serde_json::Value;
use tern_testsupport::tern::{log_field, Served};

use crate::support::{
    artifact, bench, bench_json, bench_json_failed, negotiated, num, summary, tern,
};

fn h3_served() -> (Served, String) {
    let served = Served::builder().args(&["--http3"]).admin().start();
    let url = format!("https://{}/bytes/100", served.addr);
    (served, url)
}

/// QUIC handshakes tern completed, from its metrics.
fn handshakes(served: &Served) -> f64 {
    served.scrape().sum("tern_tls_handshakes_total", &[])
}

fn logged(served: &Served, n: usize) -> Vec<String> {
    served
        .tern
        .wait_stdout_lines("status=", n, Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e}\n{}", served.tern.stderr_text()))
}

#[test]
fn h3_keepalive_discloses_quic_and_what_was_negotiated() {
    let (served, url) = h3_served();
    let report = bench_json(&[
        "-h3",
        "-n",
        "200",
        "-c",
        "4",
        "-m",
        "5",
        "--ciphers",
        "TLS_AES_128_GCM_SHA256",
        "--groups",
        "X25519",
        &url,
    ]);
    let s = summary(&report, 0);
    assert_eq!(num(s, "completed"), 200.0, "{s}");
    assert_eq!(num(s, "failed"), 0.0, "{s}");
    assert_eq!(report["plan"]["http"], "HTTP/3");
    let n = negotiated(&report);
    assert_eq!(n["version"], "TLSv1.3");
    assert_eq!(n["alpn"], "h3");
    // One suite and one group offered: those are the ones QUIC used.
    assert_eq!(n["cipher"], "TLS_AES_128_GCM_SHA256");
    assert_eq!(n["group"], "X25519");
    let quic = &s["quic"];
    assert_eq!(num(quic, "connections"), 4.0, "{quic}");
    assert!(num(quic, "datagrams_sent") > 0.0, "{quic}");
    assert!(num(quic, "datagrams_received") > 0.0, "{quic}");
    assert!(num(quic, "max_path_mtu") >= 1200.0, "{quic}");
    assert!(num(s, "handshake_bytes_mean") > 0.0, "{s}");
    // QUIC has no TCP connect and resolves the name once per run: those
    // phases are absent, not rows of zeros that read as measured.
    let phases = &s["phases"];
    assert_eq!(num(&phases["tls"], "count"), 4.0, "{phases}");
    assert!(phases.get("dns").is_none(), "{phases}");
    assert!(phases.get("connect").is_none(), "{phases}");
    let file = artifact("h3_keepalive_discloses_quic", "run.json");
    std::fs::write(&file, report.to_string()).expect("write report");
    let text = tern()
        .args(["report", "text", file.to_str().unwrap()])
        .output()
        .expect("tern report text");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("TLS handshake"), "{text}");
    assert!(
        !text.contains("DNS lookup") && !text.contains("TCP connect"),
        "{text}"
    );
    // The report says how the client opened its connections.
    assert!(
        text.contains("a UDP socket per connection (no client connection IDs)"),
        "{text}"
    );
    // What tern served: 200 requests over HTTP/3 on four connections (by
    // tern's handshake count).
    let log = logged(&served, 200);
    for line in &log {
        assert_eq!(log_field(line, "alpn"), Some("h3"), "{line}");
        assert_eq!(
            log_field(line, "cipher"),
            Some("TLS_AES_128_GCM_SHA256"),
            "{line}"
        );
        assert_eq!(log_field(line, "group"), Some("X25519"), "{line}");
    }
    assert_eq!(handshakes(&served), 4.0);
}

/// With several suites and groups offered, the report names the ones the
/// handshake chose (not the offer), and tern's access log names the same:
/// each side read its own rustls.
#[test]
fn h3_with_several_offered_reports_the_negotiated_suite_and_group() {
    let (served, url) = h3_served();
    let report = bench_json(&[
        "-h3",
        "-n",
        "10",
        "-c",
        "1",
        "--ciphers",
        "TLS_AES_256_GCM_SHA384,TLS_AES_128_GCM_SHA256,TLS_CHACHA20_POLY1305_SHA256",
        "--groups",
        "secp256r1,X25519",
        &url,
    ]);
    let n = negotiated(&report);
    let cipher = n["cipher"].as_str().unwrap_or("");
    let group = n["group"].as_str().unwrap_or("");
    let log = logged(&served, 10);
    for line in &log {
        // Both name suites by IANA (tern_tls::iana), never rustls' TLS13_*.
        assert_eq!(log_field(line, "cipher"), Some(cipher), "{n}\n{line}");
        assert_eq!(log_field(line, "group"), Some(group), "{n}\n{line}");
    }
    assert!(
        [
            "TLS_AES_256_GCM_SHA384",
            "TLS_AES_128_GCM_SHA256",
            "TLS_CHACHA20_POLY1305_SHA256"
        ]
        .contains(&cipher),
        "{n}"
    );
    assert!(["secp256r1", "X25519"].contains(&group), "{n}");
}

/// 20 HTTP/3 requests under `plan` (bench flags), each on a QUIC connection
/// of its own whose handshake brought tern's one ticket (two over TCP), as
/// the report must say; returns the report's summary and tern's 20 log
/// lines.
fn twenty_connections(served: &Served, url: &str, plan: &[&str]) -> (Value, Vec<String>) {
    let mut args = vec!["-h3", "-n", "20"];
    args.extend(plan);
    args.push(url);
    let report = bench_json(&args);
    let s = summary(&report, 0).clone();
    assert_eq!(num(&s, "completed"), 20.0, "{s}");
    assert_eq!(num(&s["quic"], "connections"), 20.0, "{s}");
    assert_eq!(num(&s, "handshakes"), 20.0, "{s}");
    assert_eq!(
        num(&s, "tickets_per_handshake"),
        tern_tls::QUIC_TICKETS as f64,
        "{s}"
    );
    (s, logged(served, 20))
}

#[test]
fn h3_without_keepalive_opens_a_quic_connection_per_request() {
    let (served, url) = h3_served();
    let (s, log) = twenty_connections(&served, &url, &["-disable-keepalive", "-c", "2"]);
    // Full handshakes, as the plan says: none resumed, by the client's
    // count and by tern's log, though tern sent its tickets (the client
    // offers resumption, as browsers do, and keeps none).
    assert_eq!(num(&s, "resumed"), 0.0, "{s}");
    for line in log {
        assert_eq!(log_field(&line, "resumed"), Some("no"), "{line}");
    }
    assert_eq!(handshakes(&served), 20.0, "one QUIC connection per request");
}

/// Each QUIC connection comes from a UDP socket of its own, as a
/// browser's do (so with zero-length client connection IDs, and no
/// NEW_CONNECTION_ID datagram for the server to take): tern logs as
/// many client ports as connections, not one per bench worker.
#[test]
fn h3_opens_each_connection_from_a_socket_of_its_own() {
    let (served, url) = h3_served();
    let (_, log) = twenty_connections(&served, &url, &["-disable-keepalive", "-c", "2"]);
    let clients: std::collections::HashSet<String> = log
        .iter()
        .map(|line| log_field(line, "client").unwrap_or_default().to_string())
        .collect();
    assert_eq!(clients.len(), 20, "{log:#?}");
}

/// `--plan resumed` over QUIC: every connection after the first resumes
/// the session of a ticket tern sent (before the first response, so one
/// slot resumes from its second connection on), by the client's count
/// and by tern's log.
#[test]
fn h3_resumed_plan_resumes_from_the_second_connection_on() {
    let (served, url) = h3_served();
    let (s, log) = twenty_connections(&served, &url, &["--plan", "resumed", "-c", "1"]);
    assert_eq!(num(&s, "resumed"), 19.0, "{s}");
    let resumed = log
        .iter()
        .filter(|l| log_field(l, "resumed") == Some("yes"))
        .count();
    // The one full handshake is the first connection's, but its line need
    // not be the first logged: tern logs a request when its exchange ends
    // on tern's side, and the client opens the next connection as soon as
    // it has read the response, so the next one's line can come first
    // (seen since each connection has a socket of its own).
    assert_eq!(resumed, 19, "{log:#?}");
    let full = log
        .iter()
        .filter(|l| log_field(l, "resumed") == Some("no"))
        .count();
    assert_eq!(full, 1, "one full handshake: {log:#?}");
}

#[test]
fn compare_protocols_runs_h1_h2_and_h3_with_server_cpu_each() {
    let (_served, url) = h3_served();
    let report = bench_json(&[
        "--compare-protocols",
        "h1,h2,h3",
        "--rounds",
        "1",
        "-n",
        "100",
        "-c",
        "2",
        &url,
    ]);
    let targets = report["targets"].as_array().expect("targets");
    assert_eq!(targets.len(), 3);
    for (t, (label, alpn)) in
        targets
            .iter()
            .zip([("[h1]", "http/1.1"), ("[h2]", "h2"), ("[h3]", "h3")])
    {
        assert!(
            t["url"].as_str().unwrap_or("").ends_with(label),
            "{}",
            t["url"]
        );
        assert_eq!(num(&t["summary"], "completed"), 100.0, "{}", t["url"]);
        assert_eq!(t["summary"]["negotiated"][0]["alpn"], alpn, "{}", t["url"]);
        let cpu = &t["server_cpu"];
        assert!(
            cpu["cpu_s"].is_f64() && cpu["found_by"] == "listening-socket-owner",
            "server CPU measured for {}: {cpu}",
            t["url"]
        );
    }
}

#[test]
fn h3_errors_are_clear() {
    let out = bench(&["-h3", "-n", "1", "-c", "1", "http://127.0.0.1:9/"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("HTTP/3 needs an https:// URL"), "{stderr}");

    // A server with no HTTP/3: every request fails within the timeout,
    // and the run ends.
    let served = Served::start(&[]);
    let url = format!("https://{}/", served.addr);
    let report = bench_json_failed(&["-h3", "-n", "2", "-c", "1", "-t", "2", &url]);
    let s = summary(&report, 0);
    assert_eq!(num(s, "failed"), 2.0, "{s}");
    assert_eq!(num(s, "completed"), 0.0, "{s}");
}

/// `--laddr` binds each connection's UDP socket: tern sees every QUIC
/// connection come from that address. One of the other family than the
/// target's is refused before any load.
#[test]
fn h3_with_laddr_connects_from_that_address() {
    let (served, url) = h3_served();
    let report = bench_json(&["-h3", "-n", "10", "-c", "2", "--laddr", "127.0.0.3", &url]);
    let s = summary(&report, 0);
    assert_eq!(num(s, "completed"), 10.0, "{s}");
    for line in logged(&served, 10) {
        let client = log_field(&line, "client").unwrap_or_default();
        assert!(client.starts_with("127.0.0.3:"), "{line}");
    }
    let out = bench(&["-h3", "-n", "1", "-c", "1", "--laddr", "::1", &url]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--laddr ::1: QUIC to 127.0.0.1 needs a source address of the same family"),
        "{stderr}"
    );
}
