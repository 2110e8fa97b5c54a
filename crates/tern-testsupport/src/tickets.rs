//! A client session store that counts the TLS 1.3 tickets it was given, so
//! a test can wait until a server's ticket has arrived (it follows the
//! handshake by a round trip) instead of sleeping, and count tickets.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rustls::client::{
    ClientSessionMemoryCache, ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue,
};
use rustls::pki_types::ServerName;
use rustls::NamedGroup;

/// rustls's in-memory store, plus a count of the TLS 1.3 tickets inserted.
#[derive(Debug)]
pub struct TicketCountingStore {
    inner: ClientSessionMemoryCache,
    tickets: AtomicUsize,
}

impl TicketCountingStore {
    /// A store keeping up to `capacity` sessions, as rustls's own.
    pub fn new(capacity: usize) -> Self {
        TicketCountingStore {
            inner: ClientSessionMemoryCache::new(capacity),
            tickets: AtomicUsize::new(0),
        }
    }

    /// TLS 1.3 tickets received so far (taken ones included).
    pub fn tickets(&self) -> usize {
        self.tickets.load(Ordering::SeqCst)
    }

    /// Waits (polling, on a runtime or not) until at least `n` tickets
    /// arrived; panics after `limit`.
    pub async fn wait_for_tickets(&self, n: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.tickets() < n {
            assert!(
                Instant::now() < deadline,
                "{} of {n} session tickets within {limit:?}",
                self.tickets()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl ClientSessionStore for TicketCountingStore {
    fn set_kx_hint(&self, name: ServerName<'static>, group: NamedGroup) {
        self.inner.set_kx_hint(name, group)
    }
    fn kx_hint(&self, name: &ServerName<'_>) -> Option<NamedGroup> {
        self.inner.kx_hint(name)
    }
    fn set_tls12_session(&self, name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.inner.set_tls12_session(name, value)
    }
    fn tls12_session(&self, name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.inner.tls12_session(name)
    }
    fn remove_tls12_session(&self, name: &ServerName<'static>) {
        self.inner.remove_tls12_session(name)
    }
    fn insert_tls13_ticket(&self, name: ServerName<'static>, value: Tls13ClientSessionValue) {
        self.tickets.fetch_add(1, Ordering::SeqCst);
        self.inner.insert_tls13_ticket(name, value)
    }
    fn take_tls13_ticket(&self, name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        self.inner.take_tls13_ticket(name)
    }
}
