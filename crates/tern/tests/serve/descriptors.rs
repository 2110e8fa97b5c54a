//! Out of file descriptors: tern keeps serving the connections it has,
//! counts the failed accepts, and takes the waiting connections once
//! descriptors free up.

use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use tern_testsupport::tern::{eventually, Served};

/// Descriptors `pid` has open now.
fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or_else(|e| panic!("/proc/{pid}/fd: {e}"))
}

/// Sets the open-file limit of the running process `pid` (prlimit(1)).
fn set_nofile(pid: u32, limit: usize) {
    let out = Command::new("prlimit")
        .arg(format!("--pid={pid}"))
        .arg(format!("--nofile={limit}:{limit}"))
        .output()
        .expect("run prlimit (util-linux)");
    assert!(
        out.status.success(),
        "prlimit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn out_of_descriptors_keeps_existing_connections_and_recovers() {
    let served = Served::builder()
        .admin()
        .args(&["--workers", "1", "--handshake-timeout", "60s"])
        .start();
    let pid = served.tern.pid();
    // A kept-alive client whose backend connection is pooled: it needs no
    // new descriptor for its next request.
    let mut kept = served.connect();
    let first = kept.get("localhost", "/status/200").expect("first request");
    assert_eq!(first.status, 200);

    set_nofile(pid, open_descriptors(pid) + 4);
    // More connections than descriptors: a few are accepted, the rest wait
    // in the listen backlog while accept(2) fails with EMFILE.
    let flood: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(served.addr).expect("connect (the backlog takes it)"))
        .collect();
    served.wait_log(&["accept failed", "open files"], Duration::from_secs(10));

    for i in 0..3 {
        let again = kept
            .get("localhost", "/status/200")
            .unwrap_or_else(|e| panic!("request {i} on the kept connection: {e}"));
        assert_eq!(again.status, 200, "request {i} on the kept connection");
    }

    // Descriptors free up: the waiting connections are taken (and closed,
    // their clients gone), and a new client is served.
    drop(flood);
    let recovered = eventually(Duration::from_secs(15), || {
        tern_testsupport::client::HttpConn::connect(served.addr, "localhost", served.client.clone())
            .and_then(|mut c| c.get("localhost", "/status/200"))
            .is_ok_and(|r| r.status == 200)
    });
    assert!(
        recovered,
        "no new client served after descriptors freed up\n{}",
        served.tern.stderr_text()
    );
    let warnings = served
        .tern
        .stderr_text()
        .lines()
        .filter(|l| l.contains("accept failed"))
        .count();
    let scrape = served.scrape();
    let errors = scrape
        .get("tern_accept_errors_total", &[])
        .unwrap_or_default();
    assert!(
        errors >= warnings as f64 && errors >= 1.0,
        "tern_accept_errors_total {errors}, {warnings} warnings"
    );
}
