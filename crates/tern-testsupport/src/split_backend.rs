//! An HTTP/1.1 backend that reports how each request reached it: the size
//! of every `read()` and the number of TCP segments that carried it. A
//! proxy that writes a small request (head and body) with one `write()`
//! delivers it in one segment; one that writes the head and then the body
//! delivers two, whatever the timing.
//!
//! Why segments and not reads: a reader that wakes a little late gets two
//! segments in one `read()`, so "one read" can hide two writes, and
//! waiting before reading (to let a second write arrive) is a guess about
//! timing. The kernel counts data-carrying segments per socket instead
//! (`tcpi_data_segs_in` of `TCP_INFO`, Linux 4.6+): read it after the
//! request's last byte, subtract the count after the previous request, and
//! the difference is exact. On loopback with `TCP_NODELAY` (tern sets it)
//! every `write()` of less than one MSS (about 64 KiB on `lo`) leaves as
//! its own segment: Nagle is off, and autocorking does not merge writes
//! because loopback releases each segment's send memory as it transmits.
//!
//! Every request is answered `200` with a JSON body:
//! `{"request": "POST /x HTTP/1.1", "bytes": 412, "reads": [412], "segments": 1}`.
//! Bodies must be framed by Content-Length (a chunked request closes the
//! connection unanswered): the segment count is meant for small requests.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How one request arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// The request line, without CRLF.
    pub request_line: String,
    /// Bytes of the whole request (head and body).
    pub bytes: usize,
    /// What each `read()` returned while the request came in.
    pub reads: Vec<usize>,
    /// TCP segments with data that carried the request.
    pub segments: u32,
}

/// Data-carrying TCP segments received so far on `socket`
/// (`tcpi_data_segs_in`).
pub fn data_segments_in(socket: &impl AsRawFd) -> io::Result<u32> {
    // SAFETY: tcp_info is plain old data (integers only); all-zero is a
    // valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `info`, which outlives the
    // call; the kernel writes at most `len` bytes and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let needed = std::mem::offset_of!(libc::tcp_info, tcpi_data_segs_in) + 4;
    if (len as usize) < needed {
        return Err(io::Error::other(
            "TCP_INFO has no tcpi_data_segs_in (Linux older than 4.6)",
        ));
    }
    Ok(info.tcpi_data_segs_in)
}

/// A running split-detecting backend; stops on drop.
pub struct SplitBackend {
    addr: SocketAddr,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SplitBackend {
    /// Starts on a free port of 127.0.0.1.
    pub fn start() -> SplitBackend {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the split backend");
        listener
            .set_nonblocking(true)
            .expect("non-blocking split backend");
        let addr = listener.local_addr().expect("split backend address");
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let arrivals = arrivals.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let arrivals = arrivals.clone();
                            std::thread::spawn(move || serve(stream, &arrivals));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        SplitBackend {
            addr,
            arrivals,
            stop,
            thread: Some(thread),
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request so far, in arrival order.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

impl Drop for SplitBackend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(mut stream: TcpStream, arrivals: &Mutex<Vec<Arrival>>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buf: Vec<u8> = Vec::new();
    let mut segments_before = 0;
    loop {
        let mut reads = Vec::new();
        let Some(len) = read_request(&mut stream, &mut buf, &mut reads) else {
            return;
        };
        let Ok(segments_now) = data_segments_in(&stream) else {
            return;
        };
        let request: Vec<u8> = buf.drain(..len).collect();
        let request_line = request
            .split(|&b| b == b'\r')
            .next()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .unwrap_or_default();
        let arrival = Arrival {
            request_line,
            bytes: len,
            reads,
            segments: segments_now - segments_before,
        };
        segments_before = segments_now;
        let body = serde_json::json!({
            "request": arrival.request_line,
            "bytes": arrival.bytes,
            "reads": arrival.reads,
            "segments": arrival.segments,
        })
        .to_string();
        if let Ok(mut all) = arrivals.lock() {
            all.push(arrival);
        }
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// Reads until `buf` holds one whole request; returns its length, `None`
/// when the peer closed or sent something this backend cannot frame.
pub(crate) fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    reads: &mut Vec<usize>,
) -> Option<usize> {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        if let Some(len) = complete_request_len(buf) {
            return len;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => {
                reads.push(n);
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

/// `Some(Some(len))` when `buf` starts with a whole request of `len`
/// bytes, `Some(None)` when it cannot be framed, `None` when more is needed.
fn complete_request_len(buf: &[u8]) -> Option<Option<usize>> {
    let head_end = crate::client::find(buf, b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let field = |name: &str| {
        head.split("\r\n")
            .filter_map(|line| line.split_once(':'))
            .find(|(n, _)| n.trim() == name)
            .map(|(_, v)| v.trim().to_string())
    };
    if field("transfer-encoding").is_some() {
        return Some(None);
    }
    let body = match field("content-length") {
        Some(v) => match v.parse::<usize>() {
            Ok(n) => n,
            Err(_) => return Some(None),
        },
        None => 0,
    };
    (buf.len() >= head_end + body).then_some(Some(head_end + body))
}
