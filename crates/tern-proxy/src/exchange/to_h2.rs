//! An exchange with an HTTP/2 backend (`protocol = "h2c"` or `"h2"`).
//!
//! Phases: open a backend stream (raced against the client cancelling) →
//! the request body goes up while tern waits for the response head → the
//! response head goes down → the response body goes down. An HTTP/2 client
//! hands its body over whole ([`Front::take_h2_body`]) and it keeps going
//! up beside the response (full duplex); an HTTP/1.1 client's body is
//! pulled piece by piece, and a response that comes before the body ended
//! leaves the client connection to be closed after it.

use std::cell::Cell;
use std::pin::pin;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt;
use h2::client::ResponseFuture;
use h2::{RecvStream, SendStream};
use tern_http::rewrite::{ClientFacts, FieldEdits};
use tern_http::BodyFraming;

use super::policy::Edits;
use super::{relay_body, BodySteps, ClientBody, ConnCtx, Front, Outcome};
use crate::fault::Kind;
use crate::io::h2data;
use crate::message::{BodyLen, Request, ResponseHeadView, ResponseView, Step, Trailers};
use crate::upstream::h2::{open, upload_stream, Forwarding, Opened, ResponseBody, UploadEnd};
use crate::upstream::{Backends, H2Stream, Tries};

pub(super) async fn exchange<F: Front>(
    front: &mut F,
    req: &Request<'_>,
    ctx: &ConnCtx<'_>,
    backends: &Backends,
    tries: &mut Tries,
    edits: &Edits<'_>,
    o: &mut Outcome,
) -> Result<(), Kind> {
    if req.is_websocket() {
        return super::tunnel::websocket_to_h2(front, req, ctx, (backends, tries), edits, o).await;
    }
    if req.upgrade {
        tracing::warn!(client = %ctx.peer, upstream = %backends.name(),
            "an Upgrade other than WebSocket cannot be relayed to an HTTP/2 upstream: answered 501");
        return Err(Kind::NotImplemented);
    }
    let limits = &ctx.listener.config.limits;
    let mut duplex = front.take_h2_body();
    let up = Cell::new(0);
    // The body at hand goes up with the head (one write when the session
    // next flushes); a request that is whole with it can be sent again.
    let (inline, whole, trailers) = gather_inline(front, req, duplex.as_mut(), &up, edits).await?;
    let facts = ctx.facts(req);
    let mut retried = false;
    loop {
        // `held` keeps the request counted in flight on its server (for
        // least_conn) until the exchange is over.
        let Opened {
            response,
            mut upstream,
            stream: held,
        } = open_stream(front, req, ctx, (backends, tries), &facts, edits, o).await?;
        let with_cookie = backends
            .set_cookie(tries, held.addr)
            .map(|c| super::with_set_cookie(&edits.response, c));
        let response_edits = with_cookie.as_ref().unwrap_or(&edits.response);
        send_inline(
            &mut upstream,
            &inline,
            whole && req.body != BodyLen::Empty,
            trailers.as_ref(),
        )?;
        let result = if whole {
            let sent = Instant::now();
            let wait = limits.backend_response_timeout;
            let head = {
                let (_, reset) = front.split();
                tokio::select! {
                    r = tokio::time::timeout(wait, response) => r,
                    () = reset => return Err(Kind::ClientGone),
                }
            };
            if let Ok(Err(e)) = &head {
                if !retried && unprocessed(e, req) {
                    // The backend says it never processed the stream: the
                    // whole request is still in hand, send it once more
                    // (on a new session: this one is going away).
                    tracing::debug!(backend = %held.addr, "stream refused ({e}); retrying");
                    retried = true;
                    continue;
                }
            }
            let answer = response_head(head, ctx, backends, &held, o, sent);
            if let Ok(answer) = &answer {
                let status = answer.status().as_u16();
                if req.is_idempotent() && backends.retry_status(tries, held.addr, status) {
                    // Not relayed: the request goes to another server.
                    tracing::debug!(backend = %held.addr, "answered {status}; retrying on another server");
                    upstream.send_reset(h2::Reason::CANCEL);
                    continue;
                }
            }
            match answer {
                Ok(answer) => relay(
                    front,
                    req,
                    answer,
                    response_edits,
                    false,
                    limits.backend_response_timeout,
                    o,
                )
                .await
                .map(|()| false),
                Err(kind) => Err(kind),
            }
        } else {
            match duplex.as_mut() {
                Some(body) => {
                    with_duplex_body(
                        front,
                        req,
                        ctx,
                        backends,
                        &held,
                        response_edits,
                        o,
                        response,
                        &mut upstream,
                        body,
                        &up,
                        edits,
                    )
                    .await
                }
                None => {
                    with_pulled_body(
                        front,
                        req,
                        ctx,
                        (backends, &held, response_edits),
                        o,
                        response,
                        &mut upstream,
                        edits,
                    )
                    .await
                }
            }
        };
        o.bytes_in += up.get();
        drop(held);
        if !matches!(result, Ok(false)) {
            // Whatever is left of the exchange is of no use to anyone: stop
            // the backend's work on it.
            upstream.send_reset(h2::Reason::CANCEL);
        }
        return result.map(|_| ());
    }
}

/// Opens a backend stream for `req` and sends its head, raced against the
/// client cancelling; the server it went to is recorded in `o`.
pub(super) async fn open_stream<F: Front>(
    front: &mut F,
    req: &Request<'_>,
    ctx: &ConnCtx<'_>,
    (backends, tries): (&Backends, &mut Tries),
    facts: &ClientFacts<'_>,
    edits: &Edits<'_>,
    o: &mut Outcome,
) -> Result<Opened, Kind> {
    let forwarding = Forwarding {
        facts,
        fields: ctx.listener.config.forwarded,
        made: &ctx.h2_forwarding,
    };
    let opening = open(
        backends,
        tries,
        req,
        forwarding,
        &edits.request,
        ctx.listener.config.limits.backend_connect_timeout,
    );
    let opened = {
        let (_, reset) = front.split();
        tokio::select! {
            r = opening => r,
            () = reset => return Err(Kind::ClientGone),
        }
    };
    let opened = opened.map_err(|(kind, addr)| {
        o.backend = addr;
        kind
    })?;
    o.backend = Some(opened.stream.addr);
    Ok(opened)
}

/// Body bytes sent with the request head without waiting for the
/// backend's window (within the initial stream window of 64 KiB that every
/// HTTP/2 peer grants, so nothing waits in tern's send buffer for long).
const INLINE_BODY: usize = 16 * 1024;

/// The request body already at hand (at most [`INLINE_BODY`]), whether
/// it is the whole body, and the trailers that ended it.
async fn gather_inline<F: Front>(
    front: &mut F,
    req: &Request<'_>,
    duplex: Option<&mut RecvStream>,
    up: &Cell<u64>,
    edits: &Edits<'_>,
) -> Result<(Inline, bool, Option<Trailers>), Kind> {
    let mut pieces = Inline::new();
    if req.body == BodyLen::Empty {
        return Ok((pieces, true, None));
    }
    let mut size = 0;
    if let Some(body) = duplex {
        while size < INLINE_BODY && !body.is_end_stream() {
            match body.data().now_or_never() {
                Some(Some(Ok(chunk))) => {
                    edits.count_body(chunk.len())?;
                    size += chunk.len();
                    up.set(up.get() + chunk.len() as u64);
                    let _ = body.flow_control().release_capacity(chunk.len());
                    pieces.push(chunk);
                }
                Some(Some(Err(_))) => return Err(Kind::ClientGone),
                Some(None) | None => break,
            }
        }
        // Trailers still to come leave the body to the duplex upload.
        return Ok((pieces, body.is_end_stream(), None));
    }
    let (body, _) = front.split();
    let (ended, trailers) =
        super::body_at_hand(&mut edits.cap(body), INLINE_BODY, &mut pieces).await?;
    Ok((pieces, ended, trailers))
}

/// The body pieces sent with the head: most requests (a gRPC call's one
/// message) have one or two, kept without an allocation.
type Inline = smallvec::SmallVec<[Bytes; 2]>;

/// Queues the inline body on the new stream (ending it when `end`, with
/// `trailers` when there are some).
fn send_inline(
    upstream: &mut SendStream<Bytes>,
    pieces: &[Bytes],
    end: bool,
    trailers: Option<&Trailers>,
) -> Result<(), Kind> {
    let n = pieces.len();
    let end_with_data = end && trailers.is_none();
    for (i, piece) in pieces.iter().enumerate() {
        upstream
            .send_data(piece.clone(), end_with_data && i + 1 == n)
            .map_err(|_| Kind::Closed)?;
    }
    match trailers {
        // Kept for a retry: a copy of a small map.
        Some(t) if end => upstream
            .send_trailers(t.clone())
            .map_err(|_| Kind::Closed)?,
        _ if end_with_data && n == 0 => upstream
            .send_data(Bytes::new(), true)
            .map_err(|_| Kind::Closed)?,
        _ => {}
    }
    Ok(())
}

/// True when the backend did not process the stream, so sending the
/// request again cannot do it twice: it refused the stream, or (for an
/// idempotent method, RFC 9110 section 9.2.2) its GOAWAY left the stream
/// out.
fn unprocessed(e: &h2::Error, req: &Request<'_>) -> bool {
    if e.reason() == Some(h2::Reason::REFUSED_STREAM) && e.is_remote() {
        return true;
    }
    req.is_idempotent() && e.is_go_away() && e.is_remote()
}

/// An HTTP/2 client's body (the part not sent with the head), going up
/// beside the response. Ok(true): the
/// response ended before the request body did (the rest is cancelled).
#[allow(clippy::too_many_arguments)]
async fn with_duplex_body<F: Front>(
    front: &mut F,
    req: &Request<'_>,
    ctx: &ConnCtx<'_>,
    backends: &Backends,
    server: &H2Stream,
    response_edits: &FieldEdits<'_>,
    o: &mut Outcome,
    response: ResponseFuture,
    upstream: &mut SendStream<Bytes>,
    body: &mut RecvStream,
    up: &Cell<u64>,
    edits: &Edits<'_>,
) -> Result<bool, Kind> {
    let limits = &ctx.listener.config.limits;
    let wait = limits.backend_response_timeout;
    let sent = Instant::now();
    let mut upload_done = body.is_end_stream();
    let mut upload = pin!(upload_stream(
        body,
        upstream,
        limits.idle_timeout,
        wait,
        up,
        edits.body_limit
    ));
    let mut head = pin!(tokio::time::timeout(wait, response));
    let head = {
        let (_, reset) = front.split();
        let mut reset = pin!(reset);
        loop {
            tokio::select! {
                r = &mut upload, if !upload_done => {
                    upload_done = true;
                    match r {
                        Ok(()) => {}
                        Err(UploadEnd::ClientReset) => return Err(Kind::ClientGone),
                        Err(UploadEnd::ClientStalled) => return Err(Kind::UploadStalled),
                        Err(UploadEnd::TooLarge) => return Err(Kind::BodyTooLarge),
                        // The backend may have answered and reset the rest of
                        // the request: its head (or its error) decides.
                        Err(UploadEnd::Backend) => {}
                    }
                }
                r = &mut head => break r,
                () = &mut reset => return Err(Kind::ClientGone),
            }
        }
    };
    let answer = response_head(head, ctx, backends, server, o, sent)?;
    let (framing, recv) = start(front, req, answer, response_edits, false, o)?;
    let relay = relay_response(front, framing, recv, wait, o);
    let mut relay = pin!(relay);
    let relayed = loop {
        tokio::select! {
            r = &mut upload, if !upload_done => {
                upload_done = true;
                match r {
                    Err(UploadEnd::ClientReset) => return Err(Kind::ClientGone),
                    Err(UploadEnd::TooLarge) => return Err(Kind::BodyTooLarge),
                    _ => {}
                }
            }
            r = &mut relay => break r,
        }
    };
    relayed?;
    // A response that ended before the request body did: the rest of the
    // body is of no use to the backend.
    Ok(!upload_done)
}

/// An HTTP/1.1 client's body (the part not sent with the head), pulled
/// piece by piece until the response head comes.
#[allow(clippy::too_many_arguments)]
async fn with_pulled_body<F: Front>(
    front: &mut F,
    req: &Request<'_>,
    ctx: &ConnCtx<'_>,
    (backends, server, response_edits): (&Backends, &H2Stream, &FieldEdits<'_>),
    o: &mut Outcome,
    response: ResponseFuture,
    upstream: &mut SendStream<Bytes>,
    edits: &Edits<'_>,
) -> Result<bool, Kind> {
    let limits = &ctx.listener.config.limits;
    let wait = limits.backend_response_timeout;
    let sent = Instant::now();
    let mut head = pin!(tokio::time::timeout(wait, response));
    let mut answered_early = false;
    let head = {
        let (body, reset) = front.split();
        if req.expects_continue && req.body != BodyLen::Empty {
            // The backend is reachable: let the client send its body.
            body.send_continue().await?;
        }
        drop(reset);
        let mut body = edits.cap(body);
        let pull = pull_upload(&mut body, upstream, wait);
        tokio::select! {
            r = pull => {
                r?;
                (&mut head).await
            }
            r = &mut head => {
                answered_early = true;
                r
            }
        }
    };
    let answer = response_head(head, ctx, backends, server, o, sent)?;
    if answered_early {
        // The rest of the request body is of no use to the backend.
        upstream.send_reset(h2::Reason::CANCEL);
    }
    // The client's body was not read to its end: its connection is not at
    // a request boundary.
    relay(front, req, answer, response_edits, answered_early, wait, o).await?;
    Ok(false)
}

/// Sends the response body (none for a bodiless response, even if the
/// backend sent one anyway).
async fn relay_response<F: Front>(
    front: &mut F,
    framing: BodyFraming,
    recv: RecvStream,
    wait: Duration,
    o: &mut Outcome,
) -> Result<(), Kind> {
    if framing == BodyFraming::Empty {
        return front
            .send_body(crate::message::Piece::Slice(&[]), true)
            .await;
    }
    relay_body(front, H2Steps(ResponseBody::new(recv)), wait, o).await
}

/// Starts the client's response with `answer`'s head; returns the body's
/// framing and the body.
fn start<F: Front>(
    front: &mut F,
    req: &Request<'_>,
    answer: http::Response<RecvStream>,
    edits: &FieldEdits<'_>,
    close: bool,
    o: &mut Outcome,
) -> Result<(BodyFraming, RecvStream), Kind> {
    let (parts, recv) = answer.into_parts();
    let framing = body_framing(req, &parts, &recv);
    let view = ResponseView {
        head: ResponseHeadView::H2(&parts),
        body: framing,
        edits,
    };
    super::note_grpc_head(o, &view);
    front.start_response(view, close)?;
    Ok((framing, recv))
}

/// Starts the response with `answer`'s head and relays its body.
pub(super) async fn relay<F: Front>(
    front: &mut F,
    req: &Request<'_>,
    answer: http::Response<RecvStream>,
    edits: &FieldEdits<'_>,
    close: bool,
    wait: Duration,
    o: &mut Outcome,
) -> Result<(), Kind> {
    let (framing, recv) = start(front, req, answer, edits, close, o)?;
    relay_response(front, framing, recv, wait, o).await
}

/// Moves a request body the front end delivers in pieces up the backend
/// stream.
async fn pull_upload<B: ClientBody>(
    body: &mut B,
    upstream: &mut SendStream<Bytes>,
    wait: Duration,
) -> Result<(), Kind> {
    loop {
        let (data, last) = match body.step(true).await? {
            Step::Data(piece, last) => (piece.into_bytes(), last),
            Step::End => (Bytes::new(), true),
            Step::Trailers(t) => return upstream.send_trailers(t).map_err(|_| Kind::Upload),
            Step::NotYet => continue,
        };
        h2data::send(upstream, data, last, wait)
            .await
            .map_err(|_| Kind::Upload)?;
        if last {
            return Ok(());
        }
    }
}

/// The response head, or the failure that took its place; records the
/// backend's time.
pub(super) fn response_head(
    head: Result<Result<http::Response<RecvStream>, h2::Error>, tokio::time::error::Elapsed>,
    ctx: &ConnCtx<'_>,
    backends: &Backends,
    server: &H2Stream,
    o: &mut Outcome,
    sent: Instant,
) -> Result<http::Response<RecvStream>, Kind> {
    let answer = match head {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            tracing::debug!(backend = ?o.backend, "backend stream failed: {e}");
            return Err(Kind::Closed);
        }
        Err(_) => {
            backends.timed_out(server.server());
            return Err(Kind::Timeout);
        }
    };
    backends.answered(server.server(), answer.status().as_u16());
    if let Some(addr) = o.backend {
        super::backend_answered(ctx, backends, o, addr, sent.elapsed());
    }
    Ok(answer)
}

/// The body a response from an HTTP/2 backend has, as tern delivers it.
fn body_framing(
    req: &Request<'_>,
    parts: &http::response::Parts,
    recv: &RecvStream,
) -> BodyFraming {
    let status = parts.status.as_u16();
    let bodiless = req.is_head() || (100..200).contains(&status) || status == 204 || status == 304;
    if bodiless || recv.is_end_stream() {
        return BodyFraming::Empty;
    }
    match parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| tern_http::framing::parse_content_length(v.as_bytes()).ok())
    {
        Some(n) => BodyFraming::Length(n),
        None => BodyFraming::Chunked,
    }
}

/// An HTTP/2 response body as steps.
struct H2Steps(ResponseBody);

impl BodySteps for H2Steps {
    async fn step(&mut self, t: Option<Duration>) -> Result<Step<'_>, Kind> {
        self.0.step(t).await
    }
}
