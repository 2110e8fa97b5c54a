//! Requests to HTTP/2 groups (`protocol = "h2c"`, cleartext, and `"h2"`,
//! over TLS): each client request, from either front end, becomes one
//! stream on the worker's HTTP/2 session to the chosen server
//! ([`crate::backend::Backends::get_h2`]). Only the session differs between the two; the
//! relay is the same.
//!
//! ```text
//!   HTTP/2 client stream ──▶ from_h2 ─┐                 ┌─▶ h2c/h2 server
//!                                     ├─ backend stream ┤   (one session per
//!   HTTP/1.1 client request ▶ from_h1 ┘                 └─   server and worker)
//! ```
//!
//! The rules are the ones of the HTTP/1.1 paths: connection-specific and
//! client-sent forwarding fields stop at tern, tern's own forwarding fields
//! are added (`tern_http::rewrite` decides both), bodies stream in both
//! directions under both peers' flow-control windows, and a backend that
//! fails before the response head is answered with 502, 503 or 504.
//!
//! Not carried: HTTP/1.1 `Upgrade` and `CONNECT` (HTTP/2 has neither in the
//! form a backend would understand; answered 501), interim 1xx responses,
//! and trailers (a chunked HTTP/1.1 response ends without them).

pub(crate) mod from_h1;
pub(crate) mod from_h2;

use std::future::poll_fn;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use h2::SendStream;
use http::{HeaderName, HeaderValue, Method, Request, Uri};
use tern_http::rewrite::{forwarding_fields, ClientFacts};

use crate::backend::ConnectError;
use crate::config::BackendProtocol;
use crate::conn::ConnCtx;

/// How a relayed HTTP/2 client stream ended, for the connection's reset
/// budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// Answered (successfully or with an error status).
    Answered,
    /// The client reset it before it was answered in full.
    ClientReset,
}

/// The status for a request whose backend could not be reached (the same
/// mapping as the HTTP/1.1 paths), after logging why.
pub(crate) fn connect_failure_status(ctx: &ConnCtx<'_>, e: &ConnectError) -> u16 {
    tracing::warn!(client = %ctx.peer, "backend unavailable: {e}");
    match e {
        ConnectError::Timeout(_) => 504,
        ConnectError::AllDown(_) => 503,
        ConnectError::Io(..) => 502,
    }
}

/// Why a request could not be turned into an HTTP/2 request.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BuildError {
    /// The authority or path does not form a URI.
    #[error("request target: {0}")]
    Target(#[from] http::Error),
    /// A field name or value HTTP/2 cannot carry.
    #[error("field {0:?} cannot be sent over HTTP/2")]
    Field(String),
}

/// The HTTP/2 request head for a backend: `:scheme` that of the hop to
/// the backend (`protocol`'s), `:authority` from the client's Host or
/// `:authority` (else the server's address), then `fields` (already
/// filtered by the caller) and tern's forwarding fields.
pub(crate) fn backend_request<'f>(
    protocol: BackendProtocol,
    method: &Method,
    path_and_query: &str,
    authority: Option<&[u8]>,
    server: SocketAddr,
    fields: impl Iterator<Item = (&'f str, &'f [u8])>,
    ctx: &ConnCtx<'_>,
) -> Result<Request<()>, BuildError> {
    let uri = match authority {
        Some(a) => Uri::builder().authority(a),
        None => Uri::builder().authority(server.to_string()),
    }
    .scheme(protocol.scheme())
    .path_and_query(path_and_query)
    .build()?;
    let mut request = Request::builder()
        .method(method.clone())
        .uri(uri)
        .body(())?;
    let headers = request.headers_mut();
    let mut bad = None;
    let mut put = |name: &str, value: &[u8]| match (
        HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_bytes(value),
    ) {
        (Ok(n), Ok(v)) => {
            headers.append(n, v);
        }
        _ => bad = Some(name.to_string()),
    };
    for (name, value) in fields {
        put(name, value);
    }
    let facts = ClientFacts {
        ip: ctx.peer.ip(),
        proto: "https",
    };
    forwarding_fields(&facts, ctx.listener.config.forwarded, authority, |n, v| {
        put(n, v)
    });
    match bad {
        Some(name) => Err(BuildError::Field(name)),
        None => Ok(request),
    }
}

/// Why data could not be sent on an HTTP/2 stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendError {
    /// The peer reset the stream or closed the connection.
    Gone,
    /// The peer's window stayed shut for the whole wait.
    Stalled,
}

/// Sends `data` (then END_STREAM when `end`) on `send`, never more than the
/// peer's flow-control window allows, waiting at most `wait` each time the
/// window is shut. Nothing queues in h2's send buffer beyond the window, so
/// a slow peer holds back the sender instead of growing tern's memory.
pub(crate) async fn send_flow_controlled(
    send: &mut SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
    wait: Duration,
) -> Result<(), SendError> {
    if data.is_empty() {
        // Nothing to wait for: an empty frame needs no window.
        return if end { end_stream(send) } else { Ok(()) };
    }
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        // The windows usually grant the reservation at once; only a peer
        // that holds its window back makes us wait.
        let cap = match send.capacity() {
            0 => match tokio::time::timeout(wait, poll_fn(|cx| send.poll_capacity(cx))).await {
                Ok(Some(Ok(cap))) if cap > 0 => cap,
                Ok(Some(Ok(_))) => continue,
                Ok(_) => return Err(SendError::Gone),
                Err(_) => return Err(SendError::Stalled),
            },
            cap => cap,
        };
        let piece = data.split_to(cap.min(data.len()));
        let last = end && data.is_empty();
        send.send_data(piece, last).map_err(|_| SendError::Gone)?;
    }
    Ok(())
}

/// Ends `send` (an empty DATA frame with END_STREAM).
pub(crate) fn end_stream(send: &mut SendStream<Bytes>) -> Result<(), SendError> {
    send.send_data(Bytes::new(), true)
        .map_err(|_| SendError::Gone)
}

/// Response fields an HTTP/2 peer may carry on: everything but the
/// connection-specific ones (an HTTP/2 backend may not send those; tern
/// does not rely on it).
pub(crate) fn is_end_to_end(name: &HeaderName) -> bool {
    !tern_http::rewrite::is_connection_specific(name.as_str())
}

/// Time to wait for anything on a backend stream: the response head, or
/// the next piece of its body.
pub(crate) fn backend_wait(ctx: &ConnCtx<'_>) -> Duration {
    ctx.listener.config.limits.backend_response_timeout
}
