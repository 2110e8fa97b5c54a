//! Opening a connection to one server of a group: TCP (with TCP_NODELAY)
//! or a Unix socket, then the TLS handshake when the group has TLS, all
//! under one deadline. Requests, HTTP/2 sessions and health checks all
//! connect here, so a server is reached the same way by each.

use std::time::Duration;

use tokio::net::{TcpStream, UnixStream};

use super::{tls, BackendStream, ConnectError, Socket};
use crate::config::{BackendAddr, BackendTls};

/// A connection to `addr`, server `server` of a group with TLS settings
/// `tls`, within `timeout` (connect and handshake together).
pub(super) async fn connect(
    addr: BackendAddr,
    server: usize,
    tls: Option<&BackendTls>,
    timeout: Duration,
) -> Result<BackendStream, ConnectError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let socket = open(addr, timeout).await?;
    let Some(settings) = tls else {
        return Ok(BackendStream::Plain(socket));
    };
    match tokio::time::timeout_at(deadline, tls::handshake(settings, server, socket)).await {
        Ok(Ok(stream)) => Ok(BackendStream::Tls(Box::new(stream))),
        Ok(Err(e)) => Err(ConnectError::Tls(addr, e)),
        Err(_) => Err(ConnectError::Timeout(addr)),
    }
}

/// Opens the socket under a deadline.
async fn open(addr: BackendAddr, timeout: Duration) -> Result<Socket, ConnectError> {
    let opened = match addr {
        BackendAddr::Tcp(a) => {
            tokio::time::timeout(timeout, TcpStream::connect(a))
                .await
                .map(|r| {
                    // One write per message is only one segment if Nagle
                    // does not hold back the tail of a previous write
                    // waiting for an ACK.
                    r.and_then(|s| s.set_nodelay(true).map(|()| Socket::Tcp(s)))
                })
        }
        BackendAddr::Unix(path) => tokio::time::timeout(timeout, UnixStream::connect(path))
            .await
            .map(|r| r.map(Socket::Unix)),
    };
    match opened {
        Ok(Ok(socket)) => Ok(socket),
        Ok(Err(e)) => Err(ConnectError::Io(addr, e)),
        Err(_) => Err(ConnectError::Timeout(addr)),
    }
}
