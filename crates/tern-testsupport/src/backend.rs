//! A real HTTP/1.1 origin (hyper 1) that tells the test what it received;
//! [`Backend::start_h2c`] starts the same origin speaking HTTP/2 over
//! cleartext TCP (prior knowledge) instead, and [`Backend::start_tls`]
//! over TLS, speaking HTTP/2 when ALPN selected `h2` and HTTP/1.1 otherwise.
//!
//! It runs on its own thread and runtime, so both sync and async tests can use
//! it, and it stops when the [`Backend`] handle is dropped. Endpoints:
//!
//! | request | answer |
//! |---|---|
//! | `ANY /echo...` | JSON: `method`, `path` (with query), `authority` (HTTP/2 `:authority`, null for HTTP/1.1), `version`, `headers` as `[name, value]` pairs in arrival order, `body_len`, `backend` (this server's address) |
//! | `GET /bytes/N` | N bytes of [`pattern`], with Content-Length |
//! | `GET /chunked/N` | N bytes of [`pattern`], chunked, in 16 KiB chunks |
//! | `POST /sha` | JSON: `len` and `sha256` (hex) of the body |
//! | `GET /slow/MS` | waits MS milliseconds, then `slow MS\n` |
//! | `GET /status/CODE` | status CODE, body `status CODE\n` (empty for 1xx/204/304) |
//! | `GET /upgrade` | 101 Switching Protocols, then echoes every byte back |
//! | `POST /trailers` | JSON: `trailers`, the request's trailer fields as `[name, value]` pairs; chunked, ended by the trailers [`TRAILERS_SENT`] (declared in `Trailer`; HTTP/1.1 sends them only to a request with `TE: trailers`) |
//! | `GET /drop` | no response: the connection is closed |
//! | `GET /close` | `closing\n` with `Connection: close`, then the connection is closed |
//! | `GET /post-page?n=N&len=L` | an HTML page whose script POSTs N bodies of L bytes to `/echo?client=chromium` one after another (synchronous XHR, so all have run before the load event) and puts each answer in a `<pre class="answer">` |
//!
//! Any other path gets 404. [`Backend::fail_with`] makes every request
//! get one status instead, until it is called again with `None`. Every
//! `/echo` answer is also kept (the first [`ECHOES_KEPT`]), for load tools
//! that cannot check bodies themselves: see [`Backend::echoes`].

use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;

use crate::certs::CertFiles;

mod answers;

pub use answers::TRAILERS_SENT;
use answers::{handle, HandlerError, ResponseBody};

/// The byte at offset `i` of every generated body: easy to check, not all-zero.
pub fn pattern_byte(i: usize) -> u8 {
    (i % 251) as u8
}

/// `n` bytes of the known pattern.
pub fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(pattern_byte).collect()
}

/// SHA-256 of `data` in lower-case hex, as `POST /sha` reports it.
pub fn sha256_hex(data: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, data);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A TLS acceptor for a test backend presenting `cert` and offering the
/// ALPN protocols `alpn` (none: ALPN is ignored).
pub fn tls_acceptor(cert: &CertFiles, alpn: &[&str]) -> TlsAcceptor {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert.chain)
        .expect("open the backend chain")
        .collect::<Result<_, _>>()
        .expect("parse the backend chain");
    let key = PrivateKeyDer::from_pem_file(&cert.key).expect("parse the backend key");
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .expect("backend TLS config");
    config.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    TlsAcceptor::from(Arc::new(config))
}

/// The values of header `name` (any case) an `/echo` answer says the
/// backend received, in arrival order.
pub fn echoed_header(echo: &serde_json::Value, name: &str) -> Vec<String> {
    echo["headers"]
        .as_array()
        .map(|headers| {
            headers
                .iter()
                .filter(|pair| {
                    pair[0]
                        .as_str()
                        .is_some_and(|n| n.eq_ignore_ascii_case(name))
                })
                .map(|pair| pair[1].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Counters the backend keeps, shared with the test.
#[derive(Debug, Default)]
pub struct BackendStats {
    connections: AtomicUsize,
    requests: AtomicUsize,
    chunked_bytes: AtomicUsize,
    echoes: Mutex<Vec<serde_json::Value>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// While not 0, every request is answered with this status.
    failing: std::sync::atomic::AtomicU16,
}

/// How many `/echo` answers a backend keeps for [`Backend::echoes`]; a
/// bound, so a load test cannot grow it without limit.
pub const ECHOES_KEPT: usize = 4096;

/// A running backend; stops on drop.
pub struct Backend {
    addr: SocketAddr,
    stats: Arc<BackendStats>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Backend {
    /// Starts a backend on a free port of 127.0.0.1.
    pub fn start() -> Backend {
        Backend::start_on("127.0.0.1:0".parse().expect("literal address"))
    }

    /// Starts a backend on `addr` (a port of 0 picks a free one).
    pub fn start_on(addr: SocketAddr) -> Backend {
        Backend::start_with(addr, Protocol::Http1)
    }

    /// Starts an h2c backend (HTTP/2 with prior knowledge, no TLS, no
    /// HTTP/1.1) on a free port of 127.0.0.1. `/upgrade` does not work.
    pub fn start_h2c() -> Backend {
        Backend::start_with(
            "127.0.0.1:0".parse().expect("literal address"),
            Protocol::H2c,
        )
    }

    /// Starts a TLS backend on a free port of 127.0.0.1 presenting `cert`
    /// and offering the ALPN protocols `alpn` (none: ALPN is ignored). A
    /// connection that selected `h2` speaks HTTP/2, any other HTTP/1.1.
    pub fn start_tls(cert: &CertFiles, alpn: &[&str]) -> Backend {
        Backend::start_with(
            "127.0.0.1:0".parse().expect("literal address"),
            Protocol::Tls(tls_acceptor(cert, alpn)),
        )
    }

    fn start_with(addr: SocketAddr, protocol: Protocol) -> Backend {
        let listener = StdTcpListener::bind(addr).expect("bind the backend");
        listener
            .set_nonblocking(true)
            .expect("non-blocking backend listener");
        let addr = listener.local_addr().expect("backend address");
        let stats = Arc::new(BackendStats::default());
        let (stop_tx, stop_rx) = oneshot::channel();
        let thread_stats = stats.clone();
        let thread = std::thread::Builder::new()
            .name(format!("backend-{addr}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("backend runtime");
                runtime.block_on(serve(listener, addr, protocol, thread_stats, stop_rx));
            })
            .expect("spawn the backend thread");
        Backend {
            addr,
            stats,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// Where the backend listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// TCP connections accepted so far (tells whether tern pools connections).
    pub fn connections(&self) -> usize {
        self.stats.connections.load(Ordering::SeqCst)
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.stats.requests.load(Ordering::SeqCst)
    }

    /// The most requests this backend was ever answering at once (each
    /// counted until its response head is made: `/slow/MS` holds one for
    /// MS milliseconds).
    pub fn max_in_flight(&self) -> usize {
        self.stats.max_in_flight.load(Ordering::SeqCst)
    }

    /// From now on answers every request with `status` (`Some`), or
    /// serves again (`None`): a server that breaks under load and heals.
    pub fn fail_with(&self, status: Option<u16>) {
        self.stats
            .failing
            .store(status.unwrap_or(0), Ordering::SeqCst);
    }

    /// The `/echo` answers given so far (the first [`ECHOES_KEPT`]), in
    /// order: what the backend received, for clients that cannot show it.
    pub fn echoes(&self) -> Vec<serde_json::Value> {
        match self.stats.echoes.lock() {
            Ok(echoes) => echoes.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Bytes of `/chunked` bodies handed to the connections so far. Bodies
    /// are made only as the socket drains, so this stops growing once the
    /// reader (tern, or tern's client behind it) stops taking bytes.
    pub fn chunked_bytes(&self) -> usize {
        self.stats.chunked_bytes.load(Ordering::SeqCst)
    }

    /// Waits until `/chunked` bodies have begun and then made no progress
    /// for `quiet`: every reader downstream is full (backpressure reached),
    /// or the bodies ended. Returns the bytes made; panics after `timeout`.
    pub fn wait_chunked_stalled(&self, quiet: Duration, timeout: Duration) -> usize {
        let deadline = std::time::Instant::now() + timeout;
        let mut last = self.chunked_bytes();
        let mut since = std::time::Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let now = self.chunked_bytes();
            if now != last {
                (last, since) = (now, std::time::Instant::now());
            } else if now > 0 && since.elapsed() >= quiet {
                return now;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "/chunked bodies still moving (or never began) after {timeout:?}: {now} bytes"
            );
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What a [`Backend`] speaks.
#[derive(Clone)]
enum Protocol {
    Http1,
    H2c,
    /// TLS, then HTTP/2 if ALPN selected h2, else HTTP/1.1.
    Tls(TlsAcceptor),
}

async fn serve(
    listener: StdTcpListener,
    addr: SocketAddr,
    protocol: Protocol,
    stats: Arc<BackendStats>,
    mut stop: oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(e) => panic!("backend listener: {e}"),
    };
    loop {
        let (stream, _) = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(_) => continue,
            },
        };
        let _ = stream.set_nodelay(true);
        stats.connections.fetch_add(1, Ordering::SeqCst);
        let stats = stats.clone();
        let protocol = protocol.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                stats.requests.fetch_add(1, Ordering::SeqCst);
                handle(req, addr, stats.clone())
            });
            match protocol {
                Protocol::Http1 => serve_http1(stream, service).await,
                Protocol::H2c => serve_h2(stream, service).await,
                Protocol::Tls(acceptor) => {
                    let Ok(Ok(tls)) =
                        tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream))
                            .await
                    else {
                        return;
                    };
                    if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                        serve_h2(tls, service).await;
                    } else {
                        serve_http1(tls, service).await;
                    }
                }
            }
        });
    }
}

async fn serve_h2<S, F>(stream: S, service: F)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    F: hyper::service::Service<Request<Incoming>, Response = Response<ResponseBody>>
        + Send
        + 'static,
    F::Future: Send + 'static,
    F::Error: Into<HandlerError>,
{
    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

async fn serve_http1<S, F>(stream: S, service: F)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    F: hyper::service::Service<Request<Incoming>, Response = Response<ResponseBody>>
        + Send
        + 'static,
    F::Future: Send + 'static,
    F::Error: Into<HandlerError>,
{
    // Far above tern's own limits, so tern's limits are what tests see.
    let _ = hyper::server::conn::http1::Builder::new()
        .max_headers(1000)
        .max_buf_size(1 << 20)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
}
