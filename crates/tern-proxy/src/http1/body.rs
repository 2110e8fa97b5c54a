//! Moving bodies through bounded buffers, and tunnels after an upgrade.

use std::io;
use std::time::Duration;

use tern_http::chunked::ChunkedScanner;
use tern_http::{BodyFraming, HttpError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::iobuf::IoBuf;

/// The part of a body still to come.
#[derive(Debug)]
pub(super) enum Pending {
    /// Nothing more.
    Done,
    /// This many bytes.
    Length(u64),
    /// Chunks until the last one and the trailers.
    Chunked(ChunkedScanner),
    /// Until the sender closes.
    UntilClose,
}

impl Pending {
    pub(super) fn new(framing: BodyFraming) -> Self {
        match framing {
            BodyFraming::Empty | BodyFraming::Length(0) => Pending::Done,
            BodyFraming::Length(n) => Pending::Length(n),
            BodyFraming::Chunked => Pending::Chunked(ChunkedScanner::new()),
            BodyFraming::UntilClose => Pending::UntilClose,
        }
    }

    pub(super) fn is_done(&self) -> bool {
        matches!(self, Pending::Done)
    }

    /// How many of the bytes at the front of `avail` belong to the body
    /// (at most `limit`), advancing past them.
    pub(super) fn take(&mut self, avail: &[u8], limit: usize) -> Result<usize, HttpError> {
        let avail = &avail[..avail.len().min(limit)];
        let n = match self {
            Pending::Done => 0,
            Pending::Length(rest) => {
                let n = (*rest).min(avail.len() as u64);
                *rest -= n;
                if *rest == 0 {
                    *self = Pending::Done;
                }
                n as usize
            }
            Pending::Chunked(scanner) => {
                let scan = scanner.scan(avail)?;
                if scan.done {
                    *self = Pending::Done;
                }
                scan.consumed
            }
            Pending::UntilClose => avail.len(),
        };
        Ok(n)
    }
}

/// Why a body could not be moved, and on which leg.
#[derive(Debug)]
pub(super) enum PumpError {
    /// Reading the source failed, timed out or ended early.
    Read(io::Error),
    /// The source sent bytes that break the body's framing.
    Framing(HttpError),
    /// Writing to the destination failed or timed out.
    Write(io::Error),
}

/// Moves the rest of a body from `src` (with bytes already in `sbuf`) to `dst`.
/// Returns the body bytes moved.
pub(super) async fn pump<R, W>(
    src: &mut R,
    sbuf: &mut IoBuf,
    dst: &mut W,
    pending: &mut Pending,
    read_timeout: Duration,
    write_timeout: Duration,
) -> Result<u64, PumpError>
where
    R: AsyncRead + Unpin + ?Sized,
    W: AsyncWrite + Unpin + ?Sized,
{
    let mut moved = 0u64;
    while !pending.is_done() {
        if sbuf.is_empty() {
            match tokio::time::timeout(read_timeout, sbuf.fill_from(src)).await {
                Err(_) => return Err(PumpError::Read(io::ErrorKind::TimedOut.into())),
                Ok(Err(e)) => return Err(PumpError::Read(e)),
                Ok(Ok(0)) => {
                    if matches!(pending, Pending::UntilClose) {
                        *pending = Pending::Done;
                        break;
                    }
                    return Err(PumpError::Read(io::ErrorKind::UnexpectedEof.into()));
                }
                Ok(Ok(_)) => {}
            }
        }
        let n = pending
            .take(sbuf.filled(), usize::MAX)
            .map_err(PumpError::Framing)?;
        match tokio::time::timeout(write_timeout, dst.write_all(&sbuf.filled()[..n])).await {
            Err(_) => return Err(PumpError::Write(io::ErrorKind::TimedOut.into())),
            Ok(Err(e)) => return Err(PumpError::Write(e)),
            Ok(Ok(())) => {}
        }
        sbuf.consume(n);
        moved += n as u64;
    }
    Ok(moved)
}

/// Relays bytes both ways until either side closes or nothing moves for
/// `idle`. Used after a successful `Upgrade` (WebSocket and the like).
/// Returns (client→backend, backend→client) byte counts.
pub(super) async fn tunnel<C, B>(client: &mut C, backend: &mut B, idle: Duration) -> (u64, u64)
where
    C: AsyncRead + AsyncWrite + Unpin + ?Sized,
    B: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let mut up = vec![0u8; 16 * 1024];
    let mut down = vec![0u8; 16 * 1024];
    let (mut sent_up, mut sent_down) = (0u64, 0u64);
    loop {
        let step = tokio::time::timeout(idle, async {
            tokio::select! {
                r = client.read(&mut up) => match r {
                    Ok(0) | Err(_) => Err(()),
                    Ok(n) => backend.write_all(&up[..n]).await.map(|()| (n as u64, 0)).map_err(|_| ()),
                },
                r = backend.read(&mut down) => match r {
                    Ok(0) | Err(_) => Err(()),
                    Ok(n) => match client.write_all(&down[..n]).await {
                        Ok(()) => client.flush().await.map(|()| (0, n as u64)).map_err(|_| ()),
                        Err(_) => Err(()),
                    },
                },
            }
        })
        .await;
        match step {
            Ok(Ok((u, d))) => {
                sent_up += u;
                sent_down += d;
            }
            _ => break,
        }
    }
    let _ = backend.shutdown().await;
    (sent_up, sent_down)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_takes_exactly_the_body() {
        let mut p = Pending::new(BodyFraming::Length(5));
        assert_eq!(p.take(b"abc", usize::MAX).unwrap(), 3);
        assert_eq!(p.take(b"defGET", usize::MAX).unwrap(), 2);
        assert!(p.is_done());
        let mut p = Pending::new(BodyFraming::Chunked);
        assert_eq!(p.take(b"1\r\na\r\n0\r\n\r\nGET", usize::MAX).unwrap(), 11);
        assert!(p.is_done());
        let mut p = Pending::new(BodyFraming::Length(10));
        assert_eq!(p.take(b"0123456789", 4).unwrap(), 4);
        assert!(!p.is_done());
    }

    #[tokio::test]
    async fn pump_moves_a_length_body_and_leaves_the_rest() {
        let mut src: &[u8] = b"world and more";
        let mut sbuf = IoBuf::new(4, 64);
        let mut dst = Vec::new();
        let mut p = Pending::new(BodyFraming::Length(5));
        let t = Duration::from_secs(1);
        let n = pump(&mut src, &mut sbuf, &mut dst, &mut p, t, t)
            .await
            .unwrap();
        assert_eq!(n, 5);
        assert_eq!(dst, b"world");
    }

    #[tokio::test]
    async fn pump_reports_a_short_body_as_a_read_error() {
        let mut src: &[u8] = b"ab";
        let mut sbuf = IoBuf::new(4, 64);
        let mut dst = Vec::new();
        let mut p = Pending::new(BodyFraming::Length(5));
        let t = Duration::from_secs(1);
        let e = pump(&mut src, &mut sbuf, &mut dst, &mut p, t, t)
            .await
            .unwrap_err();
        assert!(matches!(e, PumpError::Read(_)));
    }
}
