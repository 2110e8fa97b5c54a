//! HTTP/1.1 message bodies: what of a buffer belongs to a body (as wire
//! bytes or decoded payload), chunk encoding, and the byte tunnel used
//! after an upgrade and in TCP mode.

use std::time::Duration;

use tern_http::chunked::ChunkedScanner;
use tern_http::{BodyFraming, HttpError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The part of a body still to come.
#[derive(Debug)]
pub(crate) enum Pending {
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
    pub(crate) fn new(framing: BodyFraming) -> Self {
        match framing {
            BodyFraming::Empty | BodyFraming::Length(0) => Pending::Done,
            BodyFraming::Length(n) => Pending::Length(n),
            BodyFraming::Chunked => Pending::Chunked(ChunkedScanner::new()),
            BodyFraming::UntilClose => Pending::UntilClose,
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        matches!(self, Pending::Done)
    }

    /// How many of the bytes at the front of `avail` belong to the body
    /// (at most `limit`), advancing past them.
    pub(crate) fn take(&mut self, avail: &[u8], limit: usize) -> Result<usize, HttpError> {
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

    /// The next piece of the body at the front of `avail` (at most `limit`
    /// wire bytes): the wire bytes themselves, or with `decode` and chunked
    /// coding, the payload appended to `payload` (cleared first) and, at
    /// the body's end, its trailer section put in `trailers`.
    pub(crate) fn take_piece(
        &mut self,
        avail: &[u8],
        limit: usize,
        decode: bool,
        payload: &mut Vec<u8>,
        trailers: &mut Vec<u8>,
    ) -> Result<Taken, HttpError> {
        match self {
            Pending::Chunked(scanner) if decode => {
                payload.clear();
                let avail = &avail[..avail.len().min(limit)];
                let scan = scanner.decode(avail, payload)?;
                if scan.done {
                    *trailers = scanner.take_trailers();
                    *self = Pending::Done;
                }
                Ok(Taken::Decoded {
                    consumed: scan.consumed,
                })
            }
            _ => self.take(avail, limit).map(Taken::Wire),
        }
    }
}

/// Where a body piece taken from a buffer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// The first this-many bytes of the buffer (consume them once used).
    Wire(usize),
    /// In the payload vector; this many buffer bytes were read for it
    /// (consume them now).
    Decoded { consumed: usize },
}

/// The end of a chunked body without trailers.
pub(crate) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Appends `data` as one chunk (nothing for empty data: an empty chunk
/// would end the body).
pub(crate) fn encode_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let _ = std::io::Write::write_fmt(out, format_args!("{:x}\r\n", data.len()));
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Relays bytes both ways until either side closes or nothing moves for
/// `idle`. Used after a successful `Upgrade` (WebSocket and the like).
/// Returns (client→backend, backend→client) byte counts.
pub(crate) async fn tunnel<C, B>(client: &mut C, backend: &mut B, idle: Duration) -> (u64, u64)
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

    #[test]
    fn pieces_are_wire_bytes_or_decoded_payload() {
        let mut out = Vec::new();
        let mut p = Pending::new(BodyFraming::Chunked);
        let wire = b"3;x=1\r\nabc\r\n0\r\n\r\nNEXT";
        assert_eq!(
            p.take_piece(wire, usize::MAX, false, &mut out, &mut Vec::new())
                .unwrap(),
            Taken::Wire(17)
        );
        let mut p = Pending::new(BodyFraming::Chunked);
        assert_eq!(
            p.take_piece(wire, usize::MAX, true, &mut out, &mut Vec::new())
                .unwrap(),
            Taken::Decoded { consumed: 17 }
        );
        assert_eq!(out, b"abc");
        assert!(p.is_done());
        let mut p = Pending::new(BodyFraming::Length(4));
        assert_eq!(
            p.take_piece(b"abcdef", usize::MAX, true, &mut out, &mut Vec::new())
                .unwrap(),
            Taken::Wire(4)
        );
    }

    #[test]
    fn chunks_are_encoded_in_hex() {
        let mut out = Vec::new();
        encode_chunk(&mut out, &[7u8; 26]);
        assert_eq!(&out[..4], b"1a\r\n");
        assert_eq!(&out[out.len() - 2..], b"\r\n");
        encode_chunk(&mut out, b"");
        assert_eq!(out.len(), 4 + 26 + 2, "an empty chunk would end the body");
    }
}
