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
//! Module map: [`shared`] the process-wide state and its server set,
//! [`dns`] servers given by name, [`balance`] the policies, [`affinity`]
//! hash ring and sticky cookie, [`outlier`] passive ejection and slow
//! start, [`retry`] retries on another server and their budget, [`pool`]
//! idle connections, [`health`] active checks,
//! [`sessions`] HTTP/2 sessions (h2c and h2), [`tls`] the TLS client for h2,
//! [`h1`] and [`h2`] the clients for one exchange, [`view`] a worker's
//! view of the server set and the pick of a server.

mod affinity;
mod balance;
mod connect;
pub(crate) mod dns;
pub(crate) mod h1;
pub(crate) mod h2;
mod h2_request;
mod health;
pub(crate) mod health_grpc;
mod outlier;
mod pool;
mod preface;
mod retry;
mod sessions;
mod shared;
mod stream;
#[cfg(test)]
mod tests;
mod tls;
mod view;

use std::cell::RefCell;
use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{BackendAddr, BackendProtocol, Balance};
use crate::fault::Kind;

pub(crate) use affinity::cookie;
pub use pool::SWEEP_INTERVAL;
pub use retry::Tries;
pub use sessions::H2Stream;
pub use shared::{AdminState, Server, UpstreamShared};
pub use stream::{BackendStream, Socket};

use affinity::Target;
use pool::IdlePool;
use retry::Budget;
use shared::InFlight;
use view::{Picked, View};

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

impl BackendConn {
    /// The server it goes to.
    pub(crate) fn server(&self) -> &Arc<Server> {
        self.in_flight.server()
    }

    /// The response has left the backend: the request no longer counts as
    /// in flight on its server (least_conn), though the connection is
    /// still relaying the response's last piece to the client.
    pub(crate) fn response_ended(&mut self) {
        self.in_flight.release();
    }
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
    /// This worker's retry budget for the group.
    budget: Budget,
    /// Idle connections, per server of `view.set` (by index).
    pool: IdlePool,
    /// HTTP/2 sessions (`protocol = "h2c"` and `"h2"` only), per server of
    /// `view.set` (by index).
    sessions: sessions::Sessions,
}

/// What [`Backends::connect_next`] goes on with: the server picked (its
/// index and in-flight count), or none live.
pub struct NextConnect(Option<(usize, InFlight)>);

impl Backends {
    /// A worker's view of `shared`, keeping up to `max_idle` idle
    /// connections per server (a ceiling: the pool holds what the recent
    /// peak used, see [`pool`]).
    pub fn new(shared: Arc<UpstreamShared>, max_idle: usize) -> Self {
        let set = arc_swap::Guard::into_inner(shared.servers());
        let servers = set.servers.len();
        Backends {
            view: RefCell::new(View::new(set, &shared.config)),
            budget: Budget::new(shared.config.retries.budget),
            shared,
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
    pub async fn get(
        &self,
        tries: &mut Tries,
        connect_timeout: Duration,
    ) -> Result<BackendConn, ConnectError> {
        match self.get_pooled(tries) {
            Ok(conn) => Ok(conn),
            Err(next) => self.connect_next(tries, next, connect_timeout).await,
        }
    }

    /// [`Backends::get`]'s first step, which does not wait: the pooled
    /// connection of the server the policy picks, else what
    /// [`Backends::connect_next`] goes on with. A plain function: under
    /// keepalive this is all of `get`, which then costs no `async fn` poll
    /// (a call, 127 instructions a request with its work, callgrind).
    #[inline]
    pub fn get_pooled(&self, tries: &mut Tries) -> Result<BackendConn, NextConnect> {
        let Some(picked) = self.pick(tries, |_| true) else {
            return Err(NextConnect(None));
        };
        // Counted before connecting, so concurrent picks see it.
        let in_flight = picked.server.begin_owned();
        match self.pool.take(picked.index) {
            Some(stream) => Ok(pooled(stream, picked.index, in_flight)),
            None => Err(NextConnect(Some((picked.index, in_flight)))),
        }
    }

    /// [`Backends::get`] after [`Backends::get_pooled`] found no pooled
    /// connection.
    pub async fn connect_next(
        &self,
        tries: &mut Tries,
        next: NextConnect,
        connect_timeout: Duration,
    ) -> Result<BackendConn, ConnectError> {
        let Some((index, in_flight)) = next.0 else {
            return Err(ConnectError::AllDown(self.name().to_string()));
        };
        // Connecting is the rare path under keepalive: boxed, so its state
        // does not enlarge the future of every request that awaits `get`.
        Box::pin(self.connect_any(tries, index, in_flight, connect_timeout)).await
    }

    /// Connects to the server `in_flight` counts, then to the other live
    /// servers in policy order while connecting fails and the retry budget
    /// allows (taking a pooled connection when one of them has one).
    async fn connect_any(
        &self,
        tries: &mut Tries,
        mut index: usize,
        mut in_flight: InFlight,
        connect_timeout: Duration,
    ) -> Result<BackendConn, ConnectError> {
        loop {
            let addr = in_flight.server().addr;
            let error = match self
                .connect_counted(index, in_flight, connect_timeout)
                .await
            {
                Ok(conn) => return Ok(conn),
                Err(e) => e,
            };
            tries.tried.push(addr);
            let Some(next) = self.next_server(tries) else {
                return Err(error);
            };
            tries.connect_retries = tries.connect_retries.saturating_add(1);
            (index, in_flight) = (next.index, next.server.begin_owned());
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
        // The rare path (a pooled connection found closed): boxed, so the
        // connect's state (a TLS client mid-handshake, for TLS backends)
        // does not enlarge the future of every request that may retry, and
        // with it every idle client connection's task.
        Box::pin(self.connect_counted(index, server.begin(), connect_timeout)).await
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

    /// What picks the server of `req` (none in TCP mode) from `client`,
    /// for one request; counts the request in this worker's retry budget.
    #[inline]
    pub(crate) fn tries(&self, req: Option<&crate::message::Request<'_>>, client: IpAddr) -> Tries {
        self.budget.deposit();
        let affinity = &self.shared.config.affinity;
        let target = match (self.shared.config.balance, req) {
            (Balance::Hash, _) => affinity::hash_target(&affinity.hash_key, req, client),
            (Balance::StickyCookie, Some(req)) => {
                affinity::sticky_target(&affinity.sticky_cookie, req)
            }
            _ => Target::Any,
        };
        Tries {
            target,
            ..Tries::default()
        }
    }

    /// The server a failed request goes to next: a live one it has not
    /// tried, if the retry budget has a token for it.
    fn next_server(&self, tries: &mut Tries) -> Option<Picked> {
        let next = self.pick(tries, |_| true)?;
        if !self.budget.withdraw() {
            tries.denied = true;
            return None;
        }
        Some(next)
    }

    /// May the request, answered `status` by `from`, go to another server?
    /// (`retry_on`, once per request, a live server it has not tried, a
    /// token of the budget.) The caller checks that the request is
    /// idempotent and still whole in hand. When true, `from` counts as
    /// tried.
    ///
    /// Inline for a status `retry_on` does not list (nearly every
    /// response): its call was 49 instructions a request (callgrind).
    /// Forced: `#[inline]` alone left the call.
    #[inline(always)]
    pub(crate) fn retry_status(&self, tries: &mut Tries, from: BackendAddr, status: u16) -> bool {
        if tries.status_retry.is_some() || !self.shared.config.retries.on.contains(&status) {
            return false;
        }
        self.retry_elsewhere(tries, from, status)
    }

    /// [`Backends::retry_status`] for a status `retry_on` lists.
    #[inline(never)]
    fn retry_elsewhere(&self, tries: &mut Tries, from: BackendAddr, status: u16) -> bool {
        let other = self
            .shared
            .servers()
            .servers
            .iter()
            .any(|s| s.addr != from && !tries.tried(s.addr) && s.is_live());
        if !other {
            return false;
        }
        if !self.budget.withdraw() {
            tries.denied = true;
            return false;
        }
        tries.tried.push(from);
        tries.status_retry = Some(status);
        true
    }

    /// `server` answered a request head with `status` (outlier detection).
    #[inline]
    pub(crate) fn answered(&self, server: &Server, status: u16) {
        self.shared.answered(server, status);
    }

    /// `server` sent no response head in time (outlier detection).
    pub(crate) fn timed_out(&self, server: &Server) {
        self.shared.timed_out(server);
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
