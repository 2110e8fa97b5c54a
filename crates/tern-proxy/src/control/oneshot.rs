//! A small HTTP/1.1 server for the control plane's listeners (admin, and
//! the plain-HTTP listener for ACME HTTP-01 and redirects): one request
//! per connection, a bounded head read under one deadline, a bounded
//! write, and a cap on connections served at once, so a misbehaving
//! client costs the control plane (which also runs reloads) little.
//!
//! | request                        | answer |
//! |--------------------------------|--------|
//! | a malformed head               | 400    |
//! | a head over [`MAX_HEAD_BYTES`] | 431    |
//! | anything else                  | what the listener's `respond` says |

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tern_http::head::parse_request;
use tern_http::HttpError;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::io::iobuf::{HeadWaitError, IoBuf};

/// Largest request head read. Scrapers, health checkers and ACME
/// validators send a few hundred bytes; anything near this is not one.
pub(crate) const MAX_HEAD_BYTES: usize = 8 * 1024;

/// Time a client has to send its whole request head (not per read, so a
/// client trickling a byte at a time cannot hold a connection longer).
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Time a client has to take the response. A /metrics body is tens of KB;
/// a client that does not read it in this time is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the client asked for.
pub(crate) struct Request {
    pub method: String,
    /// The path, without the query string.
    pub path: String,
    /// The request target as sent (path and query).
    pub target: String,
    /// The Host field, if any.
    pub host: Option<String>,
    /// Whether it carries an `Origin` field: browsers add one to the
    /// requests a web page makes, scripts and scrapers do not.
    pub has_origin: bool,
}

impl Request {
    pub fn is_get_or_head(&self) -> bool {
        self.method == "GET" || self.method == "HEAD"
    }
}

/// Serves one request per connection with `respond` until the runtime
/// stops; `name` labels log lines; at most `max_connections` at once.
pub(crate) async fn serve(
    name: &'static str,
    listener: TcpListener,
    max_connections: usize,
    respond: Arc<dyn Fn(&Request) -> Response + Send + Sync>,
) {
    let slots = Arc::new(Semaphore::new(max_connections));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, most likely: back off rather
                // than spin on the same error.
                tracing::warn!("{name} accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(client = %peer, "{name} connection limit reached; closing");
            continue;
        };
        let respond = respond.clone();
        tokio::spawn(async move {
            let _slot = slot;
            answer(name, stream, peer, &*respond).await;
        });
    }
}

/// Reads one request and writes one response, then closes.
async fn answer(
    name: &str,
    mut stream: TcpStream,
    peer: SocketAddr,
    respond: &(dyn Fn(&Request) -> Response + Send + Sync),
) {
    let _ = stream.set_nodelay(true);
    let response = match tokio::time::timeout(READ_TIMEOUT, read_request(&mut stream)).await {
        Ok(Ok(request)) => {
            let mut response = respond(&request);
            response.head_only = request.method == "HEAD";
            response
        }
        Ok(Err(ReadError::Closed)) => return,
        Ok(Err(ReadError::Http(HttpError::HeadTooLarge))) => Response::text(
            431,
            "Request Header Fields Too Large",
            "request head too large\n",
        ),
        Ok(Err(ReadError::Http(_))) => Response::text(400, "Bad Request", "bad request\n"),
        Err(_) => {
            tracing::debug!(client = %peer, "{name} request head timed out");
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
        tracing::debug!(client = %peer, "{name} response not taken in time");
    }
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
        target: target.to_string(),
        host: head
            .fields
            .get("host")
            .and_then(|h| std::str::from_utf8(h).ok())
            .map(str::to_string),
        has_origin: head.fields.get("origin").is_some(),
    })
}

/// A complete response; always `connection: close`.
pub(crate) struct Response {
    pub status: u16,
    pub reason: &'static str,
    pub content_type: &'static str,
    /// Further header lines, each ending in CRLF.
    pub extra: String,
    pub body: String,
    /// HEAD: the same head (Content-Length included), no body.
    pub head_only: bool,
}

impl Response {
    pub fn text(status: u16, reason: &'static str, body: &str) -> Self {
        Response {
            status,
            reason,
            content_type: "text/plain; charset=utf-8",
            extra: String::new(),
            body: body.to_string(),
            head_only: false,
        }
    }

    /// 405 for anything but GET and HEAD.
    pub fn only_get_and_head() -> Self {
        let mut r = Response::text(405, "Method Not Allowed", "only GET and HEAD\n");
        r.extra = "allow: GET, HEAD\r\n".into();
        r
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
