//! The HTTP/1.1 client side of one exchange: the request body read from
//! the client buffer, the response written back in as few writes as the
//! one-write rule allows.

use std::cell::RefCell;

use tern_http::rewrite::{
    is_connection_specific, write_response_head, write_response_head_from_h2,
    write_simple_response, FieldEdits,
};
use tern_http::{BodyFraming, ResponseHead};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::ClientStream;
use crate::exchange::{ClientBody, ConnCtx, Front};
use crate::fault::{answer_text, Kind};
use crate::io::body::{encode_chunk, tunnel, Pending, Taken, LAST_CHUNK};
use crate::io::iobuf::IoBuf;
use crate::io::write::WriteWithin;
use crate::message::{
    clean_trailer_section, BodyForm, Piece, ResponseHeadView, ResponseView, Step, Switched,
    Trailers,
};
use tern_deadline::within;
use tern_http::trailers::write_last_chunk;

/// Body bytes sent in the same write as a response head.
const INLINE_BODY: usize = 16 * 1024;

/// One exchange's view of an HTTP/1.1 client connection.
pub(super) struct H1Client<'x, 'c, C> {
    client: &'x mut C,
    cbuf: &'x mut IoBuf,
    ctx: &'x ConnCtx<'c>,
    /// The request body still to come.
    pending: Pending,
    /// Client-buffer bytes of the body piece handed out last (consumed at
    /// the next step).
    handed: usize,
    /// Decoded chunked payload.
    payload: Vec<u8>,
    /// The response head waiting for its first body bytes, then chunk
    /// framing.
    out: Vec<u8>,
    head_pending: bool,
    chunk_encode: bool,
    /// An HTTP/1.0 client.
    http10: bool,
    /// The connection closes after this exchange.
    pub close: bool,
    /// A 429 for the rate of the connection's own address closes the
    /// connection (`client_rate_close_after` reached): set by the
    /// connection, which counts the refusals.
    pub closes_if_rate_refused: bool,
    /// The client sent `TE: trailers`: a chunked response's trailers reach
    /// it (without, they stop at tern).
    pub trailers_ok: bool,
    /// The trailers of the request body, for the step after its last
    /// piece.
    trailers: Option<Trailers>,
    status: u16,
    bytes_in: u64,
    bytes_out: u64,
}

impl<'x, 'c, C> H1Client<'x, 'c, C>
where
    C: AsyncRead + AsyncWrite + Unpin + ClientStream,
{
    /// An exchange for a request whose head (`head_len` bytes) was taken
    /// from `cbuf`; `close` when the client asked for it.
    pub(super) fn new(
        client: &'x mut C,
        cbuf: &'x mut IoBuf,
        ctx: &'x ConnCtx<'c>,
        framing: BodyFraming,
        head_len: u64,
        http10: bool,
        close: bool,
    ) -> Self {
        H1Client {
            client,
            cbuf,
            ctx,
            pending: Pending::new(framing),
            handed: 0,
            payload: Vec::new(),
            out: spare_out(),
            head_pending: false,
            chunk_encode: false,
            http10,
            close,
            closes_if_rate_refused: false,
            trailers_ok: false,
            trailers: None,
            status: 0,
            bytes_in: head_len,
            bytes_out: 0,
        }
    }

    /// Ends the exchange: what of the request body was used leaves the
    /// buffer, the response buffer goes back to the worker's spares.
    /// Returns true when the connection must close: asked for, or a request
    /// body not read to its end (the next bytes are not a request head).
    pub(super) fn finish(&mut self) -> bool {
        self.cbuf.consume(std::mem::take(&mut self.handed));
        give_back_out(std::mem::take(&mut self.out));
        self.close || !self.pending.is_done()
    }

    /// Writes and flushes `bytes` within the idle timeout; `last` when
    /// they end the response and the connection closes after it.
    async fn write(&mut self, bytes: &[u8], last: bool) -> Result<(), Kind> {
        if last && self.close {
            let t = self.ctx.listener.config.limits.idle_timeout;
            // Once a connection (its close): out of the hot code, which
            // awaits this write at several places.
            match crate::cold::cold(within(t, self.client.write_last(bytes))).await {
                Some(Ok(())) => {}
                _ => return Err(Kind::ClientGone),
            }
        } else {
            write_client(self.client, bytes, self.ctx).await?;
        }
        self.bytes_out += bytes.len() as u64;
        Ok(())
    }

    /// Writes the response bytes in `self.out` (then clears it), as
    /// [`H1Client::write`] does; a write that keeps the connection open
    /// goes to [`write_client`] directly, one future fewer on each
    /// response (a call per poll).
    async fn write_out(&mut self, last: bool) -> Result<(), Kind> {
        let result = if last && self.close {
            let out = std::mem::take(&mut self.out);
            let result = self.write(&out, last).await;
            self.out = out;
            result
        } else {
            let result = write_client(self.client, &self.out, self.ctx).await;
            if result.is_ok() {
                self.bytes_out += self.out.len() as u64;
            }
            result
        };
        self.out.clear();
        result
    }
}

/// Writes and flushes `bytes` to the client within the idle timeout. A
/// hand-written future ([`WriteWithin`]), not an `async fn` around
/// `within`, an `async` block, tokio's `write_all` and `flush`: five
/// polls, a call each, on every response.
pub(super) fn write_client<'a, C: AsyncWrite + Unpin>(
    client: &'a mut C,
    bytes: &'a [u8],
    ctx: &ConnCtx<'_>,
) -> WriteWithin<'a, C, Kind> {
    let t = ctx.listener.config.limits.idle_timeout;
    WriteWithin::new(client, bytes, true, t, Kind::ClientGone)
}

/// Logs a request body refused for `e` (`what` says which part).
/// Out of line: a rare path in code every request body step runs.
#[cold]
#[inline(never)]
fn body_refused(ctx: &ConnCtx<'_>, what: &str, e: &dyn std::fmt::Display) -> Kind {
    tracing::debug!(client = %ctx.peer, "{what}: {e}");
    Kind::BadBody
}

impl<C> ClientBody for H1Client<'_, '_, C>
where
    C: AsyncRead + AsyncWrite + Unpin + ClientStream,
{
    async fn step(&mut self, wait: bool) -> Result<Step<'_>, Kind> {
        self.cbuf.consume(std::mem::take(&mut self.handed));
        if self.pending.is_done() {
            return Ok(self.trailers.take().map_or(Step::End, Step::Trailers));
        }
        if self.cbuf.is_empty() {
            if !wait {
                return Ok(Step::NotYet);
            }
            let idle = self.ctx.listener.config.limits.idle_timeout;
            match tokio::time::timeout(idle, self.cbuf.fill_from(self.client)).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return Err(Kind::ClientGone),
            }
        }
        let mut raw_trailers = Vec::new();
        let taken = self
            .pending
            .take_piece(
                self.cbuf.filled(),
                usize::MAX,
                true,
                &mut self.payload,
                &mut raw_trailers,
            )
            .map_err(|e| body_refused(self.ctx, "bad request body", &e))?;
        if !raw_trailers.is_empty() {
            self.trailers = clean_trailer_section(&raw_trailers)
                .map_err(|e| body_refused(self.ctx, "request trailers refused", &e))?;
        }
        // With trailers to come, the last piece does not end the body.
        let last = self.pending.is_done() && self.trailers.is_none();
        Ok(match taken {
            Taken::Wire(n) => {
                self.handed = n;
                self.bytes_in += n as u64;
                Step::Data(Piece::Slice(&self.cbuf.filled()[..n]), last)
            }
            Taken::Decoded { consumed } => {
                self.cbuf.consume(consumed);
                self.bytes_in += consumed as u64;
                Step::Data(Piece::Slice(&self.payload), last)
            }
        })
    }

    async fn send_continue(&mut self) -> Result<(), Kind> {
        if !self.cbuf.is_empty() {
            // The client did not wait: its body is arriving already.
            return Ok(());
        }
        self.write(b"HTTP/1.1 100 Continue\r\n\r\n", false).await
    }

    async fn interim(&mut self, head: &ResponseHead) -> Result<(), Kind> {
        let mut out = Vec::with_capacity(256);
        write_response_head(head, false, &FieldEdits::NONE, &mut out);
        self.write(&out, false).await
    }
}

impl<C> Front for H1Client<'_, '_, C>
where
    C: AsyncRead + AsyncWrite + Unpin + ClientStream,
{
    type Body = Self;
    type ResetWatch<'a>
        = std::future::Pending<()>
    where
        Self: 'a;
    const CLIENT_CANCELS: bool = false;

    fn split(&mut self) -> (&mut Self, std::future::Pending<()>) {
        (self, std::future::pending())
    }

    fn start_response(&mut self, view: ResponseView<'_>, close: bool) -> Result<BodyForm, Kind> {
        let shutting_down = *self.ctx.worker.shutdown.borrow();
        self.close |= close || shutting_down;
        self.out.clear();
        let form = match view.head {
            ResponseHeadView::H1(head) => {
                write_response_head(head, self.close, view.edits, &mut self.out);
                if view.body == BodyFraming::Chunked && !self.http10 {
                    // Decoded and chunk-encoded again, so that its trailer
                    // section goes through the one trailer rule (and only
                    // to a client that takes trailers).
                    self.chunk_encode = true;
                    BodyForm::Payload
                } else {
                    BodyForm::Wire
                }
            }
            ResponseHeadView::H2(parts) => {
                // Without a length, HTTP/1.1 clients get chunked coding;
                // HTTP/1.0 clients cannot read it and get a body delimited
                // by the close.
                let unknown = view.body == BodyFraming::Chunked;
                self.chunk_encode = unknown && !self.http10;
                self.close |= unknown && self.http10;
                write_response_head_from_h2(
                    parts.status.as_u16(),
                    parts.status.canonical_reason().unwrap_or(""),
                    parts
                        .headers
                        .iter()
                        .filter(|(n, _)| !is_connection_specific(n.as_str()))
                        .map(|(n, v)| (n.as_str(), v.as_bytes())),
                    self.chunk_encode,
                    self.close,
                    view.edits,
                    &mut self.out,
                );
                BodyForm::Payload
            }
        };
        if let Some(alt_svc) = &self.ctx.listener.alt_svc {
            if view.status() != 101 {
                // Before the blank line that ends the head.
                self.out.truncate(self.out.len() - 2);
                self.out.extend_from_slice(b"Alt-Svc: ");
                self.out.extend_from_slice(alt_svc.as_bytes());
                self.out.extend_from_slice(b"\r\n\r\n");
            }
        }
        self.status = view.status();
        self.head_pending = true;
        Ok(form)
    }

    async fn send_body(&mut self, piece: Piece<'_>, last: bool) -> Result<(), Kind> {
        let data = piece.as_slice();
        if self.chunk_encode {
            if !self.head_pending {
                self.out.clear();
            }
            self.head_pending = false;
            encode_chunk(&mut self.out, data);
            if last {
                self.out.extend_from_slice(LAST_CHUNK);
            }
            return self.write_out(last).await;
        }
        if self.head_pending {
            self.head_pending = false;
            if data.len() <= INLINE_BODY {
                self.out.extend_from_slice(data);
                return self.write_out(last).await;
            }
            self.write_out(false).await?;
        }
        if data.is_empty() && !(last && self.close) {
            return Ok(());
        }
        self.write(data, last).await
    }

    async fn send_trailers(&mut self, trailers: Trailers) -> Result<(), Kind> {
        if !(self.chunk_encode && self.trailers_ok) {
            return self.send_body(Piece::Slice(&[]), true).await;
        }
        if !self.head_pending {
            self.out.clear();
        }
        self.head_pending = false;
        write_last_chunk(
            trailers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())),
            &mut self.out,
        );
        self.write_out(true).await
    }

    async fn flush(&mut self) -> Result<(), Kind> {
        if self.head_pending {
            self.head_pending = false;
            self.write_out(false).await?;
        }
        Ok(())
    }

    fn refused_for_rate(&mut self) {
        self.close |= self.closes_if_rate_refused;
    }

    async fn answer(&mut self, status: u16, edits: &FieldEdits<'_>) {
        let (reason, body) = answer_text(status);
        // A client refused for its rate keeps its connection when nothing
        // of the request is left to read: it was told when to come back
        // (Retry-After), and a close would make its next request pay a
        // handshake; the refusal that reaches `client_rate_close_after`
        // closes it (and says so). Every other answer of tern's closes.
        self.close = self.close || status != 429 || !self.pending.is_done();
        self.out.clear();
        write_simple_response(status, reason, body, self.close, &mut self.out);
        insert_fields(&mut self.out, edits);
        self.status = status;
        let _ = self.write_out(true).await;
    }

    fn abort(&mut self) {
        // The close that follows tells the client the response is cut short.
        self.close = true;
    }

    async fn upgrade<B>(
        &mut self,
        switched: Switched<'_>,
        backend: &mut B,
        early: &[u8],
    ) -> Result<(), Kind>
    where
        B: AsyncRead + AsyncWrite + Unpin,
    {
        let idle = self.ctx.listener.config.limits.idle_timeout;
        self.status = 101;
        self.close = true;
        self.out.clear();
        match switched.head {
            ResponseHeadView::H1(head) => {
                write_response_head(head, false, switched.edits, &mut self.out)
            }
            // An HTTP/2 backend's yes to an extended CONNECT: tern answers
            // the client's HTTP/1.1 handshake itself (RFC 8441 section 5).
            ResponseHeadView::H2(parts) => {
                let accept = switched.accept.ok_or(Kind::Invalid)?;
                write_response_head_from_h2(
                    101,
                    "Switching Protocols",
                    std::iter::once(("Sec-WebSocket-Accept", accept.as_bytes())).chain(
                        parts
                            .headers
                            .iter()
                            .filter(|(n, _)| *n != http::header::CONTENT_LENGTH)
                            .map(|(n, v)| (n.as_str(), v.as_bytes())),
                    ),
                    false,
                    false,
                    switched.edits,
                    &mut self.out,
                );
                // Connection fields, which that writer drops, before the
                // blank line that ends the head.
                self.out.truncate(self.out.len() - 2);
                self.out
                    .extend_from_slice(b"Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
            }
        }
        self.out.extend_from_slice(early);
        self.write_out(false).await?;
        self.cbuf.consume(std::mem::take(&mut self.handed));
        if !self.cbuf.is_empty() {
            let early_up = self.cbuf.filled().len();
            if tokio::time::timeout(idle, backend.write_all(self.cbuf.filled()))
                .await
                .is_err()
            {
                return Ok(());
            }
            self.bytes_in += early_up as u64;
            self.cbuf.consume(early_up);
        }
        let (up, down) = tunnel(self.client, backend, idle).await;
        self.bytes_in += up;
        self.bytes_out += down;
        Ok(())
    }

    fn status(&self) -> u16 {
        self.status
    }

    fn bytes(&self) -> (u64, u64) {
        (self.bytes_in, self.bytes_out)
    }
}

/// Response buffers kept per worker: an idle connection holds none.
const SPARE_OUT: usize = 256;

/// A response buffer that grew past this is freed rather than kept.
const OUT_KEEP_LIMIT: usize = 32 * 1024;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

fn spare_out() -> Vec<u8> {
    SPARE
        .with(|spare| spare.borrow_mut().pop())
        .unwrap_or_else(|| Vec::with_capacity(1024))
}

fn give_back_out(mut out: Vec<u8>) {
    if out.capacity() > OUT_KEEP_LIMIT {
        return;
    }
    out.clear();
    SPARE.with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < SPARE_OUT {
            spare.push(out);
        }
    });
}

/// Puts the fields `edits` add into the simple response in `out`, before
/// the blank line that ends its head.
fn insert_fields(out: &mut Vec<u8>, edits: &FieldEdits<'_>) {
    if edits.add.is_empty() {
        return;
    }
    let Some(end) = out.windows(4).position(|w| w == b"\r\n\r\n") else {
        return;
    };
    let mut fields = Vec::with_capacity(128);
    for (name, value) in edits.added() {
        fields.extend_from_slice(b"\r\n");
        fields.extend_from_slice(name.as_bytes());
        fields.extend_from_slice(b": ");
        fields.extend_from_slice(value);
    }
    out.splice(end..end, fields);
}
