//! The byte stream to one backend server: TCP, a Unix-domain socket, or
//! TLS over either. One type for the HTTP/1.1 pool, HTTP/2 sessions,
//! health checks, tunnels and tcp mode, so none of them cares how a server
//! is reached.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::client::TlsStream;

/// A connected socket to a backend server.
#[derive(Debug)]
pub enum Socket {
    /// TCP (TCP_NODELAY set).
    Tcp(TcpStream),
    /// A Unix-domain stream socket.
    Unix(UnixStream),
}

/// A connection to a backend server, with or without TLS.
#[derive(Debug)]
pub enum BackendStream {
    /// Cleartext.
    Plain(Socket),
    /// TLS over the socket (boxed: a TLS session is about a kilobyte, and
    /// cleartext connections should not carry that size).
    Tls(Box<TlsStream<Socket>>),
}

impl Socket {
    fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Socket::Tcp(s) => Some(s),
            Socket::Unix(_) => None,
        }
    }

    /// True while the peer has sent nothing (no bytes, no close): a pooled
    /// connection that has something to read was closed by its backend
    /// (EOF), or carries bytes nobody asked for; either way it is not
    /// reused. Reads at most one byte, which is lost: only call it on a
    /// connection that is dropped when it returns false.
    fn quiet(&self) -> bool {
        let mut probe = [0u8; 1];
        let read = match self {
            Socket::Tcp(s) => s.try_read(&mut probe),
            Socket::Unix(s) => s.try_read(&mut probe),
        };
        matches!(read, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }
}

impl BackendStream {
    /// The socket under any TLS.
    pub fn socket(&self) -> &Socket {
        match self {
            BackendStream::Plain(s) => s,
            BackendStream::Tls(tls) => tls.get_ref().0,
        }
    }

    /// tern's own address on the connection (TCP only), for PROXY headers.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.socket().tcp().and_then(|s| s.local_addr().ok())
    }

    /// Asks the kernel to acknowledge what arrived now rather than after
    /// the delayed-ACK timer (TCP only; see `h1::quickack`).
    pub(crate) fn quickack(&self) {
        if let Some(tcp) = self.socket().tcp() {
            // Best effort: on failure the backend only waits for the timer.
            let _ = socket2::SockRef::from(tcp).set_tcp_quickack(true);
        }
    }

    /// True when an idle pooled connection may be reused: nothing arrived
    /// on its socket since its last response. Under TLS, the socket is
    /// looked at rather than the session, so a close_notify counts as
    /// "something arrived" (the backend is closing) and so does a late
    /// TLS 1.3 ticket (the connection is dropped, which costs only a new
    /// one).
    pub(crate) fn idle_and_open(&self) -> bool {
        self.socket().quiet()
    }
}

/// `AsyncRead` and `AsyncWrite` for an enum whose every variant holds one
/// stream (a `Box` of one is a stream too), by passing each call on.
macro_rules! delegate_io {
    ($name:ident { $($variant:ident),+ }) => {
        impl AsyncRead for $name {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $($name::$variant(s) => Pin::new(s).poll_read(cx, buf),)+
                }
            }
        }

        impl AsyncWrite for $name {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $($name::$variant(s) => Pin::new(s).poll_write(cx, buf),)+
                }
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $($name::$variant(s) => Pin::new(s).poll_write_vectored(cx, bufs),)+
                }
            }

            fn is_write_vectored(&self) -> bool {
                match self {
                    $($name::$variant(s) => s.is_write_vectored(),)+
                }
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $($name::$variant(s) => Pin::new(s).poll_flush(cx),)+
                }
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $($name::$variant(s) => Pin::new(s).poll_shutdown(cx),)+
                }
            }
        }
    };
}

delegate_io!(Socket { Tcp, Unix });
delegate_io!(BackendStream { Plain, Tls });
