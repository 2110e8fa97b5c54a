//! One HTTP/2 client stream relayed as one stream to an HTTP/2 (h2c or
//! h2) backend.
//!
//! Phases: open a backend stream (raced against a client reset) → the
//! request body goes up while tern waits for the response head → the
//! response head goes down → the response body goes down while the rest
//! of the request body (if any) still goes up. A client reset resets the
//! backend stream, and a backend reset after the head resets the client's.

use std::cell::Cell;
use std::future::poll_fn;
use std::time::Instant;

use bytes::Bytes;
use h2::client::ResponseFuture;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::{HeaderValue, Request, Response, StatusCode};
use tern_http::rewrite::keeps_h2_request_field_for_h2;

use super::{
    backend_request, backend_wait, connect_failure_status, end_stream, is_end_to_end,
    send_flow_controlled, SendError, StreamEnd,
};
use crate::backend::{Backends, H2Stream};
use crate::conn::{ConnCtx, Outcome};

/// Relays one client stream to `backends` (an HTTP/2 group) and logs it.
pub(crate) async fn handle(
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    ctx: &ConnCtx<'_>,
    backends: &Backends,
) -> StreamEnd {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let mut o = Outcome::default();
    let end = relay(&parts, body, &mut respond, ctx, backends, &mut o).await;
    ctx.log_request(
        parts.method.as_str(),
        parts.uri.path_and_query().map_or("/", |p| p.as_str()),
        &o,
        started,
    );
    end
}

async fn relay(
    parts: &http::request::Parts,
    mut body: RecvStream,
    respond: &mut SendResponse<Bytes>,
    ctx: &ConnCtx<'_>,
    backends: &Backends,
    o: &mut Outcome,
) -> StreamEnd {
    if parts.method == http::Method::CONNECT {
        tracing::warn!(client = %ctx.peer, upstream = %backends.name(),
            "CONNECT cannot be relayed to an HTTP/2 upstream: answered 501");
        return answer_status(respond, 501, o);
    }
    let opened = tokio::select! {
        r = open_stream(parts, body.is_end_stream(), ctx, backends, o) => r,
        _ = poll_fn(|cx| respond.poll_reset(cx)) => return StreamEnd::ClientReset,
    };
    // `_held` keeps the request counted in flight on its server (for
    // least_conn) until the exchange is over.
    let (response, mut upstream, _held) = match opened {
        Ok(opened) => opened,
        Err(status) => return answer_status(respond, status, o),
    };
    let counted = Counted::default();
    let finish = exchange(
        &mut body,
        respond,
        response,
        &mut upstream,
        ctx,
        backends,
        &counted,
        o,
    )
    .await;
    o.bytes_in += counted.up.get();
    o.bytes_out += counted.down.get();
    if finish != Finish::Clean {
        // Whatever is left of the exchange is of no use to anyone: stop the
        // backend's work on it.
        upstream.send_reset(h2::Reason::CANCEL);
    }
    match finish {
        Finish::ClientReset => StreamEnd::ClientReset,
        _ => StreamEnd::Answered,
    }
}

/// A stream on a backend session with the request head sent (and the
/// session handle that counts it in flight); an error is the status to
/// answer.
async fn open_stream(
    parts: &http::request::Parts,
    no_body: bool,
    ctx: &ConnCtx<'_>,
    backends: &Backends,
    o: &mut Outcome,
) -> Result<(ResponseFuture, SendStream<Bytes>, H2Stream), u16> {
    let connect_timeout = ctx.listener.config.limits.backend_connect_timeout;
    let authority = crate::h2::request_host(parts);
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    // A session can die between the pick and the send (GOAWAY in flight);
    // nothing reached the backend then, so one more pick is safe.
    let mut retried = false;
    loop {
        let mut stream = backends
            .get_h2(connect_timeout)
            .await
            .map_err(|e| connect_failure_status(ctx, &e))?;
        o.backend = Some(stream.addr);
        let fields = parts
            .headers
            .iter()
            .filter(|(n, _)| keeps_h2_request_field_for_h2(n.as_str()))
            .map(|(n, v)| (n.as_str(), v.as_bytes()));
        let protocol = backends.protocol();
        let request = backend_request(
            protocol,
            &parts.method,
            path,
            authority,
            stream.addr,
            fields,
            ctx,
        )
        .map_err(|e| {
            tracing::debug!(client = %ctx.peer, "request not relayable over HTTP/2: {e}");
            400u16
        })?;
        match stream.sender.send_request(request, no_body) {
            Ok((response, upstream)) => return Ok((response, upstream, stream)),
            Err(e) if !retried => {
                tracing::debug!(backend = %stream.addr, "HTTP/2 send failed, picking again: {e}");
                retried = true;
            }
            Err(e) => {
                tracing::warn!(client = %ctx.peer, backend = %stream.addr, "backend failed: {e}");
                return Err(502);
            }
        }
    }
}

/// Body bytes moved each way, counted where both directions run at once.
#[derive(Default)]
struct Counted {
    up: Cell<u64>,
    down: Cell<u64>,
}

/// How an exchange that got a backend stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finish {
    /// Both directions completed.
    Clean,
    /// The client reset its stream (or went away).
    ClientReset,
    /// Answered with an error status, or the backend failed mid-body.
    Failed,
    /// The backend finished its response before taking the whole request.
    AnsweredEarly,
}

/// Why the request body stopped going up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UploadError {
    /// The client reset the stream.
    ClientReset,
    /// The client sent nothing for the idle timeout.
    ClientStalled,
    /// The backend reset the stream or held its window shut.
    Backend,
}

#[allow(clippy::too_many_arguments)]
async fn exchange(
    body: &mut RecvStream,
    respond: &mut SendResponse<Bytes>,
    response: ResponseFuture,
    upstream: &mut SendStream<Bytes>,
    ctx: &ConnCtx<'_>,
    backends: &Backends,
    counted: &Counted,
    o: &mut Outcome,
) -> Finish {
    let sent = Instant::now();
    let mut upload_done = body.is_end_stream();
    let upload = upload(body, upstream, ctx, &counted.up);
    tokio::pin!(upload);

    // The response head, while the request body goes up.
    let head = tokio::time::timeout(backend_wait(ctx), response);
    tokio::pin!(head);
    let head = loop {
        tokio::select! {
            r = &mut upload, if !upload_done => {
                upload_done = true;
                match r {
                    Ok(()) => {}
                    Err(UploadError::ClientReset) => return Finish::ClientReset,
                    Err(UploadError::ClientStalled) => {
                        answer_status(respond, 408, o);
                        return Finish::Failed;
                    }
                    // The backend may have answered and reset the rest of
                    // the request: its head (or its error) decides.
                    Err(UploadError::Backend) => {}
                }
            }
            r = &mut head => break r,
            _ = poll_fn(|cx| respond.poll_reset(cx)) => return Finish::ClientReset,
        }
    };
    let addr = o.backend;
    let response = match head {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            tracing::warn!(client = %ctx.peer, backend = ?addr, "backend failed: {e}");
            answer_status(respond, 502, o);
            return Finish::Failed;
        }
        Err(_) => {
            tracing::warn!(client = %ctx.peer, backend = ?addr,
                "backend failed: no response head within the backend response timeout");
            answer_status(respond, 504, o);
            return Finish::Failed;
        }
    };
    let took = sent.elapsed();
    o.backend_us = took.as_micros() as u64;
    if let Some(addr) = addr {
        ctx.worker
            .metrics
            .backend_response(backends.name(), addr, took);
    }

    // The response head.
    let (parts, mut recv) = response.into_parts();
    let mut head = Response::new(());
    *head.status_mut() = parts.status;
    for (name, value) in parts.headers.iter().filter(|(n, _)| is_end_to_end(n)) {
        head.headers_mut().append(name.clone(), value.clone());
    }
    let end_of_stream = recv.is_end_stream();
    let mut send = match respond.send_response(head, end_of_stream) {
        Ok(s) => s,
        Err(_) => return Finish::ClientReset,
    };
    o.status = parts.status.as_u16();

    // The response body, while the rest of the request body goes up.
    let pumped = if end_of_stream {
        Ok(())
    } else {
        let pump = pump(&mut recv, &mut send, ctx, &counted.down);
        tokio::pin!(pump);
        loop {
            tokio::select! {
                r = &mut upload, if !upload_done => {
                    upload_done = true;
                    if r == Err(UploadError::ClientReset) {
                        break Err(PumpEnd::ClientGone);
                    }
                }
                r = &mut pump => break r,
            }
        }
    };
    match pumped {
        Ok(()) if upload_done => Finish::Clean,
        Ok(()) => Finish::AnsweredEarly,
        Err(PumpEnd::ClientGone) => Finish::ClientReset,
        Err(PumpEnd::Backend) => {
            tracing::warn!(client = %ctx.peer, backend = ?addr, "backend failed during response body");
            send.send_reset(h2::Reason::INTERNAL_ERROR);
            Finish::Failed
        }
    }
}

/// Moves the client's request body to the backend stream, releasing the
/// client's window only as pieces are handed on.
async fn upload(
    body: &mut RecvStream,
    upstream: &mut SendStream<Bytes>,
    ctx: &ConnCtx<'_>,
    moved: &Cell<u64>,
) -> Result<(), UploadError> {
    let idle = ctx.listener.config.limits.idle_timeout;
    loop {
        let chunk = match tokio::time::timeout(idle, body.data()).await {
            // A stalled upload is not a reset: it must not count against
            // the client's reset budget.
            Err(_) => return Err(UploadError::ClientStalled),
            Ok(None) => return end_stream(upstream).map_err(|_| UploadError::Backend),
            Ok(Some(Err(_))) => return Err(UploadError::ClientReset),
            Ok(Some(Ok(chunk))) => chunk,
        };
        let n = chunk.len();
        // h2 has checked the DATA against any Content-Length already.
        let last = body.is_end_stream();
        send_flow_controlled(upstream, chunk, last, backend_wait(ctx))
            .await
            .map_err(|_| UploadError::Backend)?;
        moved.set(moved.get() + n as u64);
        let _ = body.flow_control().release_capacity(n);
        if last {
            return Ok(());
        }
    }
}

enum PumpEnd {
    ClientGone,
    Backend,
}

/// Moves the backend's response body to the client as fast as the
/// client's window lets it leave, releasing the backend's window only as
/// pieces are handed on (so a slow client holds back its backend stream,
/// not tern's memory).
async fn pump(
    recv: &mut RecvStream,
    send: &mut SendStream<Bytes>,
    ctx: &ConnCtx<'_>,
    moved: &Cell<u64>,
) -> Result<(), PumpEnd> {
    let idle = ctx.listener.config.limits.idle_timeout;
    loop {
        let chunk = match tokio::time::timeout(backend_wait(ctx), recv.data()).await {
            Ok(None) => return end_stream(send).map_err(|_| PumpEnd::ClientGone),
            Ok(Some(Ok(chunk))) => chunk,
            Ok(Some(Err(_))) | Err(_) => return Err(PumpEnd::Backend),
        };
        let n = chunk.len();
        let last = recv.is_end_stream();
        send_flow_controlled(send, chunk, last, idle)
            .await
            .map_err(|e| match e {
                SendError::Gone | SendError::Stalled => PumpEnd::ClientGone,
            })?;
        moved.set(moved.get() + n as u64);
        let _ = recv.flow_control().release_capacity(n);
        if last {
            return Ok(());
        }
    }
}

/// Answers the stream with a short text error; records the status.
fn answer_status(respond: &mut SendResponse<Bytes>, status: u16, o: &mut Outcome) -> StreamEnd {
    o.status = status;
    let body = match status {
        400 => "bad request\n",
        408 => "request timeout\n",
        501 => "not implemented\n",
        503 => "service unavailable\n",
        504 => "gateway timeout\n",
        _ => "bad gateway\n",
    };
    let mut response = Response::new(());
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    if let Ok(mut send) = respond.send_response(response, false) {
        if send
            .send_data(Bytes::from_static(body.as_bytes()), true)
            .is_ok()
        {
            o.bytes_out += body.len() as u64;
        }
    }
    StreamEnd::Answered
}
