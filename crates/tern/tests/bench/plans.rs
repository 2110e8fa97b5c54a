//! Connection plans and load models do what they say, counted at the server.

use tern_testsupport::bench_target::{BenchTarget, BenchTargetOptions};

use crate::support::{bench_json, negotiated, num, summary};

#[test]
fn keepalive_off_opens_one_connection_per_request() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let report = bench_json(&[
        "-n",
        "60",
        "-c",
        "3",
        "-disable-keepalive",
        &server.url("/"),
    ]);
    let s = summary(&report, 0);
    assert_eq!(num(s, "completed"), 60.0);
    assert_eq!(server.connections(), 60);
    assert_eq!(num(s, "connections"), 60.0);
    assert_eq!(num(s, "handshakes"), 60.0);
    // Resumption not asked: none happened, on either side.
    assert_eq!(server.resumed(), 0);
    assert_eq!(num(s, "resumed_fraction"), 0.0);
    assert_eq!(report["plan"]["keepalive"], false);
}

#[test]
fn keepalive_reuses_one_connection_per_client_connection() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let report = bench_json(&["-n", "60", "-c", "3", &server.url("/")]);
    assert_eq!(num(summary(&report, 0), "completed"), 60.0);
    assert_eq!(server.connections(), 3);
    assert_eq!(server.requests(), 60);
}

#[test]
fn resumed_plan_resumes_nearly_every_handshake() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let report = bench_json(&["-n", "60", "-c", "2", "--plan", "resumed", &server.url("/")]);
    let s = summary(&report, 0);
    assert_eq!(server.connections(), 60);
    // The first handshake of each worker is full; the rest resume.
    assert!(num(s, "resumed_fraction") >= 0.9, "{s}");
    assert_eq!(num(s, "resumed") as usize, server.resumed());
}

#[test]
fn tls12_session_ids_resume_without_tickets() {
    let server = BenchTarget::start(BenchTargetOptions {
        versions: vec![&tern_testsupport::rustls::version::TLS12],
        tickets: false,
        ..BenchTargetOptions::default()
    });
    let report = bench_json(&[
        "-n",
        "40",
        "-c",
        "1",
        "--plan",
        "resumed",
        "--resume",
        "session-ids",
        &server.url("/"),
    ]);
    let s = summary(&report, 0);
    assert_eq!(negotiated(&report)["version"], "TLSv1.2");
    assert!(num(s, "resumed_fraction") >= 0.9, "{s}");
    assert_eq!(num(s, "resumed") as usize, server.resumed());
}

#[test]
fn h2_streams_share_few_connections() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let report = bench_json(&["-n", "200", "-c", "2", "-h2", "-m", "10", &server.url("/")]);
    assert_eq!(negotiated(&report)["alpn"], "h2");
    assert_eq!(num(summary(&report, 0), "completed"), 200.0);
    assert_eq!(server.connections(), 2);
    assert_eq!(report["plan"]["http"], "HTTP/2");
}

#[test]
fn open_loop_latency_includes_queueing_behind_a_stall() {
    // One connection, 100 req/s for 2 s; the server stalls the first
    // request for 1 s. Requests scheduled during the stall wait behind it,
    // and an honest open loop counts that wait.
    let server = BenchTarget::start(BenchTargetOptions::default());
    let report = bench_json(&[
        "-c",
        "1",
        "-z",
        "2s",
        "--rate",
        "100",
        "--cpus",
        "1",
        &server.url("/stall-once/1000"),
    ]);
    let s = summary(&report, 0);
    let p90 = s["percentiles_ms"]["90"].as_f64().unwrap();
    assert!(p90 >= 300.0, "p90 {p90} ms does not include queueing: {s}");
    // The achieved rate is reported: the run caught up after the stall.
    let rps = num(s, "rps");
    assert!((50.0..=110.0).contains(&rps), "achieved rate {rps}");

    // The same stall in closed loop hides behind one slow sample.
    let server = BenchTarget::start(BenchTargetOptions::default());
    let report = bench_json(&[
        "-c",
        "1",
        "-n",
        "200",
        "--cpus",
        "1",
        &server.url("/stall-once/1000"),
    ]);
    let p90 = summary(&report, 0)["percentiles_ms"]["90"]
        .as_f64()
        .unwrap();
    assert!(p90 < 100.0, "closed loop p90 {p90}");
}
