//! A worker's QUIC endpoint for one HTTP/3 listener: its own UDP socket
//! (SO_REUSEPORT), quinn's endpoint on the worker's runtime, and the loop
//! that admits new connections: address validation (stateless Retry) when
//! new connections come faster than `quic_retry_above`, and the listener's
//! `max_connections` shared with its TCP side.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

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
    let mut rate = NewConnectionRate::default();
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
        // cost no handshake. Validated ones carry a Retry token.
        let per_second = rate.count(Instant::now());
        if !incoming.remote_address_validated()
            && per_second > h3.retry_above
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
        // at most quic_retry_above times a second, the rest proved theirs.
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
        let worker = worker.clone();
        tokio::task::spawn_local(async move {
            let _guard = (guard, slot);
            crate::front::h3::handle(incoming, listener, worker).await;
        });
    }
    // New connections now get CONNECTION_REFUSED; established ones finish
    // (their tasks hold the endpoint open).
    endpoint.set_server_config(None);
}

/// New connections seen in the current one-second window.
#[derive(Default)]
struct NewConnectionRate {
    window: Option<Instant>,
    seen: u32,
}

impl NewConnectionRate {
    /// Counts one new connection at `now`; returns how many arrived in
    /// its window, this one included.
    fn count(&mut self, now: Instant) -> u32 {
        match self.window {
            Some(start) if now.duration_since(start) < Duration::from_secs(1) => {
                self.seen = self.seen.saturating_add(1);
            }
            _ => {
                self.window = Some(now);
                self.seen = 1;
            }
        }
        self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_counts_within_a_second_and_starts_over_after() {
        let mut rate = NewConnectionRate::default();
        let t0 = Instant::now();
        assert_eq!(rate.count(t0), 1);
        assert_eq!(rate.count(t0 + Duration::from_millis(500)), 2);
        assert_eq!(rate.count(t0 + Duration::from_millis(1500)), 1);
    }
}
