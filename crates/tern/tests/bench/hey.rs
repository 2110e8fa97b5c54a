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

/// A server speaking HTTP/2 with prior knowledge (Python's `h2`, which
/// Hypercorn brings): answers each request 200 and prints its header
/// fields as one JSON line.
const H2C_HEADERS_SERVER: &str = r#"
import json, socket, sys
import h2.config, h2.connection, h2.events
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
print(srv.getsockname()[1], flush=True)
sock, _ = srv.accept()
conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
conn.initiate_connection()
sock.sendall(conn.data_to_send())
heads = {}
while True:
    data = sock.recv(65536)
    if not data:
        break
    for event in conn.receive_data(data):
        if isinstance(event, h2.events.RequestReceived):
            heads[event.stream_id] = [[n.decode(), v.decode()] for n, v in event.headers]
        elif isinstance(event, h2.events.DataReceived):
            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            conn.send_headers(event.stream_id, [(":status", "200"), ("content-length", "2")])
            conn.send_data(event.stream_id, b"ok", end_stream=True)
            print(json.dumps(heads.pop(event.stream_id)), flush=True)
    sock.sendall(conn.data_to_send())
"#;

/// Over HTTP/2 a request body of known length is declared with
/// `content-length`, as h2load, curl and browsers send it: a proxy in
/// front of an HTTP/1.1 backend then forwards a Content-Length, not
/// chunks some backends cannot read.
#[test]
fn an_http2_request_body_is_declared_with_content_length() {
    let mut server = std::process::Command::new("python3")
        .args(["-c", H2C_HEADERS_SERVER])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 with h2 (installed with hypercorn by .ci/run)");
    let mut out = BufReader::new(server.stdout.take().expect("stdout"));
    let mut port = String::new();
    out.read_line(&mut port)
        .expect("the server prints its port");
    let port: u16 = port.trim().parse().expect("a port number");
    let report = bench_json(&[
        "-n",
        "1",
        "-c",
        "1",
        "-h2",
        "-m",
        "POST",
        "-d",
        "hello=1",
        &format!("http://127.0.0.1:{port}/form"),
    ]);
    assert_eq!(num(summary(&report, 0), "completed"), 1.0);
    let mut line = String::new();
    out.read_line(&mut line).expect("the request's fields");
    let _ = server.kill();
    let _ = server.wait();
    let fields: Vec<(String, String)> = serde_json::from_str(&line).expect("JSON fields");
    assert!(
        fields.contains(&("content-length".into(), "7".into())),
        "{fields:?}"
    );
}
