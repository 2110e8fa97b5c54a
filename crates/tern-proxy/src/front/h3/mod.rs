//! HTTP/3 front end: one QUIC connection (quinn) from its handshake to
//! close, each request stream an exchange ([`crate::exchange::run`]) like
//! an HTTP/2 stream's, with the same routing, forwarding fields, access
//! log and metrics.
//!
//! Abuse limits (see docs/http3.md):
//!
//! | limit | answers |
//! |---|---|
//! | `h3_max_streams` request streams at once (QUIC stream credit) | a client holding unbounded work in flight; stream floods |
//! | field section size (`h2_max_header_list_size`, 431 past it) | QPACK bombs, oversized heads |
//! | per-stream and per-connection receive windows (256 KiB, 1 MiB) | uploads tern cannot forward yet pinning memory |
//! | `quic_retry_above` handshakes under way → stateless Retry | floods of Initials from spoofed addresses costing handshakes |
//! | anti-amplification (3x before address validation, quinn) | tern used to reflect traffic at a spoofed address |
//! | `max_connections`, `handshake_timeout`, `idle_timeout` | as for TCP |
//!
//! The cipher suite, group and handshake kind of a QUIC handshake come
//! from a patch of quinn-proto (vendor/README.md): quinn keeps them to
//! itself.

mod stream;

use super::gate;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::future;
use futures_util::stream::{FuturesUnordered, StreamExt};
use quinn::crypto::rustls::{HandshakeData, QuicServerConfig};
use rustls::HandshakeKind;
use tern_tls::iana::{group_name, suite_name};
use tern_tls::Negotiated;

use super::{CONNECTION_WINDOW, STREAM_WINDOW};
use crate::config::{H3Settings, ListenerConfig};
use crate::exchange::{ConnCtx, ListenerCtx, WorkerCtx};
use crate::metrics::HandshakeFailure;
use tern_deadline::Watchdog;

/// Response data a connection may hold that the client has not
/// acknowledged, sent or not. quinn's default is 10 MB, which a client with
/// large flow-control windows that stops acknowledging could make tern hold
/// on every connection; 4 MiB is where Linux's TCP send buffer stops by
/// default (tcp_wmem), so an HTTP/3 connection holds no more than an HTTP/2
/// one, and it still carries ~330 Mbit/s over a 100 ms path.
const SEND_WINDOW: u64 = 4 * 1024 * 1024;

/// Unidirectional streams a client may open: HTTP/3's control stream and
/// QPACK's two, with room for the reserved (grease) types clients send.
const MAX_UNI_STREAMS: u32 = 8;

/// Application-data packets a connection sends before tern starts looking
/// for a path MTU above QUIC's 1200 bytes (quinn-proto patch 0008). A
/// search run at once, as quinn does, costs every connection four probes of
/// 1326-1452 bytes and the client's four ACKs: on a new connection carrying
/// one small request, two thirds of tern's datagrams. Only a connection
/// that sends enough to gain from larger packets searches; Chromium's QUIC
/// and nginx wait for 100 packets too.
pub(crate) const MTU_SEARCH_AFTER_PACKETS: u64 = 100;

/// The QUIC version tern speaks (RFC 9000); quinn's default list also has
/// drafts no client needs any more.
pub(crate) const QUIC_V1: u32 = 1;

/// The quinn endpoint configuration of a listener with HTTP/3 on: TLS from
/// the listener's rustls config (same certificates and tickets, ALPN h3),
/// transport limits from `h3` and the listener's limits.
pub(crate) fn server_config(
    listener: &ListenerConfig,
    h3: &H3Settings,
    tls: &rustls::ServerConfig,
) -> Result<quinn::ServerConfig, String> {
    let crypto = QuicServerConfig::try_from(tern_tls::quic_server_config(tls, h3.early_data))
        .map_err(|e| format!("{e}: QUIC needs TLS_AES_128_GCM_SHA256"))?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    let idle = quinn::IdleTimeout::try_from(listener.limits.idle_timeout)
        .map_err(|_| "idle_timeout is too long for QUIC".to_string())?;
    transport
        .max_concurrent_bidi_streams(h3.max_streams.into())
        .max_concurrent_uni_streams(MAX_UNI_STREAMS.into())
        .stream_receive_window(STREAM_WINDOW.into())
        .receive_window(CONNECTION_WINDOW.into())
        .max_idle_timeout(Some(idle))
        .enable_segmentation_offload(h3.gso);
    transport.send_window(SEND_WINDOW);
    let mut mtu = quinn::MtuDiscoveryConfig::default();
    mtu.start_after(MTU_SEARCH_AFTER_PACKETS);
    transport.mtu_discovery_config(Some(mtu));
    server.transport_config(Arc::new(transport));
    // Each worker has its own UDP socket (SO_REUSEPORT, hashed by the
    // client's address): a client whose address changes lands on another
    // worker's endpoint, which does not know it.
    server.migration(false);
    server.max_incoming(listener.limits.max_connections.min(65_536));
    Ok(server)
}

/// The endpoint configuration every worker's endpoint uses: QUIC v1 only.
pub(crate) fn endpoint_config() -> quinn::EndpointConfig {
    let mut config = quinn::EndpointConfig::default();
    config.supported_versions(vec![QUIC_V1]);
    config
}

/// The QUIC handshakes of a worker's endpoint under way: accepted, not yet
/// over (done, failed or timed out). What a flood of spoofed Initials
/// piles up (their handshakes never end), so the accept loop sends
/// Retries past `quic_retry_above` of them.
#[derive(Default)]
pub(crate) struct Handshakes(Rc<Cell<u32>>);

impl Handshakes {
    /// Handshakes under way now.
    pub(crate) fn under_way(&self) -> u32 {
        self.0.get()
    }

    /// One more under way, until the returned mark is dropped.
    pub(crate) fn begin(&self) -> HandshakeUnderWay {
        self.0.set(self.0.get().saturating_add(1));
        HandshakeUnderWay(self.0.clone())
    }
}

/// One handshake counted in [`Handshakes`]; dropped when it is over.
pub(crate) struct HandshakeUnderWay(Rc<Cell<u32>>);

impl Drop for HandshakeUnderWay {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// Handles one accepted QUIC connection from `peer` (accepted at `start`)
/// to the end: the handshake under a deadline (`handshake` is dropped when
/// it is over), then HTTP/3 until the client leaves, idles out or tern
/// stops.
pub(crate) async fn handle(
    connecting: quinn::Connecting,
    peer: std::net::SocketAddr,
    start: Instant,
    handshake: HandshakeUnderWay,
    listener: std::rc::Rc<ListenerCtx>,
    worker: std::rc::Rc<WorkerCtx>,
) {
    let early_data = listener.config.h3.as_ref().is_some_and(|h3| h3.early_data);
    let connecting = if early_data {
        // Serve from 0.5-RTT: requests a resuming client sent in 0-RTT are
        // read before its Finished arrives. Until then every request is
        // taken as early (replayable): stream::handle forwards safe
        // methods only.
        match connecting.into_0rtt() {
            Ok((conn, accepted)) => {
                let established = Rc::new(Cell::new(false));
                watch_handshake(
                    &conn,
                    accepted,
                    handshake,
                    established.clone(),
                    &listener,
                    &worker,
                    start,
                );
                let ctx = ConnCtx::new(
                    peer,
                    negotiated(&conn),
                    start.elapsed().as_micros() as u64,
                    &listener,
                    &worker,
                );
                let h3 = h3_setup(conn.clone(), &listener.config);
                gate::Rewoken::new(tern_blocks::boxed(|| {
                    serve(conn, &ctx, Some(established), h3)
                }))
                .await;
                return;
            }
            Err(connecting) => connecting,
        }
    } else {
        connecting
    };
    let Ok((conn, accepted)) = connecting.into_0rtt() else {
        return;
    };
    // One future from here to the close, written into one block
    // (tern_blocks): the h3 setup and serve futures were boxed apart
    // (4,296 and 3,008 bytes in a release build, both past glibc's
    // per-thread cache of 1,032, so malloc's slow path both ways per
    // connection). At ~8 KB it goes in a large block (16 KiB) a finished
    // connection or stream of the worker gave back. Rewoken: the wake-ups the connection gives
    // itself while polled (gate.rs) do not send its task round tokio's
    // scheduler again.
    gate::Rewoken::new(tern_blocks::boxed(|| {
        handshake_then_serve(conn, accepted, handshake, peer, start, &listener, &worker)
    }))
    .await;
}

/// Bytes of the future [`handshake_then_serve`] makes (the one block a
/// QUIC connection without early data takes from its 0.5-RTT to its
/// close), for [`super::task_sizes`]: release sizes differ from a test
/// build's, and past `tern_blocks::LARGE_BLOCK` the future gets a box of its own.
pub(crate) fn connection_future_size() -> usize {
    type Make<F> = fn(
        quinn::Connection,
        quinn::ZeroRttAccepted,
        HandshakeUnderWay,
        std::net::SocketAddr,
        Instant,
        &'static ListenerCtx,
        &'static WorkerCtx,
    ) -> F;
    fn output_size<F>(_: Make<F>) -> usize {
        std::mem::size_of::<F>()
    }
    output_size(handshake_then_serve)
}

/// A connection without early data, from its 0.5-RTT to its close: the
/// handshake under its deadline, then HTTP/3.
async fn handshake_then_serve(
    conn: quinn::Connection,
    accepted: quinn::ZeroRttAccepted,
    handshake: HandshakeUnderWay,
    peer: std::net::SocketAddr,
    start: Instant,
    listener: &ListenerCtx,
    worker: &WorkerCtx,
) {
    // HTTP/3's control and QPACK streams are opened now, from 0.5-RTT (a
    // server's into_0rtt always succeeds): their SETTINGS go out in the
    // padding of the handshake's first datagram, which quinn sends only
    // once this task waits, instead of in a datagram of their own after
    // the handshake. Nothing is read before the handshake ends: without
    // early data a client sends no request before it.
    let h3 = future::maybe_done(h3_setup(conn.clone(), &listener.config));
    let mut h3 = std::pin::pin!(h3);
    let opened = std::future::poll_fn(|cx| {
        std::task::Poll::Ready(std::future::Future::poll(h3.as_mut(), cx).is_ready())
    })
    .await;
    tracing::trace!(client = %peer, opened, "h3 streams opened in 0.5-RTT");
    let under_way = handshake;
    let handshake = async {
        accepted.await;
        match conn.close_reason() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    };
    let over = super::under_deadline(handshake, peer, listener, worker, "QUIC", handshake_failure)
        .await
        .is_some();
    drop(under_way);
    if !over {
        return;
    }
    let handshake_us = start.elapsed().as_micros() as u64;
    let negotiated = negotiated(&conn);
    if !super::client_cert_present_if_required(listener, &negotiated, peer, worker) {
        conn.close(H3_NO_ERROR, b"client certificate required");
        return;
    }
    worker.metrics.handshake(&negotiated, start.elapsed());
    let ctx = ConnCtx::new(peer, negotiated, handshake_us, listener, worker);
    let h3 = async move {
        h3.as_mut().await;
        h3.as_mut()
            .take_output()
            .unwrap_or_else(|| Err("h3 setup read twice".into()))
    };
    serve(conn, &ctx, None, h3).await;
}

/// The server side of HTTP/3 on `conn`: opens the control and QPACK
/// streams and sends SETTINGS.
async fn h3_setup(conn: quinn::Connection, config: &ListenerConfig) -> Result<H3Server, String> {
    h3::server::builder()
        .max_field_section_size(u64::from(config.h2.max_header_list_size))
        // SETTINGS_ENABLE_CONNECT_PROTOCOL: WebSockets (RFC 9220).
        .enable_extended_connect(true)
        // No reserved (grease) stream, setting or frame: h3 opened the
        // stream once the first request came, in a datagram of its
        // own, which clients answer with STOP_SENDING that tern must
        // acknowledge: three of a one-request connection's ~18
        // datagrams. Grease keeps clients tolerant of unknown types
        // (RFC 9114 7.2.8, a MAY); Chromium and curl send their own.
        .send_grease(false)
        .build::<_, Bytes>(h3_quinn::Connection::new(conn))
        .await
        .map_err(|e| e.to_string())
}

/// tern's HTTP/3 server connection.
type H3Server = h3::server::Connection<h3_quinn::Connection, Bytes>;

/// What a QUIC handshake settled.
fn negotiated(conn: &quinn::Connection) -> Negotiated {
    let Some(data) = conn
        .handshake_data()
        .and_then(|d| d.downcast::<HandshakeData>().ok())
    else {
        return Negotiated {
            version: "TLSv1.3",
            alpn: Some("h3".into()),
            ..Negotiated::default()
        };
    };
    Negotiated {
        version: "TLSv1.3",
        cipher: data.cipher_suite.map_or("".into(), suite_name),
        group: data.key_exchange_group.map_or("".into(), group_name),
        alpn: Some("h3".into()),
        sni: data.server_name,
        resumed: data.handshake_kind == Some(HandshakeKind::Resumed),
        hello_retry_request: data.handshake_kind == Some(HandshakeKind::FullWithHelloRetryRequest),
        client_cert: conn
            .peer_identity()
            .and_then(|id| {
                id.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
                    .ok()
            })
            .and_then(|chain| tern_tls::ClientCert::from_chain(&chain))
            .map(Arc::new),
        // quinn's HandshakeData does not carry it (QUIC compresses the
        // chain as TCP does; only the log field is missing).
        cert_compression: None,
        // Nor this: only the PROXY v2 header of TCP mode reads it.
        served_cert: None,
    }
}

/// For a connection served from 0.5-RTT: marks `established` when the
/// handshake ends (requests accepted after it are not early), counts it,
/// and closes the connection if it does not end within handshake_timeout.
fn watch_handshake(
    conn: &quinn::Connection,
    accepted: quinn::ZeroRttAccepted,
    under_way: HandshakeUnderWay,
    established: Rc<Cell<bool>>,
    listener: &ListenerCtx,
    worker: &Rc<WorkerCtx>,
    start: Instant,
) {
    let conn = conn.clone();
    let worker = worker.clone();
    let deadline = listener.config.limits.handshake_timeout;
    tokio::task::spawn_local(async move {
        let _under_way = under_way;
        if tokio::time::timeout(deadline, accepted).await.is_ok() {
            established.set(true);
            worker
                .metrics
                .handshake(&negotiated(&conn), start.elapsed());
        } else {
            worker.metrics.handshake_failed(HandshakeFailure::Timeout);
            conn.close(H3_NO_ERROR, b"handshake timeout");
        }
    });
}

fn handshake_failure(e: &quinn::ConnectionError) -> HandshakeFailure {
    match e {
        quinn::ConnectionError::TimedOut => HandshakeFailure::Timeout,
        quinn::ConnectionError::ApplicationClosed(_)
        | quinn::ConnectionError::ConnectionClosed(_)
        | quinn::ConnectionError::Reset => HandshakeFailure::Closed,
        quinn::ConnectionError::TransportError(t) => {
            use tern_tls::ClientCertRefusal as R;
            // TLS alerts travel as CRYPTO_ERROR codes (0x100 + alert).
            match u64::from(t.code) {
                0x174 => HandshakeFailure::ClientCert(R::NoneSent),
                0x130 => HandshakeFailure::ClientCert(R::UnknownCa),
                0x12d => HandshakeFailure::ClientCert(R::Expired),
                0x12c => HandshakeFailure::ClientCert(R::Revoked),
                0x12a => HandshakeFailure::ClientCert(R::Invalid),
                _ => HandshakeFailure::ProtocolError,
            }
        }
        _ => HandshakeFailure::Other,
    }
}

/// Serves HTTP/3 on a QUIC connection: established, or (with
/// `established`, false until the handshake ends) from 0.5-RTT; `h3` is
/// the HTTP/3 layer's setup ([`h3_setup`]).
async fn serve(
    conn: quinn::Connection,
    ctx: &ConnCtx<'_>,
    established: Option<Rc<Cell<bool>>>,
    h3: impl std::future::Future<Output = Result<H3Server, String>>,
) {
    let lim = &ctx.listener.config;
    let mut h3 = match tokio::time::timeout(lim.limits.header_timeout, h3).await {
        Ok(Ok(h3)) => h3,
        Ok(Err(e)) => {
            tracing::debug!(client = %ctx.peer, "h3 connection setup failed: {e}");
            return;
        }
        Err(_) => return,
    };
    let mut streams = FuturesUnordered::new();
    let mut shutdown_rx = ctx.worker.shutdown.clone();
    let shutdown = async move {
        let _ = shutdown_rx.wait_for(|s| *s).await;
    };
    tokio::pin!(shutdown);
    // Polled only when the worker's shutdown signal woke it, not at every
    // wake-up of a request stream (~1,100 instructions per request).
    let shutdown_gate = gate::WakeGate::new();
    let mut going_away = false;
    // QUIC's own idle timeout restarts with any packet, a client's PINGs
    // included: a connection with no request for idle_timeout is closed
    // here, as over TCP. Moved when the connection falls idle.
    let idle_for = lim.limits.idle_timeout;
    let mut idle = Watchdog::new(tokio::time::Instant::now() + idle_for);
    let gate = gate::WakeGate::new();
    let mut refusals = super::RateRefusals::default();
    let mut close = (H3_NO_ERROR, &b""[..]);
    // The stream of the 429 a close for `client_rate_close_after` follows.
    let mut last_answer = None;
    loop {
        tokio::select! {
            // Only when something accept waits on woke the task, not at
            // every wake-up of a request stream (gate.rs).
            accepted = std::future::poll_fn(|cx| {
                gate.poll(cx, |cx| std::future::Future::poll(std::pin::pin!(h3.accept()), cx))
            }) => match accepted {
                Ok(Some(resolver)) => {
                    let early = established.as_ref().is_some_and(|e| !e.get());
                    // Boxed: the stream's future (the whole exchange) is
                    // 9.4 KB, and FuturesUnordered::push moved it three
                    // times on its way into its task (~25,000 instructions
                    // of memcpy per request, callgrind); a box moves as a
                    // pointer. Written into a large block an earlier
                    // stream of the worker gave back (tern_blocks), not a
                    // new 9.4 KB box: malloc's slow path both ways.
                    streams.push(tern_blocks::boxed(|| stream::handle(resolver, ctx, early)));
                }
                // GOAWAY sent or received, and every accepted request done.
                Ok(None) => break,
                Err(e) => {
                    if !e.is_h3_no_error() {
                        tracing::debug!(client = %ctx.peer, "h3 connection error: {e}");
                    }
                    break;
                }
            },
            Some(refused) = streams.next(), if !streams.is_empty() => {
                if !going_away && refusals.kept_sending(refused.map(|(s, _)| s), ctx) {
                    // GOAWAY, then the close once the last 429 is in.
                    let _ = tokio::time::timeout(GOAWAY_WAIT, h3.shutdown(0)).await;
                    last_answer = refused.and_then(|(_, id)| id);
                    close = (H3_EXCESSIVE_LOAD, &b"kept sending past its rate"[..]);
                    break;
                }
                if streams.is_empty() {
                    idle.set(tokio::time::Instant::now() + idle_for);
                }
            }
            _ = idle.run(std::future::pending::<()>()), if streams.is_empty() && !going_away => {
                // Nothing in flight: GOAWAY, then close at once.
                let _ = tokio::time::timeout(GOAWAY_WAIT, h3.shutdown(0)).await;
                break;
            }
            _ = std::future::poll_fn(|cx| {
                shutdown_gate.poll(cx, |cx| std::future::Future::poll(shutdown.as_mut(), cx))
            }), if !going_away => {
                // GOAWAY: requests already accepted finish, and so do those
                // the client has sent before it sees the GOAWAY (up to its
                // stream credit; a GOAWAY limited to what was accepted
                // would close the connection under them, unanswered); no
                // new ones after that.
                going_away = true;
                gate.open();
                let in_flight = lim.h3.as_ref().map_or(0, |h3| h3.max_streams as usize);
                if !matches!(tokio::time::timeout(GOAWAY_WAIT, h3.shutdown(in_flight)).await, Ok(Ok(()))) {
                    break;
                }
            }
        }
    }
    // Streams still answering finish before the connection closes.
    while streams.next().await.is_some() {}
    if let Some(id) = last_answer {
        // A close drops the stream data not yet sent (and what is lost
        // is not sent again): the client is to read its last 429 before
        // the close, so the close waits until it has acknowledged it.
        let _ = tokio::time::timeout(LAST_ANSWER_WAIT, conn.stream_stopped(id)).await;
    }
    // The endpoint sends the close and drains the connection on its own.
    conn.close(close.0, close.1);
}

/// How long sending a GOAWAY may wait (for the control stream's credit).
const GOAWAY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a close for `client_rate_close_after` waits for the client to
/// acknowledge its last 429: an acknowledgement delay and a
/// retransmission or two.
const LAST_ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// HTTP/3's "no error" application code (RFC 9114, 8.1).
const H3_NO_ERROR: quinn::VarInt = quinn::VarInt::from_u32(0x100);

/// H3_EXCESSIVE_LOAD (RFC 9114 section 8.1): the client kept sending past
/// its rate (`client_rate_close_after`).
const H3_EXCESSIVE_LOAD: quinn::VarInt = quinn::VarInt::from_u32(0x107);
