//! An exchange with an HTTP/1.1 backend (pooled connections).
//!
//! Phases: the request head and the body at hand in one write → the rest
//! of the body → the response head (interim ones relayed), raced against
//! the client cancelling → the response head with the body at hand in one
//! write → the rest of the body → the connection back to the pool when it
//! is reusable.

use std::time::Duration;

use crate::upstream::BackendStream;
use tern_http::framing::response_framing;

use tern_http::rewrite::FieldEdits;

use super::policy::Edits;
use super::{relay_body, BodySteps, ClientBody, ConnCtx, Front, Outcome};
use crate::fault::Kind;
use crate::message::{
    BodyForm, BodyLen, Request, RequestView, ResponseHeadView, ResponseView, Step, Switched,
};
use crate::upstream::h1::{self, H1Response, H1Scratch, ResponseBody, INLINE_BODY};
use crate::upstream::{BackendConn, Backends, Tries};

pub(super) async fn exchange<F: Front>(
    front: &mut F,
    req: &Request<'_>,
    ctx: &ConnCtx<'_>,
    (backends, tries): (&Backends, &mut Tries),
    edits: &Edits<'_>,
    o: &mut Outcome,
) -> Result<(), Kind> {
    let mut s = H1Scratch::take();
    let result = exchange_in(front, req, ctx, (backends, tries), edits, o, &mut s).await;
    s.give_back();
    result
}

async fn exchange_in<F: Front>(
    front: &mut F,
    req: &Request<'_>,
    ctx: &ConnCtx<'_>,
    (backends, tries): (&Backends, &mut Tries),
    edits: &Edits<'_>,
    o: &mut Outcome,
    s: &mut H1Scratch,
) -> Result<(), Kind> {
    let limits = &ctx.listener.config.limits;
    let wait = limits.backend_response_timeout;
    let (mut conn, mut r) = if F::CLIENT_CANCELS {
        let (body, reset) = front.split();
        let mut body = edits.cap(body);
        // Pinned where it is made: select! would otherwise move the whole
        // future (every await point of the request's send and head read)
        // into its own tuple, a memcpy per request.
        let request = std::pin::pin!(send_request(
            &mut body,
            req,
            ctx,
            (backends, tries),
            &edits.request,
            o,
            s
        ));
        tokio::select! {
            // The reset fires once: nothing to be fair to, so no random
            // start per poll.
            biased;
            r = request => r?,
            () = reset => return Err(Kind::ClientGone),
        }
    } else {
        let mut body = edits.cap(front.split().0);
        send_request(&mut body, req, ctx, (backends, tries), &edits.request, o, s).await?
    };

    if r.head.status == 101 {
        if !req.upgrade {
            return Err(Kind::Invalid);
        }
        let early = r.bbuf.filled().len();
        let switched = Switched {
            head: ResponseHeadView::H1(&r.head),
            edits: &edits.response,
            accept: None,
        };
        let result =
            crate::cold::cold(front.upgrade(switched, &mut conn.stream, &r.bbuf.filled()[..early]))
                .await;
        r.give_back();
        return result;
    }
    let framing =
        response_framing(req.is_head(), req.is_connect(), &r.head).map_err(|_| Kind::Invalid)?;
    // Stray bytes after the response are checked after the body.
    let reusable = h1::reusable(&r.head, framing, req.http10);
    let with_cookie = backends
        .set_cookie(tries, conn.addr)
        .map(|c| super::with_set_cookie(&edits.response, c));
    let view = ResponseView {
        head: ResponseHeadView::H1(&r.head),
        body: framing,
        edits: with_cookie.as_ref().unwrap_or(&edits.response),
    };
    // A close-delimited body leaves the client connection unusable.
    let form = front.start_response(view, framing.is_until_close())?;
    let mut body = ResponseBody::new(framing, form == BodyForm::Payload);
    relay_body(
        front,
        H1Steps {
            body: &mut body,
            conn: &mut conn,
            s: &mut r,
        },
        wait,
        o,
    )
    .await?;
    body.settle(&mut r);
    if body.was_split() {
        note_split(ctx, backends, conn.addr);
    }
    // Stray bytes after the response mean the backend and tern disagree on
    // framing: never reuse such a connection.
    if reusable && r.bbuf.is_empty() {
        backends.put(conn);
    }
    r.give_back();
    Ok(())
}

/// Sends the whole request, then waits for the final response head.
/// Returns the connection and the response side holding the head.
async fn send_request<B: ClientBody>(
    body: &mut B,
    req: &Request<'_>,
    ctx: &ConnCtx<'_>,
    (backends, tries): (&Backends, &mut Tries),
    edits: &FieldEdits<'_>,
    o: &mut Outcome,
    s: &mut H1Scratch,
) -> Result<(BackendConn, Box<H1Response>), Kind> {
    let limits = &ctx.listener.config.limits;
    let t = limits.backend_response_timeout;
    // An HTTP/2 or HTTP/3 body of undeclared length that has already
    // ended goes with a Content-Length, as nginx sends it (it buffers the
    // body): backends that take no chunked request body (Python's
    // http.server, many WSGI servers) read it instead of taking its chunks
    // for their next request.
    let mut early = Vec::new();
    let (ended, trailers) =
        if req.body == BodyLen::Unknown && !matches!(req.head, RequestView::H1(_)) {
            super::body_at_hand(body, INLINE_BODY, &mut early).await?
        } else {
            (false, None)
        };
    let whole_len =
        (ended && trailers.is_none()).then(|| early.iter().map(|p| p.len() as u64).sum::<u64>());
    let chunked = h1::write_head(
        req,
        whole_len,
        &ctx.facts(req),
        ctx.listener.config.forwarded,
        edits,
        &mut s.out,
    );
    let mut whole = req.body == BodyLen::Empty || ended;
    for piece in &early {
        h1::push_body(&mut s.out, piece, chunked, false);
    }
    if let Some(trailers) = &trailers {
        h1::push_trailers(&mut s.out, trailers, chunked);
    }
    // The body already at hand goes in the same write as the head.
    while !whole && s.out.len() < INLINE_BODY {
        match body.step(false).await? {
            Step::Data(piece, last) => {
                h1::push_body(&mut s.out, piece.as_slice(), chunked, last);
                whole = last;
            }
            Step::End => {
                h1::push_body(&mut s.out, &[], chunked, true);
                whole = true;
            }
            Step::Trailers(t) => {
                h1::push_trailers(&mut s.out, &t, chunked);
                whole = true;
            }
            Step::NotYet => break,
        }
    }

    // A pooled connection without a future; connecting (the rare path
    // under keepalive) out of the hot code.
    let mut conn = match backends.get_pooled(tries) {
        Ok(conn) => conn,
        Err(next) => {
            crate::cold::cold(backends.connect_next(tries, next, limits.backend_connect_timeout))
                .await
                .map_err(|e| e.kind())?
        }
    };
    o.backend = Some(conn.addr);
    if req.expects_continue && !whole {
        // The backend is reachable: let the client send its body.
        crate::cold::cold(body.send_continue()).await?;
    }
    let mut retried = false;
    loop {
        let sent = tern_deadline::now().into_std();
        let mut wrote = h1::write(&mut conn.stream, &s.out, t).await.is_ok();
        if wrote && !whole {
            // Out of the hot code (crate::cold): a body that did not come
            // with its head is large or slow next to the box this costs.
            crate::cold::cold(send_rest(body, &mut conn.stream, s, chunked, t)).await?;
            wrote = true;
        }
        let head = if wrote {
            let deadline = tokio::time::Instant::from_std(sent) + t;
            // The final head, most often the first: interim ones (and
            // the rest of the wait) out of the hot code.
            match h1::read_head(&mut conn.stream, &mut s.wait, None, deadline).await {
                Ok(r) if r.head.is_interim() => {
                    let relay = after_interim(
                        body,
                        &mut conn.stream,
                        &mut s.wait,
                        r,
                        deadline,
                        req.expects_continue,
                    );
                    crate::cold::cold(relay).await
                }
                read => read,
            }
        } else {
            Err(h1::HeadError {
                kind: Kind::Closed,
                untouched: true,
            })
        };
        match head {
            Ok(r) => {
                let status = r.head.status;
                backends.answered(conn.server(), status);
                if whole && req.is_idempotent() && backends.retry_status(tries, conn.addr, status) {
                    // Not relayed: the request goes to another server
                    // (this connection, its response unread, is closed).
                    note_retry(conn.addr, Some(status));
                    conn = crate::cold::cold(backends.get(tries, limits.backend_connect_timeout))
                        .await
                        .map_err(|e| e.kind())?;
                    o.backend = Some(conn.addr);
                    r.give_back();
                    continue;
                }
                super::backend_answered(ctx, backends, o, conn.addr, tern_deadline::since(sent));
                return Ok((conn, r));
            }
            // A pooled connection the backend had closed: the request never
            // reached it, so one fresh attempt is safe when the whole request
            // is still in hand.
            Err(e) if e.untouched && conn.reused && whole && !retried => {
                retried = true;
                note_retry(conn.addr, None);
                conn =
                    crate::cold::cold(backends.connect(conn.addr, limits.backend_connect_timeout))
                        .await
                        .map_err(|e| e.kind())?;
            }
            Err(e) => {
                if e.kind == Kind::Timeout {
                    backends.timed_out(conn.server());
                }
                return Err(e.kind);
            }
        }
    }
}

/// Logs a retry: after the backend answered with a retried `status`, or
/// (`None`) on a pooled connection the backend had closed. Out of line:
/// a rare path.
#[cold]
#[inline(never)]
fn note_retry(addr: crate::config::BackendAddr, status: Option<u16>) {
    match status {
        Some(status) => {
            tracing::debug!(backend = %addr, "answered {status}; retrying on another server")
        }
        None => {
            tracing::debug!(backend = %addr, "pooled connection was closed; retrying on a new one")
        }
    }
}

/// Sends the part of the request body that was not at hand with the head,
/// a piece per write.
async fn send_rest<B: ClientBody>(
    body: &mut B,
    conn: &mut BackendStream,
    s: &mut H1Scratch,
    chunked: bool,
    t: Duration,
) -> Result<(), Kind> {
    loop {
        let (piece, last) = match body.step(true).await? {
            Step::Data(piece, last) => (piece, last),
            Step::End => (crate::message::Piece::Slice(&[]), true),
            Step::Trailers(trailers) => {
                s.out.clear();
                h1::push_trailers(&mut s.out, &trailers, chunked);
                return h1::write(conn, &s.out, t).await;
            }
            Step::NotYet => continue,
        };
        if chunked {
            s.out.clear();
            h1::push_body(&mut s.out, piece.as_slice(), true, last);
            h1::write(conn, &s.out, t).await?;
        } else if !piece.is_empty() {
            h1::write(conn, piece.as_slice(), t).await?;
        }
        if last {
            return Ok(());
        }
    }
}

/// Relays the interim response head in `r` and reads heads until the
/// final one, relaying interim ones; a backend's own `100 Continue` is
/// dropped when the client had one. Returns the response side holding the
/// final head.
async fn after_interim<B: ClientBody>(
    body: &mut B,
    conn: &mut BackendStream,
    wait: &mut Option<tern_deadline::Watchdog>,
    mut r: Box<H1Response>,
    deadline: tokio::time::Instant,
    sent_continue: bool,
) -> Result<Box<H1Response>, h1::HeadError> {
    while r.head.is_interim() {
        if !(r.head.status == 100 && sent_continue) {
            body.interim(&r.head).await.map_err(|kind| h1::HeadError {
                kind,
                untouched: false,
            })?;
        }
        r = h1::read_head(conn, wait, Some(r), deadline).await?;
    }
    Ok(r)
}

/// An HTTP/1.1 response body as steps.
struct H1Steps<'a> {
    body: &'a mut ResponseBody,
    conn: &'a mut BackendConn,
    s: &'a mut H1Response,
}

impl BodySteps for H1Steps<'_> {
    async fn step(&mut self, t: Option<Duration>) -> Result<Step<'_>, Kind> {
        let step = self.body.step(&mut self.conn.stream, self.s, t).await?;
        // Released before the last piece goes to the client: a client
        // that has its response and sends its next request elsewhere (a
        // new connection, another worker) must find this one gone from
        // least_conn's count, not a tie.
        if matches!(step, Step::Data(_, true) | Step::End | Step::Trailers(_)) {
            self.conn.response_ended();
        }
        Ok(step)
    }
}

/// Servers each worker has warned about (bounded: past it, no more warnings).
const SPLIT_WARNED_MAX: usize = 256;

thread_local! {
    static SPLIT_WARNED: std::cell::RefCell<Vec<crate::config::BackendAddr>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Counts a response whose small body the backend wrote apart from its
/// head, and warns once per server and worker: tern cuts the stall short,
/// but every other client of that backend (and tern's own latency budget)
/// pays for it, and the fix is on the backend.
fn note_split(ctx: &ConnCtx<'_>, backends: &Backends, server: crate::config::BackendAddr) {
    ctx.worker.metrics.backend_split_response();
    let first = SPLIT_WARNED.with(|warned| {
        let mut warned = warned.borrow_mut();
        if warned.contains(&server) || warned.len() >= SPLIT_WARNED_MAX {
            return false;
        }
        warned.push(server);
        true
    });
    if first {
        tracing::warn!(backend = %server, upstream = %backends.name(),
            "backend writes response heads and small bodies in separate writes: \
             with Nagle on its side each response would wait for a delayed ACK (~40 ms); \
             tern acknowledges at once (TCP_QUICKACK), but the backend should write \
             head and body together or set TCP_NODELAY \
             (counted in tern_backend_split_responses_total)");
    }
}
