//! TLS conformance where tern fell behind nginx and haproxy (tlsfuzzer's
//! findings, issue 31): records rustls queues in answer to what it read
//! must leave at once, not wait for tern's next write; a protocol error
//! ends with the fatal alert that names it, not a close_notify or a bare
//! TCP close. The tlsfuzzer scripts the issue names run against tern with
//! an RSA certificate, as the comparison with nginx and haproxy
//! did (bench/tlsfuzzer.sh runs them against all three).

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::tern::Served;
use tern_testsupport::tlsfuzzer;
use tern_testsupport::tools::{s_client, KillOnDrop};

/// `openssl s_client -tls1_2` then `R` (tlsfuzzer's
/// test-renegotiation-disabled): the client gets the `no_renegotiation`
/// warning rustls queued, instead of hanging until its own timeout. Its
/// stdin stays open (s_client reads `R` only then), so the answer can only
/// come from tern.
#[test]
fn tls12_renegotiation_attempt_gets_no_renegotiation_at_once() {
    let served = Served::start(&[]);
    let mut child = KillOnDrop(
        Command::new("openssl")
            .args(["s_client", "-connect", &served.addr.to_string()])
            .args(["-tls1_2", "-servername", "localhost"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run openssl s_client"),
    );
    let mut stdin = child.0.stdin.take().expect("s_client's stdin");
    let mut stderr = child.0.stderr.take().expect("s_client's stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut chunk) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&chunk[..n]);
            let _ = tx.send(String::from_utf8_lossy(&all).into_owned());
        }
    });
    // The handshake is done once s_client has verified the chain.
    let mut seen = String::new();
    while !seen.contains("verify") {
        seen = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("no handshake ({e}): {seen}"));
    }
    stdin
        .write_all(b"R\n")
        .expect("ask s_client to renegotiate");
    while !seen.contains("no renegotiation") {
        seen = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| {
                panic!(
                    "no no_renegotiation alert ({e}): {seen}\n{}",
                    served.tern.stderr_text()
                )
            });
    }
    drop(stdin);
}

/// RFC 7507 (tlsfuzzer's test-fallback-scsv): a TLS 1.2 ClientHello with
/// TLS_FALLBACK_SCSV to tern, which does TLS 1.3, is a downgraded retry and
/// gets `inappropriate_fallback`; without the SCSV, TLS 1.2 still works.
#[test]
fn tls12_fallback_scsv_gets_inappropriate_fallback() {
    let served = Served::start(&[]);
    let request = b"GET /echo HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let refused = s_client(
        served.addr,
        &[
            "-tls1_2",
            "-fallback_scsv",
            "-servername",
            "localhost",
            "-ign_eof",
        ],
        request,
    );
    assert!(
        refused.all().contains("inappropriate fallback"),
        "{}",
        refused.all()
    );
    assert!(
        !refused.stdout.contains("HTTP/1.1 200"),
        "{}",
        refused.all()
    );
    let plain = s_client(
        served.addr,
        &["-tls1_2", "-servername", "localhost", "-ign_eof"],
        request,
    );
    assert!(plain.stdout.contains("HTTP/1.1 200"), "{}", plain.all());
}

/// tern with an RSA-2048 certificate for `localhost`, and the tlsfuzzer
/// checkout; None (the test is skipped, saying why) without tlsfuzzer.
fn rsa_served_and_tlsfuzzer() -> Option<(Served, std::path::PathBuf)> {
    let Some(dir) = tlsfuzzer::find() else {
        eprintln!("skipped: no tlsfuzzer checkout with tlslite-ng (.ci/run installs them)");
        return None;
    };
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::Rsa2048);
    Some((Served::builder().cert(ca, cert).start(), dir))
}

/// Runs tlsfuzzer's `script` with `args` against tern and asserts every
/// conversation it ran passed.
fn tlsfuzzer_passes(script: &str, args: &[&str]) {
    let Some((served, dir)) = rsa_served_and_tlsfuzzer() else {
        return;
    };
    let out = tlsfuzzer::run(&dir, script, served.addr, args);
    let failed = tlsfuzzer::failed(&out);
    assert!(
        out.success() && failed.is_empty() && tlsfuzzer::count(&out, "PASS") > Some(0),
        "{script}: failed {failed:?}\n{}",
        out.all()
    );
}

/// RFC 8446 5.4: a record whose inner plaintext has no content type (all
/// zeros, with or without padding), during or after the handshake, gets
/// `unexpected_message` (rustls closed without a word: vendor/patches/
/// rustls/0004).
#[test]
fn tls13_record_without_content_type_gets_unexpected_message() {
    tlsfuzzer_passes("test-tls13-zero-content-type", &[]);
}

/// RFC 8446 5.1: application data between the fragments of a handshake
/// message gets `unexpected_message`; zero-length application data after
/// the handshake is served.
#[test]
fn tls13_record_inside_a_fragmented_handshake_message_gets_unexpected_message() {
    tlsfuzzer_passes("test-tls13-zero-length-data", &[]);
}

/// KeyUpdate: answered when asked (also when the request is cut in two
/// around it, so the client waits for the answer before sending the rest:
/// tern answers before its next write would, without which both sides
/// wait), refused with `unexpected_message` when fragmented with
/// application data between the fragments. Left out: "multiple KeyUpdate
/// messages" wants 32 answers to 32 requests (or exactly one with
/// `--coalescing`); RFC 8446 4.6.3 lets a server answer requests it read
/// while silent with one, and tern answers those read before it waits, so
/// the count depends on how the records arrive.
#[test]
fn tls13_key_update_is_answered_at_once_and_a_fragmented_one_refused() {
    tlsfuzzer_passes(
        "test-tls13-keyupdate",
        &["-e", "multiple KeyUpdate messages"],
    );
}

/// The two fixes of the previous session, by the scripts that found them.
/// Both scripts offer CBC suites unless told otherwise (`-d -C` picks an
/// ECDHE AEAD suite); test-fallback-scsv's sanity conversations offer only
/// CBC suites, which tern (like nginx and haproxy under the same modern
/// policy) refuses, so the downgrade conversations are named.
#[test]
fn tlsfuzzer_renegotiation_and_fallback_scripts_pass() {
    tlsfuzzer_passes(
        "test-renegotiation-disabled",
        &["-d", "-C", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"],
    );
    tlsfuzzer_passes(
        "test-fallback-scsv",
        &[
            "-d",
            "--tls-1.3",
            "--min-support",
            "1.2",
            "FALLBACK - hello TLSv1.2 - pos 0",
            "FALLBACK - hello TLSv1.2 - pos 1",
            "FALLBACK - hello TLSv1.2 - pos 2",
            "FALLBACK - record TLSv1.2 hello TLSv1.2 - pos 0",
            "FALLBACK - record TLSv1.2 hello TLSv1.2 - pos 1",
            "FALLBACK - record TLSv1.2 hello TLSv1.2 - pos 2",
        ],
    );
}

/// A TLS 1.3 client offering only signature schemes tern's RSA key cannot
/// make (`rsa_pkcs1_*`, `rsa_pss_pss_*`) gets `handshake_failure` in place
/// of a ServerHello, as from OpenSSL (rustls sent the ServerHello first:
/// vendor/patches/rustls/0006); the schemes it can make still work.
#[test]
fn tls13_signature_schemes_the_key_cannot_make_are_refused_before_the_server_hello() {
    tlsfuzzer_passes("test-tls13-pkcs-signature", &[]);
    tlsfuzzer_passes("test-tls13-rsa-signatures", &[]);
}

/// An empty alert record (with or without padding, under handshake or
/// application keys) gets `unexpected_message`, as from OpenSSL, not the
/// `decode_error` of a failed parse (vendor/patches/rustls/0007).
#[test]
fn tls13_empty_alert_record_gets_unexpected_message() {
    tlsfuzzer_passes("test-tls13-empty-alert", &[]);
}

/// ClientHellos of every size a client may send are read, in one record or
/// fragmented down to one byte per record, up to a 64 KB extension (a
/// hello over 64 KB in all: rustls's read buffer filled first and tern
/// closed without an alert, vendor/patches/rustls/0012); a plaintext
/// record over 2^14 bytes gets `record_overflow` (RFC 8446 5.1; rustls
/// accepted it, vendor/patches/rustls/0011).
#[test]
fn client_hellos_of_every_legal_size_are_read_and_an_oversized_record_refused() {
    tlsfuzzer_passes(
        "test-record-layer-fragmentation",
        &["-d", "-C", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"],
    );
}

/// The largest legal ClientHello (a full cipher list and a 64 KB
/// extensions block: 131396 bytes, OpenSSL's limit) is read and answered;
/// at a 128 KB limit rustls refused it with `illegal_parameter`
/// (vendor/patches/rustls/0012, tlsfuzzer test-large-hello "huge hello").
#[test]
fn the_largest_legal_client_hello_is_answered() {
    tlsfuzzer_passes("test-large-hello", &["-d", "sanity", "huge hello"]);
}

/// A ClientHello whose header claims more than tern reads (0x30000
/// bytes; over the 131396 bytes of the largest legal hello, OpenSSL's
/// limit and tern's) gets
/// `illegal_parameter` as soon as its first record arrives, the alert
/// OpenSSL sends for it (vendor/patches/rustls/0012), not a close without
/// an alert.
#[test]
fn a_client_hello_over_the_size_limit_gets_illegal_parameter() {
    let served = Served::start(&[]);
    let mut tcp = std::net::TcpStream::connect(served.addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let mut record = vec![0x16, 0x03, 0x01, 0x40, 0x00];
    record.extend_from_slice(&[0x01, 0x03, 0x00, 0x00, 0x03, 0x03]);
    record.resize(5 + 0x4000, 0);
    tcp.write_all(&record).expect("send the first record");
    let mut answer = Vec::new();
    // The alert, then tern closes: read to the end (or the timeout).
    let _ = tcp.read_to_end(&mut answer);
    assert!(
        answer.len() == 7 && answer[0] == 0x15 && answer[3..] == [0x00, 0x02, 0x02, 0x2f],
        "want a fatal illegal_parameter alert, got {answer:02x?}\n{}",
        served.tern.stderr_text()
    );
}

/// RFC 8446 5.2: a TLS 1.3 record too long to hold a legal inner
/// plaintext gets `record_overflow`, also when its tag is bad (rustls
/// answered `bad_record_mac` then: vendor/patches/rustls/0014); records
/// at the limits are served. Left out: the two Finished messages of 2^14
/// bytes after 16348 bytes of padding, which get `decrypt_error` where
/// the script wants `decode_error` (a deviation listed in
/// vendor/README.md).
#[test]
fn tls13_records_over_the_length_limit_get_record_overflow() {
    tlsfuzzer_passes(
        "test-tls13-record-layer-limits",
        &[
            "-e",
            "max size payload (2**14) of Finished msg, with 16348 bytes of left padding, cipher TLS_AES_128_GCM_SHA256",
            "-e",
            "max size payload (2**14) of Finished msg, with 16348 bytes of left padding, cipher TLS_CHACHA20_POLY1305_SHA256",
        ],
    );
}

/// RFC 8422 5.2: a TLS 1.2 ServerHello for a client that sent
/// `ec_point_formats` carries the server's own (rustls sent none, and
/// tlsfuzzer's ECDHE scripts stopped at their sanity conversation:
/// vendor/patches/rustls/0015); bad ClientKeyExchange messages get their
/// alerts, a truncated ECDH value too (`decode_error`, patch 0016; it was
/// closed without one).
#[test]
fn tls12_server_hello_answers_ec_point_formats() {
    tlsfuzzer_passes(
        "test-ecdhe-rsa-key-exchange-with-bad-messages",
        &["-C", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"],
    );
}
