//! Real TLS clients against tern: curl, openssl s_client and rustls;
//! protocol and cipher policy, resumption, SNI and key type selection.

use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::client::{self, HttpConn};
use tern_testsupport::rustls;
use tern_testsupport::tempdir::TempDir;
use tern_testsupport::tern::Served;
use tern_testsupport::tools::{curl, s_client, ToolOutput};

const CLOSE_REQUEST: &[u8] = b"GET /echo HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

fn s_client_with(served: &Served, args: &[&str]) -> ToolOutput {
    let ca = served.ca().ca_file().display().to_string();
    let mut all = vec![
        "-servername",
        "localhost",
        "-CAfile",
        ca.as_str(),
        "-ign_eof",
    ];
    all.extend_from_slice(args);
    s_client(served.addr, &all, CLOSE_REQUEST)
}

fn curl_with(served: &Served, args: &[&str]) -> ToolOutput {
    let resolve = format!("localhost:{}:127.0.0.1", served.addr.port());
    let url = format!("https://localhost:{}/echo", served.addr.port());
    let ca = served.ca().ca_file().display().to_string();
    let mut all = vec![
        "-sS",
        "--cacert",
        ca.as_str(),
        "--resolve",
        resolve.as_str(),
    ];
    all.extend_from_slice(args);
    all.push(url.as_str());
    curl(&all)
}

#[test]
fn curl_gets_response_over_tls13() {
    let served = Served::start(&[]);
    let out = curl_with(&served, &["--tlsv1.3", "-w", "\n%{http_code}"]);
    assert!(out.success(), "{}", out.all());
    assert!(out.stdout.ends_with("\n200"), "{}", out.all());
    assert!(out.stdout.contains("\"path\":\"/echo\""), "{}", out.all());
}

#[test]
fn curl_gets_response_over_tls12() {
    let served = Served::start(&[]);
    let out = curl_with(
        &served,
        &["--tlsv1.2", "--tls-max", "1.2", "-w", "\n%{http_code}"],
    );
    assert!(out.success(), "{}", out.all());
    assert!(out.stdout.ends_with("\n200"), "{}", out.all());
}

#[test]
fn openssl_s_client_verifies_chain_and_gets_response() {
    let served = Served::start(&[]);
    let out = s_client_with(&served, &["-verify_return_error"]);
    assert!(
        out.stdout.contains("Verify return code: 0 (ok)"),
        "{}",
        out.all()
    );
    assert!(out.stdout.contains("HTTP/1.1 200"), "{}", out.all());
    assert!(out.stdout.contains("New, TLSv1.3"), "{}", out.all());
}

#[test]
fn alpn_http11_is_negotiated() {
    let served = Served::start(&[]);
    let conn = served.connect();
    assert_eq!(conn.tls().alpn_protocol(), Some(&b"http/1.1"[..]));
}

fn rsa_served() -> Served {
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::Rsa2048);
    Served::builder().cert(ca, cert).start()
}

#[test]
fn dhe_only_client_is_refused() {
    // An RSA certificate, so only policy (not the key type) can refuse DHE-RSA.
    let served = rsa_served();
    let control = s_client_with(
        &served,
        &["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"],
    );
    assert!(
        control.stdout.contains("HTTP/1.1 200"),
        "ECDHE control failed: {}",
        control.all()
    );
    let out = s_client_with(
        &served,
        &["-tls1_2", "-cipher", "DHE-RSA-AES128-GCM-SHA256"],
    );
    assert!(!out.success(), "DHE handshake was accepted: {}", out.all());
    assert!(!out.stdout.contains("HTTP/1.1 200"), "{}", out.all());
    assert!(!out.stdout.contains("Cipher is DHE"), "{}", out.all());
}

#[test]
fn tls11_client_is_refused() {
    let served = rsa_served();
    // SECLEVEL=0 lets OpenSSL 3 really offer TLS 1.1.
    let out = s_client_with(&served, &["-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"]);
    assert!(
        !out.success(),
        "TLS 1.1 handshake was accepted: {}",
        out.all()
    );
    assert!(!out.stdout.contains("HTTP/1.1 200"), "{}", out.all());
}

#[test]
fn tls_versions_flag_narrows_protocols() {
    let served = Served::start(&["--tls-versions", "TLSv1.2"]);
    let tls13_only = client::client_config_with(
        served.ca().ca_pem(),
        &[&rustls::version::TLS13],
        &[b"http/1.1"],
    );
    assert!(
        HttpConn::connect(served.addr, "localhost", tls13_only).is_err(),
        "a TLS 1.3-only client got in although only TLSv1.2 is allowed"
    );
    let conn = served.connect();
    assert_eq!(
        conn.tls().protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
}

fn resumes(served: &Served, version_flag: &str, version_name: &str) {
    let dir = TempDir::new("sess");
    let session = dir.path().join("session.pem").display().to_string();
    let first = s_client_with(served, &[version_flag, "-sess_out", session.as_str()]);
    assert!(
        first.stdout.contains(&format!("New, {version_name}")),
        "{}",
        first.all()
    );
    assert!(first.stdout.contains("HTTP/1.1 200"), "{}", first.all());
    let second = s_client_with(served, &[version_flag, "-sess_in", session.as_str()]);
    assert!(
        second.stdout.contains(&format!("Reused, {version_name}")),
        "session not resumed: {}",
        second.all()
    );
    assert!(second.stdout.contains("HTTP/1.1 200"), "{}", second.all());
}

#[test]
fn tls13_session_is_resumed() {
    let served = Served::start(&[]);
    resumes(&served, "-tls1_3", "TLSv1.3");
}

#[test]
fn tls12_session_is_resumed() {
    let served = Served::start(&[]);
    resumes(&served, "-tls1_2", "TLSv1.2");
}

#[test]
fn tls12_session_is_resumed_from_cache_without_tickets() {
    let served = Served::start(&["--no-tickets"]);
    resumes(&served, "-tls1_2", "TLSv1.2");
}

#[test]
fn sni_picks_matching_certificate() {
    let mut ca = TestCa::new();
    let default = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let other = ca.leaf(&["other.test"], KeyKind::EcdsaP256);
    let served = Served::builder()
        .cert(ca, default)
        .more_certs(&[&other])
        .start();
    let conn = HttpConn::connect(served.addr, "other.test", served.client.clone())
        .unwrap_or_else(|e| panic!("SNI other.test: {e}\n{}", served.tern.stderr_text()));
    let presented = conn.tls().peer_certificates().expect("certificates");
    assert_eq!(presented[0].as_ref(), other.leaf_der.as_slice());

    let conn = served.connect();
    let presented = conn.tls().peer_certificates().expect("certificates");
    assert_eq!(presented[0].as_ref(), served.cert.leaf_der.as_slice());
}

#[test]
fn missing_or_unknown_sni_gets_default_certificate() {
    let mut ca = TestCa::new();
    let default = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let other = ca.leaf(&["other.test"], KeyKind::EcdsaP256);
    let served = Served::builder()
        .cert(ca, default)
        .more_certs(&[&other])
        .start();
    // rustls sends no SNI for an IP address.
    let conn = HttpConn::connect(served.addr, "127.0.0.1", served.client.clone())
        .unwrap_or_else(|e| panic!("no SNI: {e}\n{}", served.tern.stderr_text()));
    let presented = conn.tls().peer_certificates().expect("certificates");
    assert_eq!(presented[0].as_ref(), served.cert.leaf_der.as_slice());

    let ca_file = served.ca().ca_file().display().to_string();
    let out = s_client(
        served.addr,
        &[
            "-servername",
            "unknown.test",
            "-CAfile",
            ca_file.as_str(),
            "-ign_eof",
        ],
        CLOSE_REQUEST,
    );
    assert!(
        out.stdout.contains("subject=CN = localhost"),
        "{}",
        out.all()
    );
}

#[test]
fn ecdsa_or_rsa_certificate_follows_client_signature_algorithms() {
    let mut ca = TestCa::new();
    let ecdsa = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let rsa = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::Rsa2048);
    let served = Served::builder()
        .cert(ca, ecdsa)
        .more_certs(&[&rsa])
        .start();
    for version in ["-tls1_3", "-tls1_2"] {
        let out = s_client_with(&served, &[version, "-sigalgs", "ECDSA+SHA256"]);
        assert!(
            out.stdout.contains("Peer signature type: ECDSA"),
            "{}",
            out.all()
        );
        assert!(
            out.stdout.contains("Server public key is 256 bit"),
            "{}",
            out.all()
        );
        assert!(out.stdout.contains("HTTP/1.1 200"), "{}", out.all());

        let out = s_client_with(&served, &[version, "-sigalgs", "RSA-PSS+SHA256:RSA+SHA256"]);
        assert!(
            out.stdout.contains("Server public key is 2048 bit"),
            "{}",
            out.all()
        );
        assert!(out.stdout.contains("HTTP/1.1 200"), "{}", out.all());
    }
}

#[test]
fn sni_match_ignores_case() {
    let mut ca = TestCa::new();
    let default = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let other = ca.leaf(&["other.test"], KeyKind::EcdsaP256);
    let served = Served::builder()
        .cert(ca, default)
        .more_certs(&[&other])
        .start();
    let ca_file = served.ca().ca_file().display().to_string();
    let out = s_client(
        served.addr,
        &[
            "-servername",
            "OTHER.Test",
            "-CAfile",
            ca_file.as_str(),
            "-ign_eof",
        ],
        CLOSE_REQUEST,
    );
    assert!(
        out.stdout.contains("subject=CN = other.test"),
        "{}",
        out.all()
    );
    assert!(out.stdout.contains("HTTP/1.1 200"), "{}", out.all());
}

#[test]
fn ocsp_response_is_stapled() {
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let dir = ca.dir().to_path_buf();
    let text = |p: &std::path::Path| p.display().to_string();
    // A signed "good" OCSP response for the leaf, made by openssl as the CA.
    let serial = tern_testsupport::tools::run_tool(
        "openssl",
        [
            "x509",
            "-noout",
            "-serial",
            "-in",
            text(&cert.chain).as_str(),
        ],
        b"",
        std::time::Duration::from_secs(10),
    );
    let serial = serial
        .stdout
        .trim()
        .trim_start_matches("serial=")
        .to_string();
    assert!(!serial.is_empty(), "no serial");
    let index = dir.join("index.txt");
    std::fs::write(
        &index,
        format!("V\t991231235959Z\t\t{serial}\tunknown\t/CN=localhost\n"),
    )
    .expect("write index");
    let response = dir.join("ocsp.der");
    let made = tern_testsupport::tools::run_tool(
        "openssl",
        [
            "ocsp",
            "-index",
            text(&index).as_str(),
            "-rsigner",
            text(ca.ca_file()).as_str(),
            "-rkey",
            text(&ca.ca_key_file()).as_str(),
            "-CA",
            text(ca.ca_file()).as_str(),
            "-issuer",
            text(ca.ca_file()).as_str(),
            "-cert",
            text(&cert.chain).as_str(),
            "-ndays",
            "7",
            "-respout",
            text(&response).as_str(),
        ],
        b"",
        std::time::Duration::from_secs(10),
    );
    assert!(response.exists(), "openssl ocsp failed: {}", made.all());

    let ocsp = text(&response);
    let served = Served::builder()
        .cert(ca, cert)
        .args(&["--ocsp", ocsp.as_str()])
        .start();
    let ca_file = served.ca().ca_file().display().to_string();
    let out = s_client(
        served.addr,
        &[
            "-servername",
            "localhost",
            "-CAfile",
            ca_file.as_str(),
            "-status",
            "-ign_eof",
        ],
        CLOSE_REQUEST,
    );
    assert!(
        out.stdout.contains("OCSP Response Status: successful"),
        "{}",
        out.all()
    );
    assert!(out.stdout.contains("Cert Status: good"), "{}", out.all());
}
