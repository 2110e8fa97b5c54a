//! One request/response exchange between a client and a backend.
//!
//! Latency rule: the request head and the first part of its body go to the
//! backend in one write, and the response head with the first part of its
//! body goes to the client in one write (one TLS record when it fits). A
//! message split over two writes can stall on Nagle + delayed ACK.

use std::time::Instant;

use tern_http::framing::response_framing;
use tern_http::head::{parse_response_into, FieldKind, ResponseHead};
use tern_http::rewrite::{
    wants_close, wants_upgrade, write_request_head, write_response_head, write_simple_response,
    BackendConnection, ClientFacts,
};
use tern_http::{BodyFraming, HttpError, RequestHead};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::body::{pump, tunnel, Pending, PumpError};
use super::Next;
use crate::backend::{BackendConn, Backends, ConnectError};
use crate::conn::{ConnCtx, Outcome};
use crate::deadline::{within, Watchdog};
use crate::iobuf::{HeadWaitError, IoBuf};

/// Body bytes sent in the same write as a head (request or response).
/// Larger bodies follow in further writes of up to a buffer each.
pub(crate) const INLINE_BODY: usize = 16 * 1024;

/// Largest response head accepted from a backend.
pub(crate) const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Which side of the proxy failed, deciding the status and the log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The client went away, stalled or sent something invalid.
    Client,
    /// The client sent a body that breaks its framing: 400 if nothing was sent yet.
    BadRequest,
    /// The backend failed; the client gets this status if nothing was sent yet.
    Backend(u16),
}

/// Buffers an exchange uses, kept for the life of the client connection so
/// a keepalive request allocates (and zeroes) nothing new.
pub(super) struct ExchangeBufs {
    /// Backend read buffer (response heads and bodies).
    pub bbuf: IoBuf,
    /// Outgoing head plus inline body, for the one-write rule.
    pub out: Vec<u8>,
    /// The backend's response head, refilled per response.
    pub resp: ResponseHead,
    /// Bounds the waits for response heads (made at the first one).
    pub backend_wait: Option<Watchdog>,
}

impl ExchangeBufs {
    pub(super) fn new() -> Self {
        ExchangeBufs {
            bbuf: IoBuf::new(16 * 1024, MAX_RESPONSE_HEAD),
            out: Vec::with_capacity(INLINE_BODY + 1024),
            resp: ResponseHead::default(),
            backend_wait: None,
        }
    }
}

/// Runs one exchange for `head` (already consumed from `cbuf`).
#[allow(clippy::too_many_arguments)]
pub(super) async fn run<C>(
    client: &mut C,
    cbuf: &mut IoBuf,
    bufs: &mut ExchangeBufs,
    ctx: &ConnCtx<'_>,
    head: &RequestHead,
    framing: BodyFraming,
    head_len: u64,
    started: Instant,
) -> Next
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let backends = ctx
        .listener
        .route(ctx.tls.sni.as_deref(), head.fields.first(FieldKind::Host));
    if backends.protocol().is_http2() {
        use crate::upstream_h2::from_h1;
        // Boxed so the HTTP/2 relay's state does not enlarge every exchange.
        return Box::pin(from_h1::run(
            client, cbuf, ctx, backends, head, framing, head_len, started,
        ))
        .await;
    }
    let mut p = Outcome {
        bytes_in: head_len,
        ..Outcome::default()
    };
    let next = match forward(client, cbuf, bufs, ctx, backends, head, framing, &mut p).await {
        Ok(next) => next,
        Err(Side::Client) => {
            if p.status == 0 {
                // Nothing was answered: 499 in the log, as nginx does, says
                // the client left before it got a response.
                p.status = 499;
            }
            Next::Close
        }
        Err(failure @ (Side::Backend(_) | Side::BadRequest)) => {
            if p.status == 0 {
                let status = match failure {
                    Side::Backend(status @ (503 | 504)) => status,
                    Side::Backend(_) => 502,
                    _ => 400,
                };
                answer_error(client, ctx, status, &mut p).await;
            }
            // The request body may be half read: the connection cannot be
            // trusted to be at a request boundary.
            Next::Close
        }
    };
    ctx.log_request(head.method(), head.target(), &p, started);
    next
}

#[allow(clippy::too_many_arguments)]
async fn forward<C>(
    client: &mut C,
    cbuf: &mut IoBuf,
    bufs: &mut ExchangeBufs,
    ctx: &ConnCtx<'_>,
    backends: &Backends,
    head: &RequestHead,
    framing: BodyFraming,
    p: &mut Outcome,
) -> Result<Next, Side>
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let limits = &ctx.listener.config.limits;
    let upgrade = wants_upgrade(head);
    let http10 = head.minor_version == 0;
    let client_close = http10 || wants_close(&head.fields);
    let conn_mode = if upgrade {
        BackendConnection::Upgrade
    } else if http10 {
        BackendConnection::Close
    } else {
        BackendConnection::KeepAlive
    };

    // Head plus whatever of the body is already here, for one write.
    let ExchangeBufs {
        bbuf,
        out,
        resp,
        backend_wait,
    } = bufs;
    out.clear();
    bbuf.consume(bbuf.len());
    let facts = ClientFacts {
        ip: ctx.peer.ip(),
        proto: "https",
    };
    write_request_head(head, &facts, ctx.listener.config.forwarded, conn_mode, out);
    let mut pending = Pending::new(framing);
    let inline = pending
        .take(cbuf.filled(), INLINE_BODY)
        .map_err(|e| client_error(ctx, &e))?;
    out.extend_from_slice(&cbuf.filled()[..inline]);
    cbuf.consume(inline);
    p.bytes_in += inline as u64;
    let whole_request_in_out = pending.is_done();

    let expects_continue = !whole_request_in_out
        && head
            .fields
            .first(FieldKind::Expect)
            .is_some_and(|v| v.eq_ignore_ascii_case(b"100-continue"));

    let mut backend = connect(ctx, backends).await?;
    p.backend = Some(backend.addr);
    if expects_continue {
        // The backend is reachable: let the client send its body.
        write_client(client, b"HTTP/1.1 100 Continue\r\n\r\n", ctx).await?;
    }

    let mut retried = false;
    let sent_at;
    loop {
        let sent = Instant::now();
        let wrote = within(
            limits.backend_response_timeout,
            backend.stream.write_all(out),
        )
        .await;
        let wrote_ok = matches!(wrote, Some(Ok(())));
        if wrote_ok && !pending.is_done() {
            let moved = pump(
                client,
                cbuf,
                &mut backend.stream,
                &mut pending,
                limits.idle_timeout,
                limits.backend_response_timeout,
            )
            .await;
            match moved {
                Ok(n) => p.bytes_in += n,
                Err(PumpError::Read(_)) => return Err(Side::Client),
                Err(PumpError::Framing(e)) => return Err(client_error(ctx, &e)),
                Err(PumpError::Write(e)) => {
                    tracing::warn!(backend = %backend.addr, "backend failed during request body: {e}");
                    return Err(Side::Backend(502));
                }
            }
        }
        let result = if wrote_ok {
            let deadline = tokio::time::Instant::from_std(sent) + limits.backend_response_timeout;
            let watchdog = Watchdog::set_in(backend_wait, deadline);
            read_response_head(
                &mut backend.stream,
                bbuf,
                resp,
                watchdog,
                ctx,
                expects_continue,
                client,
                p,
            )
            .await
        } else {
            Err(ResponseError::Closed { any_bytes: false })
        };
        match result {
            Ok(()) => {
                sent_at = sent;
                break;
            }
            // A pooled connection the backend had closed: the request never
            // reached it, so one fresh attempt is safe when the whole
            // request is still in hand.
            Err(ResponseError::Closed { any_bytes: false })
                if backend.reused && whole_request_in_out && !retried =>
            {
                retried = true;
                backend = fresh_connection(ctx, backends, backend.addr).await?;
                bbuf.consume(bbuf.len());
            }
            Err(e) => return Err(backend_failure(ctx, backend.addr, e)),
        }
    }
    let backend_took = sent_at.elapsed();
    p.backend_us = backend_took.as_micros() as u64;
    ctx.worker
        .metrics
        .backend_response(backends.name(), backend.addr, backend_took);

    if resp.status == 101 && upgrade {
        p.status = 101;
        return upgrade_tunnel(client, cbuf, backend.stream, bbuf, resp, ctx, p).await;
    }
    let is_connect = head.method() == "CONNECT";
    let resp: &ResponseHead = resp;
    let rframing = response_framing(head.is_head(), is_connect, resp)
        .map_err(|e| backend_failure(ctx, backend.addr, ResponseError::Invalid(e)))?;
    let shutting_down = *ctx.worker.shutdown.borrow();
    let close = client_close || rframing.is_until_close() || shutting_down || resp.status == 101;
    let backend_reusable = !rframing.is_until_close()
        && !wants_close(&resp.fields)
        && resp.minor_version >= 1
        && !http10
        && pending.is_done()
        && resp.status != 101;

    out.clear();
    write_response_head(resp, close, out);
    let mut rpending = Pending::new(rframing);
    let inline = rpending
        .take(bbuf.filled(), INLINE_BODY)
        .map_err(|e| backend_failure(ctx, backend.addr, ResponseError::Invalid(e)))?;
    out.extend_from_slice(&bbuf.filled()[..inline]);
    bbuf.consume(inline);
    // From here on the client has a status line: failures can only cut the
    // response short, not replace it.
    p.status = resp.status;
    write_client(client, out, ctx).await?;
    p.bytes_out += out.len() as u64;
    if !rpending.is_done() {
        let moved = pump(
            &mut backend.stream,
            bbuf,
            client,
            &mut rpending,
            limits.backend_response_timeout,
            limits.idle_timeout,
        )
        .await;
        match moved {
            Ok(n) => p.bytes_out += n,
            Err(PumpError::Write(_)) => return Err(Side::Client),
            Err(PumpError::Read(e)) => {
                // Headers are out; all we can do is cut the response short
                // so the client sees it incomplete.
                tracing::warn!(backend = %backend.addr, "backend failed during response body: {e}");
                return Err(Side::Client);
            }
            Err(PumpError::Framing(e)) => {
                tracing::warn!(backend = %backend.addr, "backend sent a bad response body: {e}");
                return Err(Side::Client);
            }
        }
        let _ = tokio::time::timeout(limits.idle_timeout, client.flush()).await;
    }
    // Stray bytes after the response mean the backend and tern disagree on
    // framing: never reuse such a connection.
    if backend_reusable && bbuf.is_empty() {
        backends.put(backend);
    }
    Ok(if close { Next::Close } else { Next::KeepAlive })
}

/// Relays a 101 response and then bytes both ways until one side closes.
async fn upgrade_tunnel<C>(
    client: &mut C,
    cbuf: &mut IoBuf,
    mut backend: TcpStream,
    bbuf: &mut IoBuf,
    resp: &ResponseHead,
    ctx: &ConnCtx<'_>,
    p: &mut Outcome,
) -> Result<Next, Side>
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let limits = &ctx.listener.config.limits;
    let mut out = Vec::with_capacity(512 + bbuf.len());
    write_response_head(resp, false, &mut out);
    out.extend_from_slice(bbuf.filled());
    bbuf.consume(bbuf.len());
    write_client(client, &out, ctx).await?;
    p.bytes_out += out.len() as u64;
    if !cbuf.is_empty() {
        let early = cbuf.filled().to_vec();
        cbuf.consume(early.len());
        if tokio::time::timeout(limits.idle_timeout, backend.write_all(&early))
            .await
            .is_err()
        {
            return Ok(Next::Close);
        }
        p.bytes_in += early.len() as u64;
    }
    let (up, down) = tunnel(client, &mut backend, limits.idle_timeout).await;
    p.bytes_in += up;
    p.bytes_out += down;
    Ok(Next::Close)
}

/// Reads until `bbuf` starts with a complete response head (interim or
/// final); returns its length. Shared by the HTTP/1.1 and HTTP/2 fronts.
pub(crate) async fn read_one_head(
    backend: &mut TcpStream,
    bbuf: &mut IoBuf,
    watchdog: &mut Watchdog,
) -> Result<usize, ResponseError> {
    bbuf.read_head_watched(backend, MAX_RESPONSE_HEAD, watchdog)
        .await
        .map_err(|e| match e {
            HeadWaitError::Invalid(e) => ResponseError::Invalid(e),
            HeadWaitError::TimedOut => ResponseError::Timeout,
            HeadWaitError::Closed { any_bytes } => ResponseError::Closed { any_bytes },
        })
}

/// Why no usable response head came from a backend.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResponseError {
    /// The backend closed (or reset) before a complete head.
    #[error("closed before a complete response head")]
    Closed { any_bytes: bool },
    /// No head within the response timeout.
    #[error("no response head within the backend response timeout")]
    Timeout,
    /// The head was malformed or too large.
    #[error("invalid response: {0}")]
    Invalid(HttpError),
}

/// Reads the final response head, relaying interim (1xx) responses to the
/// client. A backend's own `100 Continue` is dropped when tern already sent one.
#[allow(clippy::too_many_arguments)]
async fn read_response_head<C>(
    backend: &mut TcpStream,
    bbuf: &mut IoBuf,
    head: &mut ResponseHead,
    watchdog: &mut Watchdog,
    ctx: &ConnCtx<'_>,
    sent_continue: bool,
    client: &mut C,
    p: &mut Outcome,
) -> Result<(), ResponseError>
where
    C: AsyncWrite + Unpin,
{
    loop {
        let len = read_one_head(backend, bbuf, watchdog).await?;
        parse_response_into(&bbuf.filled()[..len], head).map_err(ResponseError::Invalid)?;
        if !head.is_interim() {
            bbuf.consume(len);
            return Ok(());
        }
        if !(head.status == 100 && sent_continue) {
            let mut out = Vec::with_capacity(len);
            write_response_head(head, false, &mut out);
            if write_client(client, &out, ctx).await.is_err() {
                return Err(ResponseError::Closed { any_bytes: true });
            }
            p.bytes_out += out.len() as u64;
        }
        bbuf.consume(len);
    }
}

async fn connect(ctx: &ConnCtx<'_>, backends: &Backends) -> Result<BackendConn, Side> {
    backends
        .get(ctx.listener.config.limits.backend_connect_timeout)
        .await
        .map_err(|e| connect_failure(ctx, e))
}

async fn fresh_connection(
    ctx: &ConnCtx<'_>,
    backends: &Backends,
    addr: std::net::SocketAddr,
) -> Result<BackendConn, Side> {
    backends
        .connect(addr, ctx.listener.config.limits.backend_connect_timeout)
        .await
        .map_err(|e| connect_failure(ctx, e))
}

fn connect_failure(ctx: &ConnCtx<'_>, e: ConnectError) -> Side {
    tracing::warn!(client = %ctx.peer, "backend unavailable: {e}");
    match e {
        ConnectError::Timeout(_) => Side::Backend(504),
        ConnectError::Io(..) => Side::Backend(502),
        ConnectError::AllDown(_) => Side::Backend(503),
    }
}

fn backend_failure(ctx: &ConnCtx<'_>, addr: std::net::SocketAddr, e: ResponseError) -> Side {
    tracing::warn!(client = %ctx.peer, backend = %addr, "backend failed: {e}");
    match e {
        ResponseError::Timeout => Side::Backend(504),
        _ => Side::Backend(502),
    }
}

fn client_error(ctx: &ConnCtx<'_>, e: &HttpError) -> Side {
    tracing::debug!(client = %ctx.peer, "bad request body: {e}");
    Side::BadRequest
}

/// The client did not take a write within the idle timeout, or its
/// connection failed.
pub(crate) struct ClientGone;

impl From<ClientGone> for Side {
    fn from(_: ClientGone) -> Side {
        Side::Client
    }
}

/// Answers a request tern could not forward with `status` (400, 501, 502,
/// 503 or 504) and a one-line body, closing; counts what was written.
pub(crate) async fn answer_error<C: AsyncWrite + Unpin>(
    client: &mut C,
    ctx: &ConnCtx<'_>,
    status: u16,
    o: &mut Outcome,
) {
    let reason = match status {
        400 => "Bad Request",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Bad Gateway",
    };
    o.status = status;
    let mut out = Vec::with_capacity(160);
    write_simple_response(
        status,
        reason,
        &format!("{}\n", reason.to_ascii_lowercase()),
        true,
        &mut out,
    );
    if write_client(client, &out, ctx).await.is_ok() {
        o.bytes_out += out.len() as u64;
    }
}

/// Writes and flushes `bytes` to the client within the idle timeout.
pub(crate) async fn write_client<C: AsyncWrite + Unpin>(
    client: &mut C,
    bytes: &[u8],
    ctx: &ConnCtx<'_>,
) -> Result<(), ClientGone> {
    let t = ctx.listener.config.limits.idle_timeout;
    match within(t, async {
        client.write_all(bytes).await?;
        client.flush().await
    })
    .await
    {
        Some(Ok(())) => Ok(()),
        _ => Err(ClientGone),
    }
}
