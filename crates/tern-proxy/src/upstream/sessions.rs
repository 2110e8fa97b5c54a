//! HTTP/2 to backends: over cleartext TCP (`protocol = "h2c"`, prior
//! knowledge, RFC 9113 section 3.3) or over TLS (`protocol = "h2"`, ALPN,
//! section 3.2; the handshake is in [`super::tls`]). One multiplexed
//! connection per server and worker instead of a pool of HTTP/1.1
//! connections; everything after the TLS handshake is shared.
//!
//! A session is reused while the h2 client says it can take a stream; a
//! session the backend closed or sent GOAWAY on is dropped and a new one
//! is opened (streams still running on it finish). Server choice, retries
//! on connect failure, passive ejection and `AllDown` are the same as for
//! HTTP/1.1 ([`Backends::get`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::sync::watch;

use super::connect::connect;
use super::preface::preface;
use super::shared::InFlight;
use super::{Backends, ConnectError, Server, Tries};
use crate::config::BackendAddr;

/// Where a request goes on an HTTP/2 backend session, counted as one
/// request in flight on its server until dropped.
#[derive(Debug)]
pub struct H2Stream {
    /// Ready to send one request (`send_request`).
    pub sender: SendRequest<Bytes>,
    /// The server.
    pub addr: BackendAddr,
    /// False when the session had to be opened for this request.
    #[allow(dead_code)] // read by tests; kept for the access log
    pub reused: bool,
    /// Keeps the server's in-flight count up (least_conn reads it).
    in_flight: InFlight,
}

impl H2Stream {
    /// The server it goes to.
    pub(crate) fn server(&self) -> &std::sync::Arc<super::Server> {
        self.in_flight.server()
    }
}

/// Per server of a group, this worker's session to it.
pub(super) type Sessions = std::cell::RefCell<Vec<Slot>>;

/// Follows a change of the group's servers: the session of server `i`
/// moves to `moves[i]` (dropped when it is `None`: the server left; its
/// running streams finish, since each holds its own handle), for
/// `servers` servers in all.
pub(super) fn remap(sessions: &Sessions, moves: &[Option<usize>], servers: usize) {
    let mut slots = sessions.borrow_mut();
    let mut next: Vec<Slot> = (0..servers).map(|_| Slot::Empty).collect();
    for (slot, to) in slots.drain(..).zip(moves) {
        if let Some(place) = to.and_then(|to| next.get_mut(to)) {
            *place = slot;
        }
    }
    *slots = next;
}

/// One server's session, as one worker sees it.
#[derive(Debug, Default)]
pub(super) enum Slot {
    /// None: the next request opens one.
    #[default]
    Empty,
    /// A request is opening one; the others wait for it instead of each
    /// opening their own (a burst would otherwise open a session per request).
    Opening(watch::Receiver<Option<Opened>>),
    /// Open (the backend may have closed it since; `ready` tells).
    Open(SendRequest<Bytes>),
}

/// How an attempt to open a session ended, for the requests that waited on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Opened {
    Ok,
    TimedOut,
    Failed,
}

/// What a request found in a slot (cloned out, so no borrow is held
/// across an await).
enum Found {
    Empty,
    Opening(watch::Receiver<Option<Opened>>),
    Open(SendRequest<Bytes>),
}

impl Backends {
    /// A sender ready for one request on an HTTP/2 session to a live
    /// server chosen by the group's policy (`protocol = "h2c"` or `"h2"`).
    /// Failing servers are handled as in [`Backends::get`]; waiting for a
    /// free stream on a busy session, or for another request's attempt to
    /// open one, is bounded by `connect_timeout` too.
    pub async fn get_h2(
        &self,
        tries: &mut Tries,
        connect_timeout: Duration,
    ) -> Result<H2Stream, ConnectError> {
        let mut last_error: Option<ConnectError> = None;
        'servers: loop {
            let picked = match last_error {
                None => self.pick(tries, |_| true),
                Some(_) => self.next_server(tries),
            };
            let Some(picked) = picked else {
                return Err(
                    last_error.unwrap_or_else(|| ConnectError::AllDown(self.name().to_string()))
                );
            };
            if last_error.is_some() {
                tries.connect_retries = tries.connect_retries.saturating_add(1);
            }
            let in_flight = picked.server.begin();
            let addr = picked.server.addr;
            // `server` names the slot across awaits (the view may change).
            let server = (&picked.server, picked.index);
            loop {
                match self.find_session(server) {
                    Found::Open(sender) => {
                        match tokio::time::timeout(connect_timeout, sender.ready()).await {
                            Ok(Ok(sender)) => {
                                return Ok(H2Stream {
                                    sender,
                                    addr,
                                    reused: true,
                                    in_flight,
                                })
                            }
                            Ok(Err(e)) => {
                                tracing::debug!(backend = %addr, "HTTP/2 session ended: {e}");
                                self.set_slot(server, Slot::Empty);
                            }
                            // Every stream of the session is busy: no other
                            // server would be better placed than a fresh
                            // session here.
                            Err(_) => return Err(ConnectError::Timeout(addr)),
                        }
                    }
                    Found::Opening(mut opening) => {
                        let waited = tokio::time::timeout(
                            connect_timeout,
                            opening.wait_for(Option::is_some),
                        )
                        .await
                        .map(|r| r.map(|outcome| *outcome));
                        match waited {
                            Err(_) | Ok(Ok(Some(Opened::TimedOut))) => {
                                return Err(ConnectError::Timeout(addr))
                            }
                            Ok(Ok(Some(Opened::Failed))) => {
                                // The opener logged and counted the failure.
                                tries.tried.push(addr);
                                last_error = Some(ConnectError::Io(
                                    addr,
                                    std::io::Error::other("HTTP/2 session could not be opened"),
                                ));
                                continue 'servers;
                            }
                            // Opened (look again), or the opener gave up
                            // (its request went away): look again.
                            Ok(_) => {}
                        }
                    }
                    Found::Empty => {
                        let (report, opening) = watch::channel(None);
                        self.set_slot(server, Slot::Opening(opening));
                        let guard = OpeningGuard {
                            backends: self,
                            server,
                        };
                        let opened = self.open_session(server, connect_timeout).await;
                        drop(guard);
                        match opened {
                            Ok(sender) => {
                                let _ = report.send(Some(Opened::Ok));
                                return Ok(H2Stream {
                                    sender,
                                    addr,
                                    reused: false,
                                    in_flight,
                                });
                            }
                            Err(e) => {
                                let _ = report.send(Some(match e {
                                    ConnectError::Timeout(_) => Opened::TimedOut,
                                    _ => Opened::Failed,
                                }));
                                tracing::warn!(upstream = %self.name(), "{e}");
                                picked.server.connect_failed(
                                    self.shared.config.passive,
                                    self.name(),
                                    &e,
                                );
                                tries.tried.push(addr);
                                last_error = Some(e);
                                continue 'servers;
                            }
                        }
                    }
                }
            }
        }
    }

    fn find_session(&self, (server, hint): (&Arc<Server>, usize)) -> Found {
        let Some(index) = self.index_of(server, hint) else {
            return Found::Empty;
        };
        match self.sessions.borrow().get(index) {
            Some(Slot::Open(sender)) => Found::Open(sender.clone()),
            Some(Slot::Opening(opening)) => Found::Opening(opening.clone()),
            _ => Found::Empty,
        }
    }

    /// Stores `slot` as the session of `server` (nothing when the server
    /// has left the group).
    fn set_slot(&self, (server, hint): (&Arc<Server>, usize), slot: Slot) {
        let Some(index) = self.index_of(server, hint) else {
            return;
        };
        if let Some(s) = self.sessions.borrow_mut().get_mut(index) {
            *s = slot;
        }
    }

    /// Connects (and for `"h2"` completes the TLS handshake) and the
    /// HTTP/2 preface with server `server`, all within `connect_timeout`;
    /// keeps the session for later requests and returns a ready sender.
    async fn open_session(
        &self,
        server: (&Arc<Server>, usize),
        connect_timeout: Duration,
    ) -> Result<SendRequest<Bytes>, ConnectError> {
        let addr = server.0.addr;
        let deadline = tokio::time::Instant::now() + connect_timeout;
        let tls = self.shared.config.tls.as_ref();
        let stream = connect(addr, server.0.origin, tls, connect_timeout).await?;
        let sender = preface(addr, stream, deadline).await?;
        server.0.connect_succeeded();
        self.set_slot(server, Slot::Open(sender.clone()));
        Ok(sender)
    }
}

/// Empties a server's slot if it still says `Opening` when the attempt
/// ends, however it ends (failure, or the request that opened it going
/// away mid-way), so the slot never waits on an attempt nobody drives.
struct OpeningGuard<'b> {
    backends: &'b Backends,
    server: (&'b Arc<Server>, usize),
}

impl Drop for OpeningGuard<'_> {
    fn drop(&mut self) {
        let (server, hint) = self.server;
        let Some(index) = self.backends.index_of(server, hint) else {
            return;
        };
        if let Some(slot) = self.backends.sessions.borrow_mut().get_mut(index) {
            if matches!(slot, Slot::Opening(_)) {
                *slot = Slot::Empty;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::config::UpstreamConfig;
    use crate::upstream::UpstreamShared;
    use tokio::net::TcpListener;

    /// An h2c origin answering every request `200` with body `from ADDR`;
    /// counts TCP connections. With `close_after`, each connection is
    /// closed (GOAWAY) after that many requests.
    async fn h2c_origin(close_after: Option<usize>) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(tcp).await else {
                        return;
                    };
                    let mut served = 0;
                    while let Some(Ok((_request, mut respond))) = conn.accept().await {
                        let response = http::Response::new(());
                        if let Ok(mut body) = respond.send_response(response, false) {
                            let _ = body.send_data(Bytes::from(format!("from {addr}")), true);
                        }
                        served += 1;
                        if close_after == Some(served) {
                            conn.graceful_shutdown();
                        }
                    }
                });
            }
        });
        (addr, connections)
    }

    fn h2c_group(servers: Vec<std::net::SocketAddr>) -> Backends {
        let shared = UpstreamShared::new(UpstreamConfig::simple("h2c".into(), servers));
        Backends::new(shared, 4)
    }

    async fn get_body(backends: &Backends) -> (String, bool) {
        let H2Stream {
            mut sender, reused, ..
        } = backends
            .get_h2(&mut Tries::default(), Duration::from_secs(2))
            .await
            .expect("a session");
        let request = http::Request::get("http://backend/x")
            .body(())
            .expect("request");
        let (response, _) = sender.send_request(request, true).expect("send");
        let mut body = response.await.expect("response").into_body();
        let mut text = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.expect("data");
            let _ = body.flow_control().release_capacity(chunk.len());
            text.extend_from_slice(&chunk);
        }
        (String::from_utf8_lossy(&text).into_owned(), reused)
    }

    #[tokio::test]
    async fn requests_share_one_session_per_server() {
        let (addr, connections) = h2c_origin(None).await;
        let backends = h2c_group(vec![addr]);
        for i in 0..5 {
            let (body, reused) = get_body(&backends).await;
            assert_eq!(body, format!("from {addr}"));
            assert_eq!(reused, i > 0);
        }
        assert_eq!(connections.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_burst_of_requests_opens_one_session() {
        let (addr, connections) = h2c_origin(None).await;
        let backends = h2c_group(vec![addr]);
        let mut tries: Vec<Tries> = (0..20).map(|_| Tries::default()).collect();
        let burst = tries
            .iter_mut()
            .map(|t| backends.get_h2(t, Duration::from_secs(2)));
        let streams = futures_util::future::join_all(burst).await;
        assert!(streams.iter().all(Result::is_ok), "{streams:?}");
        assert_eq!(streams.iter().flatten().filter(|s| !s.reused).count(), 1);
        assert_eq!(connections.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_closed_session_is_replaced() {
        let (addr, connections) = h2c_origin(Some(1)).await;
        let backends = h2c_group(vec![addr]);
        for _ in 0..3 {
            let (body, _) = get_body(&backends).await;
            assert_eq!(body, format!("from {addr}"));
            // Let the GOAWAY arrive before the next pick.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(connections.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn refused_server_fails_over_to_the_next() {
        let dead = {
            let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            l.local_addr().expect("addr")
        };
        let (live, _) = h2c_origin(None).await;
        let backends = h2c_group(vec![dead, live]);
        for _ in 0..4 {
            let (body, _) = get_body(&backends).await;
            assert_eq!(body, format!("from {live}"));
        }
    }

    #[tokio::test]
    async fn a_silent_server_times_out_at_the_preface() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let backends = h2c_group(vec![addr]);
        let result = backends
            .get_h2(&mut Tries::default(), Duration::from_millis(200))
            .await;
        assert!(
            matches!(result, Err(ConnectError::Timeout(a)) if a == addr.into()),
            "{result:?}"
        );
        drop(listener);
    }

    #[tokio::test]
    async fn an_http1_only_server_fails_the_preface() {
        // Answers anything with an HTTP/1.1 response and closes.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                use tokio::io::AsyncWriteExt;
                let _ = tcp
                    .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                    .await;
            }
        });
        let backends = h2c_group(vec![addr]);
        let result = backends
            .get_h2(&mut Tries::default(), Duration::from_secs(2))
            .await;
        assert!(matches!(result, Err(ConnectError::Io(..))), "{result:?}");
    }
}
