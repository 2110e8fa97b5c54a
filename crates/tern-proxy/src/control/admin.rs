//! The admin listener: Prometheus text at /metrics, liveness at /health.
//! Off by default and loopback only (it has no authentication).
//!
//! It runs on the control-plane runtime, away from the workers, and is
//! built to shrug off a misbehaving local client: one request per
//! connection, a bounded head read under one deadline, a bounded write,
//! and a cap on connections served at once. It keeps answering while the
//! workers drain after SIGTERM, so a load balancer polling /health sees
//! 503 and takes tern out before the listeners are gone.
//!
//! | request                      | answer                                   |
//! |------------------------------|------------------------------------------|
//! | `GET /metrics`               | 200, Prometheus text format 0.0.4        |
//! | `GET /health`                | 200 `ok` while tern serves; 503 `draining` once it shuts down (in-flight requests finishing) |
//! | `HEAD` of either             | the same head, no body                   |
//! | another path                 | 404                                      |
//! | another method               | 405 with `Allow: GET, HEAD`              |
//! | a malformed head             | 400                                      |
//! | a head over [`MAX_HEAD_BYTES`] | 431                                    |

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tern_http::head::parse_request;
use tern_http::HttpError;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use crate::control::server::Current;
use crate::io::iobuf::{HeadWaitError, IoBuf};
use crate::metrics::Metrics;

/// Largest request head the admin listener reads. Scrapers send a few
/// hundred bytes; anything near this is not a scraper.
pub(crate) const MAX_HEAD_BYTES: usize = 8 * 1024;

/// Time a client has to send its whole request head (not per read, so a
/// client trickling a byte at a time cannot hold a connection longer).
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Time a client has to take the response. A /metrics body is tens of KB;
/// a client that does not read it in this time is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once; more are closed on accept. A scraper or two
/// and a health checker need a handful; the cap bounds what a runaway
/// local client can cost the control plane (which also runs reloads).
const MAX_CONNECTIONS: usize = 32;

/// Serves admin requests until the runtime stops. `draining` turns true
/// when tern begins to shut down.
pub(crate) async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    current: Current,
    draining: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, most likely: back off rather
                // than spin on the same error.
                tracing::warn!("admin accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(client = %peer, "admin connection limit reached; closing");
            continue;
        };
        let metrics = metrics.clone();
        let current = current.clone();
        let draining = *draining.borrow();
        tokio::spawn(async move {
            let _slot = slot;
            answer(stream, peer, &metrics, &current, draining).await;
        });
    }
}

/// Reads one request and writes one response, then closes.
async fn answer(
    mut stream: TcpStream,
    peer: SocketAddr,
    metrics: &Metrics,
    current: &Current,
    draining: bool,
) {
    let _ = stream.set_nodelay(true);
    let response = match tokio::time::timeout(READ_TIMEOUT, read_request(&mut stream)).await {
        Ok(Ok(request)) => respond(&request, metrics, current, draining),
        Ok(Err(ReadError::Closed)) => return,
        Ok(Err(ReadError::Http(HttpError::HeadTooLarge))) => Response::text(
            431,
            "Request Header Fields Too Large",
            "request head too large\n",
        ),
        Ok(Err(ReadError::Http(_))) => Response::text(400, "Bad Request", "bad request\n"),
        Err(_) => {
            tracing::debug!(client = %peer, "admin request head timed out");
            return;
        }
    };
    let bytes = response.into_bytes();
    let sent = tokio::time::timeout(WRITE_TIMEOUT, async {
        stream.write_all(&bytes).await?;
        stream.shutdown().await
    })
    .await;
    if !matches!(sent, Ok(Ok(()))) {
        tracing::debug!(client = %peer, "admin response not taken in time");
    }
}

/// What the client asked for.
struct Request {
    method: String,
    path: String,
}

enum ReadError {
    /// The client closed (or the socket failed) before a whole head arrived.
    Closed,
    /// The head is malformed or too large.
    Http(HttpError),
}

async fn read_request(stream: &mut TcpStream) -> Result<Request, ReadError> {
    let mut buf = IoBuf::new(1024, MAX_HEAD_BYTES);
    // The caller bounds the whole read with READ_TIMEOUT.
    let deadline = tokio::time::Instant::now() + READ_TIMEOUT;
    let len = buf
        .read_head(stream, MAX_HEAD_BYTES, deadline)
        .await
        .map_err(|e| match e {
            HeadWaitError::Invalid(e) => ReadError::Http(e),
            HeadWaitError::TimedOut | HeadWaitError::Closed { .. } => ReadError::Closed,
        })?;
    let head = parse_request(&buf.filled()[..len]).map_err(ReadError::Http)?;
    // The query string does not select anything here.
    let target = head.target();
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    Ok(Request {
        method: head.method().to_string(),
        path: path.to_string(),
    })
}

fn respond(request: &Request, metrics: &Metrics, current: &Current, draining: bool) -> Response {
    let is_head = request.method == "HEAD";
    if request.method != "GET" && !is_head {
        let mut r = Response::text(405, "Method Not Allowed", "only GET and HEAD\n");
        r.extra = "allow: GET, HEAD\r\n";
        return r;
    }
    let mut response = match request.path.as_str() {
        "/metrics" => Response {
            status: 200,
            reason: "OK",
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            extra: "",
            body: metrics.render(&backend_health(current)),
            head_only: false,
        },
        "/health" if draining => Response::text(503, "Service Unavailable", "draining\n"),
        "/health" => Response::text(200, "OK", "ok\n"),
        _ => Response::text(404, "Not Found", "not found: try /metrics or /health\n"),
    };
    response.head_only = is_head;
    response
}

/// (upstream, server, up) for every server of the running generation.
fn backend_health(current: &Current) -> Vec<(String, SocketAddr, bool)> {
    // Hold the lock only to take the generation, not while walking it.
    let Ok(generation) = current.lock().map(|g| g.clone()) else {
        return Vec::new();
    };
    generation
        .upstreams
        .iter()
        .flat_map(|u| {
            let name = &u.config.name;
            u.health_snapshot()
                .into_iter()
                .map(move |(addr, up)| (name.clone(), addr, up))
        })
        .collect()
}

/// A complete response; always `connection: close`.
struct Response {
    status: u16,
    reason: &'static str,
    content_type: &'static str,
    /// Further header lines, each ending in CRLF.
    extra: &'static str,
    body: String,
    /// HEAD: the same head (Content-Length included), no body.
    head_only: bool,
}

impl Response {
    fn text(status: u16, reason: &'static str, body: &str) -> Self {
        Response {
            status,
            reason,
            content_type: "text/plain; charset=utf-8",
            extra: "",
            body: body.to_string(),
            head_only: false,
        }
    }

    fn into_bytes(self) -> Vec<u8> {
        let head = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\n{}cache-control: no-store\r\nconnection: close\r\n\r\n",
            self.status,
            self.reason,
            self.content_type,
            self.body.len(),
            self.extra,
        );
        let mut bytes = head.into_bytes();
        if !self.head_only {
            bytes.extend_from_slice(self.body.as_bytes());
        }
        bytes
    }
}
