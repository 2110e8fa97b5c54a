//! One HTTP/2 stream relayed to an HTTP/1.1 backend.

use std::cell::RefCell;
use std::future::poll_fn;
use std::time::Instant;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use tern_http::chunked::ChunkedScanner;
use tern_http::framing::{parse_content_length, response_framing};
use tern_http::head::{parse_response_into, FieldKind, ResponseHead};
use tern_http::rewrite::{wants_close, write_request_head_from_h2, ClientFacts, H1BodyFraming};
use tern_http::BodyFraming;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::backend::{BackendConn, Backends, ConnectError};
use crate::conn::{ConnCtx, Outcome};
use crate::deadline::{within, Watchdog};
use crate::http1::exchange::{read_one_head, ResponseError, MAX_RESPONSE_HEAD};
use crate::iobuf::IoBuf;

/// How a stream ended, for the connection's reset budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// Answered (successfully or with an error status).
    Done,
    /// The client reset it before it was answered in full.
    ClientReset,
}

/// A failure before the response head went out: answered with a status.
enum Fail {
    /// Answer with this status (400, 502, 503, 504).
    Status(u16),
    /// The client reset the stream; nothing to answer.
    Reset,
}

/// The buffers a stream works in: the request head for the backend, the
/// backend's bytes and its parsed response head; and the timer bounding
/// the wait for that head.
///
/// Streams are short and many, so each worker keeps spare sets instead of
/// allocating (and zeroing) three buffers per stream.
struct Scratch {
    out: Vec<u8>,
    bbuf: IoBuf,
    head: ResponseHead,
    backend_wait: Option<Watchdog>,
}

/// Spare scratch sets kept per worker (each about 5 KiB).
const SPARE_SCRATCH: usize = 256;

/// A scratch set that grew past this (a large response head) is freed
/// rather than kept.
const SCRATCH_KEEP_LIMIT: usize = 16 * 1024;

thread_local! {
    static SPARE: RefCell<Vec<Scratch>> = const { RefCell::new(Vec::new()) };
}

impl Scratch {
    fn take() -> Scratch {
        SPARE
            .with(|spare| spare.borrow_mut().pop())
            .unwrap_or_else(|| Scratch {
                out: Vec::with_capacity(1024),
                // Small at first: most h2 responses are small, and the
                // buffer grows (to its bound) for large ones.
                bbuf: IoBuf::new(4 * 1024, MAX_RESPONSE_HEAD),
                head: ResponseHead::default(),
                backend_wait: None,
            })
    }

    fn give_back(mut self) {
        if self.bbuf.capacity() > SCRATCH_KEEP_LIMIT
            || self.out.capacity() > SCRATCH_KEEP_LIMIT
            || self.head.fields.raw_capacity() > SCRATCH_KEEP_LIMIT
        {
            return;
        }
        self.out.clear();
        self.bbuf.clear();
        SPARE.with(|spare| {
            let mut spare = spare.borrow_mut();
            if spare.len() < SPARE_SCRATCH {
                spare.push(self);
            }
        });
    }
}

/// The host a request that arrived over HTTP/2 names: its `:authority`,
/// else its `host` field. It routes the request and becomes the backend's
/// Host (or `:authority`).
pub(crate) fn request_host(parts: &http::request::Parts) -> Option<&[u8]> {
    let authority = parts.uri.authority().map(|a| a.as_str().as_bytes());
    authority.or_else(|| {
        parts
            .headers
            .get(http::header::HOST)
            .map(HeaderValue::as_bytes)
    })
}

/// Handles one stream to the end.
pub(super) async fn handle(
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    ctx: &ConnCtx<'_>,
) -> End {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let host = request_host(&parts);
    let backends = ctx.listener.route(ctx.tls.sni.as_deref(), host);
    if backends.protocol().is_http2() {
        use crate::upstream_h2::{from_h2, StreamEnd};
        let request = Request::from_parts(parts, body);
        // Boxed: the HTTP/2 relay's state would otherwise enlarge every
        // stream's future (allocated and moved per stream).
        return match Box::pin(from_h2::handle(request, respond, ctx, backends)).await {
            StreamEnd::Answered => End::Done,
            StreamEnd::ClientReset => End::ClientReset,
        };
    }
    let mut scratch = Scratch::take();
    let mut o = Outcome::default();
    let target = Target { backends, host };
    let end = relay(
        &parts,
        target,
        body,
        &mut respond,
        ctx,
        &mut scratch,
        &mut o,
    )
    .await;
    scratch.give_back();
    ctx.log_request(
        parts.method.as_str(),
        parts.uri.path_and_query().map_or("/", |p| p.as_str()),
        &o,
        started,
    );
    end
}

/// Where a stream goes: the group it was routed to, and the host it named.
struct Target<'a> {
    backends: &'a Backends,
    host: Option<&'a [u8]>,
}

async fn relay(
    parts: &http::request::Parts,
    target: Target<'_>,
    mut body: RecvStream,
    respond: &mut SendResponse<Bytes>,
    ctx: &ConnCtx<'_>,
    scratch: &mut Scratch,
    o: &mut Outcome,
) -> End {
    // Phase 1, raced against a client reset: request to the backend and its
    // response head.
    let exchange = send_request(parts, target, &mut body, ctx, scratch, o);
    let result = tokio::select! {
        r = exchange => r,
        _ = poll_fn(|cx| respond.poll_reset(cx)) => Err(Fail::Reset),
    };
    let (mut backend, backends, framing) = match result {
        Ok(x) => x,
        Err(Fail::Reset) => return End::ClientReset,
        Err(Fail::Status(status)) => {
            o.status = status;
            let _ = answer_status(respond, status);
            return End::Done;
        }
    };

    // Phase 2: the response head.
    let Scratch { bbuf, head, .. } = scratch;
    let end_of_stream = matches!(framing, BodyFraming::Empty);
    let response = match to_h2_response(head, framing) {
        Some(r) => r,
        None => {
            o.status = 502;
            let _ = answer_status(respond, 502);
            return End::Done;
        }
    };
    let mut send = match respond.send_response(response, end_of_stream) {
        Ok(s) => s,
        Err(_) => return End::ClientReset,
    };
    o.status = head.status;
    if end_of_stream {
        reuse(backends, backend, bbuf, head, framing);
        return End::Done;
    }

    // Phase 3: the body, read from the backend only as fast as the client's
    // flow-control window lets it leave.
    match pump_response(&mut backend.stream, bbuf, &mut send, framing, ctx, o).await {
        Ok(()) => {
            reuse(backends, backend, bbuf, head, framing);
            End::Done
        }
        Err(PumpEnd::ClientGone) => End::ClientReset,
        Err(PumpEnd::Backend) => {
            send.send_reset(h2::Reason::INTERNAL_ERROR);
            End::Done
        }
    }
}

/// The backend connection with the response head in the scratch set.
type Exchanged<'b> = (BackendConn, &'b Backends, BodyFraming);

async fn send_request<'b>(
    parts: &http::request::Parts,
    Target { backends, host }: Target<'b>,
    body: &mut RecvStream,
    ctx: &ConnCtx<'_>,
    scratch: &mut Scratch,
    o: &mut Outcome,
) -> Result<Exchanged<'b>, Fail> {
    let limits = &ctx.listener.config.limits;
    if parts.method == http::Method::CONNECT {
        return Err(Fail::Status(501));
    }
    let framing = if body.is_end_stream() {
        H1BodyFraming::Empty
    } else {
        match parts.headers.get(http::header::CONTENT_LENGTH) {
            Some(v) => match parse_content_length(v.as_bytes()) {
                Ok(n) => H1BodyFraming::Length(n),
                Err(_) => return Err(Fail::Status(400)),
            },
            None => H1BodyFraming::Chunked,
        }
    };
    let facts = ClientFacts {
        ip: ctx.peer.ip(),
        proto: "https",
    };
    let Scratch {
        out,
        bbuf,
        head,
        backend_wait,
    } = scratch;
    write_request_head_from_h2(
        parts.method.as_str(),
        parts.uri.path_and_query().map_or("/", |p| p.as_str()),
        host,
        parts
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_bytes())),
        framing,
        &facts,
        ctx.listener.config.forwarded,
        out,
    );
    o.bytes_in += out.len() as u64;
    let mut backend = backends
        .get(limits.backend_connect_timeout)
        .await
        .map_err(|e| {
            tracing::warn!(client = %ctx.peer, "backend unavailable: {e}");
            Fail::Status(match e {
                ConnectError::Timeout(_) => 504,
                ConnectError::AllDown(_) => 503,
                _ => 502,
            })
        })?;
    o.backend = Some(backend.addr);
    let sent = Instant::now();
    let t = limits.backend_response_timeout;
    write_backend(&mut backend.stream, out, t).await?;
    if framing != H1BodyFraming::Empty {
        let mut received = 0u64;
        loop {
            let chunk = match tokio::time::timeout(limits.idle_timeout, body.data()).await {
                // A stalled upload is not a reset: it must not count
                // against the client's reset budget.
                Err(_) => return Err(Fail::Status(408)),
                Ok(None) => break,
                Ok(Some(Err(_))) => return Err(Fail::Reset),
                Ok(Some(Ok(chunk))) => chunk,
            };
            let n = chunk.len();
            received += n as u64;
            if let H1BodyFraming::Length(declared) = framing {
                if received > declared {
                    return Err(Fail::Status(400));
                }
            }
            let bytes = match framing {
                H1BodyFraming::Chunked if n > 0 => {
                    let mut b = Vec::with_capacity(n + 12);
                    b.extend_from_slice(format!("{n:x}\r\n").as_bytes());
                    b.extend_from_slice(&chunk);
                    b.extend_from_slice(b"\r\n");
                    b
                }
                _ => chunk.to_vec(),
            };
            if !bytes.is_empty() {
                write_backend(&mut backend.stream, &bytes, t).await?;
            }
            let _ = body.flow_control().release_capacity(n);
        }
        o.bytes_in += received;
        match framing {
            H1BodyFraming::Length(declared) if received != declared => {
                return Err(Fail::Status(400))
            }
            H1BodyFraming::Chunked => write_backend(&mut backend.stream, b"0\r\n\r\n", t).await?,
            _ => {}
        }
    }
    let deadline = tokio::time::Instant::from_std(sent) + limits.backend_response_timeout;
    let watchdog = Watchdog::set_in(backend_wait, deadline);
    loop {
        let len = read_one_head(&mut backend.stream, bbuf, watchdog)
            .await
            .map_err(|e| {
                tracing::warn!(client = %ctx.peer, backend = %backend.addr, "backend failed: {e}");
                Fail::Status(if matches!(e, ResponseError::Timeout) {
                    504
                } else {
                    502
                })
            })?;
        parse_response_into(&bbuf.filled()[..len], head).map_err(|_| Fail::Status(502))?;
        bbuf.consume(len);
        // Interim responses (100 Continue, 103) are not relayed over h2.
        if !head.is_interim() {
            break;
        }
    }
    let took = sent.elapsed();
    o.backend_us = took.as_micros() as u64;
    ctx.worker
        .metrics
        .backend_response(backends.name(), backend.addr, took);
    let is_head = parts.method == http::Method::HEAD;
    let framing = response_framing(is_head, false, head).map_err(|_| Fail::Status(502))?;
    if head.status == 101 {
        return Err(Fail::Status(502));
    }
    Ok((backend, backends, framing))
}

async fn write_backend(
    stream: &mut TcpStream,
    bytes: &[u8],
    t: std::time::Duration,
) -> Result<(), Fail> {
    match within(t, stream.write_all(bytes)).await {
        Some(Ok(())) => Ok(()),
        _ => Err(Fail::Status(502)),
    }
}

/// The HTTP/2 response for a backend's head; None when a field cannot be
/// carried (invalid name or value).
fn to_h2_response(head: &ResponseHead, framing: BodyFraming) -> Option<Response<()>> {
    let mut response = Response::new(());
    *response.status_mut() = StatusCode::from_u16(head.status).ok()?;
    let headers = response.headers_mut();
    headers.reserve(head.fields.len());
    // One copy of the head shared by every value (each would otherwise be
    // its own allocation).
    let raw = Bytes::copy_from_slice(head.fields.raw());
    let names_in_connection = head.fields.connection_names_fields();
    for (name, kind, value) in head.fields.iter_spans() {
        if kind.is_connection_specific() {
            continue;
        }
        // Content-Length describes the body (or, for HEAD and 304, the body
        // a GET would get); only a chunked or close-delimited response has
        // none to keep.
        if kind == FieldKind::ContentLength {
            if matches!(framing, BodyFraming::Chunked | BodyFraming::UntilClose) {
                continue;
            }
        } else if names_in_connection && head.fields.kind_has_token(FieldKind::Connection, name) {
            // Fields the backend named in Connection are hop-by-hop.
            continue;
        }
        let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
        let value = HeaderValue::from_maybe_shared(raw.slice(value)).ok()?;
        headers.append(name, value);
    }
    Some(response)
}

fn answer_status(respond: &mut SendResponse<Bytes>, status: u16) -> Result<(), h2::Error> {
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
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
        .headers_mut()
        .insert(http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    let mut send = respond.send_response(response, false)?;
    send.send_data(Bytes::from_static(body.as_bytes()), true)
}

enum PumpEnd {
    ClientGone,
    Backend,
}

async fn pump_response(
    backend: &mut TcpStream,
    bbuf: &mut IoBuf,
    send: &mut SendStream<Bytes>,
    framing: BodyFraming,
    ctx: &ConnCtx<'_>,
    o: &mut Outcome,
) -> Result<(), PumpEnd> {
    let limits = &ctx.listener.config.limits;
    let mut remaining = match framing {
        BodyFraming::Length(n) => n,
        _ => u64::MAX,
    };
    let mut scanner = ChunkedScanner::new();
    // Only a chunked body is decoded into here; the others are sent straight
    // from the read buffer.
    let mut payload = Vec::new();
    let mut done = false;
    while !done {
        if bbuf.is_empty() {
            match tokio::time::timeout(limits.backend_response_timeout, bbuf.fill_from(backend))
                .await
            {
                Ok(Ok(0)) if framing == BodyFraming::UntilClose => {
                    done = true;
                }
                Ok(Ok(n)) if n > 0 => {}
                _ => return Err(PumpEnd::Backend),
            }
        }
        let mut data = match framing {
            BodyFraming::Chunked => {
                payload.clear();
                let scan = scanner
                    .decode(bbuf.filled(), &mut payload)
                    .map_err(|_| PumpEnd::Backend)?;
                bbuf.consume(scan.consumed);
                done = scan.done;
                Bytes::copy_from_slice(&payload)
            }
            BodyFraming::Length(_) => {
                let take = remaining.min(bbuf.len() as u64) as usize;
                let data = Bytes::copy_from_slice(&bbuf.filled()[..take]);
                bbuf.consume(take);
                remaining -= take as u64;
                done = remaining == 0;
                data
            }
            _ => {
                let data = Bytes::copy_from_slice(bbuf.filled());
                bbuf.consume(data.len());
                data
            }
        };
        let sent_any = !data.is_empty();
        while !data.is_empty() {
            send.reserve_capacity(data.len());
            // The connection's window usually grants the reservation at once;
            // only a client that holds its window back makes us wait.
            let cap = match send.capacity() {
                0 => {
                    let granted = tokio::time::timeout(
                        limits.idle_timeout,
                        poll_fn(|cx| send.poll_capacity(cx)),
                    )
                    .await;
                    match granted {
                        Ok(Some(Ok(cap))) if cap > 0 => cap,
                        Ok(Some(Ok(_))) => continue,
                        _ => return Err(PumpEnd::ClientGone),
                    }
                }
                cap => cap,
            };
            let piece = data.split_to(cap.min(data.len()));
            o.bytes_out += piece.len() as u64;
            let last = done && data.is_empty();
            send.send_data(piece, last)
                .map_err(|_| PumpEnd::ClientGone)?;
        }
        if done && !sent_any {
            send.send_data(Bytes::new(), true)
                .map_err(|_| PumpEnd::ClientGone)?;
        }
    }
    Ok(())
}

fn reuse(
    backends: &Backends,
    backend: BackendConn,
    bbuf: &IoBuf,
    head: &ResponseHead,
    framing: BodyFraming,
) {
    if !framing.is_until_close()
        && !wants_close(&head.fields)
        && head.minor_version >= 1
        && bbuf.is_empty()
    {
        backends.put(backend);
    }
}
