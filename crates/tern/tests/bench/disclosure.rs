//! Every field of the disclosure is what really happened.

use tern_testsupport::bench_target::{BenchTarget, BenchTargetOptions};
use tern_testsupport::certs::KeyKind;

use crate::support::{bench_json, negotiated, num, summary};

#[test]
fn forced_cipher_and_group_show_up_in_the_disclosure() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let ca = server.ca_file();
    let report = bench_json(&[
        "-n",
        "20",
        "-c",
        "2",
        "--ciphers",
        "TLS_CHACHA20_POLY1305_SHA256",
        "--groups",
        "secp256r1",
        "--cacert",
        ca.to_str().unwrap(),
        &server.url("/"),
    ]);
    let n = negotiated(&report);
    assert_eq!(n["version"], "TLSv1.3");
    assert_eq!(n["cipher"], "TLS_CHACHA20_POLY1305_SHA256");
    assert_eq!(n["group"], "secp256r1");
    assert_eq!(n["server_key"], "ECDSA P-256");
    assert_eq!(n["alpn"], "http/1.1");
    assert_eq!(
        summary(&report, 0)["negotiated"].as_array().unwrap().len(),
        1
    );
    let addr = &report["targets"][0]["addresses"][0];
    assert_eq!(addr["loopback"], true);
    assert_eq!(addr["same_machine"], true);
    assert!(report["plan"]["verification"]
        .as_str()
        .unwrap()
        .contains("verified against"));
    // The load tool states its own build: a debug or PGO-instrumented
    // client caps the rate it can drive.
    let build = if cfg!(debug_assertions) {
        "(debug build"
    } else {
        "(release build"
    };
    let tool = report["tool"].as_str().unwrap();
    assert!(
        tool.starts_with("tern 0.") && tool.contains(build),
        "{tool}"
    );
    let machine = &report["machines"][0];
    assert!(machine["load_before"].is_array() && machine["load_after"].is_array());
    assert!(machine["firewall"].as_str().unwrap().contains("nftables"));
    assert!(report["command_lines"][0]
        .as_str()
        .unwrap()
        .contains("TLS_CHACHA20_POLY1305_SHA256"));
}

#[test]
fn tls12_rsa_server_is_disclosed_as_such() {
    let server = BenchTarget::start(BenchTargetOptions {
        versions: vec![&tern_testsupport::rustls::version::TLS12],
        key: KeyKind::Rsa2048,
        ..BenchTargetOptions::default()
    });
    let report = bench_json(&[
        "-n",
        "10",
        "-c",
        "1",
        "--ciphers",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        &server.url("/"),
    ]);
    let n = negotiated(&report);
    assert_eq!(n["version"], "TLSv1.2");
    assert_eq!(n["cipher"], "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256");
    assert_eq!(n["server_key"], "RSA 2048");
    // An RSA-2048 chain is larger than the ECDSA one: the handshake bytes
    // are measured, not assumed.
    assert!(num(summary(&report, 0), "handshake_bytes_mean") > 1000.0);
}

#[test]
fn text_report_opens_with_the_disclosure() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let out = crate::support::bench(&["-n", "10", "-c", "1", &server.url("/")]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Disclosure:"), "{text}");
    for needle in [
        "TLSv1.3",
        "keepalive on",
        "Machine:",
        "Load average:",
        "Firewall:",
        "Requests/sec:",
        "Latency distribution:",
        "[200]\t10 responses",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}
