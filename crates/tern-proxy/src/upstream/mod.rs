//! Backends: upstream groups, choosing a server, connecting to it,
//! keeping idle connections, and the backend clients the exchange core
//! drives ([`h1`] over pooled connections, [`h2`] over h2c/h2 sessions).
//!
//! ```text
//!              process-wide (atomics)                 per worker (no locks)
//!   UpstreamShared ── per server: up? ejected? ◄──── Backends::get ── balance: smooth WRR
//!        ▲              in flight                        │            or least_conn
//!        │                                               ├─ idle pool (reuse after a liveness probe)
//!   run_health_checks (control-plane runtime)            └─ connect; on failure record it,
//!   GET <path> every interval, rise/fall                    try the next live server once
//! ```
//!
//! Module map: [`shared`] the process-wide state, [`balance`] the
//! policies, [`pool`] idle connections, [`health`] active checks,
//! [`sessions`] HTTP/2 sessions (h2c and h2), [`tls`] the TLS client for h2,
//! [`h1`] and [`h2`] the clients for one exchange.

mod balance;
mod connect;
pub(crate) mod h1;
pub(crate) mod h2;
mod health;
mod pool;
mod sessions;
mod shared;
mod stream;
#[cfg(test)]
mod tests;
mod tls;

use std::cell::RefCell;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{BackendAddr, BackendProtocol, Balance};
use crate::fault::Kind;

pub use pool::SWEEP_INTERVAL;
pub use sessions::H2Stream;
#[allow(unused_imports)] // AdminState: the admin listener uses it (issue 28)
pub use shared::{AdminState, Server, ServerSet, UpstreamShared};
pub use stream::{BackendStream, Socket};

use balance::SmoothWrr;
use pool::IdlePool;
use shared::InFlight;

/// A connection to a backend, counted as one request in flight on its
/// server until it is dropped or returned with [`Backends::put`].
#[derive(Debug)]
pub struct BackendConn {
    /// The connection (TCP with TCP_NODELAY set, Unix, or TLS over either).
    pub stream: BackendStream,
    /// Where it goes.
    pub addr: BackendAddr,
    /// True when it came from the pool (it may have been closed by the
    /// backend in the meantime, which allows one retry).
    pub reused: bool,
    /// Where its server was in the worker's view when picked (a hint for
    /// [`Backends::put`]).
    index: usize,
    /// Keeps the server's in-flight count up (least_conn reads it).
    in_flight: InFlight,
}

/// Why a backend could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Refused, unreachable, reset (the last server tried).
    #[error("connect to {0}: {1}")]
    Io(BackendAddr, io::Error),
    /// No answer within the connect timeout (the last server tried).
    #[error("connect to {0}: timed out")]
    Timeout(BackendAddr),
    /// The TLS handshake failed: the certificate did not verify, the
    /// server refused tern's, or no common protocol or ALPN.
    #[error("connect to {0}: {1}")]
    Tls(BackendAddr, io::Error),
    /// No server of the group may be used (health checks or ejection).
    #[error("every server of upstream {0:?} is down")]
    AllDown(String),
}

impl ConnectError {
    /// The kind of failure (one mapping for both backend protocols).
    pub(crate) fn kind(&self) -> Kind {
        match self {
            ConnectError::Timeout(_) => Kind::ConnectTimeout,
            ConnectError::AllDown(_) => Kind::AllDown,
            ConnectError::Io(..) => Kind::Connect,
            ConnectError::Tls(..) => Kind::Tls,
        }
    }
}

/// A worker's view of an upstream group: balancing state and the pool of
/// idle connections (no locks: a worker is single-threaded).
#[derive(Debug)]
pub struct Backends {
    shared: Arc<UpstreamShared>,
    view: RefCell<View>,
    /// Idle connections, per server of `view.set` (by index).
    pool: IdlePool,
    /// HTTP/2 sessions (`protocol = "h2c"` and `"h2"` only), per server of
    /// `view.set` (by index).
    sessions: sessions::Sessions,
}

/// The server set this worker last saw and the balancing state built on
/// it. Rebuilt when the group's set has a newer generation (DNS changed
/// it), which a pick notices with one atomic load.
#[derive(Debug)]
struct View {
    set: Arc<ServerSet>,
    wrr: SmoothWrr,
}

/// A server chosen for one request: its state, and its index in the
/// worker's view at the time (a hint: the view may change under an await).
struct Picked {
    index: usize,
    server: Arc<Server>,
}

impl Backends {
    /// A worker's view of `shared`, keeping up to `max_idle` idle
    /// connections per server (a ceiling: the pool holds what the recent
    /// peak used, see [`pool`]).
    pub fn new(shared: Arc<UpstreamShared>, max_idle: usize) -> Self {
        let set = arc_swap::Guard::into_inner(shared.servers());
        let servers = set.servers.len();
        Backends {
            shared,
            view: RefCell::new(View {
                set,
                wrr: SmoothWrr::new(servers),
            }),
            pool: IdlePool::new(servers, max_idle),
            sessions: RefCell::new((0..servers).map(|_| sessions::Slot::Empty).collect()),
        }
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.shared.config.name
    }

    /// The protocol the group's servers speak: [`Backends::get`] for
    /// HTTP/1.1, [`Backends::get_h2`] for h2c and h2.
    pub fn protocol(&self) -> BackendProtocol {
        self.shared.config.protocol
    }

    /// A connection to a live server chosen by the group's policy: an idle
    /// pooled one, or a new one. A connect failure is counted against its
    /// server (passive ejection) and the next live server is tried, each at
    /// most once, so a request fails only when no server can be reached:
    /// `AllDown` at once when no server is live, else the last server's
    /// connect error.
    pub async fn get(&self, connect_timeout: Duration) -> Result<BackendConn, ConnectError> {
        let Some(picked) = self.pick(|_| true) else {
            return Err(ConnectError::AllDown(self.name().to_string()));
        };
        // Counted before connecting, so concurrent picks see it.
        let in_flight = picked.server.begin();
        if let Some(stream) = self.pool.take(picked.index) {
            return Ok(pooled(stream, picked.index, in_flight));
        }
        // Connecting is the rare path under keepalive: boxed, so its state
        // does not enlarge the future of every request that awaits `get`.
        Box::pin(self.connect_any(picked.index, in_flight, connect_timeout)).await
    }

    /// Connects to the server `in_flight` counts, then to the other live
    /// servers in policy order while connecting fails (taking a pooled
    /// connection when one of them has one).
    async fn connect_any(
        &self,
        mut index: usize,
        mut in_flight: InFlight,
        connect_timeout: Duration,
    ) -> Result<BackendConn, ConnectError> {
        let mut tried: Vec<BackendAddr> = Vec::new();
        loop {
            let addr = in_flight.server().addr;
            let error = match self
                .connect_counted(index, in_flight, connect_timeout)
                .await
            {
                Ok(conn) => return Ok(conn),
                Err(e) => e,
            };
            tried.push(addr);
            let Some(next) = self.pick(|s| !tried.contains(&s.addr)) else {
                return Err(error);
            };
            (index, in_flight) = (next.index, next.server.begin());
            if let Some(stream) = self.pool.take(index) {
                return Ok(pooled(stream, index, in_flight));
            }
        }
    }

    /// A new connection to `addr`, one of the group's servers (used to
    /// retry on the same server after a pooled connection turned out closed).
    pub async fn connect(
        &self,
        addr: BackendAddr,
        connect_timeout: Duration,
    ) -> Result<BackendConn, ConnectError> {
        self.refresh();
        let found = {
            let view = self.view.borrow();
            let index = view.set.servers.iter().position(|s| s.addr == addr);
            index.map(|i| (i, view.set.servers[i].clone()))
        };
        let Some((index, server)) = found else {
            return Err(ConnectError::Io(
                addr,
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("not a server of upstream {:?}", self.name()),
                ),
            ));
        };
        self.connect_counted(index, server.begin(), connect_timeout)
            .await
    }

    /// Returns a connection whose exchange completed cleanly; it is kept
    /// for reuse while its server is live, still in the set and the pool
    /// has room.
    pub fn put(&self, conn: BackendConn) {
        let server = conn.in_flight.server();
        self.refresh();
        let Some(index) = self.view.borrow().set.index_of(server, conn.index) else {
            return; // the server left the group: close
        };
        if server.is_live() {
            self.pool.put(index, conn.stream);
        } else {
            self.pool.clear(index);
        }
    }

    /// Closes idle connections unused for long (see [`SWEEP_INTERVAL`]).
    pub fn sweep(&self) {
        self.pool.sweep();
    }

    /// The next live server the policy chooses among those `allowed`.
    fn pick(&self, allowed: impl Fn(&Server) -> bool) -> Option<Picked> {
        self.refresh();
        let mut view = self.view.borrow_mut();
        let View { set, wrr } = &mut *view;
        let servers = &set.servers;
        let eligible = |i: usize| servers.get(i).is_some_and(|s| allowed(s) && s.is_live());
        let index = match self.shared.config.balance {
            Balance::RoundRobin => wrr.pick(&set.weights, eligible),
            Balance::LeastConn => {
                balance::least_conn(wrr, &set.weights, |i| servers[i].in_flight(), eligible)
            }
        }?;
        Some(Picked {
            index,
            server: servers[index].clone(),
        })
    }

    /// Brings this worker's view up to the group's current set: idle
    /// connections and sessions follow their server to its new index
    /// (those of removed servers are closed; requests running on them
    /// finish), balancing state restarts.
    fn refresh(&self) {
        let current = self.shared.servers();
        if current.generation == self.view.borrow().set.generation {
            return;
        }
        let set = arc_swap::Guard::into_inner(current);
        let mut view = self.view.borrow_mut();
        let moves: Vec<Option<usize>> = view
            .set
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| set.index_of(s, i))
            .collect();
        self.pool.remap(&moves, set.servers.len());
        sessions::remap(&self.sessions, &moves, set.servers.len());
        view.wrr = SmoothWrr::new(set.servers.len());
        view.set = set;
    }

    /// The index of `server` in this worker's current view, if it is
    /// still in the group (`hint`: its index when it was picked).
    fn index_of(&self, server: &Arc<Server>, hint: usize) -> Option<usize> {
        self.view.borrow().set.index_of(server, hint)
    }

    /// Connects to the server `in_flight` counts (at `index` in the
    /// view), recording the outcome
    /// for passive ejection.
    async fn connect_counted(
        &self,
        index: usize,
        in_flight: InFlight,
        connect_timeout: Duration,
    ) -> Result<BackendConn, ConnectError> {
        let server = in_flight.server();
        let addr = server.addr;
        let tls = self.shared.config.tls.as_ref();
        match connect::connect(addr, server.origin, tls, connect_timeout).await {
            Ok(stream) => {
                server.connect_succeeded();
                Ok(BackendConn {
                    stream,
                    addr,
                    reused: false,
                    index,
                    in_flight,
                })
            }
            Err(e) => {
                tracing::warn!(upstream = %self.name(), "{e}");
                server.connect_failed(self.shared.config.passive, self.name(), &e);
                Err(e)
            }
        }
    }
}

fn pooled(stream: BackendStream, index: usize, in_flight: InFlight) -> BackendConn {
    BackendConn {
        stream,
        addr: in_flight.server().addr,
        reused: true,
        index,
        in_flight,
    }
}
