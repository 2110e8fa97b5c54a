//! A write of a whole buffer within a time limit, as one hand-written
//! future.
//!
//! `tern_deadline::within(t, async { w.write_all(b).await?; w.flush().await })`
//! is four futures, each an `async fn` or combinator whose `poll` is a
//! call of its own (stable Rust does not inline an `async fn`'s poll into
//! its caller's: rust-lang/rust#129347): on a keepalive HTTP/1.1 request,
//! which writes once to the client and once to the backend, six calls of
//! ~20 instructions each plus their state dispatch (callgrind,
//! BENCHMARKS.md "the hot futures written by hand"). [`WriteWithin`] does
//! the same in one `poll` marked `#[inline]`, which the caller's state
//! machine takes in.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::AsyncWrite;
use tokio::time::Sleep;

/// Writes all of `bytes` to `w` (then flushes it, with `flush`) within
/// `t`: tokio's `write_all` (and `flush`) under [`tern_deadline::within`],
/// the same steps in one future. The timer is armed only when the first
/// poll does not finish (a write that fits the socket buffer arms none);
/// its state is then boxed, off the common path. Resolves to `Ok` when
/// everything was written (and flushed) in time; to `Err(fail)` on an
/// error, a zero-length write, or the time running out.
pub(crate) struct WriteWithin<'a, W: ?Sized, E> {
    w: &'a mut W,
    bytes: &'a [u8],
    flush: bool,
    t: Duration,
    fail: E,
    /// Armed at the first poll that does not finish.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<'a, W: AsyncWrite + Unpin + ?Sized, E: Copy> WriteWithin<'a, W, E> {
    /// See the type's doc.
    #[inline]
    pub(crate) fn new(w: &'a mut W, bytes: &'a [u8], flush: bool, t: Duration, fail: E) -> Self {
        WriteWithin {
            w,
            bytes,
            flush,
            t,
            fail,
            timer: None,
        }
    }

    /// The write (and flush) itself, as tokio's `WriteAll` and `Flush`.
    #[inline(always)]
    fn poll_write_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.bytes.is_empty() {
            let n = ready!(Pin::new(&mut *self.w).poll_write(cx, self.bytes))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.bytes = &self.bytes[n.min(self.bytes.len())..];
        }
        if self.flush {
            ready!(Pin::new(&mut *self.w).poll_flush(cx))?;
            self.flush = false;
        }
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin + ?Sized, E: Copy + Unpin> Future for WriteWithin<'_, W, E> {
    type Output = Result<(), E>;

    // Forced: a plain `#[inline]` left it a call (callgrind), and its
    // callers are `async fn` polls, which nothing inlines anyway.
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), E>> {
        let this = self.get_mut();
        if let Poll::Ready(r) = this.poll_write_flush(cx) {
            return Poll::Ready(r.map_err(|_| this.fail));
        }
        let t = this.t;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(t)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(this.fail)),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn writes_everything_through_a_small_pipe() {
        let (mut a, mut b) = tokio::io::duplex(7);
        let data: Vec<u8> = (0..100u8).collect();
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            b.read_to_end(&mut got).await.map(|_| got)
        });
        assert!(
            WriteWithin::new(&mut a, &data, true, Duration::from_secs(5), ())
                .await
                .is_ok()
        );
        drop(a);
        assert_eq!(reader.await.unwrap().unwrap(), data);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_when_the_reader_stalls_past_the_limit() {
        let (mut a, _b) = tokio::io::duplex(4);
        let started = tokio::time::Instant::now();
        let t = Duration::from_secs(3);
        assert!(WriteWithin::new(&mut a, b"more than four", false, t, ())
            .await
            .is_err());
        assert_eq!(started.elapsed(), t);
    }

    #[tokio::test]
    async fn fails_when_the_reader_is_gone() {
        let (mut a, b) = tokio::io::duplex(4);
        drop(b);
        assert!(
            WriteWithin::new(&mut a, b"data", true, Duration::from_secs(5), ())
                .await
                .is_err()
        );
    }
}
