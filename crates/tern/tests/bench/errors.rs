//! Failures are counted and explained, never a panic.

use tern_testsupport::bench_target::{BenchTarget, BenchTargetOptions};

use crate::support::{bench, bench_json, bench_json_failed, num, summary};

#[test]
fn refused_connections_are_counted() {
    let addr = tern_testsupport::tern::free_addr();
    // Every request failed: a failed run, with its report all the same.
    let report = bench_json_failed(&["-n", "20", "-c", "2", &format!("https://{addr}/")]);
    let s = summary(&report, 0);
    assert_eq!(num(s, "failed"), 20.0);
    assert_eq!(
        report["targets"][0]["stats"]["errors"]["connect: connection refused"],
        20
    );
    // Both connections failed before the clock too; the requests' errors
    // are counted as they were.
    assert_eq!(num(s, "set_up_failed"), 2.0, "{s}");
}

#[test]
fn tls_failure_says_what_was_offered() {
    let server = BenchTarget::start(BenchTargetOptions {
        versions: vec![&tern_testsupport::rustls::version::TLS13],
        ..BenchTargetOptions::default()
    });
    let out = bench(&["-n", "4", "-c", "1", "--tls-max", "1.2", &server.url("/")]);
    assert_eq!(out.status.code(), Some(1), "every request failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("  [") && l.contains("tls handshake"))
        .unwrap_or_else(|| panic!("no TLS error in\n{text}"));
    assert!(
        line.contains("[4]") && line.contains("alert") && line.contains("offered suites"),
        "{line}"
    );
}

#[test]
fn timeouts_are_counted() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let report = bench_json_failed(&["-n", "2", "-c", "2", "-t", "1", &server.url("/slow/3000")]);
    assert_eq!(
        report["targets"][0]["stats"]["errors"]["timeout: no complete response in time"],
        2
    );
}

#[test]
fn bad_url_is_a_clear_error() {
    let out = bench(&["-n", "1", "-c", "1", "ftp://127.0.0.1/"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad URL"));
}

#[test]
fn sni_and_ca_file_verify_the_server_name() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let ca = server.ca_file();
    let ca = ca.to_str().unwrap();
    let ok = bench_json(&[
        "-n",
        "2",
        "-c",
        "1",
        "--cacert",
        ca,
        "--sni",
        "localhost",
        &server.url("/"),
    ]);
    assert_eq!(num(summary(&ok, 0), "completed"), 2.0);
    let bad = bench_json_failed(&[
        "-n",
        "2",
        "-c",
        "1",
        "--cacert",
        ca,
        "--sni",
        "wrong.test",
        &server.url("/"),
    ]);
    let errors = &bad["targets"][0]["stats"]["errors"];
    let key = errors
        .as_object()
        .unwrap()
        .keys()
        .find(|k| k.starts_with("tls handshake"))
        .unwrap_or_else(|| panic!("no TLS error: {errors}"));
    assert!(key.contains("not valid for name"), "{key}");
    // -k skips the chain check, as hey always does.
    let insecure = bench_json(&[
        "-n",
        "2",
        "-c",
        "1",
        "--cacert",
        ca,
        "-k",
        "--sni",
        "wrong.test",
        &server.url("/"),
    ]);
    assert_eq!(num(summary(&insecure, 0), "completed"), 2.0);
}

#[test]
fn a_negative_count_is_refused_naming_the_flag_not_with_a_dash_dash_tip() {
    for (flag, value) in [("-c", "-5"), ("-n", "-1"), ("-n", "0"), ("--rate", "-3")] {
        let out = bench(&[flag, value, "http://127.0.0.1:9/"]);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("invalid value '{value}' for '{flag} ")),
            "{flag} {value}: {err}"
        );
        // clap's tip would make the number a URL.
        assert!(!err.contains("'-- "), "{flag} {value}: {err}");
    }
}

/// The one error kind of a failed run, as the JSON report names it.
fn only_error(report: &serde_json::Value) -> String {
    let errors = report["targets"][0]["stats"]["errors"]
        .as_object()
        .expect("errors");
    assert_eq!(errors.len(), 1, "{errors:?}");
    errors.keys().next().cloned().unwrap_or_default()
}

#[test]
fn https_to_a_plain_http_port_says_which_mismatch_it_is() {
    let origin = tern_testsupport::python_origin::PythonOrigin::start();
    let report = bench_json_failed(&["-n", "2", "-c", "1", &format!("https://{}/", origin.addr())]);
    let error = only_error(&report);
    assert!(
        error.starts_with("https:// URL, but the port") && error.ends_with("(use http://)"),
        "{error}"
    );
    assert!(!error.contains("InvalidContentType"), "{error}");
}

/// HTTP/2 with prior knowledge to a TLS port: tern answers the preface
/// with an alert and may reset the connection, so h2 met either a 1.3 MB
/// "frame" or a broken pipe, whichever came first. Several connections
/// give the race several chances: every one must say the same.
#[test]
fn h2_over_http_to_a_tls_port_says_which_mismatch_it_is() {
    let served = tern_testsupport::tern::Served::start(&[]);
    let report = bench_json_failed(&[
        "-h2",
        "-n",
        "40",
        "-c",
        "8",
        "--disable-keepalive",
        &format!("http://{}/", served.addr),
    ]);
    let error = only_error(&report);
    assert!(
        error.starts_with("http:// URL, but the port speaks TLS")
            && error.ends_with("(use https://)"),
        "{error}"
    );
}

/// HTTP/2 with prior knowledge to an HTTP/1.1 server (Python's, which
/// answers the preface's "HTTP/2.0" with an HTML error page alone): the
/// first bytes are text, not a SETTINGS frame, and the error says so
/// instead of h2's "frame with invalid size".
#[test]
fn h2_over_http_to_an_http1_port_says_it_has_no_prior_knowledge() {
    let origin = tern_testsupport::python_origin::PythonOrigin::start();
    let report = bench_json_failed(&[
        "-h2",
        "-n",
        "2",
        "-c",
        "1",
        &format!("http://{}/", origin.addr()),
    ]);
    let error = only_error(&report);
    assert!(
        error.starts_with(
            "http:// URL, but the port does not speak HTTP/2 with prior knowledge: it answered"
        ) && error.ends_with("(leave out -h2, or use https:// for h2 through ALPN)"),
        "{error}"
    );
}

#[test]
fn http_to_a_tls_port_says_which_mismatch_it_is() {
    let served = tern_testsupport::tern::Served::start(&[]);
    let report = bench_json_failed(&["-n", "2", "-c", "1", &format!("http://{}/", served.addr)]);
    let error = only_error(&report);
    assert!(
        error.starts_with("http:// URL, but the port speaks TLS")
            && error.ends_with("(use https://)"),
        "{error}"
    );
}

/// A kept-alive round sets its connections up before its clock: a target
/// that takes the TCP connection but never answers the handshake must not
/// hold the round. Each set-up times out (-t), is counted, and the round
/// then runs as before: its requests fail with today's errors.
#[test]
fn a_silent_target_ends_a_kept_alive_round_with_errors_in_bounded_time() {
    // The kernel completes TCP handshakes into the backlog; nothing reads.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}/", silent.local_addr().unwrap());
    let started = std::time::Instant::now();
    let report = bench_json_failed(&["-n", "4", "-c", "2", "-t", "1", &url]);
    let took = started.elapsed();
    // 1 s of set-up, then two timed-out requests of 1 s on each slot.
    assert!(took < std::time::Duration::from_secs(15), "took {took:?}");
    let s = summary(&report, 0);
    assert_eq!(num(s, "set_up_failed"), 2.0, "{s}");
    assert_eq!(num(s, "connections_set_up"), 0.0, "{s}");
    assert_eq!(num(s, "failed"), 4.0, "{s}");
    assert_eq!(
        report["targets"][0]["stats"]["errors"]["timeout: no complete response in time"],
        4
    );
    drop(silent);
}
