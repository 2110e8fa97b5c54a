//! The PROXY v2 `PP2_TYPE_SSL` TLV tern sends in TCP mode with client
//! certificates, checked against HAProxy 2.6 (Debian) on both sides of it:
//! as a consumer (`accept-proxy`), HAProxy takes tern's header with the
//! SSL TLV in it and reads the client's address and SNI past it (2.6 has
//! no fetch for a received SSL TLV: `fc_pp_tlv` is 2.9+, and no version
//! decodes its sub-TLVs); as a sender (`send-proxy-v2-ssl-cn` with every
//! `proxy-v2-options` SSL option), HAProxy terminating the same client's
//! TLS with the same certificate writes the reference TLV, which tern's
//! must equal field by field: client flags, verify result, version, CN,
//! cipher (OpenSSL's names over TLS 1.2), and the signature and key
//! algorithm of the certificate the server presented.

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

/// openssl s_client to `addr` presenting `cert`, sending `payload`, with
/// `version` (its `-tls1_3` / `-ciphersuites` or `-tls1_2` / `-cipher`
/// flags: one suite, so every server picks the same).
fn s_client_as(addr: SocketAddr, cert: &CertFiles, payload: &[u8], version: &[&str]) -> String {
    let (chain, key) = (
        cert.chain.display().to_string(),
        cert.key.display().to_string(),
    );
    let mut args = version.to_vec();
    args.extend_from_slice(&[
        "-servername",
        "localhost",
        "-ign_eof",
        "-cert",
        &chain,
        "-key",
        &key,
    ]);
    s_client(addr, &args, payload).all()
}

const TLS13: &[&str] = &["-tls1_3", "-ciphersuites", "TLS_AES_128_GCM_SHA256"];

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
    let out = s_client_as(served.addr, &alice, b"ping\n", TLS13);
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

/// HAProxy and tern terminate the same client (same client certificate,
/// same RSA server certificate) over TLS 1.3 and over TLS 1.2, and write
/// a PROXY v2 header each to a backend that parses them (ppp): the SSL
/// TLVs are equal, sub-TLV by sub-TLV.
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
    let tls12: &[&str] = &["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"];
    for (version, name, cipher) in [
        (TLS13, "TLSv1.3", "TLS_AES_128_GCM_SHA256"),
        (tls12, "TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256"),
    ] {
        let mut seen = Vec::new();
        for (addr, backend) in [
            (served.addr, &tern_backend),
            (reference.addr(), &haproxy_backend),
        ] {
            let out = s_client_as(addr, &alice, b"ping\n", version);
            assert!(out.contains("pong "), "{out}");
            let header = backend
                .next_header(LOG_WAIT)
                .unwrap_or_else(|e| panic!("{e}\n{out}"));
            seen.push(ssl_fields(&header.ssl.expect("a PP2_TYPE_SSL TLV")));
        }
        assert_eq!(
            seen[0], seen[1],
            "{name}: tern's SSL TLV (left) differs from HAProxy's"
        );
        // What both said, so that agreeing on nothing cannot pass: the
        // server certificate is RSA-2048 signed by the test CA's ECDSA key.
        let expected = [
            (0x21, name.to_string()),
            (0x22, "alice".to_string()),
            (0x23, cipher.to_string()),
            (0x24, "ecdsa-with-SHA256".to_string()),
            (0x25, "RSA2048".to_string()),
        ];
        assert_eq!(
            (seen[0].0, seen[0].1, &seen[0].2[..]),
            (0x07, 0, &expected[..]),
            "{name}"
        );
    }
}

/// With an ECDSA and an RSA certificate for one name, tern serves ECDSA
/// to a client that takes it and RSA to one that offers only RSA
/// signature schemes (with an RSA client certificate, which it can then
/// sign for); the SSL TLV's KEY_ALG names the one each got.
#[test]
fn ssl_tlv_names_the_certificate_each_connection_was_served() {
    let (mut ca, alice) = client_ca();
    let (bob, _) = ca.client("bob", KeyKind::Rsa2048, false);
    let mut server_ca = TestCa::new();
    let ecdsa = server_ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let rsa = server_ca.leaf(&["localhost", "127.0.0.1"], KeyKind::Rsa2048);
    let backend = PpBackend::start();
    let served = tern_tcp_mtls(
        Served::builder().cert(server_ca, ecdsa).more_certs(&[&rsa]),
        &ca,
        backend.addr(),
    );
    let rsa_only = [TLS13, &["-sigalgs", "rsa_pss_rsae_sha256"]].concat();
    for (client, version, key, peer_key) in [
        (&alice, TLS13, "EC256", "Server public key is 256 bit"),
        (
            &bob,
            &rsa_only[..],
            "RSA2048",
            "Server public key is 2048 bit",
        ),
    ] {
        let out = s_client_as(served.addr, client, b"ping\n", version);
        assert!(out.contains("pong ") && out.contains(peer_key), "{out}");
        let header = backend
            .next_header(LOG_WAIT)
            .unwrap_or_else(|e| panic!("{e}\n{out}"));
        let (_, _, subs) = ssl_fields(&header.ssl.expect("a PP2_TYPE_SSL TLV"));
        assert!(subs.contains(&(0x25, key.to_string())), "{key}: {subs:?}");
        assert!(
            subs.contains(&(0x24, "ecdsa-with-SHA256".to_string())),
            "{subs:?}"
        );
    }
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
        TLS13,
    );
    assert!(out.contains("HTTP/1.1 200"), "{out}");
    // s_client's own port is not printed; the address and the SNI are.
    assert!(
        out.contains("127.0.0.1 ") && out.contains(" localhost\n"),
        "{out}"
    );
}
