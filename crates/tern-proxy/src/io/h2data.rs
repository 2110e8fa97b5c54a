//! Sending DATA on an HTTP/2 stream without ever queueing more than the
//! peer's flow-control window: the one send loop for both directions
//! (responses to HTTP/2 clients, request bodies to HTTP/2 backends).

use std::future::poll_fn;
use std::time::Duration;

use bytes::Bytes;
use h2::SendStream;

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
