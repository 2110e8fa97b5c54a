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

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, UPGRADE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;

use crate::certs::CertFiles;

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

type ResponseBody = BoxBody<Bytes, hyper::Error>;

fn full(body: impl Into<Bytes>) -> ResponseBody {
    Full::new(body.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

fn json_response(value: serde_json::Value) -> Response<ResponseBody> {
    let mut response = Response::new(full(value.to_string()));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn status_response(status: StatusCode, body: impl Into<Bytes>) -> Response<ResponseBody> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response
}

/// Why the backend dropped a connection on purpose (`GET /drop`).
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("dropped on request")
    }
}

impl std::error::Error for Dropped {}

type HandlerError = Box<dyn std::error::Error + Send + Sync>;

async fn handle(
    req: Request<Incoming>,
    addr: SocketAddr,
    stats: Arc<BackendStats>,
) -> Result<Response<ResponseBody>, HandlerError> {
    let _busy = InFlight::enter(stats.clone());
    let failing = stats.failing.load(Ordering::SeqCst);
    if let Ok(status) = StatusCode::from_u16(failing) {
        return Ok(status_response(status, format!("failing {addr}\n")));
    }
    let path = req.uri().path().to_string();
    let mut segments = path.trim_start_matches('/').splitn(2, '/');
    let first = segments.next().unwrap_or("");
    let arg = segments.next().unwrap_or("");
    let number: Option<u64> = arg.parse().ok();

    let response = match (first, number) {
        ("echo", _) => echo(req, addr, &stats).await?,
        ("post-page", _) => post_page(req.uri().query().unwrap_or("")),
        ("bytes", Some(n)) => Response::new(full(pattern(n as usize))),
        ("chunked", Some(n)) => Response::new(PatternChunks::new(n as usize, stats).boxed()),
        ("sha", _) => {
            let body = req.into_body().collect().await?.to_bytes();
            json_response(serde_json::json!({
                "len": body.len(),
                "sha256": sha256_hex(&body),
            }))
        }
        ("slow", Some(ms)) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Response::new(full(format!("slow {ms}\n")))
        }
        ("status", Some(code)) => match StatusCode::from_u16(code as u16) {
            Ok(status) if status.is_informational() || code == 204 || code == 304 => {
                status_response(status, Bytes::new())
            }
            Ok(status) => status_response(status, format!("status {code}\n")),
            Err(_) => status_response(StatusCode::BAD_REQUEST, "bad status code\n"),
        },
        ("upgrade", _) => upgrade(req),
        ("trailers", _) => with_trailers(req).await?,
        ("close", _) => {
            let mut response = Response::new(full("closing\n"));
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            response
        }
        // An error from the service makes hyper close the connection unanswered.
        ("drop", _) => return Err(Box::new(Dropped)),
        _ => status_response(StatusCode::NOT_FOUND, "not found\n"),
    };
    Ok(response)
}

/// The trailer fields `/trailers` ends its response with: two that a
/// proxy relays, and one (`set-cookie`) that must not come from trailers.
pub const TRAILERS_SENT: [(&str, &str); 3] = [
    ("x-sum", "42"),
    ("grpc-status", "0"),
    ("set-cookie", "from=trailer"),
];

/// `/trailers`: reports the request's trailers, and ends its own body
/// with [`TRAILERS_SENT`].
async fn with_trailers(req: Request<Incoming>) -> Result<Response<ResponseBody>, HandlerError> {
    let collected = req.into_body().collect().await?;
    let received: Vec<[String; 2]> = collected.trailers().map_or_else(Vec::new, |t| {
        t.iter()
            .map(|(n, v)| {
                [
                    n.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                ]
            })
            .collect()
    });
    let json = serde_json::to_vec(&serde_json::json!({ "trailers": received }))?;
    let mut trailers = hyper::HeaderMap::new();
    for (name, value) in TRAILERS_SENT {
        trailers.append(name, HeaderValue::from_static(value));
    }
    let body = TrailerBody {
        data: Some(Bytes::from(json)),
        trailers: Some(trailers),
    };
    let mut response = Response::new(body.boxed());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        "trailer",
        HeaderValue::from_static("x-sum, grpc-status, set-cookie"),
    );
    Ok(response)
}

/// One DATA piece, then trailers.
struct TrailerBody {
    data: Option<Bytes>,
    trailers: Option<hyper::HeaderMap>,
}

impl Body for TrailerBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let frame = match self.data.take() {
            Some(data) => Some(Frame::data(data)),
            None => self.trailers.take().map(Frame::trailers),
        };
        std::task::Poll::Ready(frame.map(Ok))
    }
}

/// Counts a request in flight while it lives.
struct InFlight(Arc<BackendStats>);

impl InFlight {
    fn enter(stats: Arc<BackendStats>) -> InFlight {
        let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(stats)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn echo(
    req: Request<Incoming>,
    addr: SocketAddr,
    stats: &BackendStats,
) -> Result<Response<ResponseBody>, hyper::Error> {
    let method = req.method().to_string();
    let path = req
        .uri()
        .path_and_query()
        .map(|pq| pq.to_string())
        .unwrap_or_default();
    let version = format!("{:?}", req.version());
    let authority = req.uri().authority().map(|a| a.to_string());
    let headers: Vec<[String; 2]> = req
        .headers()
        .iter()
        .map(|(name, value)| {
            [
                name.as_str().to_string(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            ]
        })
        .collect();
    let body = req.into_body().collect().await?.to_bytes();
    let echo = serde_json::json!({
        "method": method,
        "path": path,
        "authority": authority,
        "version": version,
        "headers": headers,
        "body_len": body.len(),
        "backend": addr.to_string(),
    });
    if let Ok(mut echoes) = stats.echoes.lock() {
        if echoes.len() < ECHOES_KEPT {
            echoes.push(echo.clone());
        }
    }
    Ok(json_response(echo))
}

/// The page behind `/post-page`: a browser's POSTs, made by the page's own
/// script. Synchronous XHR keeps them in order and done before the load
/// event, so `chromium --dump-dom` prints every answer.
fn post_page(query: &str) -> Response<ResponseBody> {
    let arg = |key: &str, default: usize| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(default)
            .min(100_000)
    };
    let (n, len) = (arg("n", 3), arg("len", 1000));
    let html = format!(
        "<!doctype html>\n<html><head><title>post page</title></head><body>\n<script>\n\
         for (let i = 0; i < {n}; i++) {{\n\
           const xhr = new XMLHttpRequest();\n\
           xhr.open('POST', '/echo?client=chromium', false);\n\
           xhr.setRequestHeader('X-Forwarded-For', '6.6.6.6');\n\
           xhr.send('x'.repeat({len}));\n\
           const entry = performance.getEntriesByType('resource').pop();\n\
           const pre = document.createElement('pre');\n\
           pre.className = 'answer';\n\
           pre.textContent = JSON.stringify({{status: xhr.status, \
             proto: entry ? entry.nextHopProtocol : '', body: JSON.parse(xhr.responseText)}});\n\
           document.body.appendChild(pre);\n\
         }}\n</script>\n</body></html>\n"
    );
    let mut response = Response::new(full(html));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

fn upgrade(mut req: Request<Incoming>) -> Response<ResponseBody> {
    let protocol = req
        .headers()
        .get(UPGRADE)
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static("websocket"));
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let mut io = TokioIo::new(upgraded);
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if io.write_all(&buf[..n]).await.is_err() || io.flush().await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let mut response = status_response(StatusCode::SWITCHING_PROTOCOLS, Bytes::new());
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("upgrade"));
    response.headers_mut().insert(UPGRADE, protocol);
    response
}

/// A body of unknown length (so hyper sends it chunked) made of the pattern.
struct PatternChunks {
    sent: usize,
    total: usize,
    stats: Arc<BackendStats>,
}

impl PatternChunks {
    const CHUNK: usize = 16 * 1024;

    fn new(total: usize, stats: Arc<BackendStats>) -> PatternChunks {
        PatternChunks {
            sent: 0,
            total,
            stats,
        }
    }
}

impl Body for PatternChunks {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if self.sent >= self.total {
            return std::task::Poll::Ready(None);
        }
        let end = (self.sent + Self::CHUNK).min(self.total);
        let chunk: Vec<u8> = (self.sent..end).map(pattern_byte).collect();
        self.stats
            .chunked_bytes
            .fetch_add(chunk.len(), Ordering::SeqCst);
        self.sent = end;
        std::task::Poll::Ready(Some(Ok(Frame::data(Bytes::from(chunk)))))
    }

    fn is_end_stream(&self) -> bool {
        self.sent >= self.total
    }
}
