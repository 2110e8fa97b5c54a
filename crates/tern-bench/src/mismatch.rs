//! A URL whose scheme is not what the port speaks: `https://` to a port in
//! clear, `http://` to a TLS port (HTTP/1.1, or HTTP/2 with prior
//! knowledge). Each says which mismatch it is, from the first bytes the
//! server answered with, instead of the parser error those bytes cause.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error::RequestError;

/// When the first bytes a server sent in answer to a ClientHello are text,
/// not a TLS record (content types 20-24), the port speaks plain HTTP (or
/// something else in clear): say so, with what it sent.
pub(crate) fn not_tls(first: &[u8]) -> Option<RequestError> {
    let text = |b: &u8| b.is_ascii_graphic() || b.is_ascii_whitespace();
    if first.is_empty() || (0x14..=0x18).contains(&first[0]) || !first.iter().all(text) {
        return None;
    }
    let answered = String::from_utf8_lossy(first);
    let speaks = if first.starts_with(b"HTTP/") {
        "speaks plain HTTP"
    } else {
        "does not speak TLS"
    };
    Some(RequestError::SchemeMismatch(format!(
        "https:// URL, but the port {speaks}: it answered the TLS ClientHello with {answered:?}... \
         (use http://)"
    )))
}

/// The start of every "http:// URL, but ..." message: an HTTP/2 error
/// carries only the text of the I/O error it met, so the text is the mark.
const HTTP_URL_BUT: &str = "http:// URL, but the port";

/// When the first bytes a server sent in answer to a request in clear are
/// a TLS record (an alert, or a handshake), the port speaks TLS.
pub(crate) fn tls_answer(first: &[u8]) -> Option<RequestError> {
    let record = match first {
        [0x15, 0x03, ..] | [0x15] => "alert",
        [0x16, 0x03, ..] | [0x16] => "handshake",
        _ => return None,
    };
    Some(RequestError::SchemeMismatch(format!(
        "{HTTP_URL_BUT} speaks TLS: it answered with a TLS {record} record (use https://)"
    )))
}

/// What an HTTP/2 server with prior knowledge cannot have sent first: a TLS
/// record, or text (an HTTP/1 response, or an HTTP/1 server's error page:
/// Python's answers the preface's "HTTP/2.0" with HTML alone). Its first
/// frame is SETTINGS, whose first length byte is 0.
fn not_h2(first: &[u8]) -> Option<RequestError> {
    if let Some(tls) = tls_answer(first) {
        return Some(tls);
    }
    let text = |b: &u8| b.is_ascii_graphic() || b.is_ascii_whitespace();
    if first.len() >= 5 && first[..5].iter().all(text) {
        let line = first
            .split(|b| *b == b'\r' || *b == b'\n')
            .next()
            .unwrap_or_default();
        let line = &line[..line.len().min(60)];
        return Some(RequestError::SchemeMismatch(format!(
            "{HTTP_URL_BUT} does not speak HTTP/2 with prior knowledge: it answered {:?}... \
             (leave out -h2, or use https:// for h2 through ALPN)",
            String::from_utf8_lossy(line)
        )));
    }
    None
}

/// The mismatch an HTTP/2 error stands for, when [`PriorKnowledge`] found
/// one: h2 hands the streams only the text of the I/O error.
pub(crate) fn from_h2_io(e: &io::Error) -> Option<RequestError> {
    let text = e.to_string();
    if text.starts_with(HTTP_URL_BUT) {
        Some(RequestError::SchemeMismatch(text))
    } else {
        None
    }
}

/// An `http://` connection handed to h2 with prior knowledge. A TLS port
/// answers the preface with an alert record, which h2 would read as a frame
/// of 1.3 MB ("frame with invalid size"), or resets the connection (tern
/// closes with the rest of the preface unread) so that h2's next write
/// fails first ("broken pipe"): which one is a race. The first bytes read
/// are checked before h2 sees them, and a write that fails before anything
/// was read looks at what did arrive; either way a mismatch becomes an I/O
/// error whose text says which it is.
pub(crate) struct PriorKnowledge<S> {
    inner: S,
    /// Set once the server's first bytes were seen (and were not a
    /// mismatch): from then on the wrapper only passes bytes through.
    checked: bool,
    /// A write that failed before anything was read, held until what the
    /// server sent before it went away can be read (the reactor may not
    /// have seen it yet).
    failed: Option<io::Error>,
}

impl<S> PriorKnowledge<S> {
    pub(crate) fn new(inner: S) -> PriorKnowledge<S> {
        PriorKnowledge {
            inner,
            checked: false,
            failed: None,
        }
    }
}

fn mismatch_io(e: RequestError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

impl<S: AsyncRead + Unpin> PriorKnowledge<S> {
    /// After a failed write: what the server sent before it went away says
    /// why. The connection was reset or closed, so the socket becomes
    /// readable (data, end of stream or the reset): waiting for that is
    /// bounded.
    fn why_failed(&mut self, cx: &mut Context<'_>, e: io::Error) -> Poll<io::Error> {
        if self.checked
            || !matches!(
                e.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            )
        {
            return Poll::Ready(e);
        }
        let mut first = [0u8; 64];
        let mut buf = ReadBuf::new(&mut first);
        match Pin::new(&mut self.inner).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) => {
                self.checked = true;
                Poll::Ready(not_h2(buf.filled()).map_or(e, mismatch_io))
            }
            Poll::Ready(Err(_)) => Poll::Ready(e),
            Poll::Pending => {
                self.failed = Some(e);
                Poll::Pending
            }
        }
    }

    /// A write result, with a failure explained when it can be.
    fn after_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        res: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match res {
            Poll::Ready(Err(e)) => self.why_failed(cx, e).map(Err),
            other => other,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for PriorKnowledge<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let res = Pin::new(&mut this.inner).poll_read(cx, buf);
        if !this.checked && buf.filled().len() > before {
            this.checked = true;
            if let Some(e) = not_h2(&buf.filled()[before..]) {
                buf.set_filled(before);
                return Poll::Ready(Err(mismatch_io(e)));
            }
        }
        res
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for PriorKnowledge<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(e) = this.failed.take() {
            return this.why_failed(cx, e).map(Err);
        }
        let res = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.after_write(cx, res)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(e) = this.failed.take() {
            return this.why_failed(cx, e).map(Err);
        }
        let res = Pin::new(&mut this.inner).poll_flush(cx);
        this.after_write(cx, res)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_h2_server_preface_is_no_mismatch() {
        // SETTINGS, empty, stream 0.
        assert_eq!(not_h2(&[0, 0, 0, 4, 0, 0, 0, 0, 0]), None);
    }

    #[test]
    fn a_tls_alert_or_an_http1_answer_to_the_preface_is_named() {
        let alert = not_h2(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32]).unwrap();
        assert!(alert.to_string().contains("speaks TLS"), "{alert}");
        let h1 = not_h2(b"HTTP/1.1 400 Bad Request\r\nServer: x\r\n").unwrap();
        assert!(
            h1.to_string()
                .contains("answered \"HTTP/1.1 400 Bad Request\"..."),
            "{h1}"
        );
        let io = mismatch_io(alert.clone());
        assert_eq!(from_h2_io(&io), Some(alert));
    }
}
