//! A scripted backend for response framing a well-behaved server never sends:
//! it reads one request head, writes fixed bytes, and closes. It also records
//! how each request arrived.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A running scripted backend; stops on drop.
pub struct RawBackend {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    first_reads: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RawBackend {
    /// Answers every request head on 127.0.0.1 with `response`, then closes.
    pub fn start(response: &[u8]) -> RawBackend {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the raw backend");
        listener
            .set_nonblocking(true)
            .expect("non-blocking raw backend");
        let addr = listener.local_addr().expect("raw backend address");
        let requests = Arc::new(AtomicUsize::new(0));
        let first_reads = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let response = response.to_vec();
        let thread = {
            let requests = requests.clone();
            let first_reads = first_reads.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let response = response.clone();
                            let requests = requests.clone();
                            let first_reads = first_reads.clone();
                            std::thread::spawn(move || {
                                answer(stream, &response, &requests, &first_reads)
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        RawBackend {
            addr,
            requests,
            first_reads,
            stop,
            thread: Some(thread),
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Request heads received so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// What the first `read()` of each connection returned: shows whether a
    /// request arrived in one write (loopback delivers one write to one read
    /// when the reader is waiting).
    pub fn first_reads(&self) -> Vec<Vec<u8>> {
        self.first_reads
            .lock()
            .map(|reads| reads.clone())
            .unwrap_or_default()
    }
}

fn answer(
    mut stream: TcpStream,
    response: &[u8],
    requests: &AtomicUsize,
    first_reads: &Mutex<Vec<Vec<u8>>>,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut received = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    while !received.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk) {
            Ok(n) if n > 0 => {
                if received.is_empty() {
                    if let Ok(mut reads) = first_reads.lock() {
                        reads.push(chunk[..n].to_vec());
                    }
                }
                received.extend_from_slice(&chunk[..n]);
            }
            _ => return,
        }
    }
    requests.fetch_add(1, Ordering::SeqCst);
    let _ = stream.write_all(response);
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Write);
    // Drain until the peer closes, so our close is a FIN and not a reset.
    let mut sink = [0u8; 4096];
    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
}

impl Drop for RawBackend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
