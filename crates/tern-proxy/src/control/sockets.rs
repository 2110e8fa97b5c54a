//! The listening sockets `tern serve` opens itself (when no previous binary
//! or systemd hands them over: [`super::inherit`]): TCP per listener, one
//! per worker with SO_REUSEPORT or one shared; UDP for QUIC, one per
//! worker; the plain-HTTP listener's one.

use std::collections::HashMap;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};

use crate::config::AcceptMode;
use crate::error::ServeError;

/// Pending connections the kernel queues per listening socket.
const LISTEN_BACKLOG: i32 = 4096;

/// The plain-HTTP listener's socket (one, served by the control runtime).
pub(super) fn bind_plain(addr: SocketAddr) -> Result<std::net::TcpListener, ServeError> {
    let bind_err = |source| ServeError::Bind { addr, source };
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(bind_err)?;
    socket.set_reuse_address(true).map_err(bind_err)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true).map_err(bind_err)?;
    }
    socket.bind(&addr.into()).map_err(bind_err)?;
    socket.listen(LISTEN_BACKLOG).map_err(bind_err)?;
    socket.set_nonblocking(true).map_err(bind_err)?;
    Ok(socket.into())
}

/// Worker `id`'s socket for each address in `sockets`.
pub(super) fn take_worker_sockets<S>(
    sockets: &mut HashMap<SocketAddr, Vec<Option<S>>>,
    id: usize,
) -> HashMap<SocketAddr, S> {
    sockets
        .iter_mut()
        .filter_map(|(addr, list)| list.get_mut(id).and_then(Option::take).map(|s| (*addr, s)))
        .collect()
}

/// Opens the listening sockets of one listener: one per worker with
/// SO_REUSEPORT, or one shared by all.
pub(super) fn bind(
    addr: SocketAddr,
    mode: AcceptMode,
    workers: usize,
) -> Result<Vec<Option<std::net::TcpListener>>, ServeError> {
    let make = |reuse_port: bool| -> std::io::Result<std::net::TcpListener> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        if reuse_port {
            socket.set_reuse_port(true)?;
        }
        if addr.is_ipv6() {
            socket.set_only_v6(true)?;
        }
        // Accepted sockets inherit TCP_NODELAY on Linux, so a connection
        // needs no setsockopt of its own before the handshake (elsewhere
        // each sets it again: see `front::handle`).
        socket.set_tcp_nodelay(true)?;
        socket.bind(&addr.into())?;
        socket.listen(LISTEN_BACKLOG)?;
        socket.set_nonblocking(true)?;
        Ok(socket.into())
    };
    let bind_err = |source| ServeError::Bind { addr, source };
    match mode {
        AcceptMode::ReusePort => {
            // With SO_REUSEPORT a second tern (same user) would silently
            // share the port and take half the connections. A plain bind
            // first proves nobody holds it.
            drop(make(false).map_err(bind_err)?);
            (0..workers)
                .map(|_| make(true).map(Some).map_err(bind_err))
                .collect()
        }
        AcceptMode::Shared => {
            let first = make(false).map_err(bind_err)?;
            let mut all = Vec::with_capacity(workers);
            for _ in 1..workers {
                all.push(Some(first.try_clone().map_err(bind_err)?));
            }
            all.push(Some(first));
            Ok(all)
        }
    }
}

/// Opens a listener's UDP sockets for QUIC: one per worker, always with
/// SO_REUSEPORT (the kernel hashes each client address to one socket, so
/// a connection's packets reach the worker that holds it).
pub(super) fn bind_udp(
    addr: SocketAddr,
    workers: usize,
) -> Result<Vec<Option<std::net::UdpSocket>>, ServeError> {
    let make = |reuse_port: bool| -> std::io::Result<std::net::UdpSocket> {
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        if reuse_port {
            socket.set_reuse_port(true)?;
        }
        if addr.is_ipv6() {
            socket.set_only_v6(true)?;
        }
        socket.bind(&addr.into())?;
        socket.set_nonblocking(true)?;
        Ok(socket.into())
    };
    let bind_err = |source| ServeError::Bind { addr, source };
    // As for TCP: a plain bind first proves no other process holds the port.
    drop(make(false).map_err(bind_err)?);
    (0..workers)
        .map(|_| make(true).map(Some).map_err(bind_err))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The front end skips its own setsockopt on Linux because of this.
    #[test]
    fn accepted_sockets_have_tcp_nodelay_before_any_setsockopt() {
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        for mode in [AcceptMode::ReusePort, AcceptMode::Shared] {
            let listeners = bind(addr, mode, 1).unwrap();
            let listener = listeners.into_iter().flatten().next().unwrap();
            listener.set_nonblocking(false).unwrap();
            let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (accepted, _) = listener.accept().unwrap();
            assert_eq!(
                accepted.nodelay().unwrap(),
                cfg!(target_os = "linux"),
                "{mode:?}"
            );
        }
    }
}
