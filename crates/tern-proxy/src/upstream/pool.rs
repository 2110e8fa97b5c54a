//! A worker's idle keepalive connections, per server of one group.
//!
//! The pool follows demand. A connection whose exchange ended cleanly is
//! kept, so after a burst the pool holds as many connections as the burst
//! had in use (a new one is opened only when none is idle), and the next
//! burst of the same size opens none: an HTTP/2 client multiplexing
//! hundreds of streams over a few connections never costs a backend
//! connection per request. Connections are reused most recently returned
//! first, so when demand falls the surplus sinks to the bottom unused and
//! is closed once idle for [`MAX_IDLE_AGE`]: the pool shrinks slowly to the
//! recent peak. `backend_pool_size` is a hard ceiling on what one worker
//! keeps idle per server (memory and descriptors after an extreme burst).
//!
//! A pooled connection is checked for a pending close before reuse, because
//! backends close idle keepalive connections on their own schedule (Node's
//! default is 5 s) and a request written into a closed connection would fail.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::BackendStream;

/// Idle connections older than this are closed rather than reused.
pub const MAX_IDLE_AGE: Duration = Duration::from_secs(30);

/// How often a worker closes the connections idle past [`MAX_IDLE_AGE`]
/// when no request comes to do it (see [`IdlePool::sweep`]).
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(5);

/// Idle connections of one worker to the servers of one group (no locks:
/// a worker is single-threaded).
#[derive(Debug)]
pub(super) struct IdlePool {
    /// Per server index: idle connections, least recently returned first,
    /// each with the time past which it is too old to reuse (its return
    /// plus [`MAX_IDLE_AGE`]: one addition when it is kept, where the age
    /// took a subtraction at each look, two per request).
    idle: RefCell<Vec<VecDeque<(BackendStream, Instant)>>>,
    /// Most idle connections kept per server (`backend_pool_size`).
    max_idle: usize,
}

impl IdlePool {
    /// An empty pool for `servers` servers.
    pub(super) fn new(servers: usize, max_idle: usize) -> Self {
        IdlePool {
            idle: RefCell::new((0..servers).map(|_| VecDeque::new()).collect()),
            max_idle,
        }
    }

    /// Keeps `stream` for reuse with server `server`. At the ceiling the
    /// least recently used idle connection is closed to make room.
    pub(super) fn put(&self, server: usize, stream: BackendStream) {
        self.put_at(server, stream, tern_deadline::now().into_std());
    }

    /// [`IdlePool::put`], the connection idle since `now`.
    fn put_at(&self, server: usize, stream: BackendStream, now: Instant) {
        if self.max_idle == 0 {
            return;
        }
        let mut idle = self.idle.borrow_mut();
        if let Some(list) = idle.get_mut(server) {
            trim(list, now);
            if list.len() >= self.max_idle {
                list.pop_front();
            }
            // An Instant this far ahead cannot overflow on any platform
            // tern runs on; if it did, the connection is simply not kept.
            if let Some(stale_after) = now.checked_add(MAX_IDLE_AGE) {
                list.push_back((stream, stale_after));
            }
        }
    }

    /// The most recently used idle connection to `server` that still looks
    /// open; stale and closed ones met on the way are dropped.
    pub(super) fn take(&self, server: usize) -> Option<BackendStream> {
        let mut idle = self.idle.borrow_mut();
        let list = idle.get_mut(server)?;
        let now = tern_deadline::now().into_std();
        while let Some((stream, stale_after)) = list.pop_back() {
            if now > stale_after {
                // Everything below is older still.
                list.clear();
                return None;
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
        let mut next: Vec<VecDeque<(BackendStream, Instant)>> =
            (0..servers).map(|_| VecDeque::new()).collect();
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

    /// Closes the connections idle past [`MAX_IDLE_AGE`] (run every
    /// [`SWEEP_INTERVAL`], so a pool no request touches still shrinks).
    pub(super) fn sweep(&self) {
        let now = Instant::now();
        for list in self.idle.borrow_mut().iter_mut() {
            trim(list, now);
        }
    }

    /// Idle connections to `server`.
    #[cfg(test)]
    pub(super) fn len(&self, server: usize) -> usize {
        self.idle.borrow().get(server).map_or(0, VecDeque::len)
    }
}

/// Drops the connections at the bottom of `list` idle past [`MAX_IDLE_AGE`].
fn trim(list: &mut VecDeque<(BackendStream, Instant)>, now: Instant) {
    while list
        .front()
        .is_some_and(|(_, stale_after)| now > *stale_after)
    {
        list.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::stream::Socket;
    use tokio::io::AsyncReadExt;
    use tokio::net::{TcpListener, TcpStream};

    /// `n` connected pairs over loopback: (tern's side, the backend's side).
    async fn pairs(n: usize) -> Vec<(BackendStream, TcpStream)> {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut out = Vec::new();
        for _ in 0..n {
            let ours = TcpStream::connect(addr).await.expect("connect");
            let (theirs, _) = listener.accept().await.expect("accept");
            out.push((BackendStream::Plain(Socket::Tcp(ours)), theirs));
        }
        out
    }

    /// True when the backend's side reads EOF (tern closed its side).
    async fn closed(theirs: &mut TcpStream) -> bool {
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(Duration::from_secs(5), theirs.read(&mut byte)).await,
            Ok(Ok(0))
        )
    }

    #[tokio::test]
    async fn a_burst_is_kept_whole_and_reused_newest_first() {
        let pool = IdlePool::new(1, 1024);
        let mut backends = Vec::new();
        for (ours, theirs) in pairs(200).await {
            pool.put(0, ours);
            backends.push(theirs);
        }
        assert_eq!(pool.len(0), 200, "every connection of the burst is kept");
        let newest = pool.take(0).expect("a pooled connection");
        let last = backends.last().expect("200 pairs");
        assert_eq!(newest.local_addr(), Some(last.peer_addr().expect("addr")));
    }

    #[tokio::test]
    async fn the_ceiling_closes_the_least_recently_used() {
        let pool = IdlePool::new(1, 2);
        let mut pairs = pairs(3).await;
        let mut theirs = Vec::new();
        for (ours, t) in pairs.drain(..) {
            pool.put(0, ours);
            theirs.push(t);
        }
        assert_eq!(pool.len(0), 2);
        assert!(closed(&mut theirs[0]).await, "the oldest was closed");
    }

    #[tokio::test]
    async fn connections_idle_past_the_age_are_swept_the_rest_kept() {
        let pool = IdlePool::new(1, 1024);
        let long_ago = Instant::now() - MAX_IDLE_AGE - Duration::from_secs(1);
        let mut theirs = Vec::new();
        for (i, (ours, t)) in pairs(4).await.into_iter().enumerate() {
            let since = if i < 3 { long_ago } else { Instant::now() };
            pool.put_at(0, ours, since);
            theirs.push(t);
        }
        pool.sweep();
        assert_eq!(pool.len(0), 1, "the three stale ones are closed");
        for t in &mut theirs[..3] {
            assert!(closed(t).await);
        }
    }

    #[tokio::test]
    async fn a_stale_top_means_no_reuse() {
        let pool = IdlePool::new(1, 1024);
        let long_ago = Instant::now() - MAX_IDLE_AGE - Duration::from_secs(1);
        let mut keep = Vec::new();
        for (ours, theirs) in pairs(2).await {
            pool.put_at(0, ours, long_ago);
            keep.push(theirs);
        }
        assert!(pool.take(0).is_none());
        assert_eq!(pool.len(0), 0);
    }
}
