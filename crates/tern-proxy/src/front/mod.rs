//! Front ends: one client connection from accept to close. The TLS
//! handshake under a deadline (after an optional PROXY header), then the
//! listener mode's protocol: HTTP/1.1 ([`h1`]) or HTTP/2 ([`h2`]), which
//! turn client traffic into exchanges for [`crate::exchange`], or a TCP
//! tunnel ([`tcp`]). HTTP/3 ([`h3`]) arrives over QUIC instead: one QUIC
//! connection from its handshake to close, its request streams exchanges
//! like HTTP/2's.

mod backend_values;
mod client_tls;
mod gate;
mod h1;
pub(crate) mod h2;
pub(crate) mod h3;
mod http_parts;
pub(crate) mod proxy_header;
mod proxy_in;
mod tcp;

pub(crate) use proxy_in::{decode_v1 as decode_proxy_v1, decode_v2 as decode_proxy_v2};

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant;

use tern_tls::Negotiated;
use tokio::net::TcpStream;

use crate::access_log::Record;
use crate::exchange::clients::{ClientKey, ConnSlot, Refused};
use crate::fault::{ExchangeError, Kind};

use crate::config::Mode;
use crate::exchange::{ConnCtx, ListenerCtx, WorkerCtx};
use crate::metrics::HandshakeFailure;

/// Request-body flow-control window per stream, for HTTP/2 and HTTP/3
/// alike: how much a client may send on one request before tern has
/// forwarded it to the backend.
pub(crate) const STREAM_WINDOW: u32 = 256 * 1024;

/// Connection-level request-body window, for HTTP/2 and HTTP/3 alike.
pub(crate) const CONNECTION_WINDOW: u32 = 1024 * 1024;

/// Handles one accepted connection to the end. `_held` (the worker's
/// count of the connection) is dropped when the connection ends: taken
/// here rather than by an async block around this future, which was one
/// more future for every poll of the connection's task to pass through
/// (53 instructions and 4 simulated I1 misses a keepalive request,
/// callgrind) and held the arguments a second time.
pub(crate) async fn handle(
    mut tcp: TcpStream,
    mut peer: SocketAddr,
    listener: Rc<ListenerCtx>,
    worker: Rc<WorkerCtx>,
    _held: crate::control::worker::ConnGuard,
) {
    // Before the handshake: the server flight must not wait on Nagle.
    nodelay_unless_inherited(&tcp, peer);
    let limits = &listener.config.limits;
    let start = Instant::now();
    if let Some(trusted) = &listener.config.accept_proxy {
        let header = proxy_in::read_header(&mut tcp, peer, trusted, limits.handshake_timeout);
        match Box::pin(header).await {
            Ok(client) => peer = client,
            Err(e) => {
                tracing::debug!(source = %peer, "closing: {e}");
                return;
            }
        }
    }
    // Before any TLS work: a denied client or one over its connection
    // limit costs an accept and a close.
    let _slot = match admit(peer, &listener, &worker) {
        Ok(slot) => slot,
        Err(kind) => {
            turned_away(peer, &listener, &worker, kind, start);
            return;
        }
    };
    // rustls sends the alert that says why a handshake failed. Boxed, like
    // the front ends below: the handshake's state (a whole rustls
    // connection mid-handshake) would otherwise size the task's future,
    // and so every idle connection, for the connection's life.
    let handshake = Box::pin(accept(tcp, &listener));
    // Wrapped as it comes: a second local holding the stream (over a
    // kilobyte, a whole rustls connection) would take its own room in
    // the task's future for the connection's life.
    let Some(mut tls) = under_deadline(handshake, peer, &listener, &worker, "TLS", |e| {
        HandshakeFailure::of(e)
    })
    .await
    .map(client_tls::ClientTls::new) else {
        return;
    };
    let handshake_us = start.elapsed().as_micros() as u64;
    let negotiated = tern_tls::negotiated(tls.get_ref().1);
    if !client_cert_present_if_required(&listener, &negotiated, peer, &worker) {
        return;
    }
    worker.metrics.handshake(&negotiated, start.elapsed());
    let ctx = ConnCtx::new(peer, negotiated, handshake_us, &listener, &worker);
    if ctx.tls.alpn.as_deref() == Some("acme-tls/1") {
        // An ACME validator: the handshake (with the challenge
        // certificate) was the whole exchange (RFC 8737 section 3).
        let _ = tokio::time::timeout(
            limits.handshake_timeout,
            tokio::io::AsyncWriteExt::shutdown(&mut tls),
        )
        .await;
        return;
    }
    // A task's future is allocated at its largest state for the whole
    // connection: boxed, the HTTP/2 and TCP front ends (the HTTP/2 one
    // holds a whole h2 connection) do not enlarge every HTTP/1.1
    // connection, idle ones included. An HTTP/2 connection's streams
    // run inside its future and wake it while it is polled (a response
    // queued wakes h2's writer; the stream slots yield after streams
    // that woke themselves, front/h2/slots.rs): Rewoken polls it again at once rather than
    // sending the task round tokio's scheduler (as HTTP/3's; front/gate.rs).
    match listener.config.mode {
        Mode::Http if ctx.tls.alpn.as_deref() == Some("h2") => {
            gate::Rewoken::new(Box::pin(h2::serve(tls, &ctx))).await
        }
        Mode::Http => h1::serve(&mut tls, &ctx).await,
        Mode::Tcp { proxy_protocol } => Box::pin(tcp::serve(&mut tls, &ctx, proxy_protocol)).await,
    }
}

/// The TLS handshake. With per-name configurations (a certificate name
/// whose client-certificate policy differs from the listener's), the
/// ClientHello is read first and its SNI picks the configuration: rustls
/// asks for a client certificate per configuration.
async fn accept(
    tcp: TcpStream,
    listener: &ListenerCtx,
) -> std::io::Result<tokio_rustls::server::TlsStream<client_tls::ClientSocket>> {
    let tcp = client_tls::ClientSocket::new(tcp);
    match &listener.by_name {
        None => listener.acceptor.accept(tcp).await,
        Some(names) => {
            let start =
                tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), tcp)
                    .await?;
            let config = names.for_name(start.client_hello().server_name()).1.clone();
            start.into_stream(config).await
        }
    }
}

/// False (and the client refused, logged and counted) when the policy of
/// the connection's name requires a client certificate and the handshake
/// has none: a session resumed from before a reload that made the
/// certificate required carries none, and rustls resumes it.
pub(crate) fn client_cert_present_if_required(
    listener: &ListenerCtx,
    tls: &tern_tls::Negotiated,
    peer: SocketAddr,
    worker: &WorkerCtx,
) -> bool {
    if tls.client_cert.is_some() {
        return true;
    }
    let mode = match &listener.by_name {
        Some(names) => names.for_name(tls.sni.as_deref()).0,
        None => listener.config.tls.client_auth.mode(),
    };
    if mode != tern_tls::ClientAuthMode::Required {
        return true;
    }
    let why = tern_tls::ClientCertRefusal::NoneSent;
    tracing::info!(client = %peer, reason = why.label(), "client certificate refused: a resumed session without one");
    worker
        .metrics
        .handshake_failed(HandshakeFailure::ClientCert(why));
    false
}

/// Sets TCP_NODELAY on an accepted socket where it is not inherited: on
/// Linux it comes from the listener (`control::sockets::bind`), and a
/// setsockopt per connection would cost a system call for nothing.
fn nodelay_unless_inherited(tcp: &TcpStream, peer: SocketAddr) {
    if cfg!(target_os = "linux") {
        return;
    }
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(client = %peer, "TCP_NODELAY: {e}");
    }
}

/// Awaits a handshake (`what`: TLS or QUIC) within the listener's
/// `handshake_timeout`; a failure or the deadline is logged and counted by
/// why (`classify`), and gives None.
pub(crate) async fn under_deadline<T, E: std::fmt::Display>(
    handshake: impl std::future::Future<Output = Result<T, E>>,
    peer: SocketAddr,
    listener: &ListenerCtx,
    worker: &WorkerCtx,
    what: &str,
    classify: impl Fn(&E) -> HandshakeFailure,
) -> Option<T> {
    let started = Instant::now();
    let failure =
        match tokio::time::timeout(listener.config.limits.handshake_timeout, handshake).await {
            Ok(Ok(done)) => return Some(done),
            Ok(Err(e)) => {
                let why = classify(&e);
                match why.client_cert() {
                    // An operator of an mTLS listener wants to know who was
                    // turned away and why, at the default log level.
                    Some(refusal) => tracing::info!(
                        client = %peer,
                        reason = refusal.label(),
                        "client certificate refused: {e}"
                    ),
                    None => tracing::debug!(client = %peer, "{what} handshake failed: {e}"),
                }
                why
            }
            Err(_) => {
                tracing::debug!(client = %peer, "{what} handshake timed out");
                HandshakeFailure::Timeout
            }
        };
    worker.metrics.handshake_failed(failure);
    let none = Negotiated::default();
    log_rejected(
        peer,
        listener,
        worker,
        Kind::HandshakeFailed,
        &none,
        started,
    );
    None
}

/// The listener's access lists and per-client connection limit, applied
/// to a new TCP connection or QUIC Initial from `peer` (the PROXY-protocol
/// address when the listener takes them). The slot counts the connection
/// while it lives.
pub(crate) fn admit(
    peer: SocketAddr,
    listener: &ListenerCtx,
    worker: &WorkerCtx,
) -> Result<Option<ConnSlot>, Kind> {
    let edge = &listener.config.edge;
    if !edge.admits(peer.ip()) {
        return Err(Kind::Denied);
    }
    let key = ClientKey::of(peer.ip(), edge.client.ipv6_prefix);
    worker
        .clients
        .connect(key, &edge.client)
        .map_err(Refused::kind)
}

/// A connection [`admit`] refused (closed before any handshake): counted
/// with the request errors, and logged when `log_rejected` is on.
pub(crate) fn turned_away(
    peer: SocketAddr,
    listener: &ListenerCtx,
    worker: &WorkerCtx,
    kind: Kind,
    start: Instant,
) {
    tracing::debug!(client = %peer, "closing before the handshake: {}", kind.as_str());
    worker.metrics.request_error(ExchangeError::new(kind));
    log_rejected(peer, listener, worker, kind, &Negotiated::default(), start);
}

/// A connection that ends before any request (`kind` says why): counted
/// with the request errors, and logged when `log_rejected` is on.
pub(crate) fn rejected(ctx: &ConnCtx<'_>, kind: Kind) {
    ctx.worker.metrics.request_error(ExchangeError::new(kind));
    let started = Instant::now()
        .checked_sub(std::time::Duration::from_micros(ctx.handshake_us))
        .unwrap_or_else(Instant::now);
    log_rejected(ctx.peer, ctx.listener, ctx.worker, kind, &ctx.tls, started);
}

/// A connection's requests refused for its client's rate in a row, for
/// `client_rate_close_after`: a client told by 429 and Retry-After to
/// wait that keeps sending anyway costs tern a request parse and an
/// answer each time; after that many its connection is closed and its
/// new connections are closed before the TLS handshake until the
/// Retry-After it was given has passed, which costs an accept and a
/// close. Any request served in between starts the count again.
#[derive(Debug, Default)]
pub(crate) struct RateRefusals {
    in_a_row: u32,
}

impl RateRefusals {
    /// True when one more request refused for the rate of the
    /// connection's own address closes the connection: its 429 says so
    /// (`Connection: close` over HTTP/1.1), so the client knows before it
    /// sees the close.
    pub(crate) fn next_closes(&self, ctx: &ConnCtx<'_>) -> bool {
        let close_after = ctx.listener.config.edge.client.close_after;
        close_after > 0 && self.in_a_row.saturating_add(1) >= close_after
    }

    /// Notes how an exchange ended (`slow_down`: [`Finished::slow_down`]);
    /// true when the connection must close now: the client was shut out
    /// for its Retry-After, counted, and logged (with `log_rejected`) as
    /// `client:kept_sending`.
    ///
    /// [`Finished::slow_down`]: crate::exchange::Finished::slow_down
    ///
    /// Inline for a served request (all but the refused): its call was 21
    /// instructions of each keepalive request (callgrind).
    #[inline]
    pub(crate) fn kept_sending(&mut self, slow_down: Option<u32>, ctx: &ConnCtx<'_>) -> bool {
        let Some(after) = slow_down else {
            self.in_a_row = 0;
            return false;
        };
        self.refused(after, ctx)
    }

    /// [`RateRefusals::kept_sending`] for a refused request.
    #[inline(never)]
    fn refused(&mut self, after: u32, ctx: &ConnCtx<'_>) -> bool {
        let limits = &ctx.listener.config.edge.client;
        let closes = self.next_closes(ctx);
        self.in_a_row += 1;
        if !closes {
            return false;
        }
        let key = ClientKey::of(ctx.peer.ip(), limits.ipv6_prefix);
        ctx.worker.clients.shut(key, after, limits);
        tracing::debug!(client = %ctx.peer, refused = self.in_a_row, seconds = after,
            "client kept sending past its rate: connection closed, new ones closed before the handshake meanwhile");
        rejected(ctx, Kind::KeptSending);
        true
    }
}

/// The access-log line of a connection closed before any request, like
/// nginx's 400/408 lines: method and path `-`, status 0 (nothing was
/// answered), the reason in `error=`. Only with `log_rejected`; not
/// counted as a request.
fn log_rejected(
    peer: SocketAddr,
    listener: &ListenerCtx,
    worker: &WorkerCtx,
    kind: Kind,
    tls: &Negotiated,
    started: Instant,
) {
    if !listener.config.edge.log_rejected {
        return;
    }
    worker.log.log(&Record {
        client: peer,
        tls,
        handshake_us: 0,
        early: false,
        method: "-",
        path: "-",
        status: 0,
        bytes_in: 0,
        bytes_out: 0,
        backend: None,
        backend_us: 0,
        total_us: started.elapsed().as_micros() as u64,
        error: Some(ExchangeError::new(kind).label()),
        request_id: None,
        grpc_status: None,
        retry: None,
    });
}

/// How long an over-the-limit connection gets to finish its handshake and
/// send a request head before it is closed.
const OVERLOAD_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

/// Answers a connection over the connection limit with 503 and closes it.
/// The request head is read first, so the close does not reset the
/// connection under the client's unread response.
pub(crate) async fn refuse_overloaded(tcp: TcpStream, peer: SocketAddr, listener: Rc<ListenerCtx>) {
    use tokio::io::AsyncWriteExt;
    nodelay_unless_inherited(&tcp, peer);
    let _ = tokio::time::timeout(OVERLOAD_DEADLINE, async {
        let mut tls = listener.acceptor.accept(tcp).await.ok()?;
        if listener.config.mode == Mode::Http {
            let mut buf = crate::io::iobuf::IoBuf::new(4096, 16 * 1024);
            // Whatever arrives (or not) within the deadline, the answer is
            // the same 503.
            let deadline = tokio::time::Instant::now() + OVERLOAD_DEADLINE;
            let _ = buf.read_head(&mut tls, 16 * 1024, deadline).await;
            let mut out = Vec::with_capacity(160);
            tern_http::rewrite::write_simple_response(
                503,
                "Service Unavailable",
                "service unavailable: connection limit reached\n",
                true,
                &mut out,
            );
            tls.write_all(&out).await.ok()?;
        }
        tls.shutdown().await.ok()
    })
    .await;
    tracing::debug!(client = %peer, "connection limit reached; answered 503");
}

/// The bytes a connection's task takes for the connection's whole life
/// (a future is as large as its largest state, whatever it waits for),
/// and of its larger parts: logged at start-up (debug) for memory work on
/// release builds, where sizes differ from a test build's.
pub(crate) fn task_sizes() -> [(&'static str, usize); 5] {
    fn future_of<A, B, C, D, E, F: std::future::Future>(_: fn(A, B, C, D, E) -> F) -> usize {
        std::mem::size_of::<F>()
    }
    [
        ("connection", future_of(handle)),
        ("http1", h1::serve_size()),
        ("client_tls", std::mem::size_of::<client_tls::ClientTls>()),
        ("conn_ctx", std::mem::size_of::<ConnCtx<'static>>()),
        ("quic_connection", h3::connection_future_size()),
    ]
}

#[cfg(test)]
mod tests {
    /// Most bytes a connection's task may take in a test build: the task
    /// is allocated at its largest state for the connection's life, so
    /// every byte here is a byte of every idle connection. A local that
    /// kept a second copy of the TLS stream once added 1.2 KiB, and an
    /// inline backend connect 0.6 KiB (see `task_sizes`, logged at
    /// start-up at debug level for release builds).
    const CONNECTION_TASK_MAX: usize = 6 * 1024;

    #[test]
    fn a_connection_task_stays_small() {
        let sizes = super::task_sizes();
        let (_, connection) = sizes[0];
        assert!(
            connection <= CONNECTION_TASK_MAX,
            "a connection's task takes {connection} bytes (over {CONNECTION_TASK_MAX}): {sizes:?}"
        );
        let parts: usize = sizes[1..4].iter().map(|(_, n)| n).sum();
        assert!(
            connection < parts + 512,
            "the task holds more than its HTTP/1.1 front end, TLS stream and context \
             ({connection} bytes against {parts}): a large local outlives its use? {sizes:?}"
        );
    }
}
