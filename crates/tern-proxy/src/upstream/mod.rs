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

mod affinity;
mod balance;
pub(crate) mod h1;
pub(crate) mod h2;
mod health;
mod outlier;
mod pool;
mod retry;
mod sessions;
mod shared;
#[cfg(test)]
mod tests;
mod tls;

use std::cell::RefCell;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;

use crate::config::{BackendProtocol, Balance};
use crate::fault::Kind;

pub use retry::Tries;
pub use sessions::H2Stream;
pub use shared::UpstreamShared;

pub(crate) use affinity::cookie;
use affinity::Target;
use balance::SmoothWrr;
use pool::IdlePool;
use retry::Budget;
use shared::InFlight;

/// A connection to a backend, counted as one request in flight on its
/// server until it is dropped or returned with [`Backends::put`].
#[derive(Debug)]
pub struct BackendConn {
    /// The socket (TCP_NODELAY set).
    pub stream: TcpStream,
    /// Where it goes.
    pub addr: SocketAddr,
    /// True when it came from the pool (it may have been closed by the
    /// backend in the meantime, which allows one retry).
    pub reused: bool,
    /// Keeps the server's in-flight count up (least_conn reads it).
    in_flight: InFlight,
}

impl BackendConn {
    /// The server answered with `status` (outlier detection).
    pub(crate) fn answered(&self, status: u16) {
        self.in_flight.answered(status);
    }

    /// The server sent no response head in time (outlier detection).
    pub(crate) fn timed_out(&self) {
        self.in_flight.timed_out();
    }
}

/// Why a backend could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Refused, unreachable, reset (the last server tried).
    #[error("connect to {0}: {1}")]
    Io(SocketAddr, io::Error),
    /// No answer within the connect timeout (the last server tried).
    #[error("connect to {0}: timed out")]
    Timeout(SocketAddr),
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
        }
    }
}

/// A worker's view of an upstream group: balancing state and the pool of
/// idle connections (no locks: a worker is single-threaded).
#[derive(Debug)]
pub struct Backends {
    shared: Arc<UpstreamShared>,
    wrr: RefCell<SmoothWrr>,
    /// Weights in slow start (scratch, reused).
    ramped: RefCell<Vec<u32>>,
    /// This worker's retry budget for the group.
    budget: Budget,
    pool: IdlePool,
    /// HTTP/2 sessions (`protocol = "h2c"` and `"h2"` only).
    sessions: sessions::Sessions,
}

impl Backends {
    /// A worker's view of `shared`, keeping up to `max_idle` idle connections per server.
    pub fn new(shared: Arc<UpstreamShared>, max_idle: usize) -> Self {
        let servers = shared.config.servers.len();
        Backends {
            wrr: RefCell::new(SmoothWrr::new(servers)),
            ramped: RefCell::new(Vec::with_capacity(servers)),
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
        let Some(server) = self.pick(tries, |_| true) else {
            return Err(ConnectError::AllDown(self.name().to_string()));
        };
        // Counted before connecting, so concurrent picks see it.
        let in_flight = self.shared.begin(server);
        if let Some(stream) = self.pool.take(server) {
            return Ok(self.pooled(server, stream, in_flight));
        }
        // Connecting is the rare path under keepalive: boxed, so its state
        // does not enlarge the future of every request that awaits `get`.
        Box::pin(self.connect_any(tries, server, in_flight, connect_timeout)).await
    }

    /// Connects to `server`, then to the other live servers in policy order
    /// while connecting fails and the retry budget allows (taking a pooled
    /// connection when one of them has one).
    async fn connect_any(
        &self,
        tries: &mut Tries,
        mut server: usize,
        mut in_flight: InFlight,
        connect_timeout: Duration,
    ) -> Result<BackendConn, ConnectError> {
        loop {
            let error = match self.connect_counted(in_flight, connect_timeout).await {
                Ok(conn) => return Ok(conn),
                Err(e) => e,
            };
            tries.tried.push(self.shared.addr(server));
            let Some(next) = self.next_server(tries) else {
                return Err(error);
            };
            tries.connect_retries = tries.connect_retries.saturating_add(1);
            server = next;
            in_flight = self.shared.begin(server);
            if let Some(stream) = self.pool.take(server) {
                return Ok(self.pooled(server, stream, in_flight));
            }
        }
    }

    fn pooled(&self, server: usize, stream: TcpStream, in_flight: InFlight) -> BackendConn {
        BackendConn {
            stream,
            addr: self.shared.addr(server),
            reused: true,
            in_flight,
        }
    }

    /// A new connection to `addr`, one of the group's servers (used to
    /// retry on the same server after a pooled connection turned out closed).
    pub async fn connect(
        &self,
        addr: SocketAddr,
        connect_timeout: Duration,
    ) -> Result<BackendConn, ConnectError> {
        let Some(server) = self.shared.index_of(addr) else {
            return Err(ConnectError::Io(
                addr,
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("not a server of upstream {:?}", self.name()),
                ),
            ));
        };
        self.connect_counted(self.shared.begin(server), connect_timeout)
            .await
    }

    /// Returns a connection whose exchange completed cleanly; it is kept
    /// for reuse while its server is live and the pool has room.
    pub fn put(&self, conn: BackendConn) {
        let server = conn.in_flight.server();
        if self.shared.is_live(server) {
            self.pool.put(server, conn.stream);
        } else {
            self.pool.clear(server);
        }
    }

    /// What picks the server of `req` (none in TCP mode) from `client`,
    /// for one request; counts the request in this worker's retry budget.
    pub(crate) fn tries(&self, req: Option<&crate::message::Request<'_>>, client: IpAddr) -> Tries {
        self.budget.deposit();
        let affinity = &self.shared.config.affinity;
        let target = match self.shared.config.balance {
            Balance::Hash => affinity::hash_target(&affinity.hash_key, req, client),
            Balance::StickyCookie => match req {
                Some(req) => affinity::sticky_target(&affinity.sticky_cookie, req),
                None => Target::Any,
            },
            Balance::RoundRobin | Balance::LeastConn => Target::Any,
        };
        Tries {
            target,
            ..Tries::default()
        }
    }

    /// The server a failed request goes to next: a live one it has not
    /// tried, if the retry budget has a token for it.
    fn next_server(&self, tries: &mut Tries) -> Option<usize> {
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
    pub(crate) fn retry_status(&self, tries: &mut Tries, from: SocketAddr, status: u16) -> bool {
        if tries.status_retry.is_some() || !self.shared.config.retries.on.contains(&status) {
            return false;
        }
        let other = (0..self.shared.config.servers.len()).any(|i| {
            let addr = self.shared.addr(i);
            addr != from && !tries.tried(addr) && self.shared.is_live(i)
        });
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

    /// The `Set-Cookie` value to send with a response from `server`, when
    /// the group is sticky and the request's cookie did not name it.
    pub(crate) fn set_cookie(&self, tries: &Tries, server: SocketAddr) -> Option<&str> {
        if self.shared.cookies.is_empty() {
            return None;
        }
        let (value, field) = &self.shared.cookies[self.shared.index_of(server)?];
        match tries.target {
            Target::Sticky(Some(had)) if had == *value => None,
            _ => Some(field),
        }
    }

    /// The next live server the policy chooses for `tries` among those
    /// `allowed` that the request has not tried.
    fn pick(&self, tries: &Tries, allowed: impl Fn(usize) -> bool) -> Option<usize> {
        let shared = &self.shared;
        let eligible = |i: usize| {
            allowed(i)
                && shared.is_live(i)
                && (tries.tried.is_empty() || !tries.tried(shared.addr(i)))
        };
        let mut ramped = self.ramped.borrow_mut();
        let weights: &[u32] = if shared.ramped_weights(&mut ramped) {
            &ramped
        } else {
            &shared.weights
        };
        let mut wrr = self.wrr.borrow_mut();
        match (shared.config.balance, tries.target) {
            (Balance::Hash, Target::Hash(h)) => affinity::pick(
                &shared.ring,
                h,
                &shared.weights,
                shared.config.affinity.balance_factor,
                |i| shared.in_flight(i),
                eligible,
            ),
            (Balance::StickyCookie, Target::Sticky(Some(v))) => {
                match shared.cookies.iter().position(|c| c.0 == v) {
                    Some(i) if eligible(i) => Some(i),
                    _ => wrr.pick(weights, eligible),
                }
            }
            (Balance::LeastConn, _) => {
                balance::least_conn(&mut wrr, weights, |i| shared.in_flight(i), eligible)
            }
            _ => wrr.pick(weights, eligible),
        }
    }

    /// Connects to the server `in_flight` counts, recording the outcome
    /// for passive ejection.
    async fn connect_counted(
        &self,
        in_flight: InFlight,
        connect_timeout: Duration,
    ) -> Result<BackendConn, ConnectError> {
        let server = in_flight.server();
        let addr = self.shared.addr(server);
        match open(addr, connect_timeout).await {
            Ok(stream) => {
                self.shared.connect_succeeded(server);
                Ok(BackendConn {
                    stream,
                    addr,
                    reused: false,
                    in_flight,
                })
            }
            Err(e) => {
                tracing::warn!(upstream = %self.name(), "{e}");
                self.shared.connect_failed(server, &e);
                Err(e)
            }
        }
    }
}

/// Opens a TCP connection with TCP_NODELAY under a deadline.
async fn open(addr: SocketAddr, connect_timeout: Duration) -> Result<TcpStream, ConnectError> {
    let stream = match tokio::time::timeout(connect_timeout, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(ConnectError::Io(addr, e)),
        Err(_) => return Err(ConnectError::Timeout(addr)),
    };
    // One write per message is only one segment if Nagle does not hold
    // back the tail of a previous write waiting for an ACK.
    stream
        .set_nodelay(true)
        .map_err(|e| ConnectError::Io(addr, e))?;
    Ok(stream)
}
