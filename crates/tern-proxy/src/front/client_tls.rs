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
//! rustls hands its queued records to the socket as a vectored write. When
//! they are one piece (a response in one record, the usual case) the
//! socket sends it with send(2), not writev(2): the kernel's writev path
//! adds an iovec import, a file-permission check and an fsnotify call per
//! write that send skips ([`ClientSocket`]).
//!
//! After a protocol error the fatal alert rustls queued is the last record:
//! closing does not add a `close_notify`, which would tell the client the
//! connection ended gracefully (RFC 8446 6.2; tlsfuzzer's
//! test-tls13-zero-content-type and test-tls13-zero-length-data).

use std::cell::RefCell;
use std::io::{self, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// A client's TLS stream that flushes what rustls queued while reading;
/// and a read error met after a read had bytes to return, for the next
/// read.
#[derive(Debug)]
pub(crate) struct ClientTls {
    tls: TlsStream<ClientSocket>,
    /// A read error met after a read had bytes to return, for the next read.
    read_error: Option<io::Error>,
}

impl ClientTls {
    /// Wraps a stream whose handshake is done.
    pub(crate) fn new(inner: TlsStream<ClientSocket>) -> Self {
        ClientTls {
            tls: inner,
            read_error: None,
        }
    }

    /// tokio-rustls's `TlsStream::poll_read`, but one that does not read
    /// the socket again once its last read came back short: tokio took
    /// that read for the end of what the socket held (it cleared the
    /// socket's readiness), so the next read would only find the socket
    /// not ready. tokio-rustls's read fills `buf` until a read is pending,
    /// and a kept-alive request, one record, paid a second pass through
    /// rustls's read and tokio's readiness check for it (~450
    /// instructions). Plaintext rustls already holds is taken whatever the
    /// socket did; a read that filled rustls's buffer is followed by
    /// another, as before.
    fn read_records(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        use tokio::io::AsyncBufRead;
        if let Some(err) = self.read_error.take() {
            return Poll::Ready(Err(err));
        }
        let mut first = true;
        while buf.remaining() > 0 {
            if !first {
                let (socket, conn) = self.tls.get_ref();
                if conn.wants_read() && socket.last_read_short {
                    break;
                }
            }
            let data = match Pin::new(&mut self.tls).poll_fill_buf(cx) {
                Poll::Ready(Ok(data)) => data,
                Poll::Ready(Err(err)) if first => return Poll::Ready(Err(err)),
                Poll::Ready(Err(err)) => {
                    self.read_error = Some(err);
                    break;
                }
                Poll::Pending if first => return Poll::Pending,
                Poll::Pending => break,
            };
            let len = data.len().min(buf.remaining());
            if len == 0 {
                break;
            }
            buf.put_slice(&data[..len]);
            Pin::new(&mut self.tls).consume(len);
            first = false;
        }
        Poll::Ready(Ok(()))
    }

    /// The socket and the rustls connection.
    pub(crate) fn get_ref(&self) -> (&TcpStream, &rustls::ServerConnection) {
        let (socket, conn) = self.tls.get_ref();
        (&socket.tcp, conn)
    }

    /// The socket and the rustls connection, mutably.
    pub(crate) fn get_mut(&mut self) -> (&mut TcpStream, &mut rustls::ServerConnection) {
        let (socket, conn) = self.tls.get_mut();
        (&mut socket.tcp, conn)
    }

    /// Waits until a read would find something (decrypted bytes already
    /// buffered, or bytes on the socket). Meanwhile the connection holds no
    /// TLS read buffer: rustls keeps 4 KiB for the next record even when
    /// idle, about a quarter of an idle connection's memory. The buffer goes
    /// to the worker's spare list and one comes back from it when bytes
    /// arrive (a wait that is dropped leaves rustls to allocate its own).
    pub(crate) async fn readable(&mut self) -> io::Result<()> {
        let (tcp, conn) = self.tls.get_mut();
        if !conn.wants_read() {
            // Plaintext (or a close) is buffered in rustls already.
            return Ok(());
        }
        if let Some(buf) = conn.take_idle_read_buffer() {
            give_back_read_buffer(buf);
        }
        // The socket's own read waker, as a read registers it: no waiter
        // joins the readiness list (TcpStream::readable's future), about
        // 300 instructions a request. One task reads this socket, so the
        // one slot is enough.
        let readable = std::future::poll_fn(|cx| tcp.tcp.poll_read_ready(cx)).await;
        if let Some(buf) = SPARE_READ.with(|spare| spare.borrow_mut().pop()) {
            conn.give_read_buffer(buf);
        }
        readable
    }
}

/// A client's TCP socket under rustls: a vectored write of one piece goes
/// out as a plain write (send(2)).
///
/// Measured (bench/keepalive-kernel.sh, perf's kernel call chains of a
/// kept-alive request): outside TCP itself, tern's writev of a response
/// took 54 samples where the backend's send took 22 for as many calls.
///
/// It notes whether its last read came back short (fewer bytes than asked
/// for: tokio then clears the socket's readiness), for
/// [`ClientTls::read_records`].
#[derive(Debug)]
pub(crate) struct ClientSocket {
    pub(crate) tcp: TcpStream,
    /// Its last read came back short (see above).
    last_read_short: bool,
}

impl ClientSocket {
    pub(crate) fn new(tcp: TcpStream) -> Self {
        ClientSocket {
            tcp,
            last_read_short: false,
        }
    }
}

impl AsyncRead for ClientSocket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let room = buf.remaining();
        let read = Pin::new(&mut self.tcp).poll_read(cx, buf);
        // Pending and errors count as short: nothing more to read now.
        self.last_read_short =
            !matches!(read, Poll::Ready(Ok(()))) || buf.remaining() > 0 && room > 0;
        read
    }
}

impl AsyncWrite for ClientSocket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut pieces = bufs.iter().filter(|b| !b.is_empty());
        match (pieces.next(), pieces.next()) {
            (Some(one), None) => Pin::new(&mut self.tcp).poll_write(cx, one),
            _ => Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// TLS read buffers kept per worker for connections that wake up (1 MiB
/// at most).
const SPARE_READ_COUNT: usize = 256;

/// Largest TLS read buffer kept: rustls's own size for a connection
/// between records. One that grew for a large record is freed.
const SPARE_READ_SIZE: usize = 4096;

thread_local! {
    static SPARE_READ: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

fn give_back_read_buffer(buf: Vec<u8>) {
    if buf.capacity() > SPARE_READ_SIZE {
        return;
    }
    SPARE_READ.with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < SPARE_READ_COUNT {
            spare.push(buf);
        }
    });
}

impl AsyncRead for ClientTls {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let read = self.read_records(cx, buf);
        let conn = self.tls.get_mut().1;
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
            let _ = Pin::new(&mut self.tls).poll_flush(cx);
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
        Pin::new(&mut self.tls).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tls).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tls.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let (tcp, conn) = self.tls.get_mut();
        // rustls's writer reports the connection's fatal error, if any: the
        // read that met it sent the alert; only the TCP close is left.
        if conn.writer().flush().is_err() {
            return Pin::new(tcp).poll_shutdown(cx);
        }
        Pin::new(&mut self.tls).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tern_testsupport::certs::{KeyKind, TestCa};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Over loopback: a vectored write of one piece (among empty ones)
    /// goes out as a plain write, one of several pieces as a vectored
    /// one; either way the peer reads every byte, in order.
    #[tokio::test]
    async fn vectored_writes_of_one_piece_or_several_deliver_every_byte_in_order() {
        use std::io::IoSlice;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let peer = tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            tcp.read_to_end(&mut got).await.unwrap();
            got
        });
        let mut socket = ClientSocket::new(TcpStream::connect(addr).await.unwrap());
        let one = [
            IoSlice::new(b""),
            IoSlice::new(b"one piece;"),
            IoSlice::new(b""),
        ];
        let n = socket.write_vectored(&one).await.unwrap();
        assert_eq!(n, 10, "the one piece, whole");
        let several = [
            IoSlice::new(b"two "),
            IoSlice::new(b""),
            IoSlice::new(b"pieces"),
        ];
        let mut sent = 0;
        while sent < 10 {
            // A short vectored write is legal; finish with the rest.
            let rest = &b"two pieces"[sent..];
            sent += if sent == 0 {
                socket.write_vectored(&several).await.unwrap()
            } else {
                socket.write(rest).await.unwrap()
            };
        }
        let none = [IoSlice::new(b""), IoSlice::new(b"")];
        assert_eq!(socket.write_vectored(&none).await.unwrap(), 0);
        socket.shutdown().await.unwrap();
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), peer)
            .await
            .expect("the peer reads to the end")
            .unwrap();
        assert_eq!(got, b"one piece;two pieces");
    }

    fn spare_count() -> usize {
        SPARE_READ.with(|spare| spare.borrow().len())
    }

    /// A TLS server's acceptor, and a client connector that trusts it.
    fn tls_pair() -> (tokio_rustls::TlsAcceptor, tokio_rustls::TlsConnector) {
        let mut ca = TestCa::new();
        let leaf = ca.leaf(&["localhost"], KeyKind::EcdsaP256);
        let chain = CertificateDer::pem_file_iter(&leaf.chain)
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(&leaf.key).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        let connector =
            tokio_rustls::TlsConnector::from(tern_testsupport::client::client_config(ca.ca_pem()));
        (acceptor, connector)
    }

    /// Over loopback with a rustls client: records that arrived together
    /// are taken by one read (no socket read is needed for the second),
    /// and a stream of records far larger than rustls's read buffer, ended
    /// by close_notify, arrives whole and in order through reads that stop
    /// where the socket's reads do.
    #[tokio::test]
    async fn a_read_takes_the_records_at_hand_and_a_long_stream_arrives_whole() {
        let (acceptor, connector) = tls_pair();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let sent = big.clone();
        let client = tokio::spawn(async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let name = ServerName::try_from("localhost").unwrap();
            let mut tls = connector.connect(name, tcp).await.unwrap();
            // Once the server's handshake is over (its read could take
            // records sent before), two records.
            let mut go = [0u8; 2];
            tls.read_exact(&mut go).await.unwrap();
            tls.write_all(b"first").await.unwrap();
            tls.write_all(b"second").await.unwrap();
            tls.flush().await.unwrap();
            let mut ack = [0u8; 2];
            tls.read_exact(&mut ack).await.unwrap();
            tls.write_all(&sent).await.unwrap();
            tls.shutdown().await.unwrap();
            tls
        });
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = ClientTls::new(acceptor.accept(ClientSocket::new(tcp)).await.unwrap());
        tls.write_all(b"go").await.unwrap();
        tls.flush().await.unwrap();
        // Until both records are in the socket: 5 bytes of header, the
        // content type and a 16-byte tag around each plaintext.
        let both = 2 * 22 + b"firstsecond".len();
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            let mut peeked = [0u8; 256];
            while tls.get_ref().0.peek(&mut peeked).await.unwrap() < both {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("both records arrive");
        let mut buf = vec![0u8; 8 * 1024];
        let n = tls.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"firstsecond", "one read takes both records");
        tls.write_all(b"ok").await.unwrap();
        tls.flush().await.unwrap();
        let mut got = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                let n = tls.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
        })
        .await
        .expect("the stream ends with close_notify");
        assert!(got == big, "{} bytes read of {}", got.len(), big.len());
        drop(client.await.unwrap());
    }

    /// Over loopback with a rustls client: while the server side waits for
    /// the next request its TLS read buffer sits in the worker's spare
    /// list, and the connection takes it back when the request comes.
    #[tokio::test]
    async fn a_waiting_connection_lends_its_tls_read_buffer_to_the_spare_list() {
        let (acceptor, connector) = tls_pair();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let name = ServerName::try_from("localhost").unwrap();
            let mut tls = connector.connect(name, tcp).await.unwrap();
            tls.write_all(b"first").await.unwrap();
            tls.flush().await.unwrap();
            // Until the server says it waits.
            let mut ack = [0u8; 4];
            tls.read_exact(&mut ack).await.unwrap();
            tls.write_all(b"second").await.unwrap();
            tls.flush().await.unwrap();
            tls
        });
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = ClientTls::new(acceptor.accept(ClientSocket::new(tcp)).await.unwrap());
        let mut buf = [0u8; 16];
        let n = tls.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"first");
        let before = spare_count();
        {
            let wait = tls.readable();
            tokio::pin!(wait);
            assert!(
                futures_util::FutureExt::now_or_never(&mut wait).is_none(),
                "nothing sent yet"
            );
            assert_eq!(spare_count(), before + 1, "the buffer went to the spares");
        }
        tls.write_all(b"wait").await.unwrap();
        tls.flush().await.unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), tls.readable())
            .await
            .expect("the second message arrives")
            .unwrap();
        assert_eq!(spare_count(), before, "a buffer came back from the spares");
        let n = tls.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"second");
        drop(client.await.unwrap());
    }
}
