//! What the test origin answers: the routing of [`handle`] and each
//! endpoint's response (the table in the parent module's docs).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, UPGRADE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{pattern, pattern_byte, sha256_hex, BackendStats, ECHOES_KEPT};

pub(super) type ResponseBody = BoxBody<Bytes, hyper::Error>;

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

pub(super) type HandlerError = Box<dyn std::error::Error + Send + Sync>;

pub(super) async fn handle(
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
