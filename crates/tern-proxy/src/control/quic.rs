//! A worker's QUIC endpoint for one HTTP/3 listener: its own UDP socket
//! (SO_REUSEPORT), quinn's endpoint on the worker's runtime, and the loop
//! that admits new connections: address validation (stateless Retry) when
//! more than `quic_retry_above` handshakes are under way, and the
//! listener's `max_connections` shared with its TCP side.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use tokio::task::JoinHandle;

use super::worker::ConnCounter;
use crate::exchange::clients::ClientKey;
use crate::exchange::{ListenerCtx, WorkerCtx};
use crate::fault::{ExchangeError, Kind};

/// A running endpoint and its accept loop.
pub(crate) struct QuicAcceptor {
    endpoint: quinn::Endpoint,
    task: JoinHandle<()>,
}

impl QuicAcceptor {
    /// Starts an endpoint on `socket` with `config`; new connections get
    /// the listener settings in `current` at the time they arrive.
    pub(super) fn start(
        socket: std::net::UdpSocket,
        config: quinn::ServerConfig,
        current: Rc<RefCell<Rc<ListenerCtx>>>,
        worker: Rc<WorkerCtx>,
        counter: ConnCounter,
    ) -> std::io::Result<QuicAcceptor> {
        let endpoint = quinn::Endpoint::new(
            crate::front::h3::endpoint_config(),
            Some(config),
            socket,
            Arc::new(quinn::TokioRuntime),
        )?;
        let task =
            tokio::task::spawn_local(accept_loop(endpoint.clone(), current, worker, counter));
        Ok(QuicAcceptor { endpoint, task })
    }

    /// A reload: new connections use `config` (certificates, limits);
    /// established ones keep theirs.
    pub(super) fn update(&self, config: quinn::ServerConfig) {
        self.endpoint.set_server_config(Some(config));
    }

    /// HTTP/3 turned off or the listener removed: no new connections;
    /// established ones go on until they end.
    pub(super) fn stop_accepting(&self) {
        self.endpoint.set_server_config(None);
        self.task.abort();
    }
}

async fn accept_loop(
    endpoint: quinn::Endpoint,
    current: Rc<RefCell<Rc<ListenerCtx>>>,
    worker: Rc<WorkerCtx>,
    counter: ConnCounter,
) {
    let mut shutdown = worker.shutdown.clone();
    let handshakes = crate::front::h3::Handshakes::default();
    loop {
        let incoming = tokio::select! {
            i = endpoint.accept() => i,
            _ = shutdown.wait_for(|s| *s) => break,
        };
        // None: the endpoint was closed.
        let Some(incoming) = incoming else { break };
        let listener = current.borrow().clone();
        let Some(h3) = listener.config.h3.as_ref() else {
            incoming.refuse();
            continue;
        };
        // A denied address costs no packet at all (ignored, not refused:
        // a refusal would answer a spoofed source), and no log line
        // either: a datagram's source is unproven, and one line per
        // spoofed Initial would be the flood's aim.
        let edge = &listener.config.edge;
        let peer = incoming.remote_address();
        if !edge.admits(peer.ip()) {
            worker
                .metrics
                .request_error(ExchangeError::new(Kind::Denied));
            incoming.ignore();
            continue;
        }
        // Under a flood of Initials, clients first prove they receive at
        // their address (one round trip): spoofed ones never come back and
        // cost no handshake. Validated ones carry a Retry token. What a
        // flood of spoofed Initials piles up is handshakes that never end
        // (until handshake_timeout), so that is what is counted, as
        // haproxy (tune.quic.retry-threshold) and quic-go do, and as TCP
        // sends SYN cookies only once its SYN queue is full: real clients
        // arriving fast, each handshake over in a round trip, pay no
        // Retry (its round trip, a second Initial, two token seals: 11 %
        // of a new connection's instructions), and a flood gets at most
        // quic_retry_above handshakes per handshake_timeout instead of
        // that many a second.
        if !incoming.remote_address_validated()
            && handshakes.under_way() >= h3.retry_above
            && incoming.may_retry()
        {
            worker.metrics.quic_retry();
            if let Err(e) = incoming.retry() {
                tracing::debug!("QUIC retry: {e}");
            }
            continue;
        }
        // Counted with the client's TCP connections (one table for the
        // process). Logged with log_rejected: unproven sources reach here
        // only while fewer than quic_retry_above handshakes are under way,
        // the rest proved theirs.
        let key = ClientKey::of(peer.ip(), edge.client.ipv6_prefix);
        let slot = match worker.clients.connect(key, &edge.client) {
            Ok(slot) => slot,
            Err(refused) => {
                crate::front::turned_away(
                    peer,
                    &listener,
                    &worker,
                    refused.kind(),
                    std::time::Instant::now(),
                );
                incoming.refuse();
                continue;
            }
        };
        let max = listener.config.limits.max_connections;
        let Some(guard) = counter.admit(max, &worker.metrics) else {
            tracing::debug!(client = %incoming.remote_address(), max, "connection limit reached; refusing QUIC connection");
            incoming.refuse();
            continue;
        };
        // Accepted here, not in the connection's task: quinn's Incoming
        // (the first packet, its keys, the token) was in the task's
        // future twice, as the spawned block's capture and as handle's
        // argument, which made the task a 2,048-byte allocation (past
        // glibc's per-thread cache: malloc's slow path both ways); a
        // Connecting is a few words.
        let start = std::time::Instant::now();
        let connecting = match incoming.accept() {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(client = %peer, "QUIC connection refused: {e}");
                continue;
            }
        };
        let worker = worker.clone();
        let handshake = handshakes.begin();
        tokio::task::spawn_local(async move {
            let _guard = (guard, slot);
            crate::front::h3::handle(connecting, peer, start, handshake, listener, worker).await;
        });
    }
    // New connections now get CONNECTION_REFUSED; established ones finish
    // (their tasks hold the endpoint open).
    endpoint.set_server_config(None);
}
