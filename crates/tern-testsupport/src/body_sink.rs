//! An HTTP/1.1 origin that records how a request body arrived: the head,
//! the body bytes, and whether the body ended (chunked `0` chunk or
//! Content-Length reached) or the connection was cut first. For tests of
//! what a backend sees when tern aborts a request mid-body.
//!
//! It answers a complete request with `200 ok`; with
//! [`BodySink::answer_early`] it sends a `200` head and a first chunk as
//! soon as the head arrives and never ends that response, so the client's
//! response has begun before its body is read.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How one request's body ended at the origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// The request head, as received.
    pub head: String,
    /// Body bytes received after the head (chunk framing included).
    pub body_bytes: usize,
    /// The body ended as framed (false: the connection closed first).
    pub complete: bool,
}

#[derive(Default)]
struct State {
    heads: usize,
    arrivals: Vec<Arrival>,
}

/// A running origin; its thread ends with the test process.
pub struct BodySink {
    addr: SocketAddr,
    state: Arc<(Mutex<State>, Condvar)>,
}

impl BodySink {
    /// Answers each complete request with `200 ok`.
    pub fn start() -> BodySink {
        BodySink::spawn(false)
    }

    /// Answers each request head at once with a `200` whose body never ends.
    pub fn answer_early() -> BodySink {
        BodySink::spawn(true)
    }

    fn spawn(early: bool) -> BodySink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the body sink");
        let addr = listener.local_addr().expect("body sink address");
        let state = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let shared = shared.clone();
                std::thread::spawn(move || serve(stream, early, &shared));
            }
        });
        BodySink { addr, state }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Request heads received so far.
    pub fn heads(&self) -> usize {
        self.wait(Duration::ZERO, |s| Some(s.heads)).unwrap_or(0)
    }

    /// Waits (up to `timeout`) until `n` request heads have arrived.
    pub fn wait_heads(&self, n: usize, timeout: Duration) {
        self.wait(timeout, |s| (s.heads >= n).then_some(()))
            .unwrap_or_else(|| panic!("{n} request heads not seen within {timeout:?}"));
    }

    /// Waits (up to `timeout`) until `n` requests have ended (complete or
    /// cut) and returns every arrival.
    pub fn wait_arrivals(&self, n: usize, timeout: Duration) -> Vec<Arrival> {
        self.wait(timeout, |s| {
            (s.arrivals.len() >= n).then(|| s.arrivals.clone())
        })
        .unwrap_or_else(|| panic!("{n} request bodies not ended within {timeout:?}"))
    }

    fn wait<T>(&self, timeout: Duration, mut ready: impl FnMut(&State) -> Option<T>) -> Option<T> {
        let (lock, changed) = &*self.state;
        let deadline = Instant::now() + timeout;
        let mut state = lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(v) = ready(&state) {
                return Some(v);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            state = changed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

fn serve(mut stream: TcpStream, early: bool, shared: &(Mutex<State>, Condvar)) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
    let mut received = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let head_end = loop {
        if let Some(at) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match stream.read(&mut buf) {
            Ok(n) if n > 0 => received.extend_from_slice(&buf[..n]),
            _ => return,
        }
    };
    let head = String::from_utf8_lossy(&received[..head_end]).into_owned();
    let lower = head.to_ascii_lowercase();
    let length = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let (lock, changed) = shared;
    if let Ok(mut s) = lock.lock() {
        s.heads += 1;
    }
    changed.notify_all();
    if early {
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nearly\r\n");
    }
    let mut body = received[head_end..].to_vec();
    let ended = |body: &[u8]| match length {
        Some(n) => body.len() >= n,
        None => {
            body.ends_with(b"0\r\n\r\n") && (body.len() == 5 || body.ends_with(b"\r\n0\r\n\r\n"))
        }
    };
    while !ended(&body) {
        match stream.read(&mut buf) {
            Ok(n) if n > 0 => body.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let complete = ended(&body);
    if complete && !early {
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    }
    if let Ok(mut s) = lock.lock() {
        s.arrivals.push(Arrival {
            head,
            body_bytes: body.len(),
            complete,
        });
    }
    changed.notify_all();
    if complete {
        // Hold the connection like a keepalive origin until tern closes it.
        let _ = stream.read(&mut buf);
    }
}
