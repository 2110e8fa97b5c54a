//! Backends: choosing one, connecting to it, and keeping idle connections.
//!
//! Each worker keeps its own pool (no locks on the request path). A pooled
//! connection is checked for a pending close before reuse, because backends
//! close idle keepalive connections on their own schedule (Node's default is
//! 5 s) and a request written into a closed connection would fail.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

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
}

/// A worker's view of a listener's backends: round-robin choice and pool.
#[derive(Debug)]
pub struct Backends {
    addrs: Vec<SocketAddr>,
    next: Cell<usize>,
    idle: RefCell<HashMap<SocketAddr, Vec<(TcpStream, Instant)>>>,
    max_idle: usize,
}

impl Backends {
    /// Backends at `addrs`, keeping up to `max_idle` idle connections each.
    pub fn new(addrs: Vec<SocketAddr>, max_idle: usize) -> Self {
        Backends {
            addrs,
            next: Cell::new(0),
            idle: RefCell::new(HashMap::new()),
            max_idle,
        }
    }

    /// The next backend in round-robin order.
    pub fn pick(&self) -> SocketAddr {
        let i = self.next.get();
        self.next.set(i.wrapping_add(1));
        self.addrs[i % self.addrs.len()]
    }

    /// A live idle connection to `addr`, or a new one.
    pub async fn get(
        &self,
        addr: SocketAddr,
        connect_timeout: Duration,
    ) -> Result<BackendConn, ConnectError> {
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

    /// Closes every idle connection (at shutdown).
    pub fn clear(&self) {
        self.idle.borrow_mut().clear();
    }
}
