//! The exchange core: one request/response exchange, whatever protocol the
//! client and the backend speak.
//!
//! ```text
//!   front end (HTTP/1.1, HTTP/2)          exchange core                 backend client
//!   parses the request into a       ──▶  route once; pick the   ──▶  upstream::h1 (pooled
//!   message::Request; implements          group's client; move        HTTP/1.1 connections)
//!   Front (body in, response out)         bodies both ways; retry     upstream::h2 (h2c/h2
//!                                         a stale pooled connection;  sessions)
//!                                         fault → status; log+metrics
//! ```
//!
//! Each rule lives here once: routing ([`ctx::ListenerCtx::route`]), the
//! one-write rule for a request head and the body at hand, the retry of a
//! request written whole into a pooled connection the backend had closed,
//! which failures are answered with which status ([`crate::fault`]), and
//! the access-log record and request metrics. Imports point one way: front
//! ends call this module, this module calls the backend clients, and
//! neither of those imports it back.

pub(crate) mod clients;
pub(crate) mod ctx;
mod policy;
mod to_h1;
mod to_h2;
mod tunnel;

use std::future::Future;
use std::time::Instant;

use h2::RecvStream;
use tern_http::rewrite::FieldEdits;
use tern_http::ResponseHead;
use tokio::io::{AsyncRead, AsyncWrite};

pub(crate) use ctx::{ConnCtx, ListenerCtx, Outcome, WorkerCtx};

use crate::fault::{ExchangeError, Kind, Side};
use crate::message::{
    grpc_status, BodyForm, Piece, Request, ResponseView, Step, Switched, Trailers,
};

/// A client's request body, as its front end delivers it, and what a
/// front end can tell the client before the response.
pub(crate) trait ClientBody {
    /// The next piece of the request body (payload: chunked coding
    /// removed). Without `wait`, only what has already arrived
    /// ([`Step::NotYet`] when nothing has). A piece stays valid until the
    /// next call.
    async fn step(&mut self, wait: bool) -> Result<Step<'_>, Kind>;

    /// Lets a client that waits for it send its body (`100 Continue`;
    /// nothing over HTTP/2).
    async fn send_continue(&mut self) -> Result<(), Kind>;

    /// Relays an interim (1xx) response head (HTTP/1.1 clients; HTTP/2
    /// clients do not get them).
    async fn interim(&mut self, head: &ResponseHead) -> Result<(), Kind>;
}

/// The client side of one exchange, implemented by each front end.
pub(crate) trait Front {
    /// The request body.
    type Body: ClientBody;
    /// Resolves when the client cancels the request (an HTTP/2 stream
    /// reset); never over HTTP/1.1.
    type ResetWatch<'a>: Future<Output = ()>
    where
        Self: 'a;

    /// False when [`Front::ResetWatch`] never resolves (HTTP/1.1: a
    /// client cancels by closing, which the next read or write finds): the
    /// exchange then waits for the backend alone, without racing the
    /// watch (a `select!` moves the whole request future into its own
    /// state, a copy of a few hundred bytes, and adds a poll layer, on
    /// every request).
    const CLIENT_CANCELS: bool = true;

    /// The request body, and a watch on the client cancelling, usable at
    /// the same time (until the response starts).
    fn split(&mut self) -> (&mut Self::Body, Self::ResetWatch<'_>);

    /// An HTTP/2 client's request body as its stream, for an HTTP/2
    /// backend to take whole: full duplex, DATA moved without a copy.
    fn take_h2_body(&mut self) -> Option<RecvStream> {
        None
    }

    /// Starts the response with `view`'s head; `close` when the client
    /// connection cannot carry another request after it (the backend cut
    /// it, or the request body was not read to its end). The head waits
    /// for the first body piece so both leave in one write. Returns the
    /// form body pieces must come in.
    fn start_response(&mut self, view: ResponseView<'_>, close: bool) -> Result<BodyForm, Kind>;

    /// Sends a piece of the response body (`last` ends it); the first
    /// carries the head with it.
    async fn send_body(&mut self, piece: Piece<'_>, last: bool) -> Result<(), Kind>;

    /// Ends the response body with trailer fields (cleaned already). A
    /// client leg that cannot carry them (an HTTP/1.1 client that did not
    /// send `TE: trailers`, or a body not chunk-encoded) gets the body's
    /// end without them.
    async fn send_trailers(&mut self, trailers: Trailers) -> Result<(), Kind>;

    /// Sends the head now: no body is at hand yet.
    async fn flush(&mut self) -> Result<(), Kind>;

    /// The request is refused (429 follows) for the rate of the
    /// connection's own address: a front end whose connection closes
    /// after this refusal (`client_rate_close_after`) says so in the
    /// answer (HTTP/1.1: `Connection: close`). HTTP/2 and HTTP/3 say it
    /// with GOAWAY after the answer.
    fn refused_for_rate(&mut self) {}

    /// Answers with a status of tern's (nothing was sent yet), with the
    /// fields `edits` add (the response rules, Retry-After).
    async fn answer(&mut self, status: u16, edits: &FieldEdits<'_>);

    /// Answers a gRPC call tern could not complete the way gRPC clients
    /// understand: a trailers-only response (HTTP 200, `grpc-status`,
    /// `grpc-message`, and the fields `edits` add). Only HTTP/2 and HTTP/3
    /// carry gRPC; an HTTP/1.1 client gets [`Front::answer`]'s `fallback`
    /// status.
    async fn answer_grpc(
        &mut self,
        _code: u16,
        _message: &str,
        fallback: u16,
        edits: &FieldEdits<'_>,
    ) {
        self.answer(fallback, edits).await
    }

    /// Marks a response whose backend failed mid-body as incomplete (an
    /// HTTP/2 stream reset; over HTTP/1.1, the close that follows does).
    fn abort(&mut self);

    /// Tells the client its WebSocket is open (`101 Switching Protocols`
    /// to an HTTP/1.1 client, `200` to an extended CONNECT), with the
    /// response rules applied, then relays bytes both ways between the
    /// client and `backend` (a backend socket after its 101, or an HTTP/2
    /// backend's extended CONNECT stream) until both end or nothing moves
    /// for `idle_timeout`. `early`: bytes the backend sent after its head.
    async fn upgrade<B>(
        &mut self,
        switched: Switched<'_>,
        backend: &mut B,
        early: &[u8],
    ) -> Result<(), Kind>
    where
        B: AsyncRead + AsyncWrite + Unpin;

    /// The status sent to the client so far (0: none).
    fn status(&self) -> u16;

    /// Bytes read from and written to the client for this request.
    fn bytes(&self) -> (u64, u64);
}

/// How an exchange ended, for the front end's next move.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Finished {
    /// Why it failed, if it did.
    pub error: Option<ExchangeError>,
    /// Refused for the rate of the connection's own address: the
    /// Retry-After it was given, in seconds (for
    /// `client_rate_close_after`).
    pub slow_down: Option<u32>,
}

/// Runs one exchange for `req` (begun at `started`): routes it, forwards it
/// with the chosen group's backend client, answers a failure with its
/// status when the client has had none, and logs and counts it.
pub(crate) async fn run<F: Front>(
    front: &mut F,
    req: &Request<'_>,
    ctx: &ConnCtx<'_>,
    started: Instant,
) -> Finished {
    let mut o = Outcome {
        early: req.early,
        ..Outcome::default()
    };
    if ctx
        .listener
        .misdirected(ctx.tls.sni.as_deref(), req.authority)
    {
        crate::cold::cold(front.answer(421, &FieldEdits::NONE)).await;
        o.status = front.status();
        ctx.log_request(req.method, req.target, &o, started);
        return Finished {
            error: None,
            slow_down: None,
        };
    }
    let (backends, route) = ctx.listener.route_of(ctx.tls.sni.as_deref(), req.authority);
    let mut edits = policy::edits(req, ctx);
    o.request_id = edits.id.take();
    let mut slow_down = None;
    // Made once the request is admitted: a refused request deposits
    // nothing in the group's retry budget (a flood of 429s would buy
    // retries) and costs no affinity hashing.
    let mut tries = crate::upstream::Tries::default();
    let admitted = policy::admit(req, ctx, route, started);
    if admitted.is_ok() {
        tries = backends.tries(Some(req), ctx.peer.ip());
    }
    let result = match admitted {
        Err(refusal) => {
            slow_down = refused(front, req, &mut edits, &refusal);
            Err(refusal.kind)
        }
        // tern is a reverse proxy: a CONNECT names a destination the
        // client chose, not one of its backends (docs/http2.md, "Plain
        // CONNECT: not relayed, by decision"). Only the extended CONNECT
        // of a WebSocket names a path.
        Ok(()) if req.is_connect() && !req.is_websocket() => Err(Kind::NotImplemented),
        Ok(()) if backends.protocol().is_http2() => {
            // Boxed so the HTTP/2 client's state does not enlarge every
            // HTTP/1.1 exchange's future.
            Box::pin(to_h2::exchange(
                front, req, ctx, backends, &mut tries, &edits, &mut o,
            ))
            .await
        }
        Ok(()) => to_h1::exchange(front, req, ctx, (backends, &mut tries), &edits, &mut o).await,
    };
    if tries.any() {
        count_retries(ctx, backends, &tries, &mut o);
    }
    let error = result.err().map(ExchangeError::new);
    if let Some(e) = error {
        crate::cold::cold(answer_failure(
            front,
            req,
            ctx,
            backends,
            e,
            &edits.response,
            &mut o,
        ))
        .await;
    }
    if req.is_grpc()
        && o.grpc_status.is_none()
        && error.is_some_and(|e| e.kind() == Kind::ClientGone)
    {
        // The client cancelled the call (gRPC's CANCELLED), as gRPC
        // servers log it.
        o.grpc_status = Some(1);
    }
    o.error = error;
    o.status = front.status();
    let (bytes_in, bytes_out) = front.bytes();
    o.bytes_in += bytes_in;
    o.bytes_out += bytes_out;
    ctx.log_request(req.method, req.target, &o, started);
    policy::give_back(edits, ctx);
    Finished { error, slow_down }
}

/// A refused request: the Retry-After (and gRPC pushback) fields its
/// answer carries; the refusal's Retry-After when it was for the rate of
/// the connection's own address. Out of line: a rare path.
#[cold]
#[inline(never)]
fn refused<F: Front>(
    front: &mut F,
    req: &Request<'_>,
    edits: &mut policy::Edits<'_>,
    refusal: &policy::Refusal,
) -> Option<u32> {
    let after = refusal.retry_after?;
    edits.response.add.push(policy::retry_after(after));
    if req.is_grpc() {
        edits.response.add.push(policy::grpc_pushback(after));
    }
    if refusal.by_address {
        front.refused_for_rate();
    }
    refusal.by_address.then_some(after)
}

/// Counts and logs an exchange's retries. Out of line: a rare path.
#[cold]
#[inline(never)]
fn count_retries(
    ctx: &ConnCtx<'_>,
    backends: &crate::upstream::Backends,
    tries: &crate::upstream::Tries,
    o: &mut Outcome,
) {
    ctx.worker.metrics.retries(
        backends.name(),
        u64::from(tries.connect_retries),
        u64::from(tries.status_retry.is_some()),
        tries.denied,
    );
    o.retry = tries.log_value();
}

/// Logs a failed exchange and answers it with its status when the client
/// has had none (a gRPC call the gRPC way), or marks the response
/// incomplete when its head is out. Awaited through [`crate::cold::cold`].
async fn answer_failure<F: Front>(
    front: &mut F,
    req: &Request<'_>,
    ctx: &ConnCtx<'_>,
    backends: &crate::upstream::Backends,
    e: ExchangeError,
    edits: &FieldEdits<'_>,
    o: &mut Outcome,
) {
    match e.side() {
        Side::Client => tracing::debug!(client = %ctx.peer, error = %e, "request failed"),
        _ => tracing::warn!(client = %ctx.peer, backend = ?o.backend,
            upstream = %backends.name(), error = %e, "request failed"),
    }
    match (front.status(), e.kind().status()) {
        (0, Some(status)) if req.is_grpc() => {
            let code = grpc_code_for(status);
            o.grpc_status = Some(code);
            let message = crate::fault::answer_text(status).1.trim_end();
            front.answer_grpc(code, message, status, edits).await
        }
        (0, Some(status)) => front.answer(status, edits).await,
        (0, None) => {}
        // The status line is out: all that is left is to mark the
        // response incomplete.
        (_, _) => front.abort(),
    }
}

/// Records that the backend at `addr` answered the request head after
/// `took` (access log and the per-server latency histogram), whichever
/// backend protocol it speaks.
fn backend_answered(
    ctx: &ConnCtx<'_>,
    backends: &crate::upstream::Backends,
    o: &mut Outcome,
    addr: crate::config::BackendAddr,
    took: std::time::Duration,
) {
    o.backend_us = took.as_micros() as u64;
    ctx.worker
        .metrics
        .backend_response(backends.name(), addr, took);
}

/// `base` with a `Set-Cookie: cookie` field added (a sticky group's
/// cookie, on the first response from its server).
fn with_set_cookie<'e>(base: &FieldEdits<'e>, cookie: String) -> FieldEdits<'e> {
    let mut edits = base.clone();
    edits.add.push((
        "set-cookie",
        tern_http::rewrite::FieldValue::Made(bytes::Bytes::from(cookie.into_bytes())),
    ));
    edits
}

/// The gRPC status code for a call tern answers with HTTP `status` itself
/// (gRPC's "HTTP to gRPC status code mapping"): a backend that could not
/// be reached or answered too late is UNAVAILABLE (14), which a gRPC
/// client may retry. tern's 429 is its own rate limit, a per-client
/// quota: RESOURCE_EXHAUSTED (8), as gRPC servers report one (the HTTP
/// mapping's UNAVAILABLE is for proxies that do not speak gRPC), with
/// `grpc-retry-pushback-ms` saying when to retry.
fn grpc_code_for(status: u16) -> u16 {
    match status {
        400 => 13,
        401 => 16,
        403 => 7,
        404 | 501 => 12,
        429 => 8,
        502..=504 => 14,
        _ => 2,
    }
}

/// Records the gRPC status a response's head carries (a trailers-only
/// response).
fn note_grpc_head(o: &mut Outcome, view: &ResponseView<'_>) {
    if let crate::message::ResponseHeadView::H2(parts) = view.head {
        if let Some(code) = grpc_status(&parts.headers) {
            o.grpc_status = Some(code);
        }
    }
}

/// Moves a response body from a backend client to the front end: the
/// pieces at hand leave with the head, then each piece as it comes, and
/// the trailers that end it (their `grpc-status` noted in `o`).
async fn relay_body<F, B>(
    front: &mut F,
    mut next: B,
    wait: std::time::Duration,
    o: &mut Outcome,
) -> Result<(), Kind>
where
    F: Front,
    B: BodySteps,
{
    let mut t = None;
    loop {
        match next.step(t).await? {
            Step::Trailers(trailers) => {
                if let Some(code) = grpc_status(&trailers) {
                    o.grpc_status = Some(code);
                }
                return front.send_trailers(trailers).await;
            }
            Step::Data(piece, last) => {
                front.send_body(piece, last).await?;
                if last {
                    return Ok(());
                }
                t = Some(wait);
            }
            Step::NotYet => {
                front.flush().await?;
                t = Some(wait);
            }
            Step::End => return front.send_body(Piece::Slice(&[]), true).await,
        }
    }
}

/// A backend client's response body, step by step.
trait BodySteps {
    /// The next step: what is at hand (`None`), or what comes within `t`.
    async fn step(&mut self, t: Option<std::time::Duration>) -> Result<Step<'_>, Kind>;
}

/// Takes what of a request body is at hand without waiting, up to about
/// `limit` bytes, into `pieces` (sent with the backend request's head, in
/// the same write); says whether the body has ended, and the trailers
/// that ended it.
pub(super) async fn body_at_hand<B: ClientBody>(
    body: &mut B,
    limit: usize,
    pieces: &mut impl Extend<bytes::Bytes>,
) -> Result<(bool, Option<Trailers>), Kind> {
    let mut size = 0;
    while size < limit {
        match body.step(false).await? {
            Step::Data(piece, last) => {
                size += piece.len();
                pieces.extend([piece.into_bytes()]);
                if last {
                    return Ok((true, None));
                }
            }
            Step::End => return Ok((true, None)),
            Step::Trailers(t) => return Ok((true, Some(t))),
            Step::NotYet => break,
        }
    }
    Ok((false, None))
}
