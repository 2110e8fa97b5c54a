//! Listening sockets tern did not bind itself: handed over by the tern it
//! replaces (binary upgrade, [`super::upgrade`]) or by systemd (socket
//! activation, `LISTEN_FDS`). Each is matched to the configuration by its
//! own address and type (`getsockname`, `SO_TYPE`), so neither source
//! needs a manifest, and the sockets it holds are recorded ([`Held`]) for
//! the next upgrade.
//!
//! Per address, worker `i` of `W` gets socket `i % N` of the `N` inherited
//! (TCP; several workers then accept on one socket, as with `accept =
//! "shared"`) or socket `i` if `i < N` (UDP: a QUIC connection's packets
//! must reach the one endpoint that holds it). More inherited sockets
//! than workers is refused: the extra ones would queue connections that
//! nobody accepts.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};

use socket2::{SockRef, Type};

use crate::error::ServeError;

/// Sockets given to this process, by address, in the order received.
#[derive(Default)]
pub(crate) struct Inherited {
    tcp: HashMap<SocketAddr, Vec<TcpListener>>,
    udp: HashMap<SocketAddr, Vec<UdpSocket>>,
    /// Where they came from, for messages.
    from: &'static str,
}

impl Inherited {
    /// Sorts `fds` by type and address; anything but a bound TCP or UDP
    /// socket is an error.
    pub(crate) fn from_fds(fds: Vec<OwnedFd>, from: &'static str) -> Result<Self, ServeError> {
        let mut inherited = Inherited {
            from,
            ..Inherited::default()
        };
        for (index, fd) in fds.into_iter().enumerate() {
            let sock = SockRef::from(&fd);
            let described = sock
                .r#type()
                .and_then(|t| sock.local_addr().map(|a| (t, a.as_socket())));
            let (kind, addr) = match described {
                Ok((kind, Some(addr))) => (kind, addr),
                Ok((_, None)) => return Err(not_inet(from, index, "not a TCP or UDP socket")),
                Err(e) => return Err(not_inet(from, index, &e.to_string())),
            };
            if kind == Type::STREAM {
                let listener = TcpListener::from(fd);
                listener.set_nonblocking(true).map_err(bind_err(addr))?;
                inherited.tcp.entry(addr).or_default().push(listener);
            } else if kind == Type::DGRAM {
                let socket = UdpSocket::from(fd);
                socket.set_nonblocking(true).map_err(bind_err(addr))?;
                inherited.udp.entry(addr).or_default().push(socket);
            } else {
                return Err(not_inet(
                    from,
                    index,
                    "neither a stream nor a datagram socket",
                ));
            }
        }
        Ok(inherited)
    }

    /// The sockets systemd passed (`LISTEN_FDS`, `LISTEN_PID`), if any.
    /// Must run before any thread starts: it clears those variables.
    pub(crate) fn from_systemd() -> Result<Self, ServeError> {
        let names = std::env::var("LISTEN_FDNAMES").unwrap_or_default();
        let mut fds = listenfd::ListenFd::from_env();
        let mut owned = Vec::with_capacity(fds.len());
        for index in 0..fds.len() {
            // listenfd checks the type (and LISTEN_PID) before it gives a
            // descriptor away as a typed, owned socket.
            let fd = match fds.take_tcp_listener(index) {
                Ok(Some(tcp)) => OwnedFd::from(tcp),
                _ => match fds.take_udp_socket(index) {
                    Ok(Some(udp)) => OwnedFd::from(udp),
                    _ => return Err(not_inet("systemd", index, "not a TCP or UDP socket")),
                },
            };
            owned.push(fd);
        }
        let inherited = Inherited::from_fds(owned, "systemd")?;
        if !inherited.is_empty() {
            let names: Vec<&str> = names.split(':').filter(|n| !n.is_empty()).collect();
            tracing::info!(
                "socket activation: {} sockets from systemd{}",
                inherited.count(),
                if names.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", names.join(", "))
                }
            );
        }
        Ok(inherited)
    }

    fn count(&self) -> usize {
        self.tcp.values().map(Vec::len).sum::<usize>()
            + self.udp.values().map(Vec::len).sum::<usize>()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tcp.is_empty() && self.udp.is_empty()
    }

    /// The inherited TCP sockets of `addr`, one for each of `workers`.
    pub(crate) fn tcp_for_workers(
        &mut self,
        addr: SocketAddr,
        workers: usize,
    ) -> Result<Option<Vec<Option<TcpListener>>>, ServeError> {
        let Some(sockets) = self.tcp.remove(&addr) else {
            return Ok(None);
        };
        self.check_count(addr, "TCP", sockets.len(), workers)?;
        let mut out = Vec::with_capacity(workers);
        for i in 0..workers {
            let socket = sockets[i % sockets.len()]
                .try_clone()
                .map_err(bind_err(addr))?;
            // Accepted sockets inherit it (see `sockets::bind`); a socket
            // from systemd may not have it yet.
            SockRef::from(&socket)
                .set_tcp_nodelay(true)
                .map_err(bind_err(addr))?;
            out.push(Some(socket));
        }
        Ok(Some(out))
    }

    /// The inherited UDP sockets of `addr`: worker `i` gets socket `i`,
    /// workers past the last socket none (their QUIC endpoint is not
    /// started).
    pub(crate) fn udp_for_workers(
        &mut self,
        addr: SocketAddr,
        workers: usize,
    ) -> Result<Option<Vec<Option<UdpSocket>>>, ServeError> {
        let Some(sockets) = self.udp.remove(&addr) else {
            return Ok(None);
        };
        self.check_count(addr, "UDP", sockets.len(), workers)?;
        if sockets.len() < workers {
            tracing::info!(
                "udp {addr}: {} sockets from {}: HTTP/3 on {} of {workers} workers",
                sockets.len(),
                self.from,
                sockets.len()
            );
        }
        let mut out: Vec<Option<UdpSocket>> = sockets.into_iter().map(Some).collect();
        out.resize_with(workers, || None);
        Ok(Some(out))
    }

    /// One inherited TCP socket for a listener served by the control
    /// runtime (admin, plain HTTP).
    pub(crate) fn single_tcp(&mut self, addr: SocketAddr) -> Option<TcpListener> {
        let mut sockets = self.tcp.remove(&addr)?;
        let first = sockets.swap_remove(0);
        Some(first)
    }

    fn check_count(
        &self,
        addr: SocketAddr,
        kind: &str,
        have: usize,
        workers: usize,
    ) -> Result<(), ServeError> {
        if have > workers {
            return Err(ServeError::Bind {
                addr,
                source: std::io::Error::other(format!(
                    "{have} {kind} sockets from {} but workers = {workers}: connections queued on \
                     the extra ones would wait for nobody; start with workers >= {have}",
                    self.from
                )),
            });
        }
        Ok(())
    }

    /// Closes what the configuration does not use, saying so.
    pub(crate) fn close_unused(self) {
        for addr in self.tcp.keys() {
            tracing::warn!(
                "tcp {addr} from {} is not in the configuration: closed",
                self.from
            );
        }
        for addr in self.udp.keys() {
            tracing::warn!(
                "udp {addr} from {} is not in the configuration: closed",
                self.from
            );
        }
    }
}

fn not_inet(from: &str, index: usize, why: &str) -> ServeError {
    ServeError::Io {
        context: "taking over listening sockets",
        source: std::io::Error::other(format!("socket {index} from {from}: {why}")),
    }
}

fn bind_err(addr: SocketAddr) -> impl Fn(std::io::Error) -> ServeError {
    move |source| ServeError::Bind { addr, source }
}

/// A listening socket's transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Kind {
    Tcp,
    Udp,
}

/// Copies of every listening socket this process serves, by type and
/// address in worker order: what the next binary upgrade hands over.
#[derive(Clone, Default)]
pub(crate) struct Held(Arc<Mutex<HeldMap>>);

type HeldMap = HashMap<(Kind, SocketAddr), Vec<OwnedFd>>;

impl Held {
    /// Records a copy of `socket` (one more of `addr`'s sockets).
    pub(crate) fn add(&self, kind: Kind, addr: SocketAddr, socket: BorrowedFd<'_>) {
        match socket.try_clone_to_owned() {
            Ok(fd) => {
                if let Ok(mut held) = self.0.lock() {
                    held.entry((kind, addr)).or_default().push(fd);
                }
            }
            Err(e) => tracing::warn!("{addr}: cannot keep a copy for upgrades: {e}"),
        }
    }

    /// Records every socket of a per-worker list.
    pub(crate) fn add_all<S: AsFd>(&self, kind: Kind, addr: SocketAddr, sockets: &[Option<S>]) {
        for s in sockets.iter().flatten() {
            self.add(kind, addr, s.as_fd());
        }
    }

    /// Forgets (closes) the copies of addresses no longer served.
    pub(crate) fn retain(&self, keep: impl Fn(Kind, SocketAddr) -> bool) {
        if let Ok(mut held) = self.0.lock() {
            held.retain(|(kind, addr), _| keep(*kind, *addr));
        }
    }

    /// Runs `f` with every held socket, in a stable order.
    pub(crate) fn with_all<R>(&self, f: impl FnOnce(&[BorrowedFd<'_>]) -> R) -> R {
        let held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut keys: Vec<_> = held.keys().collect();
        keys.sort_by_key(|(kind, addr)| (*kind, *addr));
        let fds: Vec<BorrowedFd<'_>> = keys
            .into_iter()
            .flat_map(|k| held[k].iter().map(|fd| fd.as_fd()))
            .collect();
        f(&fds)
    }
}
