//! The client's TLS stream as the front ends use it: tokio-rustls's, with
//! records rustls queued while reading written out at once.
//!
//! tokio-rustls writes only when its user writes or flushes (and when a
//! read fails, for the fatal alert). A record rustls queues in answer to
//! something it read while the application waits for the next request
//! waits with it: the `no_renegotiation` warning to a TLS 1.2 ClientHello
//! after the handshake (the client then hangs until its own timeout), and
//! a TLS 1.3 KeyUpdate answering one with `update_requested` (rustls holds
//! that one back until the next application write: an empty write
//! releases it without sending a record, when the read is about to wait).
//! After every read, whatever rustls wants to write is flushed.
//!
//! After a protocol error the fatal alert rustls queued is the last record:
//! closing does not add a `close_notify`, which would tell the client the
//! connection ended gracefully (RFC 8446 6.2; tlsfuzzer's
//! test-tls13-zero-content-type and test-tls13-zero-length-data).

use std::io::{self, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// A client's TLS stream that flushes what rustls queued while reading.
#[derive(Debug)]
pub(crate) struct ClientTls(TlsStream<TcpStream>);

impl ClientTls {
    /// Wraps a stream whose handshake is done.
    pub(crate) fn new(inner: TlsStream<TcpStream>) -> Self {
        ClientTls(inner)
    }

    /// The socket and the rustls connection.
    pub(crate) fn get_ref(&self) -> (&TcpStream, &rustls::ServerConnection) {
        self.0.get_ref()
    }

    /// The socket and the rustls connection, mutably.
    pub(crate) fn get_mut(&mut self) -> (&mut TcpStream, &mut rustls::ServerConnection) {
        self.0.get_mut()
    }
}

impl AsyncRead for ClientTls {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let read = Pin::new(&mut self.0).poll_read(cx, buf);
        let conn = self.0.get_mut().1;
        if read.is_pending() && !conn.is_handshaking() {
            // About to wait for the client, which may be waiting for the
            // KeyUpdate answer rustls keeps for the next write: an empty
            // write releases it and sends nothing else. Only then, so that
            // KeyUpdates read in one go get one answer, as rustls
            // coalesces them. An error here is the read's, reported by it.
            let _ = conn.writer().write(&[]);
        }
        if conn.wants_write() {
            // Pending registers the socket's write readiness with this
            // task: the next poll flushes the rest. An error shows on the
            // next read or write.
            let _ = Pin::new(&mut self.0).poll_flush(cx);
        }
        read
    }
}

impl AsyncWrite for ClientTls {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let (tcp, conn) = self.0.get_mut();
        // rustls's writer reports the connection's fatal error, if any: the
        // read that met it sent the alert; only the TCP close is left.
        if conn.writer().flush().is_err() {
            return Pin::new(tcp).poll_shutdown(cx);
        }
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
