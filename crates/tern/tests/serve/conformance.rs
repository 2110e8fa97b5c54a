//! TLS conformance where tern fell behind nginx and haproxy (tlsfuzzer's
//! findings, issue 31): records rustls queues in answer to what it read
//! must leave at once, not wait for tern's next write.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use tern_testsupport::tern::Served;
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
