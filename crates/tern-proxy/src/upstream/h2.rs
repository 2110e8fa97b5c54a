//! The HTTP/2 backend client (`protocol = "h2c"`, cleartext, and `"h2"`,
//! over TLS): one request as one stream on the worker's session to the
//! chosen server ([`Backends::get_h2`]), in steps the exchange core drives.
//!
//! Not carried: `Upgrade` other than WebSocket (a WebSocket goes as an
//! extended CONNECT, RFC 8441), plain `CONNECT`, and interim 1xx
//! responses.

use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use h2::client::ResponseFuture;
use h2::{RecvStream, SendStream};
use http::Method;
use tern_http::rewrite::FieldEdits;

use super::h2_request::backend_request;
pub(crate) use super::h2_request::{Forwarding, ForwardingCache};
use super::{Backends, H2Stream};
use crate::fault::Kind;
use crate::io::h2data;
use crate::message::{clean_trailer_map, BodyLen, Piece, Request, Step};

/// A stream on a backend session with the request head sent, and the
/// session handle that counts it in flight on its server (for least_conn)
/// until dropped.
pub(crate) struct Opened {
    /// The response head, when it comes.
    pub response: ResponseFuture,
    /// The request body's way up.
    pub upstream: SendStream<Bytes>,
    /// The session handle (server address, in-flight count).
    pub stream: H2Stream,
}

/// Opens a stream for `req` on a session of `backends` and sends the head.
/// A session can die between the pick and the send (GOAWAY in flight);
/// nothing reached the backend then, so one more pick is safe. A
/// WebSocket ([`Request::is_websocket`]) goes as an extended CONNECT (RFC
/// 8441) whose stream stays open for the tunnel, to a backend whose
/// SETTINGS offered it; to one that did not, [`Kind::NoExtendedConnect`].
#[allow(clippy::too_many_arguments)]
pub(crate) async fn open(
    backends: &Backends,
    tries: &mut super::Tries,
    req: &Request<'_>,
    forwarding: Forwarding<'_>,
    edits: &FieldEdits<'_>,
    connect_timeout: Duration,
) -> Result<Opened, (Kind, Option<crate::config::BackendAddr>)> {
    let websocket = req.is_websocket();
    let method = if websocket {
        Method::CONNECT
    } else {
        Method::from_bytes(req.method.as_bytes()).map_err(|_| (Kind::Unrelayable, None))?
    };
    let mut retried = false;
    loop {
        let mut stream = backends
            .get_h2(tries, connect_timeout)
            .await
            .map_err(|e| (e.kind(), None))?;
        let addr = stream.addr;
        // The session's SETTINGS are in: the preface waited for them.
        if websocket && !stream.sender.is_extended_connect_protocol_enabled() {
            tracing::warn!(backend = %addr, upstream = %backends.name(),
                "WebSocket refused with 502: the backend does not offer extended CONNECT \
                 (RFC 8441, SETTINGS_ENABLE_CONNECT_PROTOCOL); route WebSockets to a server \
                 that does, or to an http1 group");
            return Err((Kind::NoExtendedConnect, Some(addr)));
        }
        let scheme = backends.protocol().scheme();
        let mut request =
            backend_request(scheme, &method, req, addr, forwarding, edits).map_err(|e| {
                tracing::debug!("request not relayable over HTTP/2: {e}");
                (Kind::Unrelayable, Some(addr))
            })?;
        if websocket {
            request
                .extensions_mut()
                .insert(h2::ext::Protocol::from_static("websocket"));
        }
        let end = req.body == BodyLen::Empty && !websocket;
        match stream.sender.send_request(request, end) {
            Ok((response, upstream)) => {
                return Ok(Opened {
                    response,
                    upstream,
                    stream,
                })
            }
            Err(e) if !retried => {
                tracing::debug!(backend = %addr, "HTTP/2 send failed, picking again: {e}");
                retried = true;
            }
            Err(e) => {
                tracing::warn!(backend = %addr, "backend failed: {e}");
                return Err((Kind::Closed, Some(addr)));
            }
        }
    }
}

/// Why the request body stopped going up a duplex upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UploadEnd {
    /// The client reset its stream.
    ClientReset,
    /// The client sent nothing for the idle timeout.
    ClientStalled,
    /// The backend reset the stream or held its window shut.
    Backend,
    /// The body went past `max_request_body`.
    TooLarge,
}

/// Moves an HTTP/2 client's request body (DATA payloads, moved, not
/// copied) to the backend stream, releasing the client's window only as
/// pieces are handed on. Runs beside the response: HTTP/2 on both sides is
/// full duplex.
pub(crate) async fn upload_stream(
    body: &mut RecvStream,
    upstream: &mut SendStream<Bytes>,
    idle: Duration,
    backend_wait: Duration,
    moved: &std::cell::Cell<u64>,
    limit: Option<u64>,
) -> Result<(), UploadEnd> {
    loop {
        let chunk = match tokio::time::timeout(idle, body.data()).await {
            // A stalled upload is not a reset: it must not count against
            // the client's reset budget.
            Err(_) => return Err(UploadEnd::ClientStalled),
            Ok(None) => return end_upload(body, upstream, idle).await,
            Ok(Some(Err(_))) => return Err(UploadEnd::ClientReset),
            Ok(Some(Ok(chunk))) => chunk,
        };
        let n = chunk.len();
        if limit.is_some_and(|l| moved.get() + n as u64 > l) {
            return Err(UploadEnd::TooLarge);
        }
        // h2 has checked the DATA against any Content-Length already.
        let last = body.is_end_stream();
        h2data::send(upstream, chunk, last, backend_wait)
            .await
            .map_err(|_| UploadEnd::Backend)?;
        moved.set(moved.get() + n as u64);
        let _ = body.flow_control().release_capacity(n);
        if last {
            return Ok(());
        }
    }
}

/// Ends an upload whose DATA is over: with the client's trailers
/// (cleaned) when it sent some, else an empty END_STREAM.
async fn end_upload(
    body: &mut RecvStream,
    upstream: &mut SendStream<Bytes>,
    idle: Duration,
) -> Result<(), UploadEnd> {
    match tokio::time::timeout(idle, body.trailers()).await {
        Err(_) => Err(UploadEnd::ClientStalled),
        Ok(Err(_)) => Err(UploadEnd::ClientReset),
        Ok(Ok(None)) => h2data::end_stream(upstream).map_err(|_| UploadEnd::Backend),
        Ok(Ok(Some(map))) => match clean_trailer_map(map) {
            Ok(Some(t)) => upstream.send_trailers(t).map_err(|_| UploadEnd::Backend),
            Ok(None) => h2data::end_stream(upstream).map_err(|_| UploadEnd::Backend),
            Err(e) => {
                tracing::debug!("client trailers refused: {e}");
                Err(UploadEnd::ClientReset)
            }
        },
    }
}

/// A response body being read from a backend stream.
pub(crate) struct ResponseBody {
    recv: RecvStream,
    /// Bytes of the piece handed out last, whose window is released at
    /// the next step (so a slow client holds back its backend stream, not
    /// tern's memory).
    handed: usize,
}

impl ResponseBody {
    /// What ends a body whose DATA is over: the backend's trailers
    /// (cleaned), if it sent any (h2 has them at hand once DATA ended).
    async fn trailers(&mut self, wait: Option<Duration>) -> Result<Step<'static>, Kind> {
        let t = wait.unwrap_or(Duration::ZERO);
        let map = match tokio::time::timeout(t, self.recv.trailers()).await {
            Ok(Ok(map)) => map,
            // None at hand yet: only DATA said the body is over.
            Err(_) if wait.is_none() => return Ok(Step::NotYet),
            Ok(Err(_)) | Err(_) => return Err(Kind::Body),
        };
        match map.map(clean_trailer_map) {
            None | Some(Ok(None)) => Ok(Step::End),
            Some(Ok(Some(t))) => Ok(Step::Trailers(t)),
            Some(Err(e)) => {
                tracing::debug!("backend trailers refused: {e}");
                Err(Kind::Body)
            }
        }
    }

    /// The body of a response.
    pub(crate) fn new(recv: RecvStream) -> Self {
        ResponseBody { recv, handed: 0 }
    }

    /// The next piece: one already received, or (with `wait`) the next the
    /// backend sends within that time.
    pub(crate) async fn step(&mut self, wait: Option<Duration>) -> Result<Step<'static>, Kind> {
        let handed = std::mem::take(&mut self.handed);
        if handed > 0 {
            // A lock of the session's stream store: not taken for nothing.
            let _ = self.recv.flow_control().release_capacity(handed);
        }
        let next = match wait {
            None => match self.recv.data().now_or_never() {
                Some(next) => next,
                None => return Ok(Step::NotYet),
            },
            Some(t) => match tokio::time::timeout(t, self.recv.data()).await {
                Ok(next) => next,
                Err(_) => return Err(Kind::Body),
            },
        };
        match next {
            None => self.trailers(wait).await,
            Some(Err(e)) => {
                tracing::debug!("backend stream failed: {e}");
                Err(Kind::Body)
            }
            Some(Ok(chunk)) => {
                self.handed = chunk.len();
                let last = self.recv.is_end_stream();
                Ok(Step::Data(Piece::Shared(chunk), last))
            }
        }
    }
}
