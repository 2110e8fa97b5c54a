//! The HTTP/2 preface with a backend (RFC 9113 section 3.4): tern's
//! settings for its side of a session, and the wait for the server's
//! first SETTINGS frame, which says the server speaks HTTP/2 and what it
//! offers (extended CONNECT, stream limits) before the first request goes.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

use super::ConnectError;
use crate::config::BackendAddr;

/// Response-body window tern grants each backend stream: how much a
/// backend may send before tern has handed it on to the client. Large
/// enough that one stream is not held to a round trip per 64 KiB (the
/// HTTP/2 default) on a fast network.
const STREAM_WINDOW: u32 = 256 * 1024;

/// Response-body window of a whole backend session, shared by all its
/// streams: the most response data tern holds per session. Several times
/// the stream window, so a few slow clients (whose streams keep their
/// window full) do not stall the others on the same session.
const SESSION_WINDOW: u32 = 4 * 1024 * 1024;

/// Settings tern's side of a backend HTTP/2 session uses.
fn session_builder() -> h2::client::Builder {
    let mut builder = h2::client::Builder::new();
    builder
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(SESSION_WINDOW)
        // Server push is of no use to a proxy.
        .enable_push(false);
    builder
}

/// Completes the HTTP/2 preface with the server `addr` on `stream` by
/// `deadline`, spawns the session's connection task, and returns a ready
/// sender.
pub(super) async fn preface<S>(
    addr: BackendAddr,
    stream: S,
    deadline: tokio::time::Instant,
) -> Result<SendRequest<Bytes>, ConnectError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let h2_error = |e: h2::Error| {
        ConnectError::Io(addr, std::io::Error::other(format!("HTTP/2 preface: {e}")))
    };
    let (stream, settings) = PrefaceWatch::new(stream);
    let (sender, connection) =
        match tokio::time::timeout_at(deadline, session_builder().handshake(stream)).await {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => return Err(h2_error(e)),
            Err(_) => return Err(ConnectError::Timeout(addr)),
        };
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(backend = %addr, "HTTP/2 session closed: {e}");
        }
    });
    // The h2 client is ready before the server said a word; wait for
    // its SETTINGS so a server that does not speak HTTP/2 counts as a
    // failed connect (and the request goes elsewhere), not a failed
    // request.
    match tokio::time::timeout_at(deadline, settings).await {
        Ok(Ok(true)) => {}
        Ok(_) => {
            return Err(ConnectError::Io(
                addr,
                std::io::Error::other("does not speak HTTP/2 (no SETTINGS frame first)"),
            ))
        }
        Err(_) => return Err(ConnectError::Timeout(addr)),
    }
    match tokio::time::timeout_at(deadline, sender.ready()).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(h2_error(e)),
        Err(_) => Err(ConnectError::Timeout(addr)),
    }
}

/// A backend socket that reports whether the first frame the server sent
/// is SETTINGS (RFC 9113 section 3.4: the server preface): `false` as soon
/// as its header's type byte says otherwise, `true` once the whole frame
/// has been read. Not at its header alone: a frame's payload can come in
/// a later read, and until h2 has it the session does not know what the
/// server offers (a WebSocket sent then would find no extended CONNECT).
/// h2 applies a SETTINGS frame in the same poll of the session's task as
/// the read that completed it (`Connection::poll2` receives it, then
/// `Settings::poll_send` acknowledges and applies it before reading on),
/// and a worker's runtime runs one task at a time, so the request woken
/// by the verdict sees the settings applied.
struct PrefaceWatch<S> {
    inner: S,
    /// The first frame's header, as far as it has come.
    head: [u8; FRAME_HEADER],
    /// Bytes of the first frame read so far.
    seen: usize,
    verdict: Option<oneshot::Sender<bool>>,
}

impl<S> PrefaceWatch<S> {
    fn new(inner: S) -> (Self, oneshot::Receiver<bool>) {
        let (tx, rx) = oneshot::channel();
        let watch = PrefaceWatch {
            inner,
            head: [0; FRAME_HEADER],
            seen: 0,
            verdict: Some(tx),
        };
        (watch, rx)
    }

    /// The verdict once `new` bytes more have been read, if there is one.
    fn judge(&mut self, new: &[u8]) -> Option<bool> {
        let at = self.seen.min(FRAME_HEADER);
        let take = new.len().min(FRAME_HEADER - at);
        self.head[at..at + take].copy_from_slice(&new[..take]);
        self.seen = self.seen.saturating_add(new.len());
        if self.seen <= 3 {
            return None;
        }
        if self.head[3] != SETTINGS_FRAME {
            return Some(false);
        }
        let [a, b, c, ..] = self.head;
        let length = u32::from_be_bytes([0, a, b, c]) as usize;
        (self.seen >= FRAME_HEADER + length).then_some(true)
    }
}

/// Bytes of an HTTP/2 frame header (RFC 9113 section 4.1).
const FRAME_HEADER: usize = 9;

/// Frame type of SETTINGS.
const SETTINGS_FRAME: u8 = 0x4;

impl<S: AsyncRead + Unpin> AsyncRead for PrefaceWatch<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if self.verdict.is_some() {
            if let Poll::Ready(outcome) = &result {
                let new = &buf.filled()[before..];
                let verdict = match outcome {
                    Err(_) => Some(false),
                    Ok(()) if new.is_empty() => Some(false),
                    Ok(()) => self.judge(new),
                };
                // Taken only with a verdict: dropped, it would say
                // "no SETTINGS" to the preface.
                if let Some(v) = verdict {
                    if let Some(tx) = self.verdict.take() {
                        let _ = tx.send(v);
                    }
                }
            }
        }
        result
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for PrefaceWatch<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use tokio::io::{AsyncWriteExt, DuplexStream};
    use tokio::sync::Notify;

    use super::*;

    /// The client's end of a socket, counting what the session has read.
    struct Counted {
        inner: DuplexStream,
        read: Arc<AtomicUsize>,
        progress: Arc<Notify>,
    }

    impl AsyncRead for Counted {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            let before = buf.filled().len();
            let result = Pin::new(&mut self.inner).poll_read(cx, buf);
            let n = buf.filled().len() - before;
            if n > 0 {
                self.read.fetch_add(n, Ordering::SeqCst);
                self.progress.notify_one();
            }
            result
        }
    }

    impl AsyncWrite for Counted {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            Pin::new(&mut self.inner).poll_write(cx, buf)
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.inner).poll_flush(cx)
        }

        fn poll_shutdown(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }

    /// A server whose SETTINGS (extended CONNECT on) reach tern in three
    /// reads (2 bytes of the header, the rest of it, the payload): the
    /// preface is not over, and a WebSocket not refused, before the
    /// payload has come.
    #[tokio::test]
    async fn settings_that_come_in_pieces_are_waited_for() {
        let (client, mut server) = tokio::io::duplex(64 * 1024);
        let read = Arc::new(AtomicUsize::new(0));
        let progress = Arc::new(Notify::new());
        let client = Counted {
            inner: client,
            read: read.clone(),
            progress: progress.clone(),
        };
        let addr: BackendAddr = std::net::SocketAddr::from(([127, 0, 0, 1], 9)).into();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        let opening = preface(addr, client, deadline);
        tokio::pin!(opening);
        // SETTINGS, 6 bytes of payload: SETTINGS_ENABLE_CONNECT_PROTOCOL = 1.
        let frame = [0, 0, 6, 0x4, 0, 0, 0, 0, 0, 0, 0x8, 0, 0, 0, 1];
        let (head, payload) = frame.split_at(FRAME_HEADER);
        for piece in [&head[..2], &head[2..]] {
            server.write_all(piece).await.expect("write");
            let until = read.load(Ordering::SeqCst) + piece.len();
            // Until the session has read the piece, the preface polled
            // first each time.
            while read.load(Ordering::SeqCst) < until {
                tokio::select! {
                    biased;
                    r = &mut opening => panic!(
                        "the preface ended before the SETTINGS payload came: {r:?}"
                    ),
                    () = progress.notified() => {}
                }
            }
        }
        let still_open = futures_util::poll!(&mut opening).is_pending();
        assert!(still_open, "the preface ended on the SETTINGS header");
        server.write_all(payload).await.expect("write the payload");
        let sender = opening.await.expect("a session");
        assert!(sender.is_extended_connect_protocol_enabled());
    }
}
