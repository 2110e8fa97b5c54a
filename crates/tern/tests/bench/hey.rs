//! hey's flags reach the wire as hey sends them, in one write; a proxy
//! tunnel works; Ctrl-C prints the report so far.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::time::Duration;

use tern_testsupport::bench_target::{BenchTarget, BenchTargetOptions};
use tern_testsupport::tern::wait_until;

use crate::support::{bench_json, num, summary, tern};

/// Accepts one connection, reads once, answers 200 and returns what that
/// single read got.
fn capture_first_read(listener: TcpListener) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 64 * 1024];
        let n = s.read(&mut buf).expect("read");
        buf.truncate(n);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        buf
    })
}

#[test]
fn hey_flags_reach_the_wire_in_one_write() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let got = capture_first_read(listener);
    let report = bench_json(&[
        "-n",
        "1",
        "-c",
        "1",
        "-m",
        "POST",
        "-d",
        "hello=1",
        "-T",
        "application/x-www-form-urlencoded",
        "-A",
        "text/plain",
        "-a",
        "user:pw",
        "-H",
        "X-Test: yes",
        "-host",
        "example.test",
        "-disable-compression",
        &format!("http://{addr}/path?q=1"),
    ]);
    assert_eq!(num(summary(&report, 0), "completed"), 1.0);
    let req = String::from_utf8(got.join().unwrap()).unwrap();
    assert!(req.starts_with("POST /path?q=1 HTTP/1.1\r\n"), "{req}");
    for line in [
        "Host: example.test\r\n",
        "Content-Type: application/x-www-form-urlencoded\r\n",
        "Accept: text/plain\r\n",
        "Authorization: Basic dXNlcjpwdw==\r\n",
        "X-Test: yes\r\n",
        "Content-Length: 7\r\n",
    ] {
        assert!(req.contains(line), "missing {line:?} in {req:?}");
    }
    assert!(!req.contains("Accept-Encoding"), "{req}");
    // Head and body arrived in the first read: one write, no Nagle wait.
    assert!(req.ends_with("\r\n\r\nhello=1"), "{req:?}");
}

#[test]
fn proxy_tunnel_reaches_the_target() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let proxy = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_addr = proxy.local_addr().unwrap();
    let target = server.addr();
    let proxy_thread = std::thread::spawn(move || {
        let (client, _) = proxy.accept().unwrap();
        let mut reader = BufReader::new(client.try_clone().unwrap());
        let mut first = String::new();
        reader.read_line(&mut first).unwrap();
        assert_eq!(first, format!("CONNECT {target} HTTP/1.1\r\n"));
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
        }
        let upstream = TcpStream::connect(target).unwrap();
        let mut c = client;
        c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .unwrap();
        let (mut c2, mut u2) = (c.try_clone().unwrap(), upstream.try_clone().unwrap());
        let up = std::thread::spawn(move || std::io::copy(&mut reader, &mut u2));
        let mut u = upstream;
        let _ = std::io::copy(&mut u, &mut c2);
        let _ = up.join();
    });
    let report = bench_json(&[
        "-n",
        "5",
        "-c",
        "1",
        "-x",
        &proxy_addr.to_string(),
        &server.url("/"),
    ]);
    assert_eq!(num(summary(&report, 0), "completed"), 5.0);
    assert_eq!(
        server.connections(),
        1,
        "all requests went through the one tunnel"
    );
    drop(server);
    let _ = proxy_thread.join();
}

#[test]
fn ctrl_c_prints_the_report_so_far() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let child = tern()
        .args(["bench", "-z", "60s", "-c", "2", &server.url("/")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once the run is under way: requests are arriving (tern
    // bench starts its Ctrl-C listener before the run begins).
    wait_until(
        "bench requests at the server",
        Duration::from_secs(10),
        || server.requests() >= 20,
    );
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("interrupted") && text.contains("Requests/sec:"),
        "{text}"
    );
    assert!(server.requests() > 0);
}
