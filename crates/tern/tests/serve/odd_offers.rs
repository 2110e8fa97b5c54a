//! The interop matrix, part three: clients that offer odd things in their
//! ClientHello, as real ones do: TLS 1.2 only, no SNI, a server name in
//! upper case, no ALPN, the post-quantum group first, only a rarer group,
//! a ClientHello too big for one TLS record. Each must be served (200, the
//! right certificate) and logged with what was negotiated.
//!
//! (A server name that is not a DNS name, `IP:port` as Go sends it, is in
//! sni.rs.)

use std::sync::Arc;

use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::client::{client_config_for, HttpConn};
use tern_testsupport::rustls::crypto::{aws_lc_rs, CryptoProvider, SupportedKxGroup};
use tern_testsupport::rustls::version::{TLS12, TLS13};
use tern_testsupport::rustls::{ClientConfig, SupportedProtocolVersion};
use tern_testsupport::tern::{log_field, Served};
use tern_testsupport::tools::s_client;

use crate::LOG_WAIT;

/// One tern with two certificates: `localhost` (the default) and
/// `other.test`, so the tests see which one SNI picked.
fn served_with_two_names() -> (Served, Vec<u8>) {
    let mut ca = TestCa::new();
    let default = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let other = ca.leaf(&["other.test"], KeyKind::EcdsaP256);
    let other_der = other.leaf_der.clone();
    let served = Served::builder()
        .cert(ca, default)
        .more_certs(&[&other])
        .start();
    (served, other_der)
}

fn provider_with_groups(groups: &[&'static dyn SupportedKxGroup]) -> CryptoProvider {
    CryptoProvider {
        kx_groups: groups.to_vec(),
        ..aws_lc_rs::default_provider()
    }
}

fn config(
    served: &Served,
    groups: &[&'static dyn SupportedKxGroup],
    versions: &[&'static SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> Arc<ClientConfig> {
    client_config_for(
        served.ca().ca_pem(),
        provider_with_groups(groups),
        versions,
        alpn,
    )
}

/// Connects with `config` sending `server_name` (an IP sends none), GETs
/// `/echo?offer=NAME`, checks the 200 and the certificate, and returns the
/// access-log line.
fn offer(
    served: &Served,
    name: &str,
    server_name: &str,
    config: Arc<ClientConfig>,
    expect_leaf: &[u8],
) -> String {
    let mut conn = HttpConn::connect(served.addr, server_name, config).unwrap_or_else(|e| {
        panic!(
            "offer {name}: handshake failed: {e}\n{}",
            served.tern.stderr_text()
        )
    });
    let presented = conn.tls().peer_certificates().expect("certificates");
    assert_eq!(
        presented[0].as_ref(),
        expect_leaf,
        "offer {name}: certificate"
    );
    let path = format!("/echo?offer={name}");
    let response = conn
        .get("localhost", &path)
        .unwrap_or_else(|e| panic!("offer {name}: {e}"));
    assert_eq!(response.status, 200, "offer {name}: {}", response.text());
    logged(served, &path)
}

fn logged(served: &Served, path: &str) -> String {
    let lines = served
        .tern
        .wait_stdout_lines(&format!("path={path} "), 1, LOG_WAIT)
        .unwrap_or_else(|stdout| panic!("no access-log line for {path}; stdout:\n{stdout}"));
    lines[0].clone()
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    log_field(line, key).unwrap_or_else(|| panic!("no {key}= in {line}"))
}

#[test]
fn tls12_only_client_is_served() {
    let (served, _) = served_with_two_names();
    let groups = aws_lc_rs::default_provider().kx_groups;
    let config = config(&served, &groups, &[&TLS12], &[b"http/1.1"]);
    let leaf = served.cert.leaf_der.clone();
    let line = offer(&served, "tls12", "localhost", config, &leaf);
    assert_eq!(field(&line, "tls"), "TLSv1.2", "{line}");
    assert_eq!(field(&line, "sni"), "localhost", "{line}");
}

#[test]
fn client_without_sni_gets_the_default_certificate() {
    let (served, _) = served_with_two_names();
    let groups = aws_lc_rs::default_provider().kx_groups;
    let config = config(&served, &groups, &[&TLS13, &TLS12], &[b"http/1.1"]);
    let leaf = served.cert.leaf_der.clone();
    // rustls sends no server_name extension for an IP address.
    let line = offer(&served, "no-sni", "127.0.0.1", config, &leaf);
    assert_eq!(field(&line, "sni"), "-", "{line}");
    assert_eq!(field(&line, "tls"), "TLSv1.3", "{line}");
}

#[test]
fn upper_case_server_name_picks_its_certificate() {
    let (served, _) = served_with_two_names();
    let ca = served.ca().ca_file().display().to_string();
    let request =
        b"GET /echo?offer=upper-case HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n";
    // openssl sends the name exactly as given.
    let out = s_client(
        served.addr,
        &[
            "-servername",
            "OTHER.TEST",
            "-CAfile",
            &ca,
            "-verify_return_error",
            "-showcerts",
            "-ign_eof",
        ],
        request,
    );
    assert!(out.stdout.contains("HTTP/1.1 200"), "{}", out.all());
    assert!(
        out.stdout.contains("subject=CN = other.test"),
        "{}",
        out.all()
    );
    let line = logged(&served, "/echo?offer=upper-case");
    assert!(
        field(&line, "sni").eq_ignore_ascii_case("other.test"),
        "{line}"
    );
}

#[test]
fn client_without_alpn_is_served_http11() {
    let (served, _) = served_with_two_names();
    let groups = aws_lc_rs::default_provider().kx_groups;
    let config = config(&served, &groups, &[&TLS13, &TLS12], &[]);
    let leaf = served.cert.leaf_der.clone();
    let line = offer(&served, "no-alpn", "localhost", config, &leaf);
    assert_eq!(field(&line, "alpn"), "-", "{line}");
}

#[test]
fn post_quantum_group_first_is_chosen() {
    let (served, _) = served_with_two_names();
    // Chromium's and Firefox's order today: the hybrid first, X25519 next.
    let config = config(
        &served,
        &[
            aws_lc_rs::kx_group::X25519MLKEM768,
            aws_lc_rs::kx_group::X25519,
        ],
        &[&TLS13],
        &[b"http/1.1"],
    );
    let leaf = served.cert.leaf_der.clone();
    let line = offer(&served, "pq-first", "localhost", config, &leaf);
    assert_eq!(field(&line, "group"), "X25519MLKEM768", "{line}");
}

#[test]
fn client_with_only_secp384r1_is_served() {
    let (served, _) = served_with_two_names();
    let config = config(
        &served,
        &[aws_lc_rs::kx_group::SECP384R1],
        &[&TLS13],
        &[b"http/1.1"],
    );
    let leaf = served.cert.leaf_der.clone();
    let line = offer(&served, "p384-only", "localhost", config, &leaf);
    assert_eq!(field(&line, "group"), "secp384r1", "{line}");
}

#[test]
fn client_hello_bigger_than_one_record_is_served() {
    let (served, other_leaf) = served_with_two_names();
    // 160 made-up ALPN names of 120 bytes before http/1.1: a ClientHello of
    // about 20 KB, which rustls splits over two TLS records (16 KiB each at
    // most) and TCP over many segments; tern must reassemble it.
    let padding: Vec<Vec<u8>> = (0..160)
        .map(|i| format!("x-odd-{i:03}-{}", "p".repeat(110)).into_bytes())
        .collect();
    let mut alpn: Vec<&[u8]> = padding.iter().map(|p| p.as_slice()).collect();
    alpn.push(b"http/1.1");
    let groups = aws_lc_rs::default_provider().kx_groups;
    let config = config(&served, &groups, &[&TLS13], &alpn);
    let line = offer(&served, "huge-hello", "other.test", config, &other_leaf);
    assert_eq!(field(&line, "alpn"), "http/1.1", "{line}");
    assert_eq!(field(&line, "sni"), "other.test", "{line}");
}
