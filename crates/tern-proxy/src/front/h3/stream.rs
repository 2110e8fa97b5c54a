//! The HTTP/3 client side of one exchange: a request stream's body and its
//! response.

use bytes::{Buf, Bytes};
use futures_util::FutureExt;
use h3::server::{RequestResolver, RequestStream, ResolveNow};
use tern_http::head::ResponseHead;
use tern_http::rewrite::FieldEdits;

use crate::exchange::{ClientBody, ConnCtx, Front};
use crate::fault::Kind;
use crate::front::http_parts;
use crate::message::{
    BodyForm, BodyLen, Piece, RequestView, ResponseView, Step, Switched, Trailers,
};
use tern_deadline::within;

type Resolver = RequestResolver<h3_quinn::Connection, Bytes>;
type SendHalf = RequestStream<h3_quinn::SendStream<Bytes>, Bytes>;
type RecvHalf = RequestStream<h3_quinn::RecvStream, Bytes>;
/// A request stream before it is split into its halves.
type BidiHalves = RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// Handles one request stream to the end; `Some` when it was refused for
/// the rate of the connection's address: the seconds of its Retry-After
/// ([`crate::exchange::Finished::slow_down`]) and the QUIC stream its 429
/// went out on.
pub(super) async fn handle(
    resolver: Resolver,
    ctx: &ConnCtx<'_>,
    early: bool,
) -> Option<(u32, Option<quinn::StreamId>)> {
    // The turn's time, as log_request's end is (tern_deadline::now).
    let started = tern_deadline::now().into_std();
    let limits = &ctx.listener.config.limits;
    // The head usually arrived with the stream: it is read and checked
    // without a future (h3 patch 0015); else `within` waits for it.
    // The request and its stream taken straight out of what resolved
    // them, not through an Option and a second match: each step moved
    // them (memcpy, callgrind).
    let (request, stream) = match resolver.resolve_request_now() {
        ResolveNow::Resolved(Ok(r)) => r,
        other => match resolve_later(other, ctx).await {
            Some(r) => r,
            None => return None,
        },
    };
    let (send, recv) = stream.split();
    let quic_id = quinn::VarInt::from_u64(send.send_id().into_inner())
        .ok()
        .map(quinn::StreamId::from);
    let (mut parts, ()) = request.into_parts();
    // A request that came before the handshake ended may be a replay: only
    // safe methods go on, marked for the backend (RFC 8470); the rest get
    // 425 and the client sends them again after the handshake.
    let too_early = early
        && ![http::Method::GET, http::Method::HEAD, http::Method::OPTIONS].contains(&parts.method);
    if early {
        parts
            .headers
            .insert("early-data", http::HeaderValue::from_static("1"));
    }
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| tern_http::framing::parse_content_length(v.as_bytes()).ok());
    // Made in place, its body with it (not moved in after the peek).
    let mut front = H3Client {
        body: H3Body {
            recv,
            first: None,
            ended: false,
            declared,
            received: 0,
            idle: limits.idle_timeout,
        },
        send,
        head: None,
        finished: false,
        ctx,
        status: 0,
        bytes_out: 0,
    };
    // Extended CONNECT for a WebSocket (RFC 9220): the stream becomes the
    // tunnel once the backend switched protocols; no body goes before.
    let websocket = parts.method == http::Method::CONNECT
        && parts.extensions.get::<h3::ext::Protocol>() == Some(&h3::ext::Protocol::WEBSOCKET);
    let body_len = match declared {
        _ if websocket => BodyLen::Empty,
        Some(n) => BodyLen::Length(n),
        None => front.body.peek_length(),
    };
    let req = crate::message::Request {
        method: parts.method.as_str(),
        target: parts.uri.path_and_query().map_or("/", |p| p.as_str()),
        authority: http_parts::request_host(&parts),
        head: RequestView::H2(&parts),
        body: body_len,
        http10: false,
        upgrade: websocket,
        expects_continue: false,
        early,
        client_cert: ctx.client_cert.as_ref(),
        trailers_ok: crate::message::h2_takes_trailers(&parts.headers),
    };
    let mut slow_down = None;
    if too_early {
        front.answer(425, &FieldEdits::NONE).await;
        let o = crate::exchange::Outcome {
            status: front.status(),
            bytes_out: front.bytes().1,
            early: true,
            ..Default::default()
        };
        ctx.log_request(req.method, req.target, &o, started);
    } else {
        slow_down = crate::exchange::run(&mut front, &req, ctx, started)
            .await
            .slow_down;
    }
    front.finish().await;
    // The request's fields, read, serve a later request head of this
    // worker (h3 patch 0017).
    h3::server::give_back_request_fields(parts.headers);
    slow_down.map(|seconds| (seconds, quic_id))
}

/// The request and stream of a head not resolved at once: waited for
/// (under `header_timeout`), or refused (logged; h3 has answered with a
/// 431 or reset the stream already).
async fn resolve_later(
    now: ResolveNow<h3_quinn::Connection, Bytes>,
    ctx: &ConnCtx<'_>,
) -> Option<(http::Request<()>, BidiHalves)> {
    let limit = ctx.listener.config.limits.header_timeout;
    let resolved = match now {
        ResolveNow::Resolved(r) => r,
        ResolveNow::NotYet(resolver) => within(limit, resolver.resolve_request()).await?,
        ResolveNow::TooLarge(refused) => within(limit, refused.resolve()).await?,
    };
    match resolved {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::debug!(client = %ctx.peer, "h3 request refused: {e}");
            None
        }
    }
}

/// A request stream's body.
struct H3Body {
    recv: RecvHalf,
    /// A piece read ahead to learn whether a body follows the head.
    first: Option<Bytes>,
    ended: bool,
    /// The client's content-length.
    declared: Option<u64>,
    received: u64,
    idle: std::time::Duration,
}

impl H3Body {
    /// The body's length when the client gave none: empty when the stream
    /// ended with its head (a GET, usually in the same packet), else
    /// unknown. What was read ahead is kept for the first step.
    fn peek_length(&mut self) -> BodyLen {
        match self.recv.recv_data().now_or_never() {
            Some(Ok(None)) => {
                self.ended = true;
                BodyLen::Empty
            }
            Some(Ok(Some(mut data))) => {
                let bytes = data.copy_to_bytes(data.remaining());
                self.received += bytes.len() as u64;
                self.first = Some(bytes);
                BodyLen::Unknown
            }
            // An error shows at the first step; no data yet means a body
            // may still come.
            Some(Err(_)) | None => BodyLen::Unknown,
        }
    }
}

impl H3Body {
    /// What ends a body whose DATA is over: its trailers (cleaned), if the
    /// client sent any (h3 holds them once DATA has ended).
    async fn trailers(&mut self) -> Result<Step<'static>, Kind> {
        match within(self.idle, self.recv.recv_trailers()).await {
            Some(Ok(map)) => http_parts::request_end(map),
            Some(Err(_)) | None => Err(Kind::ClientGone),
        }
    }
}

impl ClientBody for H3Body {
    async fn step(&mut self, wait: bool) -> Result<Step<'_>, Kind> {
        if let Some(first) = self.first.take() {
            return Ok(Step::Data(Piece::Shared(first), false));
        }
        if self.ended {
            return Ok(Step::End);
        }
        let next = if wait {
            match within(self.idle, self.recv.recv_data()).await {
                Some(next) => next,
                None => return Err(Kind::UploadStalled),
            }
        } else {
            match self.recv.recv_data().now_or_never() {
                Some(next) => next,
                None => return Ok(Step::NotYet),
            }
        };
        match next {
            Ok(Some(mut data)) => {
                let bytes = data.copy_to_bytes(data.remaining());
                self.received += bytes.len() as u64;
                match self.declared {
                    Some(n) if self.received > n => Err(Kind::BadBody),
                    _ => Ok(Step::Data(Piece::Shared(bytes), false)),
                }
            }
            Ok(None) => {
                self.ended = true;
                match self.declared {
                    Some(n) if n != self.received => Err(Kind::BadBody),
                    _ => self.trailers().await,
                }
            }
            Err(_) => Err(Kind::ClientGone),
        }
    }

    async fn send_continue(&mut self) -> Result<(), Kind> {
        Ok(())
    }

    async fn interim(&mut self, _head: &ResponseHead) -> Result<(), Kind> {
        // Interim responses are not relayed over HTTP/3 (as over HTTP/2).
        Ok(())
    }
}

/// One exchange's view of an HTTP/3 request stream.
struct H3Client<'x, 'c> {
    body: H3Body,
    send: SendHalf,
    /// The response head (status and fields), held until the first body
    /// piece (or a flush) so both leave together.
    head: Option<(http::StatusCode, http_parts::FieldList)>,
    /// The stream's send side was finished (or reset).
    finished: bool,
    ctx: &'x ConnCtx<'c>,
    status: u16,
    bytes_out: u64,
}

impl H3Client<'_, '_> {
    /// How long a write may wait for the client's flow-control credit.
    fn write_deadline(&self) -> std::time::Duration {
        self.ctx.listener.config.limits.idle_timeout
    }

    async fn send_head(&mut self) -> Result<(), Kind> {
        if let Some((status, fields)) = self.head.take() {
            let idle = self.write_deadline();
            match within(idle, self.send.send_response_fields(status, &fields)).await {
                Some(Ok(())) => {}
                _ => return Err(Kind::ClientGone),
            }
        }
        Ok(())
    }

    /// Ends the response if the exchange left it open (a head with no
    /// body sent, say).
    async fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        if self.send_head().await.is_ok() {
            let idle = self.write_deadline();
            let _ = within(idle, self.send.finish()).await;
        }
    }
}

impl Front for H3Client<'_, '_> {
    type Body = H3Body;
    // A client's cancel (RESET_STREAM / STOP_SENDING) shows as a failed
    // read or write; h3 has no separate watch for it.
    type ResetWatch<'a>
        = std::future::Pending<()>
    where
        Self: 'a;

    fn split(&mut self) -> (&mut H3Body, std::future::Pending<()>) {
        (&mut self.body, std::future::pending())
    }

    fn start_response(&mut self, view: ResponseView<'_>, _close: bool) -> Result<BodyForm, Kind> {
        self.head = Some(http_parts::for_h3_client(view, self.ctx.listener)?);
        self.status = view.status();
        Ok(BodyForm::Payload)
    }

    async fn send_body(&mut self, piece: Piece<'_>, last: bool) -> Result<(), Kind> {
        if self.finished {
            return Ok(());
        }
        self.send_head().await?;
        let n = piece.len() as u64;
        let idle = self.write_deadline();
        if n > 0 {
            match within(idle, self.send.send_data(piece.into_bytes())).await {
                Some(Ok(())) => {}
                // A client that stopped reading (window closed) for a
                // whole idle timeout is treated as gone.
                _ => return Err(Kind::ClientGone),
            }
            self.bytes_out += n;
        }
        if last {
            self.finished = true;
            match within(idle, self.send.finish()).await {
                Some(Ok(())) => {}
                _ => return Err(Kind::ClientGone),
            }
        }
        Ok(())
    }

    async fn send_trailers(&mut self, trailers: Trailers) -> Result<(), Kind> {
        if self.finished {
            return Ok(());
        }
        self.send_head().await?;
        self.finished = true;
        let idle = self.write_deadline();
        let send = &mut self.send;
        match within(idle, async {
            send.send_trailers(trailers).await?;
            send.finish().await
        })
        .await
        {
            Some(Ok(())) => Ok(()),
            _ => Err(Kind::ClientGone),
        }
    }

    async fn flush(&mut self) -> Result<(), Kind> {
        self.send_head().await
    }

    async fn answer_grpc(
        &mut self,
        code: u16,
        message: &str,
        _fallback: u16,
        edits: &FieldEdits<'_>,
    ) {
        self.status = 200;
        self.head = None;
        self.finished = true;
        let response = http_parts::grpc_answer(code, message, edits);
        let idle = self.write_deadline();
        let send = &mut self.send;
        let _ = within(idle, async {
            send.send_response(response).await?;
            send.finish().await
        })
        .await;
    }

    async fn answer(&mut self, status: u16, edits: &FieldEdits<'_>) {
        let (response, body) = http_parts::answer(status, edits);
        self.status = status;
        self.head = None;
        self.finished = true;
        let idle = self.write_deadline();
        let send = &mut self.send;
        let answered = within(idle, async {
            send.send_response(response).await?;
            send.send_data(Bytes::from_static(body.as_bytes())).await?;
            send.finish().await
        })
        .await;
        if matches!(answered, Some(Ok(()))) {
            self.bytes_out += body.len() as u64;
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
        if self.status != 0 || self.finished {
            return Err(Kind::Invalid);
        }
        let response = http_parts::websocket_accepted(switched, self.ctx.listener);
        let idle = self.ctx.listener.config.limits.idle_timeout;
        match within(idle, self.send.send_response(response)).await {
            Some(Ok(())) => {}
            _ => return Err(Kind::ClientGone),
        }
        self.status = 200;
        self.finished = true;
        let (up, down) = tunnel(&mut self.body.recv, &mut self.send, backend, early, idle).await;
        self.body.received += up;
        self.bytes_out += down;
        Ok(())
    }

    fn abort(&mut self) {
        // The client sees the stream reset, not a complete response.
        self.finished = true;
        self.send.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
    }

    fn status(&self) -> u16 {
        self.status
    }

    fn bytes(&self) -> (u64, u64) {
        (self.body.received, self.bytes_out)
    }
}

/// Bytes both ways between a WebSocket's request stream and its backend
/// connection until both sides end, either fails, or nothing moves for
/// `idle`. Each write waits for the peer's flow-control credit (QUIC's on
/// the client side), so a slow reader holds tern to one read buffer.
/// Returns the bytes moved (up, down).
async fn tunnel<B>(
    recv: &mut RecvHalf,
    send: &mut SendHalf,
    backend: &mut B,
    early: &[u8],
    idle: std::time::Duration,
) -> (u64, u64)
where
    B: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut up, mut down) = (0u64, 0u64);
    if !early.is_empty() {
        if !matches!(
            within(idle, send.send_data(Bytes::copy_from_slice(early))).await,
            Some(Ok(()))
        ) {
            return (0, 0);
        }
        down += early.len() as u64;
    }
    let (mut from_backend, mut to_backend) = tokio::io::split(&mut *backend);
    let mut buf = bytes::BytesMut::with_capacity(TUNNEL_READ);
    let (mut client_open, mut backend_open) = (true, true);
    let clean = loop {
        if !client_open && !backend_open {
            break true;
        }
        if buf.capacity() < TUNNEL_READ {
            buf = bytes::BytesMut::with_capacity(TUNNEL_READ);
        }
        let step = within(idle, async {
            tokio::select! {
                chunk = recv.recv_data(), if client_open => Moved::Up(chunk),
                read = from_backend.read_buf(&mut buf), if backend_open => Moved::Down(read),
            }
        })
        .await;
        match step {
            None | Some(Moved::Up(Err(_))) => break false,
            Some(Moved::Up(Ok(None))) => {
                client_open = false;
                let _ = to_backend.shutdown().await;
            }
            Some(Moved::Up(Ok(Some(mut chunk)))) => {
                let piece = chunk.copy_to_bytes(chunk.remaining());
                if !matches!(
                    within(idle, to_backend.write_all(&piece)).await,
                    Some(Ok(()))
                ) {
                    break false;
                }
                up += piece.len() as u64;
            }
            Some(Moved::Down(Ok(0) | Err(_))) => {
                backend_open = false;
                if !matches!(within(idle, send.finish()).await, Some(Ok(()))) {
                    break false;
                }
            }
            Some(Moved::Down(Ok(n))) => {
                if !matches!(
                    within(idle, send.send_data(buf.split().freeze())).await,
                    Some(Ok(()))
                ) {
                    break false;
                }
                down += n as u64;
            }
        }
    };
    if !clean {
        send.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
        let _ = to_backend.shutdown().await;
    }
    (up, down)
}

/// Bytes read from a WebSocket's backend at once.
const TUNNEL_READ: usize = 16 * 1024;

enum Moved<U, D> {
    Up(U),
    Down(D),
}
