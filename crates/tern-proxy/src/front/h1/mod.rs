//! HTTP/1.1 over a terminated TLS connection: read a request head, check
//! it, forward it to a backend, relay the response, repeat.
//!
//! Requests on one connection are handled strictly in order, so pipelined
//! requests are answered in order: bytes of the next request simply wait in
//! the client buffer. Bodies stream through bounded buffers in both
//! directions; nothing buffers a whole body.

mod client;

use std::future::Future as _;
use std::time::{Duration, Instant};

use tern_http::head::{parse_request_into, parse_request_prefix, FieldKind, RequestHead};
use tern_http::rewrite::{wants_close, wants_upgrade, write_simple_response};
use tern_http::{framing, BodyFraming, HttpError};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::exchange::ConnCtx;
use crate::fault::{answer_text, Kind};
use crate::io::iobuf::{FoundHead, HeadScan, HeadWaitError, IoBuf};
use crate::message::{BodyLen, Request, RequestView};
use client::H1Client;
use tern_deadline::Watchdog;

/// Initial size of a connection's client read buffer.
const CLIENT_BUF_INITIAL: usize = 8 * 1024;

/// What to do with the client connection after an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Read the next request.
    KeepAlive,
    /// Close (after close_notify).
    Close,
}

/// What the HTTP/1.1 front end needs of a client stream beyond reads and
/// writes.
pub(crate) trait ClientStream {
    /// Sends the pending ACK now instead of after the delayed-ACK timer.
    fn quickack(&self);

    /// Waits until a read would find something (decrypted bytes already
    /// buffered, or bytes on the socket), without holding a read buffer.
    async fn readable(&mut self) -> std::io::Result<()>;

    /// Writes and flushes `bytes`, the last this connection will send: the
    /// end of the stream (TLS close_notify) leaves in the same write where
    /// the stream can hold both, saving a write and a packet per closed
    /// connection. The caller must shut the stream down right after: on
    /// Linux the tail is corked so that the shutdown's FIN rides on the
    /// same segment (the kernel sends it anyway after 200 ms).
    async fn write_last(&mut self, bytes: &[u8]) -> std::io::Result<()>;
}

impl ClientStream for crate::front::client_tls::ClientTls {
    fn quickack(&self) {
        // Best effort: on failure the client only waits for the timer.
        let _ = socket2::SockRef::from(self.get_ref().0).set_tcp_quickack(true);
    }

    // The client's own future, not an `async fn` around it: one future
    // fewer on each wait for a request (23 instructions a request,
    // callgrind).
    fn readable(&mut self) -> impl std::future::Future<Output = std::io::Result<()>> {
        crate::front::client_tls::ClientTls::readable(self)
    }

    async fn write_last(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write as _;
        #[cfg(target_os = "linux")]
        {
            // Best effort: without the cork the FIN is a segment of its own.
            let _ = socket2::SockRef::from(self.get_ref().0).set_tcp_cork(true);
        }
        let conn = self.get_mut().1;
        // Encrypts into rustls' send buffer without I/O; it takes less than
        // all of `bytes` only past its buffer limit.
        let taken = conn.writer().write(bytes)?;
        if taken == bytes.len() {
            // Idempotent: the shutdown that follows sends no second one.
            conn.send_close_notify();
        }
        self.write_all(&bytes[taken..]).await?;
        self.flush().await
    }
}

/// Serves requests on `client` until it closes, errs, idles out or tern
/// shuts down.
pub(crate) async fn serve<S>(client: &mut S, ctx: &ConnCtx<'_>)
where
    S: AsyncRead + AsyncWrite + Unpin + ClientStream,
{
    let limits = &ctx.listener.config.limits;
    // The buffer holds a whole head at most (plus what was pipelined behind
    // it); bodies pass through it in pieces.
    let mut buf = IoBuf::lazy(CLIENT_BUF_INITIAL, limits.max_head_bytes);
    // Resolves when tern begins to shut down. Made once per connection:
    // a fresh `changed()` per request would register a waiter each time.
    let mut shutdown_rx = ctx.worker.shutdown.clone();
    let shutdown = async move {
        let _ = shutdown_rx.wait_for(|s| *s).await;
    };
    tokio::pin!(shutdown);
    // Polled only when the worker's shutdown signal woke it, not each time
    // the connection waits for its next request (the watch's own poll was
    // ~200 instructions per request, callgrind).
    let shutdown_gate = super::gate::WakeGate::new();
    let mut first = true;
    let mut next_request_wait = None;
    let mut refusals = super::RateRefusals::default();
    let mut graced = false;
    loop {
        // A connection accepted just before the shutdown still gets its
        // first request answered (with `Connection: close`): its client
        // had no way to know. So does one whose last answer went out
        // without `Connection: close` just before the shutdown began: its
        // client may be sending the next request already, and gets
        // DRAIN_IDLE_GRACE (once) for it to arrive.
        if !first && *ctx.worker.shutdown.borrow() {
            if graced {
                break;
            }
            graced = true;
            if buf.is_empty() {
                buf.release();
                let next = async {
                    client.readable().await?;
                    buf.fill_from(client).await
                };
                match crate::cold::cold(tokio::time::timeout(DRAIN_IDLE_GRACE, next)).await {
                    Ok(Ok(n)) if n > 0 => {}
                    _ => break,
                }
            }
        }
        // Wait for the first byte of the next request: the idle timeout
        // (or, for the first request, the header timeout) applies, and a
        // shutdown closes an idle connection after DRAIN_IDLE_GRACE.
        if buf.is_empty() {
            let wait = if first {
                limits.header_timeout
            } else {
                limits.idle_timeout
            };
            let watchdog = Watchdog::set_in(&mut next_request_wait, tern_deadline::now() + wait);
            // An idle connection holds no read buffer: it takes one when
            // bytes arrive.
            buf.release();
            let next = async {
                client.readable().await?;
                buf.fill_from(client).await
            };
            tokio::pin!(next);
            let read = tokio::select! {
                // In this order: no random start per poll (tokio's
                // fairness, for branches that could starve each other).
                biased;
                r = watchdog.run_pinned(&mut next) => r,
                // A busy keepalive client may have its next request on the
                // way already; closing under it would fail that request.
                // It gets a moment to arrive, answered with `Connection:
                // close`; a truly idle client is closed after it.
                _ = std::future::poll_fn(|cx| shutdown_gate.poll(cx, |cx| shutdown.as_mut().poll(cx))),
                    if !first => {
                    crate::cold::cold(tokio::time::timeout(DRAIN_IDLE_GRACE, &mut next)).await.ok()
                }
            };
            match read {
                Some(Ok(n)) if n > 0 => {}
                None if first => {
                    // Not a byte of a request within header_timeout.
                    super::rejected(ctx, Kind::HeadTimeout);
                    break;
                }
                _ => break, // closed, error or idle
            }
        }
        first = false;
        // The turn's time: the bytes were there when it began.
        let started = tern_deadline::now().into_std();
        let mut head = take_head();
        let mut scan = HeadScan::default();
        let found = match head_at_hand(&buf, ctx, &mut head, &mut scan) {
            Some(found) => found,
            // A head split over reads: the wait is the rare path.
            None => {
                crate::cold::cold(read_head(client, &mut buf, ctx, started, &mut head, scan)).await
            }
        };
        let found = match found {
            Ok(found) => found,
            Err(HeadReadError::Closed) => break,
            Err(HeadReadError::TimedOut) => {
                super::rejected(ctx, Kind::HeadTimeout);
                break;
            }
            Err(HeadReadError::Invalid(e)) => {
                crate::cold::cold(reject(client, ctx, &e, buf.len() as u64, started)).await;
                break;
            }
        };
        let head_len = found.len;
        if !found.parsed {
            if let Err(e) = parse_request_into(&buf.filled()[..head_len], &mut head) {
                crate::cold::cold(reject(client, ctx, &e, head_len as u64, started)).await;
                break;
            }
        }
        let framing =
            match tern_http::check_host(&head).and_then(|()| framing::request_framing(&head)) {
                Ok(f) => f,
                Err(e) => {
                    crate::cold::cold(reject(client, ctx, &e, head_len as u64, started)).await;
                    break;
                }
            };
        buf.consume(head_len);
        if framing != tern_http::BodyFraming::Empty && buf.is_empty() {
            // A client that wrote its head and body in two writes (with
            // Nagle on) holds the body until this head is acknowledged;
            // Linux would delay that ACK up to 40 ms. Acknowledge now.
            client.quickack();
        }
        // Not boxed (unlike the front ends in front/mod.rs): measured,
        // boxing the exchange took 0.2 KiB off an idle connection and cost
        // 1,500 instructions per request (the allocation, and the copy of
        // the whole future into it).
        let next = exchange(
            client,
            &mut buf,
            ctx,
            &head,
            (framing, head_len as u64),
            started,
            &mut refusals,
        )
        .await;
        give_back_head(head);
        if next == Next::Close {
            break;
        }
    }
    // Tell the client we are done (close_notify); errors here change nothing.
    let _ = tokio::time::timeout(limits.idle_timeout, client.shutdown()).await;
}

/// The size of [`serve`]'s future for a TLS client (see
/// `front::task_sizes`).
pub(super) fn serve_size() -> usize {
    fn future_of<A, B, F: std::future::Future>(_: fn(A, B) -> F) -> usize {
        std::mem::size_of::<F>()
    }
    type Tls = crate::front::client_tls::ClientTls;
    future_of::<&'static mut Tls, &'static ConnCtx<'static>, _>(serve::<Tls>)
}

/// Parsed request heads kept per worker: a connection takes one for a
/// request and gives it back before it waits for the next, so an idle
/// connection holds none. Boxed: taking and giving back move a pointer,
/// not the head (a `memcpy` each way).
const SPARE_HEADS: usize = 256;

/// A head whose storage grew past this (a large request head) is freed
/// rather than kept, so the per-worker bound holds.
const HEAD_KEEP_LIMIT: usize = 8 * 1024;

thread_local! {
    // Boxed on purpose: a take or give-back moves the box, not the head.
    #[allow(clippy::vec_box)]
    static SPARE_HEAD: std::cell::RefCell<Vec<Box<RequestHead>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

fn take_head() -> Box<RequestHead> {
    SPARE_HEAD
        .with(|spare| spare.borrow_mut().pop())
        .unwrap_or_default()
}

fn give_back_head(head: Box<RequestHead>) {
    if head.fields.raw_capacity() > HEAD_KEEP_LIMIT {
        return;
    }
    SPARE_HEAD.with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < SPARE_HEADS {
            spare.push(head);
        }
    });
}

/// How long an idle keepalive connection may still send a request once
/// tern shuts down (or hands over to a new binary).
const DRAIN_IDLE_GRACE: Duration = Duration::from_millis(500);

enum HeadReadError {
    Closed,
    /// No whole head within `header_timeout` (slowloris).
    TimedOut,
    Invalid(HttpError),
}

/// The request head at the start of `buf` when the bytes in hold it whole
/// (or cannot start a valid one); `None` when more must come, `scan`
/// saying where the search stopped. A plain function, the fast path of
/// [`read_head`]: a keepalive request's head comes in the read that ended
/// the wait for it, and is found here without running a future (the
/// three nested `async fn`s of the wait were a call each, callgrind).
#[inline]
fn head_at_hand(
    buf: &IoBuf,
    ctx: &ConnCtx<'_>,
    head: &mut RequestHead,
    scan: &mut HeadScan,
) -> Option<Result<FoundHead, HeadReadError>> {
    let max = ctx.listener.config.limits.max_head_bytes;
    let mut parse = |b: &[u8]| parse_request_prefix(b, max, head);
    buf.head_at_hand(scan, max, &mut parse)
        .map(|found| found.map_err(head_read_error))
}

/// Reads until `buf` starts with a complete head (begun at `started`),
/// going on from where [`head_at_hand`] left `scan`; returns its length,
/// and whether `head` holds it parsed already.
async fn read_head<S>(
    client: &mut S,
    buf: &mut IoBuf,
    ctx: &ConnCtx<'_>,
    started: Instant,
    head: &mut RequestHead,
    scan: HeadScan,
) -> Result<FoundHead, HeadReadError>
where
    S: AsyncRead + Unpin,
{
    let limits = &ctx.listener.config.limits;
    let max = limits.max_head_bytes;
    let deadline = tokio::time::Instant::from_std(started) + limits.header_timeout;
    let parse = |b: &[u8]| parse_request_prefix(b, max, head);
    buf.read_head_from(client, max, deadline, scan, parse)
        .await
        .map_err(head_read_error)
}

fn head_read_error(e: HeadWaitError) -> HeadReadError {
    match e {
        HeadWaitError::Invalid(e) => HeadReadError::Invalid(e),
        // Closed mid-head, read error, or too slow (slowloris): there is
        // no one to answer, or no reason to wait.
        HeadWaitError::TimedOut => HeadReadError::TimedOut,
        HeadWaitError::Closed { .. } => HeadReadError::Closed,
    }
}

/// Answers a request tern refuses (400 or 431) and logs it.
async fn reject<S>(
    client: &mut S,
    ctx: &ConnCtx<'_>,
    e: &HttpError,
    bytes_in: u64,
    started: Instant,
) where
    S: AsyncWrite + Unpin + ClientStream,
{
    let status = e.status();
    let (reason, _) = answer_text(status);
    let mut out = Vec::with_capacity(256);
    write_simple_response(
        status,
        reason,
        &format!("{}: {e}\n", reason.to_ascii_lowercase()),
        true,
        &mut out,
    );
    // The connection closes after this answer.
    let _ = tokio::time::timeout(
        ctx.listener.config.limits.idle_timeout,
        client.write_last(&out),
    )
    .await;
    tracing::debug!(client = %ctx.peer, status, "refused request: {e}");
    let outcome = crate::exchange::Outcome {
        status,
        bytes_in,
        bytes_out: out.len() as u64,
        ..Default::default()
    };
    ctx.log_request("-", "-", &outcome, started);
}

/// Runs one exchange for `head` (`head_len` bytes, already consumed from
/// `buf`) and says whether the connection can carry another request.
async fn exchange<S>(
    client: &mut S,
    buf: &mut IoBuf,
    ctx: &ConnCtx<'_>,
    head: &RequestHead,
    (framing, head_len): (BodyFraming, u64),
    started: Instant,
    refusals: &mut super::RateRefusals,
) -> Next
where
    S: AsyncRead + AsyncWrite + Unpin + ClientStream,
{
    let http10 = head.minor_version == 0;
    let body = match framing {
        BodyFraming::Empty | BodyFraming::Length(0) => BodyLen::Empty,
        BodyFraming::Length(n) => BodyLen::Length(n),
        _ => BodyLen::Unknown,
    };
    let req = Request {
        method: head.method(),
        target: head.target(),
        authority: head.fields.first(FieldKind::Host),
        head: RequestView::H1(head),
        body,
        http10,
        upgrade: wants_upgrade(head),
        expects_continue: body != BodyLen::Empty
            && head
                .fields
                .first(FieldKind::Expect)
                .is_some_and(|v| v.eq_ignore_ascii_case(b"100-continue")),
        early: false,
        client_cert: ctx.client_cert.as_ref(),
        // TE is a hop-by-hop kind: a head without one (most) is answered
        // by its kinds, without a walk of its fields' names.
        trailers_ok: head.fields.has(FieldKind::HopByHop)
            && head.fields.has_token("te", "trailers"),
    };
    let close = http10 || wants_close(&head.fields);
    let mut front = H1Client::new(client, buf, ctx, framing, head_len, http10, close);
    front.trailers_ok = req.trailers_ok;
    front.closes_if_rate_refused = refusals.next_closes(ctx);
    let finished = crate::exchange::run(&mut front, &req, ctx, started).await;
    // A 429 leaves the connection open when the client did not ask to
    // close and no body is left unread (the answer says which): its next
    // request then costs no handshake, until it keeps sending.
    let refused = finished
        .error
        .is_some_and(|e| e.kind() == Kind::RateLimited);
    let closing = front.finish() || (finished.error.is_some() && !refused);
    // Counted even when the connection closes anyway: the client is shut
    // out once it has had `client_rate_close_after` refusals in a row.
    let kept_sending = refusals.kept_sending(finished.slow_down, ctx);
    if closing || kept_sending {
        Next::Close
    } else {
        Next::KeepAlive
    }
}
