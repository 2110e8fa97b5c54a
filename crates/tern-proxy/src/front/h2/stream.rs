//! The HTTP/2 client side of one exchange: a stream's request body, its
//! response, and its reset.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::FutureExt;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::Request;
use tern_http::head::ResponseHead;
use tern_http::rewrite::FieldEdits;
use tern_http::BodyFraming;

use crate::exchange::{ClientBody, ConnCtx, Front};
use crate::fault::Kind;
use crate::front::http_parts::{self, MadeValues};
use crate::io::h2data;
use crate::message::{
    BodyForm, BodyLen, Piece, RequestView, ResponseView, Step, Switched, Trailers,
};

/// How a stream ended, for the connection's reset budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// Answered (successfully or with an error status).
    Done,
    /// The client reset it before it was answered in full.
    ClientReset,
    /// Refused for the rate of the connection's address, told to retry
    /// after this many seconds.
    RateLimited(u32),
}

/// What the streams of one connection share.
#[derive(Debug, Default)]
pub(super) struct Shared {
    /// Response heads sent on the connection.
    responses: Cell<u32>,
}

/// One response in this many sends its request ID indexable
/// ([`MadeValues`]): the first puts the name in the client's HPACK table;
/// the next ones put it back if later entries pushed it out (a 4 KiB
/// table holds about a minute of a typical backend's changing `Date`
/// values). One ID in the table per this many responses is the cost.
const REINDEX_EVERY: u32 = 256;

impl Shared {
    /// How the next response head sends request IDs.
    fn next_made(&self) -> MadeValues {
        let n = self.responses.get();
        self.responses.set(n.wrapping_add(1));
        if n % REINDEX_EVERY == 0 {
            MadeValues::Indexable
        } else {
            MadeValues::NeverIndexed
        }
    }
}

/// Handles one stream to the end.
pub(super) async fn handle(
    request: Request<RecvStream>,
    respond: SendResponse<Bytes>,
    ctx: &ConnCtx<'_>,
    shared: &Shared,
) -> End {
    // The turn's time, as log_request's end is (tern_deadline::now).
    let started = tern_deadline::now().into_std();
    let (parts, recv) = request.into_parts();
    let ended = recv.is_end_stream();
    // h2 has checked any content-length against the DATA already. A
    // stream already ended (every GET) has no body to hold it to: the
    // header map's look-up is spared.
    let declared = if ended {
        None
    } else {
        parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| tern_http::framing::parse_content_length(v.as_bytes()).ok())
    };
    // Extended CONNECT for a WebSocket (RFC 8441): the stream becomes the
    // tunnel once the backend switched protocols; no body goes before.
    let websocket = parts.method == http::Method::CONNECT
        && parts
            .extensions
            .get::<h2::ext::Protocol>()
            .is_some_and(|p| p.as_str().eq_ignore_ascii_case("websocket"));
    let body = match declared {
        _ if ended || websocket => BodyLen::Empty,
        Some(n) => BodyLen::Length(n),
        None => BodyLen::Unknown,
    };
    let req = crate::message::Request {
        method: parts.method.as_str(),
        target: parts.uri.path_and_query().map_or("/", |p| p.as_str()),
        authority: http_parts::request_host(&parts),
        head: RequestView::H2(&parts),
        body,
        http10: false,
        upgrade: websocket,
        expects_continue: false,
        early: false,
        client_cert: ctx.client_cert.as_ref(),
        trailers_ok: crate::message::h2_takes_trailers(&parts.headers),
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
        head: None,
        send: None,
        ctx,
        shared,
        status: 0,
        bytes_out: 0,
    };
    let finished = crate::exchange::run(&mut front, &req, ctx, started).await;
    // The stream's two handles released together, under one lock of h2's
    // streams (h2 patch 0017) where their drops took it three times.
    let H2Client { body, respond, .. } = front;
    match body.recv {
        Some(recv) => respond.drop_with_request_body(recv),
        None => drop(respond),
    }
    // The request's fields, read, serve a later request head of this
    // worker (h2 patch 0009).
    h2::server::give_back_request_fields(parts.headers);
    match (finished.error.map(|e| e.kind()), finished.slow_down) {
        (_, Some(after)) => End::RateLimited(after),
        (Some(Kind::ClientGone), _) => End::ClientReset,
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
                    _ => request_trailers(recv).await,
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

/// What ends a request body whose DATA is over: its trailers (cleaned), if
/// the client sent any. h2 has them at hand once DATA has ended.
async fn request_trailers(recv: &mut RecvStream) -> Result<Step<'static>, Kind> {
    match recv.trailers().now_or_never() {
        Some(Ok(map)) => http_parts::request_end(map),
        Some(Err(_)) => Err(Kind::ClientGone),
        None => Ok(Step::End),
    }
}

/// One exchange's view of an HTTP/2 client stream.
struct H2Client<'x, 'c> {
    body: H2Body,
    respond: SendResponse<Bytes>,
    /// The response head, made and waiting for the first body piece (or a
    /// flush), so that a whole small body leaves with it in one call.
    head: Option<(http::StatusCode, http_parts::H2Fields)>,
    /// The response body's way down, once the head was sent.
    send: Option<SendStream<Bytes>>,
    ctx: &'x ConnCtx<'c>,
    shared: &'x Shared,
    status: u16,
    bytes_out: u64,
}

/// Largest response body sent with its head in one call: one DATA frame
/// of the default size, queued whole whatever the client's window (it is
/// already in memory; h2 sends it as the window allows).
const WITH_HEAD_MAX: usize = 16 * 1024;

impl H2Client<'_, '_> {
    /// Sends the response head that waited for a body piece.
    fn send_head(
        &mut self,
        status: http::StatusCode,
        fields: http_parts::H2Fields,
    ) -> Result<(), Kind> {
        let send = self
            .respond
            .send_response_shared(status, fields.shared, fields.list, false)
            .map_err(|_| Kind::ClientGone)?;
        self.send = Some(send);
        Ok(())
    }
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
        let made = self.shared.next_made();
        let (status, fields) = http_parts::for_h2_client(view, self.ctx.listener, made)?;
        self.status = view.status();
        if view.body == BodyFraming::Empty {
            self.respond
                .send_response_shared(status, fields.shared, fields.list, true)
                .map_err(|_| Kind::ClientGone)?;
        } else {
            self.head = Some((status, fields));
        }
        Ok(BodyForm::Payload)
    }

    async fn send_body(&mut self, piece: Piece<'_>, last: bool) -> Result<(), Kind> {
        if let Some((status, fields)) = self.head.take() {
            if last && piece.len() <= WITH_HEAD_MAX {
                // The whole body is at hand: head, DATA and END_STREAM in
                // one call (h2 patch 0011), one lock where the head and a
                // window-checked send took four.
                let n = piece.len() as u64;
                let sent = if n == 0 {
                    self.respond
                        .send_response_shared(status, fields.shared, fields.list, true)
                        .map(drop)
                } else {
                    self.respond.send_response_shared_with_body(
                        status,
                        fields.shared,
                        fields.list,
                        piece.into_bytes(),
                    )
                };
                sent.map_err(|_| Kind::ClientGone)?;
                self.bytes_out += n;
                return Ok(());
            }
            self.send_head(status, fields)?;
        }
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

    async fn send_trailers(&mut self, trailers: Trailers) -> Result<(), Kind> {
        if let Some((status, fields)) = self.head.take() {
            self.send_head(status, fields)?;
        }
        let Some(mut send) = self.send.take() else {
            return Ok(());
        };
        send.send_trailers(trailers).map_err(|_| Kind::ClientGone)
    }

    async fn flush(&mut self) -> Result<(), Kind> {
        // No body at hand: the head goes now. Frames leave when the
        // connection task next writes.
        match self.head.take() {
            Some((status, fields)) => self.send_head(status, fields),
            None => Ok(()),
        }
    }

    async fn answer_grpc(
        &mut self,
        code: u16,
        message: &str,
        _fallback: u16,
        edits: &FieldEdits<'_>,
    ) {
        self.status = 200;
        let response = http_parts::grpc_answer(code, message, edits);
        let _ = self.respond.send_response(response, true);
    }

    async fn answer(&mut self, status: u16, edits: &FieldEdits<'_>) {
        let (response, body) = http_parts::answer(status, edits);
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
        } else if self.head.take().is_some() {
            // The head never left: the reset alone tells the client.
            self.respond.send_reset(h2::Reason::INTERNAL_ERROR);
        }
    }

    async fn upgrade<B>(
        &mut self,
        switched: Switched<'_>,
        backend: &mut B,
        early: &[u8],
    ) -> Result<(), Kind>
    where
        B: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        // Only an extended CONNECT asked for a WebSocket.
        let Some(mut recv) = self.body.recv.take() else {
            return Err(Kind::Invalid);
        };
        let response = http_parts::websocket_accepted(switched, self.ctx.listener);
        let mut send = self
            .respond
            .send_response(response, false)
            .map_err(|_| Kind::ClientGone)?;
        self.status = 200;
        let idle = self.ctx.listener.config.limits.idle_timeout;
        let (up, down) = h2data::tunnel(&mut recv, &mut send, backend, early, idle).await;
        self.body.received += up;
        self.bytes_out += down;
        Ok(())
    }

    fn status(&self) -> u16 {
        self.status
    }

    fn bytes(&self) -> (u64, u64) {
        (self.body.received, self.bytes_out)
    }
}
