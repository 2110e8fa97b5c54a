//! Sending DATA on an HTTP/2 stream without ever queueing more than the
//! peer's flow-control window: the one send loop for both directions
//! (responses to HTTP/2 clients, request bodies to HTTP/2 backends), and
//! the tunnel of an extended CONNECT stream built on it.

use std::future::poll_fn;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use h2::{RecvStream, SendStream};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Why data could not be sent on an HTTP/2 stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendError {
    /// The peer reset the stream or closed the connection.
    Gone,
    /// The peer's window stayed shut for the whole wait.
    Stalled,
}

/// Sends `data` (then END_STREAM when `end`) on `send`, never more than the
/// peer's flow-control window allows, waiting at most `wait` each time the
/// window is shut. Nothing queues in h2's send buffer beyond the window, so
/// a slow peer holds back the sender instead of growing tern's memory.
pub(crate) async fn send(
    send: &mut SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
    wait: Duration,
) -> Result<(), SendError> {
    if data.is_empty() {
        // Nothing to wait for: an empty frame needs no window.
        return if end { end_stream(send) } else { Ok(()) };
    }
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        // The windows usually grant the reservation at once; only a peer
        // that holds its window back makes us wait.
        let cap = match send.capacity() {
            0 => match tokio::time::timeout(wait, poll_fn(|cx| send.poll_capacity(cx))).await {
                Ok(Some(Ok(cap))) if cap > 0 => cap,
                Ok(Some(Ok(_))) => continue,
                Ok(_) => return Err(SendError::Gone),
                Err(_) => return Err(SendError::Stalled),
            },
            cap => cap,
        };
        let piece = data.split_to(cap.min(data.len()));
        let last = end && data.is_empty();
        send.send_data(piece, last).map_err(|_| SendError::Gone)?;
    }
    Ok(())
}

/// Ends `send` (an empty DATA frame with END_STREAM).
pub(crate) fn end_stream(send: &mut SendStream<Bytes>) -> Result<(), SendError> {
    send.send_data(Bytes::new(), true)
        .map_err(|_| SendError::Gone)
}

/// Relays a tunnel (a WebSocket over an HTTP/2 extended CONNECT stream)
/// between an HTTP/2 stream and a backend (a socket, or an HTTP/2
/// backend's stream) until both ends are closed or nothing moves for
/// `idle`, then resets what is left open.
/// `early`: bytes the backend sent after its 101 head. Flow control holds
/// both ways: the client's window is released only once its bytes were
/// written to the backend, and the backend is read only when the client's
/// window has taken the previous read. Returns (client→backend,
/// backend→client) byte counts.
pub(crate) async fn tunnel<B>(
    recv: &mut RecvStream,
    down_stream: &mut SendStream<Bytes>,
    backend: &mut B,
    early: &[u8],
    idle: Duration,
) -> (u64, u64)
where
    B: AsyncRead + AsyncWrite + Unpin,
{
    let (mut up, mut down) = (0u64, 0u64);
    if !early.is_empty() {
        if send(down_stream, Bytes::copy_from_slice(early), false, idle)
            .await
            .is_err()
        {
            return (0, 0);
        }
        down += early.len() as u64;
    }
    let (mut from_backend, mut to_backend) = tokio::io::split(&mut *backend);
    let mut buf = BytesMut::with_capacity(TUNNEL_READ);
    let (mut client_open, mut backend_open) = (true, true);
    let clean = loop {
        if !client_open && !backend_open {
            break true;
        }
        if buf.capacity() < TUNNEL_READ {
            buf = BytesMut::with_capacity(TUNNEL_READ);
        }
        let step = tokio::time::timeout(idle, async {
            tokio::select! {
                chunk = recv.data(), if client_open => Moved::Up(chunk),
                read = from_backend.read_buf(&mut buf), if backend_open => Moved::Down(read),
            }
        })
        .await;
        match step {
            Err(_) => break false,
            Ok(Moved::Up(None)) => {
                // The client ended its side: so does the backend's.
                client_open = false;
                let _ = to_backend.shutdown().await;
            }
            Ok(Moved::Up(Some(Err(_)))) => break false,
            Ok(Moved::Up(Some(Ok(chunk)))) => {
                let n = chunk.len();
                match tokio::time::timeout(idle, to_backend.write_all(&chunk)).await {
                    Ok(Ok(())) => {}
                    _ => break false,
                }
                let _ = recv.flow_control().release_capacity(n);
                up += n as u64;
            }
            Ok(Moved::Down(Ok(0) | Err(_))) => {
                backend_open = false;
                if end_stream(down_stream).is_err() {
                    break false;
                }
            }
            Ok(Moved::Down(Ok(n))) => {
                if send(down_stream, buf.split().freeze(), false, idle)
                    .await
                    .is_err()
                {
                    break false;
                }
                down += n as u64;
            }
        }
    };
    if !clean {
        down_stream.send_reset(h2::Reason::CANCEL);
    }
    let _ = to_backend.shutdown().await;
    (up, down)
}

/// Bytes read from a tunnel's backend at a time.
const TUNNEL_READ: usize = 16 * 1024;

/// What moved in one turn of a tunnel.
enum Moved {
    Up(Option<Result<Bytes, h2::Error>>),
    Down(std::io::Result<usize>),
}
