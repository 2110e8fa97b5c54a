//! The HTTP/1.1 backend client: one request on a pooled connection, in
//! steps the exchange core drives (head, body pieces, response head,
//! response body pieces, reuse).
//!
//! Latency rule: the request head and the body already at hand go to the
//! backend in one write ([`INLINE_BODY`]); a message split over two writes
//! can stall on Nagle + delayed ACK.

use std::cell::RefCell;
use std::task::{ready, Poll};
use std::thread::LocalKey;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tern_http::forwarding::ForwardedFields;
use tern_http::head::{parse_response_into, parse_response_prefix, ResponseHead};
use tern_http::rewrite::{
    wants_close, write_request_head, write_request_head_from_h2, BackendConnection, ClientFacts,
    FieldEdits, H1BodyFraming,
};
use tern_http::BodyFraming;
use tokio::io::AsyncReadExt;

use super::BackendStream;
use crate::fault::Kind;
use crate::io::body::{encode_chunk, Pending, Taken, LAST_CHUNK};
use crate::io::iobuf::{HeadScan, HeadWaitError, IoBuf};
use crate::io::write::WriteWithin;
use crate::message::{clean_trailer_section, BodyLen, Piece, Request, RequestView, Step, Trailers};
use tern_deadline::Watchdog;

/// Body bytes sent in the same write as a head (request or response).
/// Larger bodies follow in further writes.
pub(crate) const INLINE_BODY: usize = 16 * 1024;

/// Largest response head accepted from a backend.
pub(crate) const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// What one HTTP/1.1 exchange holds from its start to its end: the
/// outgoing head (with inline body), kept for a retry, and the timer
/// bounding the wait for the response head. The response side is an
/// [`H1Response`], taken when the response comes.
///
/// Exchanges are short and many, and an idle client connection should hold
/// no buffers: each worker keeps spare sets, taken for one exchange and
/// given back after it. A set is boxed, so taking and giving it back moves
/// a pointer rather than the set.
pub(crate) struct H1Scratch {
    /// Request head plus inline body, for the one-write rule.
    pub out: Vec<u8>,
    /// Bounds the waits for response heads.
    pub wait: Option<Watchdog>,
}

/// The response side of an exchange: the backend's bytes, its parsed
/// response head, decoded chunked payload.
///
/// Taken from the worker's spares by the read that finds the response's
/// first bytes, not when the exchange starts. With hundreds of exchanges
/// waiting on their backends (HTTP/2 clients multiplexing), a set held
/// across the wait was last touched hundreds of exchanges earlier, and
/// every line of it the response touched (the buffer's bounds, the head's
/// status line and fields, the last head kept for comparison) missed the
/// caches: about 0.8 µs a request in perf's samples (BENCHMARKS.md, "the
/// response side taken when the response comes"). Taken at the response,
/// the set is the one the exchange before it gave back, still in the
/// caches, and the last head it kept is most often this backend's.
pub(crate) struct H1Response {
    /// Backend read buffer.
    pub bbuf: IoBuf,
    /// The backend's response head, refilled per response.
    pub head: ResponseHead,
    /// Decoded chunked payload (only when a front end wants payload).
    pub payload: Vec<u8>,
}

/// Spare scratch sets kept per worker (each a 1 KiB buffer for the
/// request head and a timer). As many as tern-blocks keeps stream futures
/// (the streams of 50 connections of 10 each, h2load -c50 -m10): with 256,
/// half the exchanges of that load made a set (then with its response
/// side: a zeroed 4 KiB read buffer, and a timer) and freed one, +5,000
/// instructions a request against 100 in flight (callgrind).
const SPARE_SCRATCH: usize = 512;

/// Spare response sets kept per worker (each about 5 KiB: at most 640 KiB).
/// Only exchanges reading or relaying a response hold one, far fewer than
/// those in flight; the margin covers a burst of large responses ending
/// together.
const SPARE_RESPONSE: usize = 128;

/// A scratch or response set that grew past this (a large response head)
/// is freed rather than kept, so the per-worker bound holds.
const SCRATCH_KEEP_LIMIT: usize = 16 * 1024;

thread_local! {
    // Boxed on purpose: a take or give-back moves the box, not the set.
    #[allow(clippy::vec_box)]
    static SPARE: RefCell<Vec<Box<H1Scratch>>> = const { RefCell::new(Vec::new()) };
    #[allow(clippy::vec_box)]
    static SPARE_RESP: RefCell<Vec<Box<H1Response>>> = const { RefCell::new(Vec::new()) };
}

/// Keeps `set` in the worker's `spare` list unless the list holds `max`.
/// Inlined (forced) into the give-backs, as their callers inline them.
#[inline(always)]
fn keep_spare<T>(spare: &'static LocalKey<RefCell<Vec<Box<T>>>>, set: Box<T>, max: usize) {
    spare.with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < max {
            spare.push(set);
        }
    });
}

impl H1Scratch {
    /// A spare set, or a new one. Inlined into its one caller (forced:
    /// `#[inline]` left the call, 21 instructions a request, callgrind).
    #[inline(always)]
    pub(crate) fn take() -> Box<H1Scratch> {
        SPARE
            .with(|spare| spare.borrow_mut().pop())
            .unwrap_or_else(|| {
                Box::new(H1Scratch {
                    out: Vec::with_capacity(1024),
                    wait: None,
                })
            })
    }

    /// Keeps the set for the next exchange, unless it grew too large.
    /// Inlined into its one caller, as [`H1Scratch::take`].
    #[inline(always)]
    pub(crate) fn give_back(mut self: Box<Self>) {
        if self.out.capacity() > SCRATCH_KEEP_LIMIT {
            return;
        }
        self.out.clear();
        keep_spare(&SPARE, self, SPARE_SCRATCH);
    }
}

impl H1Response {
    /// The spare set given back last (still in the caches), or a new one.
    #[inline(always)]
    fn take() -> Box<H1Response> {
        SPARE_RESP
            .with(|spare| spare.borrow_mut().pop())
            .unwrap_or_else(|| {
                Box::new(H1Response {
                    // Small at first: most responses are small, and the buffer
                    // grows (to its bound) for large ones.
                    bbuf: IoBuf::new(4 * 1024, MAX_RESPONSE_HEAD),
                    head: ResponseHead::default(),
                    payload: Vec::new(),
                })
            })
    }

    /// Keeps the set for the next response, unless it grew too large.
    #[inline(always)]
    pub(crate) fn give_back(mut self: Box<Self>) {
        if self.bbuf.capacity() > SCRATCH_KEEP_LIMIT
            || self.payload.capacity() > SCRATCH_KEEP_LIMIT
            || self.head.fields.raw_capacity() > SCRATCH_KEEP_LIMIT
        {
            return;
        }
        self.bbuf.clear();
        keep_spare(&SPARE_RESP, self, SPARE_RESPONSE);
    }
}

/// Writes the backend request head for `req` into `out` (cleared first):
/// hop-by-hop and client-sent forwarding fields dropped, tern's own added.
/// `whole_body` is the length of an HTTP/2 or HTTP/3 body of undeclared
/// length that has already ended: it goes with a Content-Length instead
/// of chunked coding. Returns true when body pieces must be chunk-encoded.
pub(crate) fn write_head(
    req: &Request<'_>,
    whole_body: Option<u64>,
    facts: &ClientFacts<'_>,
    forwarded: ForwardedFields,
    edits: &FieldEdits<'_>,
    out: &mut Vec<u8>,
) -> bool {
    out.clear();
    match req.head {
        RequestView::H1(head) => {
            let mode = if req.upgrade {
                BackendConnection::Upgrade
            } else if req.http10 {
                BackendConnection::Close
            } else {
                BackendConnection::KeepAlive
            };
            write_request_head(head, facts, forwarded, mode, edits, out);
        }
        RequestView::H2(parts) => {
            let framing = match req.body {
                BodyLen::Empty => H1BodyFraming::Empty,
                BodyLen::Length(n) => H1BodyFraming::Length(n),
                BodyLen::Unknown => {
                    whole_body.map_or(H1BodyFraming::Chunked, H1BodyFraming::Length)
                }
            };
            let method = if req.is_websocket_connect() {
                "GET"
            } else {
                req.method
            };
            write_request_head_from_h2(
                method,
                req.target,
                req.authority,
                parts
                    .headers
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_bytes())),
                framing,
                facts,
                forwarded,
                edits,
                out,
            );
        }
    }
    if req.is_websocket_connect() {
        // RFC 8441 section 5: the HTTP/1.1 handshake an extended CONNECT
        // stands for (the client's sec-websocket-version, -protocol and
        // -extensions went with its other fields).
        out.truncate(out.len() - 2);
        out.extend_from_slice(b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ");
        out.extend_from_slice(websocket_key().as_bytes());
        out.extend_from_slice(b"\r\n\r\n");
    }
    if req.trailers_ok {
        // The client takes trailers: so may the backend's response carry
        // them (RFC 9110 section 10.1.4: TE is named in Connection).
        out.truncate(out.len() - 2);
        out.extend_from_slice(b"TE: trailers\r\nConnection: te\r\n\r\n");
    }
    req.body == BodyLen::Unknown && whole_body.is_none()
}

/// A fresh `Sec-WebSocket-Key` (RFC 6455 section 4.1: 16 random bytes,
/// base64).
fn websocket_key() -> String {
    use base64::Engine as _;
    let mut nonce = [0u8; 16];
    let random = rustls::crypto::aws_lc_rs::default_provider().secure_random;
    if random.fill(&mut nonce).is_err() {
        // Never seen; the key only proves the backend speaks WebSocket, so
        // a clock-derived nonce still serves.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        nonce = t.to_le_bytes();
    }
    base64::engine::general_purpose::STANDARD.encode(nonce)
}

/// Appends the end of a chunked request body with `trailers` as its
/// trailer section; a body of declared length has ended already and
/// cannot carry them (they stop here).
pub(crate) fn push_trailers(out: &mut Vec<u8>, trailers: &Trailers, chunked: bool) {
    if chunked {
        tern_http::trailers::write_last_chunk(
            trailers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())),
            out,
        );
    }
}

/// Appends a request body piece to `out`, chunk-encoded when `chunked`;
/// with `last`, the body's end too.
pub(crate) fn push_body(out: &mut Vec<u8>, data: &[u8], chunked: bool, last: bool) {
    if chunked {
        encode_chunk(out, data);
        if last {
            out.extend_from_slice(LAST_CHUNK);
        }
    } else {
        out.extend_from_slice(data);
    }
}

/// Writes `bytes` to the backend within `t`. A hand-written future
/// ([`WriteWithin`]), not an `async fn` around `within` and tokio's
/// `write_all`: three polls, a call each, once per request.
pub(crate) fn write<'a>(
    conn: &'a mut BackendStream,
    bytes: &'a [u8],
    t: Duration,
) -> WriteWithin<'a, BackendStream, Kind> {
    WriteWithin::new(conn, bytes, false, t, Kind::Upload)
}

/// Why no response head came.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeadError {
    /// What went wrong.
    pub kind: Kind,
    /// The backend closed before sending a byte: a request written whole
    /// into a pooled connection never reached it, and may be sent again.
    pub untouched: bool,
}

/// Reads the next response head (interim or final) into a response side's
/// `head`, consuming it from its `bbuf`, bounded by `deadline`; `resp` is
/// the side an interim head was read into (its `bbuf` may hold more).
///
/// A hand-written future ([`ReadHead`]: [`IoBuf::poll_head`] and the
/// watchdog's own poll), not an `async fn`: every keepalive request polls
/// this wait twice (the response is not there yet when the request has
/// just gone out), and as `async fn`s and tokio's read future it was six
/// nested polls, a call each, every time (callgrind, BENCHMARKS.md "the
/// hot futures written by hand").
pub(crate) fn read_head<'a>(
    conn: &'a mut BackendStream,
    wait: &'a mut Option<Watchdog>,
    resp: Option<Box<H1Response>>,
    deadline: tokio::time::Instant,
) -> ReadHead<'a> {
    ReadHead {
        conn,
        resp,
        watchdog: Watchdog::set_in(wait, deadline),
        scan: HeadScan::default(),
    }
}

/// The future of [`read_head`]: the response side it read the head into.
pub(crate) struct ReadHead<'a> {
    conn: &'a mut BackendStream,
    /// The response side: given (bytes after an interim head) or taken
    /// by the read that finds bytes, given back while none came.
    resp: Option<Box<H1Response>>,
    watchdog: &'a mut Watchdog,
    scan: HeadScan,
}

impl std::future::Future for ReadHead<'_> {
    type Output = Result<Box<H1Response>, HeadError>;

    // Forced: a plain `#[inline]` left it a call (callgrind), and its
    // callers are `async fn` polls, which nothing inlines anyway.
    #[inline(always)]
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let ReadHead {
            conn,
            resp,
            watchdog,
            scan,
        } = self.get_mut();
        let fail = |kind| HeadError {
            kind,
            untouched: false,
        };
        let mut set = resp.take().unwrap_or_else(H1Response::take);
        let H1Response { bbuf, head, .. } = &mut *set;
        let mut parse = |b: &[u8]| parse_response_prefix(b, MAX_RESPONSE_HEAD, head);
        // The read first, then the deadline, as `Watchdog::run`.
        let found = match bbuf.poll_head(cx, *conn, MAX_RESPONSE_HEAD, scan, &mut parse) {
            Poll::Ready(found) => found,
            Poll::Pending => {
                // Nothing came: the set goes back for whichever response
                // comes first (see `H1Response`); part of a head stays.
                if bbuf.is_empty() {
                    set.give_back();
                } else {
                    *resp = Some(set);
                }
                ready!(watchdog.poll_expired(cx));
                return Poll::Ready(Err(fail(Kind::Timeout)));
            }
        };
        let found = found.map_err(|e| match e {
            HeadWaitError::Invalid(_) => fail(Kind::Invalid),
            HeadWaitError::TimedOut => fail(Kind::Timeout),
            HeadWaitError::Closed { any_bytes } => HeadError {
                kind: Kind::Closed,
                untouched: !any_bytes,
            },
        })?;
        if !found.parsed {
            parse_response_into(&set.bbuf.filled()[..found.len], &mut set.head)
                .map_err(|_| fail(Kind::Invalid))?;
        }
        set.bbuf.consume(found.len);
        Poll::Ready(Ok(set))
    }
}

/// Whether a backend connection may go back to the pool after a response
/// with `head` and `framing` was relayed (the caller also checks that no
/// stray bytes followed it): the body was delimited (not by the close),
/// neither side asked to close, and it is not an upgraded connection.
pub(crate) fn reusable(head: &ResponseHead, framing: BodyFraming, client_http10: bool) -> bool {
    !framing.is_until_close()
        && !wants_close(&head.fields)
        && head.minor_version >= 1
        && !client_http10
        && head.status != 101
}

/// Acknowledge at once what the backend sent while a response has read
/// less than this: past it, a bulk transfer gets its ACKs anyway.
const QUICKACK_BELOW: u64 = 64 * 1024;

/// Once a body outgrows its first read, the backend is read in pieces of
/// up to this much: each piece goes to the client as one write (a few TLS
/// records or HTTP/2 DATA frames). At the buffer's first 4 KiB a 1 MiB
/// response cost 256 reads, 256 client writes and as many wake-ups of the
/// client, each a trip through the loopback stack.
const BODY_READ: usize = 64 * 1024;

/// A body up to this size that arrives after its head, in a later write, is
/// counted as a split response: writing it with the head would cost the
/// backend nothing.
const SPLIT_BODY_MAX: u64 = 16 * 1024;

/// Tells the kernel to acknowledge what arrived on `conn` now rather than
/// after the delayed-ACK timer. A backend that wrote a response head and
/// then its body, with Nagle on (Python's http.server, many frameworks),
/// holds the body until the head is acknowledged, and Linux delays that
/// ACK up to 40 ms on a request/response connection.
pub(crate) fn quickack(conn: &BackendStream) {
    conn.quickack();
}

/// A response body being read from the backend.
#[derive(Debug)]
pub(crate) struct ResponseBody {
    pending: Pending,
    /// Wire bytes of the piece handed out last, consumed at the next step.
    handed: usize,
    /// Payload pieces (chunked coding removed) rather than wire bytes.
    decode: bool,
    /// Body bytes read so far.
    read: u64,
    /// A small body came in a later write than its head.
    split: bool,
    /// Trailers that ended a decoded chunked body, for the step after its
    /// last piece.
    trailers: Option<Trailers>,
}

impl ResponseBody {
    /// A body framed by `framing`, delivered as payload when `decode`.
    pub(crate) fn new(framing: BodyFraming, decode: bool) -> Self {
        ResponseBody {
            pending: Pending::new(framing),
            handed: 0,
            decode,
            read: 0,
            split: false,
            trailers: None,
        }
    }

    /// True when a small body (Content-Length up to 16 KiB) did not come
    /// with its head: the backend wrote them apart.
    pub(crate) fn was_split(&self) -> bool {
        self.split
    }

    /// Consumes the piece handed out last (call once the body is done).
    pub(crate) fn settle(&mut self, s: &mut H1Response) {
        s.bbuf.consume(std::mem::take(&mut self.handed));
    }

    /// With payload pieces (HTTP/2 and HTTP/3 clients, whose senders keep
    /// each piece as `Bytes` until the client has it) and a body that
    /// needs no decoding, how much the next read may take: such a piece is
    /// read into memory of its own and handed on without a copy.
    fn owned_read_limit(&self) -> Option<usize> {
        if !self.decode {
            return None;
        }
        match self.pending {
            Pending::Length(rest) => Some(rest.min(BODY_READ as u64) as usize),
            Pending::UntilClose => Some(BODY_READ),
            Pending::Done | Pending::Chunked(_) => None,
        }
    }

    /// Reads the next piece (at most `limit` bytes, never past the body)
    /// into a buffer of its own.
    async fn read_owned(
        &mut self,
        conn: &mut BackendStream,
        limit: usize,
        t: Duration,
    ) -> Result<Step<'static>, Kind> {
        let mut piece = BytesMut::with_capacity(limit);
        let mut body_only = (&mut *conn).take(limit as u64);
        let read = tokio::time::timeout(t, body_only.read_buf(&mut piece)).await;
        if let Some(end) = self.after_read(read)? {
            return Ok(end);
        }
        let n = self.pending.take(&piece, limit).map_err(|_| Kind::Body)?;
        debug_assert_eq!(n, piece.len(), "a read never passes the body's end");
        self.read += n as u64;
        // The client's sender holds a piece until the client has it, and
        // counts it by its length: a short read is copied to memory of its
        // size, so a body that trickles in cannot pin 64 KiB a byte.
        let piece = if piece.len() < piece.capacity() / 2 {
            Bytes::copy_from_slice(&piece)
        } else {
            piece.freeze()
        };
        Ok(Step::Data(Piece::Shared(piece), self.pending.is_done()))
    }

    /// What a read of the body came to: bytes (`None`, go on), the close
    /// that ends a close-delimited body (its last, empty, step), or a
    /// failure (a timeout, an error, or a close before the body's end).
    fn after_read(
        &mut self,
        read: Result<std::io::Result<usize>, tokio::time::error::Elapsed>,
    ) -> Result<Option<Step<'static>>, Kind> {
        match read {
            Ok(Ok(0)) if matches!(self.pending, Pending::UntilClose) => {
                self.pending = Pending::Done;
                Ok(Some(Step::Data(Piece::Slice(&[]), true)))
            }
            Ok(Ok(n)) if n > 0 => Ok(None),
            _ => Err(Kind::Body),
        }
    }

    /// The next piece: what is in the buffer, or (with `wait`) what the
    /// backend sends within that time. A piece stays valid until the next
    /// call, which consumes it.
    pub(crate) async fn step<'s>(
        &mut self,
        conn: &mut BackendStream,
        s: &'s mut H1Response,
        wait: Option<Duration>,
    ) -> Result<Step<'s>, Kind> {
        s.bbuf.consume(std::mem::take(&mut self.handed));
        if self.pending.is_done() {
            return Ok(self.trailers.take().map_or(Step::End, Step::Trailers));
        }
        if s.bbuf.is_empty() {
            let Some(t) = wait else {
                return Ok(Step::NotYet);
            };
            if self.read < QUICKACK_BELOW {
                quickack(conn);
                if self.read == 0 {
                    self.split |= matches!(self.pending, Pending::Length(n) if n <= SPLIT_BODY_MAX);
                }
            }
            if self.read > 0 {
                if let Some(limit) = self.owned_read_limit() {
                    return self.read_owned(conn, limit, t).await;
                }
                s.bbuf.reserve_empty(BODY_READ);
            }
            let read = tokio::time::timeout(t, s.bbuf.fill_from(conn)).await;
            if let Some(end) = self.after_read(read)? {
                return Ok(end);
            }
        }
        let mut raw_trailers = Vec::new();
        let taken = self
            .pending
            .take_piece(
                s.bbuf.filled(),
                usize::MAX,
                self.decode,
                &mut s.payload,
                &mut raw_trailers,
            )
            .map_err(|_| Kind::Body)?;
        if !raw_trailers.is_empty() {
            self.trailers = clean_trailer_section(&raw_trailers).map_err(trailers_refused)?;
        }
        // With trailers to come, the last piece does not end the body.
        let last = self.pending.is_done() && self.trailers.is_none();
        Ok(match taken {
            Taken::Wire(n) => {
                self.read += n as u64;
                self.handed = n;
                Step::Data(Piece::Slice(&s.bbuf.filled()[..n]), last)
            }
            Taken::Decoded { consumed } => {
                self.read += consumed as u64;
                s.bbuf.consume(consumed);
                Step::Data(Piece::Slice(&s.payload), last)
            }
        })
    }
}

/// Logs a backend's trailer section refused for `e`. Out of line: a rare
/// path in code every response body step runs.
#[cold]
#[inline(never)]
fn trailers_refused(e: impl std::fmt::Display) -> Kind {
    tracing::debug!("backend trailers refused: {e}");
    Kind::Body
}
