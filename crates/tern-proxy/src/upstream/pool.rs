//! A worker's idle keepalive connections, per server of one group.
//!
//! A pooled connection is checked for a pending close before reuse, because
//! backends close idle keepalive connections on their own schedule (Node's
//! default is 5 s) and a request written into a closed connection would fail.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use super::BackendStream;

/// Idle connections older than this are closed rather than reused.
pub const MAX_IDLE_AGE: Duration = Duration::from_secs(30);

/// Idle connections of one worker to the servers of one group (no locks:
/// a worker is single-threaded).
#[derive(Debug)]
pub(super) struct IdlePool {
    /// Per server index: idle connections, most recently returned last.
    idle: RefCell<Vec<Vec<(BackendStream, Instant)>>>,
    /// Most idle connections kept per server.
    max_idle: usize,
}

impl IdlePool {
    /// An empty pool for `servers` servers.
    pub(super) fn new(servers: usize, max_idle: usize) -> Self {
        IdlePool {
            idle: RefCell::new((0..servers).map(|_| Vec::new()).collect()),
            max_idle,
        }
    }

    /// Keeps `stream` for reuse with server `server`, unless the pool is full.
    pub(super) fn put(&self, server: usize, stream: BackendStream) {
        let mut idle = self.idle.borrow_mut();
        if let Some(list) = idle.get_mut(server) {
            if list.len() < self.max_idle {
                list.push((stream, Instant::now()));
            }
        }
    }

    /// The most recently used idle connection to `server` that still looks
    /// open; stale and closed ones met on the way are dropped.
    pub(super) fn take(&self, server: usize) -> Option<BackendStream> {
        let mut idle = self.idle.borrow_mut();
        let list = idle.get_mut(server)?;
        while let Some((stream, since)) = list.pop() {
            if since.elapsed() > MAX_IDLE_AGE {
                continue;
            }
            // A closed or misbehaving backend connection has something to
            // read (EOF or stray bytes); a healthy idle one has nothing.
            if stream.idle_and_open() {
                return Some(stream);
            }
        }
        None
    }

    /// Follows a change of the group's servers: the idle connections of
    /// server `i` move to `moves[i]` (closed when it is `None`: the server
    /// left), for `servers` servers in all.
    pub(super) fn remap(&self, moves: &[Option<usize>], servers: usize) {
        let mut idle = self.idle.borrow_mut();
        let mut next: Vec<Vec<(BackendStream, Instant)>> =
            (0..servers).map(|_| Vec::new()).collect();
        for (list, to) in idle.drain(..).zip(moves) {
            if let Some(slot) = to.and_then(|to| next.get_mut(to)) {
                *slot = list;
            }
        }
        *idle = next;
    }

    /// Closes every idle connection to `server` (it was marked down).
    pub(super) fn clear(&self, server: usize) {
        if let Some(list) = self.idle.borrow_mut().get_mut(server) {
            list.clear();
        }
    }
}
