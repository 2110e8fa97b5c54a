//! One HTTP/1.1 request relayed as one stream to an HTTP/2 (h2c or h2) backend, its
//! response written back as HTTP/1.1.
//!
//! The request body (Content-Length or chunked, decoded) becomes DATA
//! frames; the response gets the backend's Content-Length when it sent
//! one, else chunked coding (close-delimited for an HTTP/1.0 client), and
//! no body for HEAD, 1xx, 204 and 304. Keepalive follows the HTTP/1.1
//! path's rules, plus one: a backend that answers before it has taken the
//! whole request body leaves the client connection mid-request, so it is
//! closed after the response.
//!
//! `Upgrade` and `CONNECT` requests are answered 501: an HTTP/2 backend
//! has no `101 Switching Protocols`, and tern does not speak extended
//! CONNECT (RFC 8441) to backends.

use std::time::Instant;

use bytes::Bytes;
use futures_util::FutureExt;
use h2::{RecvStream, SendStream};
use tern_http::chunked::ChunkedScanner;
use tern_http::head::FieldKind;
use tern_http::rewrite::{
    h1_request_fields_for_h2, wants_close, wants_upgrade, write_response_head_from_h2,
};
use tern_http::{BodyFraming, RequestHead};
use tokio::io::{AsyncRead, AsyncWrite};

use super::{
    backend_request, backend_wait, connect_failure_status, is_end_to_end, send_flow_controlled,
};
use crate::backend::Backends;
use crate::conn::{ConnCtx, Outcome};
use crate::http1::exchange::{answer_error, write_client, ClientGone};
use crate::http1::Next;
use crate::iobuf::IoBuf;

impl From<ClientGone> for Failure {
    fn from(_: ClientGone) -> Failure {
        Failure::Client
    }
}

/// Which side failed before the client got a status line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// The client went away or stalled: nobody to answer.
    Client,
    /// Answer with this status and close.
    Status(u16),
}

/// Runs one exchange for `head` (already consumed from `cbuf`) with
/// `backends`, an HTTP/2 group, and logs it.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run<C>(
    client: &mut C,
    cbuf: &mut IoBuf,
    ctx: &ConnCtx<'_>,
    backends: &Backends,
    head: &RequestHead,
    framing: BodyFraming,
    head_len: u64,
    started: Instant,
) -> Next
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let mut p = Outcome {
        bytes_in: head_len,
        ..Outcome::default()
    };
    let next = match forward(client, cbuf, ctx, backends, head, framing, &mut p).await {
        Ok(next) => next,
        Err(Failure::Client) => {
            if p.status == 0 {
                p.status = 499;
            }
            Next::Close
        }
        Err(Failure::Status(status)) => {
            if p.status == 0 {
                answer_error(client, ctx, status, &mut p).await;
            }
            // The request body may be half read: the connection is not at
            // a request boundary.
            Next::Close
        }
    };
    ctx.log_request(head.method(), head.target(), &p, started);
    next
}

async fn forward<C>(
    client: &mut C,
    cbuf: &mut IoBuf,
    ctx: &ConnCtx<'_>,
    backends: &Backends,
    head: &RequestHead,
    framing: BodyFraming,
    p: &mut Outcome,
) -> Result<Next, Failure>
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    if wants_upgrade(head) || head.method() == "CONNECT" {
        tracing::warn!(client = %ctx.peer, upstream = %backends.name(),
            "{} cannot be relayed to an HTTP/2 upstream: answered 501",
            if wants_upgrade(head) { "Upgrade" } else { "CONNECT" });
        return Err(Failure::Status(501));
    }
    let limits = &ctx.listener.config.limits;
    let http10 = head.minor_version == 0;
    let client_close = http10 || wants_close(&head.fields);
    let no_body = matches!(framing, BodyFraming::Empty | BodyFraming::Length(0));
    let expects_continue = !no_body
        && cbuf.is_empty()
        && head
            .fields
            .first(FieldKind::Expect)
            .is_some_and(|v| v.eq_ignore_ascii_case(b"100-continue"));

    // Lives to the end of the exchange: it counts the request in flight
    // on its server (least_conn reads that).
    let mut stream = backends
        .get_h2(limits.backend_connect_timeout)
        .await
        .map_err(|e| Failure::Status(connect_failure_status(ctx, &e)))?;
    p.backend = Some(stream.addr);
    let addr = stream.addr;
    let request = backend_request(
        backends.protocol(),
        &http::Method::from_bytes(head.method().as_bytes()).map_err(|_| Failure::Status(400))?,
        origin_form(head.target()),
        head.fields.first(FieldKind::Host),
        addr,
        h1_request_fields_for_h2(head),
        ctx,
    )
    .map_err(|e| {
        tracing::debug!(client = %ctx.peer, "request not relayable over HTTP/2: {e}");
        Failure::Status(400)
    })?;
    let (response, mut upstream) = stream.sender.send_request(request, no_body).map_err(|e| {
        tracing::warn!(client = %ctx.peer, backend = %addr, "backend failed: {e}");
        Failure::Status(502)
    })?;
    let sent = Instant::now();
    if expects_continue {
        // The backend is reachable: let the client send its body.
        write_client(client, b"HTTP/1.1 100 Continue\r\n\r\n", ctx).await?;
    }

    // The request body, raced against an early response.
    let mut response = std::pin::pin!(tokio::time::timeout(backend_wait(ctx), response));
    let mut answered_early = false;
    let head_result = if no_body {
        (&mut response).await
    } else {
        let upload = upload(client, cbuf, framing, &mut upstream, ctx, &mut p.bytes_in);
        tokio::select! {
            r = upload => {
                r?;
                (&mut response).await
            }
            r = &mut response => {
                answered_early = true;
                r
            }
        }
    };
    let answer = match head_result {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            tracing::warn!(client = %ctx.peer, backend = %addr, "backend failed: {e}");
            upstream.send_reset(h2::Reason::CANCEL);
            return Err(Failure::Status(502));
        }
        Err(_) => {
            tracing::warn!(client = %ctx.peer, backend = %addr,
                "backend failed: no response head within the backend response timeout");
            upstream.send_reset(h2::Reason::CANCEL);
            return Err(Failure::Status(504));
        }
    };
    if answered_early {
        // The rest of the request body is of no use to the backend.
        upstream.send_reset(h2::Reason::CANCEL);
    }
    let took = sent.elapsed();
    p.backend_us = took.as_micros() as u64;
    ctx.worker
        .metrics
        .backend_response(backends.name(), addr, took);

    let shutting_down = *ctx.worker.shutdown.borrow();
    let close = client_close || answered_early || shutting_down;
    relay_response(client, answer, head, http10, close, ctx, p).await?;
    Ok(if close { Next::Close } else { Next::KeepAlive })
}

/// The request target in origin form: a client may send absolute form
/// (`http://host/path`), whose authority already went into `:authority`
/// via Host (RFC 9112 section 3.2.2 makes them agree).
fn origin_form(target: &str) -> &str {
    if target.starts_with('/') || target == "*" {
        return target;
    }
    match target.find("://") {
        Some(i) => {
            let rest = &target[i + 3..];
            rest.find('/').map_or("/", |slash| &rest[slash..])
        }
        None => target,
    }
}

/// Moves the rest of the request body (some may be in `cbuf` already)
/// to the backend stream, decoding chunked coding into plain DATA.
async fn upload<C>(
    client: &mut C,
    cbuf: &mut IoBuf,
    framing: BodyFraming,
    upstream: &mut SendStream<Bytes>,
    ctx: &ConnCtx<'_>,
    moved: &mut u64,
) -> Result<(), Failure>
where
    C: AsyncRead + Unpin,
{
    let idle = ctx.listener.config.limits.idle_timeout;
    let mut remaining = match framing {
        BodyFraming::Length(n) => n,
        _ => 0,
    };
    let mut scanner = ChunkedScanner::new();
    let mut payload = Vec::new();
    loop {
        if cbuf.is_empty() {
            match tokio::time::timeout(idle, cbuf.fill_from(client)).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return Err(Failure::Client),
            }
        }
        let (data, consumed, done) = if framing == BodyFraming::Chunked {
            payload.clear();
            let scan = scanner.decode(cbuf.filled(), &mut payload).map_err(|e| {
                tracing::debug!(client = %ctx.peer, "bad request body: {e}");
                Failure::Status(400)
            })?;
            (Bytes::copy_from_slice(&payload), scan.consumed, scan.done)
        } else {
            let take = remaining.min(cbuf.len() as u64) as usize;
            remaining -= take as u64;
            let data = Bytes::copy_from_slice(&cbuf.filled()[..take]);
            (data, take, remaining == 0)
        };
        cbuf.consume(consumed);
        *moved += consumed as u64;
        send_flow_controlled(upstream, data, done, backend_wait(ctx))
            .await
            .map_err(|e| {
                tracing::warn!(client = %ctx.peer, "backend failed during request body: {e:?}");
                Failure::Status(502)
            })?;
        if done {
            return Ok(());
        }
    }
}

/// Writes the backend's response to the client as HTTP/1.1.
async fn relay_response<C>(
    client: &mut C,
    answer: http::Response<RecvStream>,
    head: &RequestHead,
    http10: bool,
    close: bool,
    ctx: &ConnCtx<'_>,
    p: &mut Outcome,
) -> Result<(), Failure>
where
    C: AsyncWrite + Unpin,
{
    let (parts, mut recv) = answer.into_parts();
    let status = parts.status.as_u16();
    let bodiless = head.is_head() || (100..200).contains(&status) || status == 204 || status == 304;
    let has_length = parts.headers.contains_key(http::header::CONTENT_LENGTH);
    // Without a length, HTTP/1.1 clients get chunked coding; HTTP/1.0
    // clients cannot read it and get a body delimited by the close.
    let chunked = !bodiless && !has_length && !http10;
    let mut out = Vec::with_capacity(1024);
    write_response_head_from_h2(
        status,
        parts.status.canonical_reason().unwrap_or(""),
        parts
            .headers
            .iter()
            .filter(|(n, _)| is_end_to_end(n))
            .map(|(n, v)| (n.as_str(), v.as_bytes())),
        chunked,
        close,
        &mut out,
    );
    p.status = status;
    if bodiless || recv.is_end_stream() {
        if chunked {
            out.extend_from_slice(b"0\r\n\r\n");
        }
        // A body the backend sent anyway (to HEAD, say) is not relayed.
        write_client(client, &out, ctx).await?;
        p.bytes_out += out.len() as u64;
        return Ok(());
    }
    // The head leaves with whatever body is already here, in one write;
    // when none is, it leaves alone rather than wait for the body.
    let mut ready = recv.data().now_or_never();
    let mut head_sent = false;
    if ready.is_none() {
        write_client(client, &out, ctx).await?;
        p.bytes_out += out.len() as u64;
        out.clear();
        head_sent = true;
    }
    loop {
        let next = match ready.take() {
            Some(next) => next,
            None => match tokio::time::timeout(backend_wait(ctx), recv.data()).await {
                Ok(next) => next,
                // Only awaited once the status line is out: cut short.
                Err(_) => {
                    tracing::warn!(client = %ctx.peer, backend = ?p.backend,
                        "backend failed during response body: nothing within the backend response timeout");
                    return Err(Failure::Client);
                }
            },
        };
        let mut release = 0;
        let mut done = false;
        match next {
            None => {
                if chunked {
                    out.extend_from_slice(b"0\r\n\r\n");
                }
                done = true;
            }
            Some(Err(e)) => {
                tracing::warn!(client = %ctx.peer, backend = ?p.backend,
                    "backend failed during response body: {e}");
                if head_sent {
                    // The status line is out: all that is left is to cut
                    // the response short so the client sees it incomplete.
                    return Err(Failure::Client);
                }
                p.status = 0;
                return Err(Failure::Status(502));
            }
            Some(Ok(chunk)) => {
                release = chunk.len();
                if chunked && !chunk.is_empty() {
                    out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                    out.extend_from_slice(&chunk);
                    out.extend_from_slice(b"\r\n");
                } else {
                    out.extend_from_slice(&chunk);
                }
                if recv.is_end_stream() {
                    if chunked {
                        out.extend_from_slice(b"0\r\n\r\n");
                    }
                    done = true;
                }
            }
        }
        write_client(client, &out, ctx).await?;
        p.bytes_out += out.len() as u64;
        out.clear();
        head_sent = true;
        // The backend may send more only once this piece is out: a slow
        // client holds back its backend stream, not tern's memory.
        let _ = recv.flow_control().release_capacity(release);
        if done {
            return Ok(());
        }
    }
}
