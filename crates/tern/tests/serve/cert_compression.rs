//! Certificate compression (RFC 8879, issue 31): TLS 1.3 clients that
//! offer brotli or zlib get tern's chain compressed, and the access log
//! says so (`cert_compression=`); clients that do not offer it, and
//! listeners with `no_cert_compression`, get it whole. Real clients: tern
//! bench (rustls), openssl s_client (OpenSSL 3.0, which cannot decompress)
//! and headless Chromium (which offers brotli).

use std::time::Duration;

use tern_testsupport::chromium::{dump_dom, find_chromium};
use tern_testsupport::tern::{run_to_exit, tern_bin, Served};
use tern_testsupport::tools::s_client;

use crate::LOG_WAIT;

/// `tern bench` with new connections (full handshakes) against `served`.
fn bench(served: &Served, extra: &[&str]) -> String {
    let url = format!("https://{}/echo", served.addr);
    let mut args = vec!["bench", "-n", "4", "-c", "1", "--disable-keepalive"];
    args.extend_from_slice(extra);
    args.push(&url);
    let out = run_to_exit(tern_bin(), args, Duration::from_secs(60));
    assert_eq!(out.status.and_then(|s| s.code()), Some(0), "{}", out.stderr);
    out.stdout
}

/// The first `count` access-log lines of requests to /echo.
fn echo_lines(served: &Served, count: usize) -> Vec<String> {
    served
        .tern
        .wait_stdout_lines("path=/echo", count, LOG_WAIT)
        .expect("access log lines")
}

#[test]
fn rustls_client_offering_compression_gets_the_chain_compressed() {
    let served = Served::start(&[]);
    let report = bench(&served, &[]);
    assert!(
        report.contains("Cert compression: used on 4 of 4 full handshakes (brotli 4)"),
        "{report}"
    );
    assert!(
        report.contains("cert compression offered (brotli, zlib)"),
        "{report}"
    );
    let lines = echo_lines(&served, 4);
    assert!(
        lines.iter().all(|l| l.contains(" cert_compression=brotli")),
        "{lines:?}"
    );

    // Refused by the client: whole, and no field.
    let report = bench(&served, &["--no-cert-compression"]);
    assert!(
        report.contains("Cert compression: used on 0 of 4 full handshakes\n"),
        "{report}"
    );
    assert!(report.contains("cert compression refused"), "{report}");
    let lines = echo_lines(&served, 8);
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("cert_compression="))
            .count(),
        4,
        "{lines:?}"
    );
}

#[test]
fn listener_with_no_cert_compression_sends_the_chain_whole() {
    let served = Served::start(&["--no-cert-compression"]);
    let report = bench(&served, &[]);
    assert!(
        report.contains("Cert compression: used on 0 of 4 full handshakes\n"),
        "{report}"
    );
    let lines = echo_lines(&served, 4);
    assert!(
        lines.iter().all(|l| !l.contains("cert_compression")),
        "{lines:?}"
    );
}

/// OpenSSL 3.0 (this machine's) offers no certificate compression: it
/// gets the chain whole, and the handshake is unchanged.
#[test]
fn openssl_without_compression_gets_the_chain_whole() {
    let served = Served::start(&[]);
    let out = s_client(
        served.addr,
        &["-tls1_3", "-servername", "localhost", "-ign_eof"],
        b"GET /echo HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert!(out.stdout.contains("HTTP/1.1 200"), "{}", out.all());
    let lines = echo_lines(&served, 1);
    assert!(!lines[0].contains("cert_compression"), "{lines:?}");
}

/// A browser offers brotli (Chromium does since version 91) and gets it.
#[test]
fn chromium_gets_the_chain_compressed_with_brotli() {
    let Some(chromium) = find_chromium() else {
        eprintln!("skipped: no chromium on PATH");
        return;
    };
    let served = Served::start(&[]);
    let url = format!("https://localhost:{}/echo", served.addr.port());
    let out = dump_dom(&chromium, &url, &[], Duration::from_secs(90));
    assert!(out.success(), "{}", out.all());
    let lines = echo_lines(&served, 1);
    assert!(
        lines[0].contains(" cert_compression=brotli"),
        "{lines:?}\n{}",
        out.all()
    );
}
