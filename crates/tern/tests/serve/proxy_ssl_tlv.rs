//! The PROXY v2 `PP2_TYPE_SSL` TLV tern sends in TCP mode with client
//! certificates, checked against HAProxy 2.6 (Debian) on both sides of it:
//! as a consumer (`accept-proxy`), HAProxy takes tern's header with the
//! SSL TLV in it and reads the client's address and SNI past it (2.6 has
//! no fetch for a received SSL TLV: `fc_pp_tlv` is 2.9+, and no version
//! decodes its sub-TLVs); as a sender (`send-proxy-v2-ssl-cn` with every
//! `proxy-v2-options` SSL option), HAProxy terminating the same client's
//! TLS writes the reference TLV, which tern's must equal field by field:
//! client flags, verify result, version, CN and cipher. (Not the signature
//! and key algorithms: HAProxy names its own certificate's there, as the
//! spec says, tern the client certificate's.)

use std::net::SocketAddr;

use tern_testsupport::certs::{CertFiles, KeyKind, TestCa};
use tern_testsupport::haproxy::{self, Haproxy};
use tern_testsupport::proxy_protocol::PpBackend;
use tern_testsupport::tern::{Served, ServedBuilder};
use tern_testsupport::tools::s_client;

use crate::LOG_WAIT;

/// A client CA with one client (`alice`, ECDSA P-256).
fn client_ca() -> (TestCa, CertFiles) {
    let mut ca = TestCa::named("PROXY TLV clients");
    let (alice, _) = ca.client("alice", KeyKind::EcdsaP256, false);
    (ca, alice)
}

/// tern (from `builder`) in TCP mode with PROXY v2 in front of
/// `backend`, requiring a certificate from `ca`.
fn tern_tcp_mtls(builder: ServedBuilder<'_>, ca: &TestCa, backend: SocketAddr) -> Served {
    builder
        .backend_addr(backend)
        .args(&[
            "--mode",
            "tcp",
            "--proxy-protocol",
            "v2",
            "--client-auth",
            "required",
            "--client-ca",
            &ca.ca_file().display().to_string(),
        ])
        .start()
}

/// openssl s_client over TLS 1.3 with TLS_AES_128_GCM_SHA256 (every
/// server then picks the same suite) to `addr` presenting `cert`, sending
/// `payload`.
fn s_client_as(addr: SocketAddr, cert: &CertFiles, payload: &[u8]) -> String {
    let (chain, key) = (
        cert.chain.display().to_string(),
        cert.key.display().to_string(),
    );
    let args = [
        "-tls1_3",
        "-ciphersuites",
        "TLS_AES_128_GCM_SHA256",
        "-servername",
        "localhost",
        "-ign_eof",
        "-cert",
        &chain,
        "-key",
        &key,
    ];
    s_client(addr, &args, payload).all()
}

/// An SSL TLV's value split into client flags, verify result and the
/// sub-TLVs as (type, text), sorted by type.
fn ssl_fields(ssl: &[u8]) -> (u8, u32, Vec<(u8, String)>) {
    assert!(ssl.len() >= 5, "{ssl:02x?}");
    let verify = u32::from_be_bytes([ssl[1], ssl[2], ssl[3], ssl[4]]);
    let mut subs = Vec::new();
    let mut rest = &ssl[5..];
    while rest.len() >= 3 {
        let len = usize::from(u16::from_be_bytes([rest[1], rest[2]]));
        assert!(rest.len() >= 3 + len, "sub-TLV past the end: {ssl:02x?}");
        subs.push((
            rest[0],
            String::from_utf8_lossy(&rest[3..3 + len]).into_owned(),
        ));
        rest = &rest[3 + len..];
    }
    assert!(rest.is_empty(), "trailing bytes: {ssl:02x?}");
    subs.sort();
    (ssl[0], verify, subs)
}

/// tern's own header, parsed by ppp: it names the verified client
/// (PP2_TYPE_SSL: flags, verify result 0, CN sub-TLV) and the payload
/// follows it.
#[test]
fn tcp_mode_proxy_v2_ssl_tlv_names_the_verified_client() {
    let (ca, alice) = client_ca();
    let backend = PpBackend::start();
    let served = tern_tcp_mtls(Served::builder(), &ca, backend.addr());
    let out = s_client_as(served.addr, &alice, b"ping\n");
    assert!(out.contains("pong "), "{out}");
    let seen = backend
        .next_header(LOG_WAIT)
        .unwrap_or_else(|e| panic!("{e}\n{}", served.tern.stderr_text()));
    let ssl = seen.ssl.expect("a PP2_TYPE_SSL TLV");
    // PP2_CLIENT_SSL | PP2_CLIENT_CERT_CONN | PP2_CLIENT_CERT_SESS, verify 0.
    assert_eq!(&ssl[..5], &[0x07, 0, 0, 0, 0], "{ssl:02x?}");
    let cn = [&[0x22, 0, 5][..], b"alice"].concat();
    assert!(ssl.windows(cn.len()).any(|w| w == cn), "{ssl:02x?}");
    assert_eq!(seen.payload_line, b"ping");
}

/// HAProxy and tern terminate the same client (same certificate, TLS 1.3)
/// and write a PROXY v2 header each to a backend that parses them (ppp):
/// the SSL TLVs carry the same fields with the same values.
#[test]
fn haproxy_and_tern_send_the_same_ssl_tlv_for_one_client() {
    if let Some(why) = haproxy::unavailable() {
        panic!("HAProxy is part of the test environment: {why}");
    }
    let (ca, alice) = client_ca();
    let mut server_ca = TestCa::new();
    let server = server_ca.leaf(&["localhost", "127.0.0.1"], KeyKind::Rsa2048);
    let tern_backend = PpBackend::start();
    let haproxy_backend = PpBackend::start();
    let served = tern_tcp_mtls(
        Served::builder().cert(server_ca, server.clone()),
        &ca,
        tern_backend.addr(),
    );
    let reference = Haproxy::start_tls_sending_ssl_tlv(
        &server.chain,
        &server.key,
        ca.ca_file(),
        haproxy_backend.addr(),
    );
    let mut seen = Vec::new();
    for (addr, backend) in [
        (served.addr, &tern_backend),
        (reference.addr(), &haproxy_backend),
    ] {
        let out = s_client_as(addr, &alice, b"ping\n");
        assert!(out.contains("pong "), "{out}");
        let header = backend
            .next_header(LOG_WAIT)
            .unwrap_or_else(|e| panic!("{e}\n{out}"));
        seen.push(ssl_fields(&header.ssl.expect("a PP2_TYPE_SSL TLV")));
    }
    // SIG_ALG (0x24) and KEY_ALG (0x25) are left out: HAProxy describes
    // its own certificate there ("RSA2048" for this RSA one, as the spec's
    // "certificate presented by the frontend" says), tern the client's
    // (issue 31, left open).
    let common = |(client, verify, subs): &(u8, u32, Vec<(u8, String)>)| {
        let subs: Vec<_> = subs.iter().filter(|(t, _)| *t < 0x24).cloned().collect();
        (*client, *verify, subs)
    };
    let (tern, haproxy) = (common(&seen[0]), common(&seen[1]));
    assert_eq!(
        tern, haproxy,
        "tern's SSL TLV (left) differs from HAProxy's"
    );
    // What both said, so that agreeing on nothing cannot pass.
    let expected = [
        (0x21, "TLSv1.3".to_string()),
        (0x22, "alice".to_string()),
        (0x23, "TLS_AES_128_GCM_SHA256".to_string()),
    ];
    assert_eq!((tern.0, tern.1, &tern.2[..]), (0x07, 0, &expected[..]));
    assert!(
        seen[1].2.contains(&(0x25, "RSA2048".to_string())),
        "HAProxy's KEY_ALG names its own RSA key: {:?}",
        seen[1]
    );
}

/// HAProxy with `accept-proxy` behind tern (TCP mode, PROXY v2, client
/// certificate required) reads the client's address and SNI from a
/// header that carries the SSL TLV before them: it walks the TLVs as the
/// spec lays them out.
#[test]
fn haproxy_accept_proxy_reads_past_terns_ssl_tlv() {
    if let Some(why) = haproxy::unavailable() {
        panic!("HAProxy is part of the test environment: {why}");
    }
    let (ca, alice) = client_ca();
    let haproxy = Haproxy::start_address_echo();
    let served = tern_tcp_mtls(Served::builder(), &ca, haproxy.addr());
    let out = s_client_as(
        served.addr,
        &alice,
        b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert!(out.contains("HTTP/1.1 200"), "{out}");
    // s_client's own port is not printed; the address and the SNI are.
    assert!(
        out.contains("127.0.0.1 ") && out.contains(" localhost\n"),
        "{out}"
    );
}
