//! The HTTP/2 client side of one exchange: a stream's request body, its
//! response, and its reset.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use futures_util::FutureExt;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use tern_http::head::{FieldKind, ResponseHead};
use tern_http::rewrite::is_connection_specific;
use tern_http::BodyFraming;
use tokio::net::TcpStream;

use crate::exchange::{ClientBody, ConnCtx, Front};
use crate::fault::{answer_text, Kind};
use crate::io::h2data;
use crate::message::{BodyForm, BodyLen, Piece, RequestView, ResponseHeadView, ResponseView, Step};

/// How a stream ended, for the connection's reset budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// Answered (successfully or with an error status).
    Done,
    /// The client reset it before it was answered in full.
    ClientReset,
}

/// The host a request that arrived over HTTP/2 names: its `:authority`,
/// else its `host` field. It routes the request and becomes the backend's
/// Host (or `:authority`).
pub(crate) fn request_host(parts: &http::request::Parts) -> Option<&[u8]> {
    let authority = parts.uri.authority().map(|a| a.as_str().as_bytes());
    authority.or_else(|| {
        parts
            .headers
            .get(http::header::HOST)
            .map(HeaderValue::as_bytes)
    })
}

/// Handles one stream to the end.
pub(super) async fn handle(
    request: Request<RecvStream>,
    respond: SendResponse<Bytes>,
    ctx: &ConnCtx<'_>,
) -> End {
    let started = Instant::now();
    let (parts, recv) = request.into_parts();
    // h2 has checked any content-length against the DATA already.
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| tern_http::framing::parse_content_length(v.as_bytes()).ok());
    let body = match declared {
        _ if recv.is_end_stream() => BodyLen::Empty,
        Some(n) => BodyLen::Length(n),
        None => BodyLen::Unknown,
    };
    let req = crate::message::Request {
        method: parts.method.as_str(),
        target: parts.uri.path_and_query().map_or("/", |p| p.as_str()),
        authority: request_host(&parts),
        head: RequestView::H2(&parts),
        body,
        http10: false,
        upgrade: false,
        expects_continue: false,
    };
    let mut front = H2Client {
        body: H2Body {
            recv: Some(recv),
            handed: 0,
            declared,
            received: 0,
            idle: ctx.listener.config.limits.idle_timeout,
        },
        respond,
        send: None,
        ctx,
        status: 0,
        bytes_out: 0,
    };
    let finished = crate::exchange::run(&mut front, &req, ctx, started).await;
    match finished.error.map(|e| e.kind()) {
        Some(Kind::ClientGone) => End::ClientReset,
        _ => End::Done,
    }
}

/// A stream's request body.
struct H2Body {
    /// None once an HTTP/2 backend took it whole.
    recv: Option<RecvStream>,
    /// Bytes of the piece handed out last, whose window is released at the
    /// next step (the client may send more only once a piece was handed on).
    handed: usize,
    /// The client's content-length.
    declared: Option<u64>,
    received: u64,
    idle: std::time::Duration,
}

impl ClientBody for H2Body {
    async fn step(&mut self, wait: bool) -> Result<Step<'_>, Kind> {
        let Some(recv) = self.recv.as_mut() else {
            return Ok(Step::End);
        };
        let _ = recv
            .flow_control()
            .release_capacity(std::mem::take(&mut self.handed));
        if recv.is_end_stream() {
            return Ok(Step::End);
        }
        let next = if wait {
            match tokio::time::timeout(self.idle, recv.data()).await {
                Ok(next) => next,
                // A stalled upload is not a reset: it must not count
                // against the client's reset budget.
                Err(_) => return Err(Kind::UploadStalled),
            }
        } else {
            match recv.data().now_or_never() {
                Some(next) => next,
                None => return Ok(Step::NotYet),
            }
        };
        let chunk = match next {
            None => {
                return match self.declared {
                    Some(n) if n != self.received => Err(Kind::BadBody),
                    _ => Ok(Step::End),
                }
            }
            Some(Err(_)) => return Err(Kind::ClientGone),
            Some(Ok(chunk)) => chunk,
        };
        self.handed = chunk.len();
        self.received += chunk.len() as u64;
        let last = recv.is_end_stream();
        match self.declared {
            Some(n) if self.received > n || (last && self.received != n) => Err(Kind::BadBody),
            _ => Ok(Step::Data(Piece::Shared(chunk), last)),
        }
    }

    async fn send_continue(&mut self) -> Result<(), Kind> {
        Ok(())
    }

    async fn interim(&mut self, _head: &ResponseHead) -> Result<(), Kind> {
        // Interim responses (100 Continue, 103) are not relayed over h2.
        Ok(())
    }
}

/// One exchange's view of an HTTP/2 client stream.
struct H2Client<'x, 'c> {
    body: H2Body,
    respond: SendResponse<Bytes>,
    /// The response body's way down, once the head was sent.
    send: Option<SendStream<Bytes>>,
    ctx: &'x ConnCtx<'c>,
    status: u16,
    bytes_out: u64,
}

/// Resolves when the client resets the stream.
pub(super) struct ResetWatch<'a>(&'a mut SendResponse<Bytes>);

impl Future for ResetWatch<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.poll_reset(cx).map(|_| ())
    }
}

impl Front for H2Client<'_, '_> {
    type Body = H2Body;
    type ResetWatch<'a>
        = ResetWatch<'a>
    where
        Self: 'a;

    fn split(&mut self) -> (&mut H2Body, ResetWatch<'_>) {
        (&mut self.body, ResetWatch(&mut self.respond))
    }

    fn take_h2_body(&mut self) -> Option<RecvStream> {
        self.body.recv.take()
    }

    fn start_response(&mut self, view: ResponseView<'_>, _close: bool) -> Result<BodyForm, Kind> {
        let response = match view.head {
            ResponseHeadView::H1(head) => {
                if head.status == 101 {
                    return Err(Kind::Invalid);
                }
                to_h2_response(head, view.body).ok_or(Kind::Invalid)?
            }
            ResponseHeadView::H2(parts) => {
                let mut response = Response::new(());
                *response.status_mut() = parts.status;
                let headers = response.headers_mut();
                for (name, value) in parts
                    .headers
                    .iter()
                    .filter(|(n, _)| !is_connection_specific(n.as_str()))
                {
                    headers.append(name.clone(), value.clone());
                }
                response
            }
        };
        let end_of_stream = view.body == BodyFraming::Empty;
        let send = self
            .respond
            .send_response(response, end_of_stream)
            .map_err(|_| Kind::ClientGone)?;
        self.status = view.status();
        if !end_of_stream {
            self.send = Some(send);
        }
        Ok(BodyForm::Payload)
    }

    async fn send_body(&mut self, piece: Piece<'_>, last: bool) -> Result<(), Kind> {
        let Some(send) = self.send.as_mut() else {
            return Ok(());
        };
        let n = piece.len() as u64;
        let idle = self.ctx.listener.config.limits.idle_timeout;
        h2data::send(send, piece.into_bytes(), last, idle)
            .await
            .map_err(|_| Kind::ClientGone)?;
        self.bytes_out += n;
        if last {
            self.send = None;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Kind> {
        // Frames leave when the connection task next writes.
        Ok(())
    }

    async fn answer(&mut self, status: u16) {
        let (_, body) = answer_text(status);
        let mut response = Response::new(());
        *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
        let headers = response.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        self.status = status;
        if let Ok(mut send) = self.respond.send_response(response, false) {
            if send
                .send_data(Bytes::from_static(body.as_bytes()), true)
                .is_ok()
            {
                self.bytes_out += body.len() as u64;
            }
        }
    }

    fn abort(&mut self) {
        if let Some(send) = self.send.as_mut() {
            send.send_reset(h2::Reason::INTERNAL_ERROR);
        }
    }

    async fn upgrade(
        &mut self,
        _head: &ResponseHead,
        _backend: &mut TcpStream,
        _early: &[u8],
    ) -> Result<(), Kind> {
        // HTTP/2 requests carry no Upgrade: a 101 is a backend error.
        Err(Kind::Invalid)
    }

    fn status(&self) -> u16 {
        self.status
    }

    fn bytes(&self) -> (u64, u64) {
        (self.body.received, self.bytes_out)
    }
}

/// The HTTP/2 response for an HTTP/1.1 backend's head; None when a field
/// cannot be carried (invalid name or value).
fn to_h2_response(head: &ResponseHead, framing: BodyFraming) -> Option<Response<()>> {
    let mut response = Response::new(());
    *response.status_mut() = StatusCode::from_u16(head.status).ok()?;
    let headers = response.headers_mut();
    headers.reserve(head.fields.len());
    // One copy of the head shared by every value (each would otherwise be
    // its own allocation).
    let raw = Bytes::copy_from_slice(head.fields.raw());
    let names_in_connection = head.fields.connection_names_fields();
    for (name, kind, value) in head.fields.iter_spans() {
        if kind.is_connection_specific() {
            continue;
        }
        // Content-Length describes the body (or, for HEAD and 304, the body
        // a GET would get); only a chunked or close-delimited response has
        // none to keep.
        if kind == FieldKind::ContentLength {
            if matches!(framing, BodyFraming::Chunked | BodyFraming::UntilClose) {
                continue;
            }
        } else if names_in_connection && head.fields.kind_has_token(FieldKind::Connection, name) {
            // Fields the backend named in Connection are hop-by-hop.
            continue;
        }
        let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
        let value = HeaderValue::from_maybe_shared(raw.slice(value)).ok()?;
        headers.append(name, value);
    }
    Some(response)
}
