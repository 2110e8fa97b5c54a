//! One HTTP/2 stream as a byte stream (`AsyncRead` + `AsyncWrite`): the
//! backend side of a WebSocket tunnelled over an extended CONNECT stream
//! (RFC 8441) to an HTTP/2 backend, so every front end's tunnel loop,
//! written for a backend socket, runs over it unchanged.
//!
//! Flow control holds both ways, so a slow reader on either side holds
//! back its peer, not tern's memory: a write sends only what the
//! backend's window grants (nothing waits in h2's send buffer beyond it),
//! and the backend's window is released only as the tunnel takes bytes
//! out of a read, so at most one stream window (256 KiB, tern's backend
//! sessions' setting) waits in tern per tunnel and direction.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use h2::{RecvStream, SendStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A backend stream's two halves, read and written as bytes.
pub(crate) struct H2Io {
    send: SendStream<Bytes>,
    recv: RecvStream,
    /// The rest of the DATA payload read last; its window is released as
    /// it is handed on.
    pending: Bytes,
    /// The backend ended its side (END_STREAM).
    read_done: bool,
    /// tern ended its side.
    write_done: bool,
}

impl H2Io {
    /// The stream whose request head was sent (`send`) and whose response
    /// head came (`recv`, its body).
    pub(crate) fn new(send: SendStream<Bytes>, recv: RecvStream) -> Self {
        H2Io {
            send,
            recv,
            pending: Bytes::new(),
            read_done: false,
            write_done: false,
        }
    }

    /// Resets the stream (CANCEL) unless both sides ended cleanly: a
    /// tunnel cut short (idle timeout, client gone) must not leave a
    /// half-open stream on the backend holding one of its stream slots.
    pub(crate) fn finish(mut self) {
        if !(self.read_done && self.write_done) {
            self.send.send_reset(h2::Reason::CANCEL);
        }
    }
}

fn io_error(e: h2::Error) -> io::Error {
    io::Error::other(e)
}

impl AsyncRead for H2Io {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            if !self.pending.is_empty() {
                let n = self.pending.len().min(buf.remaining());
                buf.put_slice(&self.pending[..n]);
                self.pending.advance(n);
                // Only now may the backend send these bytes again.
                let _ = self.recv.flow_control().release_capacity(n);
                return Poll::Ready(Ok(()));
            }
            if self.read_done || buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            match ready!(self.recv.poll_data(cx)) {
                Some(Ok(data)) => self.pending = data,
                Some(Err(e)) => return Poll::Ready(Err(io_error(e))),
                None => self.read_done = true,
            }
        }
    }
}

impl AsyncWrite for H2Io {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if self.write_done {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        self.send.reserve_capacity(buf.len());
        loop {
            let cap = self.send.capacity();
            if cap > 0 {
                let n = cap.min(buf.len());
                self.send
                    .send_data(Bytes::copy_from_slice(&buf[..n]), false)
                    .map_err(io_error)?;
                return Poll::Ready(Ok(n));
            }
            // The backend's window is shut: wait for it to open (or for
            // the stream to be reset).
            match ready!(self.send.poll_capacity(cx)) {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Poll::Ready(Err(io_error(e))),
                None => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Frames leave when the session's connection task next writes.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.write_done {
            self.write_done = true;
            self.send.reserve_capacity(0);
            self.send.send_data(Bytes::new(), true).map_err(io_error)?;
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A real h2 client and server over an in-memory pipe; returns the
    /// client's stream as an [`H2Io`] and the server's halves.
    async fn pair(window: u32) -> (H2Io, SendStream<Bytes>, RecvStream) {
        let (a, b) = tokio::io::duplex(1 << 20);
        let server = tokio::spawn(async move {
            let mut conn = h2::server::Builder::new()
                .initial_window_size(window)
                .handshake::<_, Bytes>(b)
                .await
                .expect("server handshake");
            let (req, mut respond) = conn.accept().await.expect("a stream").expect("no error");
            let send = respond
                .send_response(http::Response::new(()), false)
                .expect("response");
            tokio::spawn(async move { while conn.accept().await.is_some() {} });
            (send, req.into_body())
        });
        let (mut client, conn) = h2::client::Builder::new()
            .initial_window_size(window)
            .handshake::<_, Bytes>(a)
            .await
            .expect("client handshake");
        tokio::spawn(conn);
        client = client.ready().await.expect("ready");
        let req = http::Request::builder()
            .uri("http://x/")
            .body(())
            .expect("request");
        let (response, send) = client.send_request(req, false).expect("sent");
        let (server_send, server_recv) = server.await.expect("server");
        let recv = response.await.expect("head").into_body();
        (H2Io::new(send, recv), server_send, server_recv)
    }

    #[tokio::test]
    async fn bytes_cross_both_ways_and_shutdown_ends_the_stream() {
        let (mut io, mut server_send, mut server_recv) = pair(65_535).await;
        io.write_all(b"up").await.unwrap();
        io.shutdown().await.unwrap();
        // Until END_STREAM (h2 hands on the empty DATA frame that carries
        // it as an empty chunk).
        let mut up = Vec::new();
        while let Some(chunk) = server_recv.data().await {
            up.extend_from_slice(&chunk.unwrap());
        }
        assert_eq!(up, b"up");
        server_send
            .send_data(Bytes::from_static(b"down"), true)
            .unwrap();
        let mut got = Vec::new();
        io.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"down");
    }

    #[tokio::test(start_paused = true)]
    async fn the_backend_gets_back_only_the_window_the_tunnel_read() {
        let window = 16 * 1024;
        let (mut io, mut server_send, _server_recv) = pair(window).await;
        // The server wants to send four windows; the tunnel reads nothing.
        server_send.reserve_capacity(4 * window as usize);
        let mut sent = 0;
        while sent < window as usize {
            let cap = std::future::poll_fn(|cx| server_send.poll_capacity(cx))
                .await
                .unwrap()
                .unwrap();
            server_send
                .send_data(Bytes::from(vec![7u8; cap]), false)
                .unwrap();
            sent += cap;
        }
        assert_eq!(sent, window as usize);
        // No window comes back while nothing is read (time is paused: the
        // wait ends only once every task has nothing left to do).
        let more = tokio::time::timeout(std::time::Duration::from_millis(200), async {
            std::future::poll_fn(|cx| server_send.poll_capacity(cx)).await
        })
        .await;
        assert!(more.is_err(), "window back before any read");
        // A read of 1 KiB gives the sender back 1 KiB, not the whole DATA
        // frame it came in (h2 sends WINDOW_UPDATE at once when the window
        // was used up).
        let mut small = [0u8; 1024];
        io.read_exact(&mut small).await.unwrap();
        let back = std::future::poll_fn(|cx| server_send.poll_capacity(cx))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back, small.len(), "window back beyond what was read");
    }
}
