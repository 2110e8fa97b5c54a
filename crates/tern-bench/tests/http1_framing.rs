//! The HTTP/1.1 response reader against a scripted server on loopback: each
//! framing (Content-Length, chunked with extensions and trailers, until
//! close, no body) is read to its exact end, even when the server dribbles
//! it out in small pieces, and the connection is reused only when allowed.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tern_bench::{BenchConfig, StopCondition, Target};

/// Serves every connection with `response` for each request it reads,
/// written in pieces of `piece` bytes; closes after one response when
/// `close` is set. Returns the address and the accepted-connection counter.
fn scripted(response: &'static [u8], piece: usize, close: bool) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let counter = conns.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            counter.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || serve(stream, response, piece, close));
        }
    });
    (format!("http://{addr}/"), conns)
}

fn serve(mut s: TcpStream, response: &[u8], piece: usize, close: bool) {
    s.set_nodelay(true).unwrap();
    let mut buf = [0u8; 4096];
    let mut pending = Vec::new();
    loop {
        let Ok(n) = s.read(&mut buf) else { return };
        if n == 0 {
            return;
        }
        pending.extend_from_slice(&buf[..n]);
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..end + 4);
            for chunk in response.chunks(piece) {
                if s.write_all(chunk).is_err() {
                    return;
                }
                if piece < response.len() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            if close {
                return;
            }
        }
    }
}

fn run(url: &str, n: u64, method: &str) -> tern_bench::Report {
    let mut config = BenchConfig::new(vec![Target::parse(url).unwrap()]);
    config.connections = 1;
    config.workers = 1;
    config.stop = StopCondition::Requests(n);
    config.method = method.to_string();
    config.timeout = Some(Duration::from_secs(5));
    tern_bench::run(config).unwrap()
}

#[test]
fn content_length_body_read_exactly_and_connection_reused() {
    let (url, conns) = scripted(
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        3,
        false,
    );
    let r = run(&url, 10, "GET");
    let s = &r.targets[0].summary;
    assert_eq!((s.completed, s.failed, s.body_bytes), (10, 0, 50));
    assert_eq!(conns.load(Ordering::SeqCst), 1);
}

#[test]
fn chunked_body_with_extensions_and_trailers() {
    let resp: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
        4;ext=1\r\nwiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Trailer: t\r\n\r\n";
    let (url, conns) = scripted(resp, 7, false);
    let r = run(&url, 6, "GET");
    let s = &r.targets[0].summary;
    assert_eq!((s.completed, s.failed, s.body_bytes), (6, 0, 6 * 23));
    assert_eq!(conns.load(Ordering::SeqCst), 1);
}

#[test]
fn body_until_close_forces_a_new_connection() {
    let (url, conns) = scripted(b"HTTP/1.1 200 OK\r\n\r\nuntil close", 4, true);
    let r = run(&url, 4, "GET");
    let s = &r.targets[0].summary;
    assert_eq!((s.completed, s.failed, s.body_bytes), (4, 0, 44));
    assert_eq!(conns.load(Ordering::SeqCst), 4);
}

#[test]
fn connection_close_header_is_honoured() {
    let (url, conns) = scripted(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
        64,
        true,
    );
    let r = run(&url, 3, "GET");
    assert_eq!(r.targets[0].summary.completed, 3);
    assert_eq!(conns.load(Ordering::SeqCst), 3);
}

#[test]
fn head_and_204_have_no_body_even_with_a_length() {
    let (url, conns) = scripted(
        b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n",
        64,
        false,
    );
    let r = run(&url, 3, "HEAD");
    assert_eq!(
        (
            r.targets[0].summary.completed,
            r.targets[0].summary.body_bytes
        ),
        (3, 0)
    );
    assert_eq!(conns.load(Ordering::SeqCst), 1);
    let (url, _) = scripted(b"HTTP/1.1 204 No Content\r\n\r\n", 64, false);
    let r = run(&url, 3, "GET");
    assert_eq!(r.targets[0].stats.status.get(&204), Some(&3));
}

#[test]
fn interim_100_continue_is_skipped() {
    let (url, _) = scripted(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
        5,
        false,
    );
    let r = run(&url, 2, "GET");
    assert_eq!(r.targets[0].stats.status.get(&201), Some(&2));
}

#[test]
fn truncated_and_garbage_responses_are_counted_errors() {
    let (url, _) = scripted(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        64,
        true,
    );
    let r = run(&url, 2, "GET");
    assert_eq!(
        r.targets[0]
            .stats
            .errors
            .get("connection closed before a complete response"),
        Some(&2)
    );
    let (url, _) = scripted(b"NOT HTTP AT ALL\r\n\r\n", 64, true);
    let r = run(&url, 2, "GET");
    assert_eq!(r.targets[0].summary.failed, 2);
    assert!(r.targets[0]
        .stats
        .errors
        .keys()
        .all(|k| k.starts_with("http: bad response head")));
}
