//! HTTP/2 client side on the h2 crate: one connection carries many streams.

use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};

use crate::config::BenchConfig;
use crate::conn::Stream;
use crate::error::{BenchError, RequestError};
use crate::http1::Exchange;
use crate::mismatch::{self, PriorKnowledge};
use crate::target::{Scheme, Target};

/// Stream receive window, HTTP/2's and HTTP/3's: large enough that a 1 MiB
/// body is not throttled by WINDOW_UPDATE (MAX_STREAM_DATA) round trips.
pub(crate) const STREAM_WINDOW: u32 = 4 * 1024 * 1024;
/// Connection receive window, HTTP/2's and HTTP/3's.
pub(crate) const CONNECTION_WINDOW: u32 = 16 * 1024 * 1024;

/// The request for one target, with its parts prepared once.
#[derive(Debug, Clone)]
pub struct H2Request {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

/// Header names HTTP/2 forbids or expresses as pseudo-headers.
const NOT_IN_H2: [&str; 6] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

impl H2Request {
    /// Prepares the request; `headers` are the merged h1 headers (Host
    /// becomes `:authority`).
    pub fn new(
        config: &BenchConfig,
        target: &Target,
        headers: &[(String, String)],
    ) -> Result<H2Request, BenchError> {
        let scheme = match target.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        let authority = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("host"))
            .map_or_else(|| target.authority(), |(_, v)| v.clone());
        let uri: Uri = format!("{scheme}://{authority}{}", target.path)
            .parse()
            .map_err(|e| BenchError::Config(format!("request URI: {e}")))?;
        let method = Method::from_bytes(config.method.as_bytes())
            .map_err(|e| BenchError::Config(format!("method {:?}: {e}", config.method)))?;
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            if NOT_IN_H2.iter().any(|n| name.eq_ignore_ascii_case(n)) {
                continue;
            }
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| BenchError::Config(format!("header name {name:?}: {e}")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|e| BenchError::Config(format!("header value {value:?}: {e}")))?;
            map.append(name, value);
        }
        // As h2load, curl and browsers send it: a request body of known
        // length is declared, so the server (or a proxy's HTTP/1.1
        // backend) gets a Content-Length rather than chunks.
        if !config.body.is_empty() && !map.contains_key(http::header::CONTENT_LENGTH) {
            map.insert(
                http::header::CONTENT_LENGTH,
                HeaderValue::from(config.body.len()),
            );
        }
        Ok(H2Request {
            method,
            uri,
            headers: map,
            body: Bytes::from(config.body.clone()),
        })
    }

    /// The request head, for a new stream.
    pub(crate) fn build(&self) -> http::Request<()> {
        let mut req = http::Request::new(());
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }

    /// The request body.
    pub(crate) fn body(&self) -> &Bytes {
        &self.body
    }
}

/// Runs the HTTP/2 preface on `stream` and drives the connection on the
/// current `LocalSet`.
pub async fn handshake(stream: Stream) -> Result<H2Handshake, RequestError> {
    match stream {
        plain @ Stream::Plain(_) => start(PriorKnowledge::new(plain)).await,
        tls @ Stream::Tls(_) => start(tls).await,
    }
}

async fn start<T>(io: T) -> Result<H2Handshake, RequestError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let (send, mut connection) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .handshake(io)
        .await
        .map_err(|e| h2_error(&e).0)?;
    let ping = connection.ping_pong();
    tokio::task::spawn_local(async move {
        // Errors surface on the streams; nothing more to say here.
        let _ = connection.await;
    });
    Ok(H2Handshake { send, ping })
}

/// A client connection whose preface is sent, its driver running.
pub struct H2Handshake {
    /// Where requests are sent.
    pub send: h2::client::SendRequest<Bytes>,
    /// The connection's one handle for PINGs; `None` if h2 gave none.
    pub ping: Option<h2::PingPong>,
}

/// Waits for a PING's answer: the server has then read the client's
/// preface and SETTINGS (frames are read in order) and sent its own
/// SETTINGS before it (its preface comes first).
pub async fn settings_exchanged(ping: &mut h2::PingPong) -> Result<(), RequestError> {
    ping.ping(h2::Ping::opaque())
        .await
        .map(|_pong| ())
        .map_err(|e| h2_error(&e).0)
}

/// Sends one request on a new stream and reads the whole response. On
/// error, the flag says whether the connection is dead.
pub async fn exchange(
    send: &mut h2::client::SendRequest<Bytes>,
    req: &H2Request,
    expect_body: Option<&[u8]>,
) -> Result<Exchange, (RequestError, bool)> {
    // Polled in place: cloning the handle per request would take the
    // connection's lock twice more.
    std::future::poll_fn(|cx| send.poll_ready(cx))
        .await
        .map_err(|e| h2_error(&e))?;
    let start = Instant::now();
    let (response, mut body_tx) = send
        .send_request(req.build(), req.body.is_empty())
        .map_err(|e| h2_error(&e))?;
    if !req.body.is_empty() {
        body_tx
            .send_data(req.body.clone(), true)
            .map_err(|e| h2_error(&e))?;
    }
    let response = response.await.map_err(|e| h2_error(&e))?;
    let first = Instant::now();
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut bytes = 0u64;
    let mut finder = expect_body.map(crate::mix::BodyFinder::new);
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| h2_error(&e))?;
        bytes += chunk.len() as u64;
        if let Some(f) = &mut finder {
            f.feed(&chunk);
        }
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let done = Instant::now();
    Ok(Exchange {
        status,
        body_bytes: bytes,
        ttfb: first - start,
        body: done - first,
        reusable: true,
        done,
        body_found: finder.is_none_or(|f| f.found()),
    })
}

fn h2_error(e: &h2::Error) -> (RequestError, bool) {
    if let Some(mismatch) = e.get_io().and_then(mismatch::from_h2_io) {
        (mismatch, true)
    } else if e.is_io() {
        let kind = e
            .get_io()
            .map_or_else(|| "io".to_string(), |io| io.kind().to_string());
        (RequestError::Io(kind), true)
    } else if e.is_go_away() && e.is_remote() && e.reason() == Some(h2::Reason::NO_ERROR) {
        // A graceful GOAWAY (a server draining) reaches the streams it
        // did not process, and requests sent after it.
        (RequestError::Unprocessed, true)
    } else if e.is_go_away() {
        (RequestError::Http(format!("GOAWAY: {e}")), true)
    } else if let Some(reason) = e.reason() {
        (
            RequestError::Http(format!("stream reset: {reason:?}")),
            false,
        )
    } else {
        (RequestError::Http(e.to_string()), true)
    }
}
