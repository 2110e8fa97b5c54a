//! Scripted backends for the conformance matrix (`crates/tern/tests/matrix.rs`):
//! the same misbehaviours spoken over HTTP/1.1 ([`ScriptedH1Backend`]) and
//! over HTTP/2, cleartext or TLS ([`ScriptedH2Backend`]), so every path
//! through tern meets the same backend.
//!
//! | [`Script`] | HTTP/1.1 | HTTP/2 |
//! |---|---|---|
//! | `Serve` | answers every request `200 ok` | answers every stream `200` with JSON `{"stream", "body_len", "segments"}` |
//! | `CloseWhenIdle` | answers the first connection's first request (keep-alive, no `Connection: close`), then closes it | answers the first session's first stream, then `GOAWAY` (last stream = that one) and closes |
//! | `CloseAsNextRequestArrives` | answers the first connection's first request, then closes it, unread, once the next request is waiting in it | answers the first session's first stream; on the next `HEADERS`, `GOAWAY` (last stream = the answered one) and closes, the new stream unprocessed |
//! | `Silent` | reads requests, never answers | completes the HTTP/2 preface, reads streams, never answers |
//!
//! Every later connection (or session) is served as with `Serve`.
//! `CloseAsNextRequestArrives` is the race every keep-alive proxy meets:
//! the backend gives up on an idle connection just as a request is sent on
//! it. The request reached the socket but not the application, so a retry
//! on a new connection is safe and the backend processes it once.
//!
//! The HTTP/2 backend speaks frames directly (its answers are HPACK static
//! or literal fields, no dynamic table), so it decides exactly which stream
//! a GOAWAY leaves unprocessed; it does not decode request headers. Request
//! bodies must fit the initial flow-control window (65,535 bytes): it sends
//! no WINDOW_UPDATE.

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;

use crate::certs::CertFiles;
use crate::h2frames::{code, flag, frame, kind, settings, PREFACE};
use crate::split_backend::data_segments_in;

/// What a scripted backend does; see the module table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// Answer everything.
    Serve,
    /// Close the first connection (session) once its first request is
    /// answered and it is idle.
    CloseWhenIdle,
    /// Close the first connection (session) when the request after its
    /// first arrives, without processing that request.
    CloseAsNextRequestArrives,
    /// Never answer.
    Silent,
}

/// What a scripted backend has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScriptCounts {
    /// Connections (HTTP/2: sessions) accepted.
    pub connections: usize,
    /// Requests answered (processed).
    pub answered: usize,
    /// Connections the script closed (`CloseWhenIdle`,
    /// `CloseAsNextRequestArrives`); counted once the close is done.
    pub closed: usize,
}

#[derive(Debug, Default)]
struct Counters {
    connections: AtomicUsize,
    answered: AtomicUsize,
    closed: AtomicUsize,
}

impl Counters {
    fn snapshot(&self) -> ScriptCounts {
        ScriptCounts {
            connections: self.connections.load(Ordering::SeqCst),
            answered: self.answered.load(Ordering::SeqCst),
            closed: self.closed.load(Ordering::SeqCst),
        }
    }
}

/// An HTTP/1.1 backend following a [`Script`] (plain threads, blocking
/// sockets); stops on drop.
pub struct ScriptedH1Backend {
    addr: SocketAddr,
    counters: Arc<Counters>,
    answered: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ScriptedH1Backend {
    /// Starts on a free port of 127.0.0.1.
    pub fn start(script: Script) -> ScriptedH1Backend {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the scripted backend");
        listener
            .set_nonblocking(true)
            .expect("non-blocking scripted backend");
        let addr = listener.local_addr().expect("scripted backend address");
        let counters = Arc::new(Counters::default());
        let answered = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (counters, answered, stop) = (counters.clone(), answered.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let first = counters.connections.fetch_add(1, Ordering::SeqCst) == 0;
                            let (counters, answered) = (counters.clone(), answered.clone());
                            std::thread::spawn(move || {
                                serve_h1(stream, script, first, &counters, &answered)
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        ScriptedH1Backend {
            addr,
            counters,
            answered,
            stop,
            thread: Some(thread),
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What it has done so far.
    pub fn counts(&self) -> ScriptCounts {
        self.counters.snapshot()
    }

    /// The request lines it answered, in order.
    pub fn answered(&self) -> Vec<String> {
        self.answered.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

impl Drop for ScriptedH1Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve_h1(
    mut stream: TcpStream,
    script: Script,
    first: bool,
    counters: &Counters,
    answered: &Mutex<Vec<String>>,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buf = Vec::new();
    loop {
        let mut reads = Vec::new();
        let Some(len) = crate::split_backend::read_request(&mut stream, &mut buf, &mut reads)
        else {
            return;
        };
        let request: Vec<u8> = buf.drain(..len).collect();
        if script == Script::Silent {
            continue;
        }
        let line = request
            .split(|&b| b == b'\r')
            .next()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .unwrap_or_default();
        if let Ok(mut all) = answered.lock() {
            all.push(line);
        }
        counters.answered.fetch_add(1, Ordering::SeqCst);
        if stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
            .is_err()
        {
            return;
        }
        if !first {
            continue;
        }
        match script {
            Script::CloseWhenIdle => {
                // A FIN, as a backend's idle timeout sends it.
                let _ = stream.shutdown(Shutdown::Both);
                drop(stream);
                counters.closed.fetch_add(1, Ordering::SeqCst);
                return;
            }
            Script::CloseAsNextRequestArrives => {
                // Wait until the next request is in the socket, then close
                // without reading it: the kernel answers with a reset, as
                // when an idle timeout fires while a request is in flight.
                let mut probe = [0u8; 1];
                if matches!(stream.peek(&mut probe), Ok(n) if n > 0) {
                    drop(stream);
                    counters.closed.fetch_add(1, Ordering::SeqCst);
                }
                return;
            }
            Script::Serve | Script::Silent => {}
        }
    }
}

/// An HTTP/2 backend following a [`Script`], over cleartext TCP (h2c,
/// prior knowledge) or TLS (ALPN `h2`); stops on drop.
///
/// It also counts, per answered stream, the TCP segments with data that
/// arrived since the previous stream was answered (see
/// [`crate::split_backend`]): `segments` in its JSON answer.
pub struct ScriptedH2Backend {
    addr: SocketAddr,
    counters: Arc<Counters>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ScriptedH2Backend {
    /// Starts an h2c backend on a free port of 127.0.0.1.
    pub fn start_h2c(script: Script) -> ScriptedH2Backend {
        ScriptedH2Backend::start_with(script, None)
    }

    /// Starts an HTTP/2-over-TLS backend presenting `cert` (ALPN `h2`).
    pub fn start_tls(script: Script, cert: &CertFiles) -> ScriptedH2Backend {
        ScriptedH2Backend::start_with(script, Some(tls_acceptor(cert)))
    }

    fn start_with(script: Script, tls: Option<TlsAcceptor>) -> ScriptedH2Backend {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the scripted h2 backend");
        listener
            .set_nonblocking(true)
            .expect("non-blocking scripted h2 backend");
        let addr = listener.local_addr().expect("scripted h2 backend address");
        let counters = Arc::new(Counters::default());
        let (stop_tx, stop_rx) = oneshot::channel();
        let thread = {
            let counters = counters.clone();
            std::thread::Builder::new()
                .name(format!("h2-script-{addr}"))
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("scripted h2 backend runtime");
                    runtime.block_on(accept_h2(listener, script, tls, counters, stop_rx));
                })
                .expect("spawn the scripted h2 backend")
        };
        ScriptedH2Backend {
            addr,
            counters,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What it has done so far.
    pub fn counts(&self) -> ScriptCounts {
        self.counters.snapshot()
    }
}

impl Drop for ScriptedH2Backend {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn tls_acceptor(cert: &CertFiles) -> TlsAcceptor {
    crate::backend::tls_acceptor(cert, &["h2"])
}

async fn accept_h2(
    listener: TcpListener,
    script: Script,
    tls: Option<TlsAcceptor>,
    counters: Arc<Counters>,
    mut stop: oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(e) => panic!("scripted h2 backend listener: {e}"),
    };
    loop {
        let tcp = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(_) => continue,
            },
        };
        let _ = tcp.set_nodelay(true);
        let first = counters.connections.fetch_add(1, Ordering::SeqCst) == 0;
        let counters = counters.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let fd = tcp.as_raw_fd();
            let session = Session {
                fd,
                script,
                first,
                counters: &counters,
            };
            match tls {
                None => session.run(tcp).await,
                Some(acceptor) => {
                    let handshake = acceptor.accept(tcp);
                    if let Ok(Ok(stream)) =
                        tokio::time::timeout(Duration::from_secs(10), handshake).await
                    {
                        session.run(stream).await;
                    }
                }
            }
        });
    }
}

/// One HTTP/2 connection of a [`ScriptedH2Backend`].
struct Session<'a> {
    /// The TCP socket under any TLS, for its segment count.
    fd: RawFd,
    script: Script,
    /// The backend's first connection: the one the script closes.
    first: bool,
    counters: &'a Counters,
}

/// The PADDED flag of DATA frames.
const PADDED: u8 = 0x8;

/// A frame as read: type, flags, stream, payload.
type RawFrame = (u8, u8, u32, Vec<u8>);

impl Session<'_> {
    async fn run<S: AsyncRead + AsyncWrite + Unpin>(self, mut io: S) {
        let mut preface = [0u8; 24];
        if io.read_exact(&mut preface).await.is_err() || preface != PREFACE {
            return;
        }
        if io.write_all(&settings(&[])).await.is_err() {
            return;
        }
        // `None` if TCP_INFO fails: the answer then says `"segments": null`.
        let mut segments_before = data_segments_in(&self.fd).ok();
        // Request body bytes per open stream.
        let mut open: Vec<(u32, usize)> = Vec::new();
        let mut streams_seen = 0usize;
        let mut last_answered = 0u32;
        loop {
            let Ok((ty, flags, stream, payload)) = read_frame(&mut io).await else {
                return;
            };
            let mut ended = None;
            match ty {
                kind::SETTINGS | kind::PING if flags & flag::ACK == 0 => {
                    // SETTINGS: an empty ACK; PING: its payload back.
                    let echo = if ty == kind::PING { &payload[..] } else { &[] };
                    if io.write_all(&frame(ty, flag::ACK, 0, echo)).await.is_err() {
                        return;
                    }
                }
                kind::GOAWAY => return,
                kind::HEADERS => {
                    streams_seen += 1;
                    if self.first
                        && streams_seen == 2
                        && self.script == Script::CloseAsNextRequestArrives
                    {
                        // RFC 9113 section 6.8: streams above the last
                        // stream id were not processed and may be retried.
                        self.go_away(&mut io, last_answered).await;
                        return;
                    }
                    if flags & flag::END_HEADERS == 0 && !skip_continuation(&mut io).await {
                        return;
                    }
                    open.push((stream, 0));
                    if flags & flag::END_STREAM != 0 {
                        ended = Some(stream);
                    }
                }
                kind::DATA => {
                    let padding = if flags & PADDED != 0 {
                        1 + payload.first().copied().unwrap_or(0) as usize
                    } else {
                        0
                    };
                    if let Some(entry) = open.iter_mut().find(|(s, _)| *s == stream) {
                        entry.1 += payload.len().saturating_sub(padding);
                    }
                    if flags & flag::END_STREAM != 0 {
                        ended = Some(stream);
                    }
                }
                _ => {}
            }
            let Some(stream) = ended else {
                continue;
            };
            let Some(at) = open.iter().position(|(s, _)| *s == stream) else {
                continue;
            };
            let (_, body_len) = open.swap_remove(at);
            if self.script == Script::Silent {
                continue;
            }
            let segments_now = data_segments_in(&self.fd).ok();
            let segments = segments_now
                .zip(segments_before)
                .map(|(now, before)| now.wrapping_sub(before));
            segments_before = segments_now;
            let body = serde_json::json!({
                "stream": stream,
                "body_len": body_len,
                "segments": segments,
            })
            .to_string();
            self.counters.answered.fetch_add(1, Ordering::SeqCst);
            if io.write_all(&response(stream, &body)).await.is_err() {
                return;
            }
            last_answered = stream;
            if self.first && self.script == Script::CloseWhenIdle {
                self.go_away(&mut io, last_answered).await;
                return;
            }
        }
    }

    /// Sends GOAWAY(NO_ERROR) naming `last` the last stream processed,
    /// closes the connection, and counts the close.
    async fn go_away<S: AsyncWrite + Unpin>(&self, io: &mut S, last: u32) {
        let mut payload = last.to_be_bytes().to_vec();
        payload.extend_from_slice(&code::NO_ERROR.to_be_bytes());
        let _ = io.write_all(&frame(kind::GOAWAY, 0, 0, &payload)).await;
        let _ = io.flush().await;
        let _ = io.shutdown().await;
        self.counters.closed.fetch_add(1, Ordering::SeqCst);
    }
}

/// HEADERS `:status: 200`, `content-type: application/json` and
/// `content-length`, then DATA `body` with END_STREAM: one write.
fn response(stream: u32, body: &str) -> Vec<u8> {
    // 0x88: indexed `:status: 200`. 0x0f 0x10 / 0x0f 0x0d: literals without
    // indexing, names `content-type` (31) and `content-length` (28) of the
    // static table (RFC 7541 appendix A).
    let mut block = vec![0x88, 0x0f, 0x10, 16];
    block.extend_from_slice(b"application/json");
    let length = body.len().to_string();
    block.extend_from_slice(&[0x0f, 0x0d, length.len() as u8]);
    block.extend_from_slice(length.as_bytes());
    let mut out = frame(kind::HEADERS, flag::END_HEADERS, stream, &block);
    out.extend(frame(kind::DATA, flag::END_STREAM, stream, body.as_bytes()));
    out
}

async fn read_frame<S: AsyncRead + Unpin>(io: &mut S) -> std::io::Result<RawFrame> {
    let mut header = [0u8; 9];
    io.read_exact(&mut header).await?;
    let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
    let stream = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    io.read_exact(&mut payload).await?;
    Ok((header[3], header[4], stream, payload))
}

/// Reads CONTINUATION frames up to END_HEADERS; false on anything else.
async fn skip_continuation<S: AsyncRead + Unpin>(io: &mut S) -> bool {
    loop {
        match read_frame(io).await {
            Ok((kind::CONTINUATION, flags, _, _)) if flags & flag::END_HEADERS != 0 => return true,
            Ok((kind::CONTINUATION, _, _, _)) => {}
            _ => return false,
        }
    }
}
