//! A read buffer with a hard size bound.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tern_http::head::find_head_end;

use tern_http::HttpError;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::Instant;

/// Why no complete message head arrived.
#[derive(Debug)]
pub enum HeadWaitError {
    /// The bytes so far cannot start a valid head, or it outgrew `max`.
    Invalid(HttpError),
    /// The deadline passed first.
    TimedOut,
    /// The peer closed (or the read failed) first.
    Closed {
        /// Some bytes of the head had arrived.
        any_bytes: bool,
    },
}

/// A complete head at the start of an [`IoBuf`].
#[derive(Debug, Clone, Copy)]
pub struct FoundHead {
    /// Its length.
    pub len: usize,
    /// The parser offered the bytes read it already.
    pub parsed: bool,
}

/// Where a wait for a head stands between reads: how far the search for
/// its end went, and whether the parser had the bytes.
#[derive(Debug, Default, Clone, Copy)]
pub struct HeadScan {
    scanned: usize,
    offered: bool,
}

/// Bytes read but not yet used, in a buffer that never grows past its bound.
///
/// A buffer made with [`IoBuf::lazy`] holds no memory until bytes come, and
/// [`IoBuf::release`] hands an empty one's memory back to a per-worker spare
/// list: an idle keepalive connection then holds no read buffer at all, and
/// the next request takes one without allocating or zeroing.
#[derive(Debug)]
pub struct IoBuf {
    data: Vec<u8>,
    start: usize,
    end: usize,
    /// Size of the first allocation.
    initial: usize,
    max: usize,
}

/// Size of the buffers the spare list keeps (client read buffers).
const SPARE_SIZE: usize = 8 * 1024;

/// Spare buffers kept per worker (at most 2 MiB).
const SPARE_COUNT: usize = 256;

thread_local! {
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl IoBuf {
    /// A buffer starting at `initial` bytes that may grow to `max`.
    pub fn new(initial: usize, max: usize) -> Self {
        IoBuf {
            data: vec![0; initial.min(max)],
            start: 0,
            end: 0,
            initial: initial.min(max),
            max,
        }
    }

    /// Like [`IoBuf::new`], but nothing is allocated until the first read.
    pub fn lazy(initial: usize, max: usize) -> Self {
        IoBuf {
            data: Vec::new(),
            start: 0,
            end: 0,
            initial: initial.min(max),
            max,
        }
    }

    /// Gives an empty buffer's memory back (to the worker's spare list when
    /// it has the spare size); the next read takes memory again. Inlined
    /// (forced: `#[inline]` left the call), once per request: its call
    /// was 45 instructions (callgrind).
    #[inline(always)]
    pub fn release(&mut self) {
        if !self.is_empty() || self.data.is_empty() {
            return;
        }
        let data = std::mem::take(&mut self.data);
        self.start = 0;
        self.end = 0;
        if data.len() == SPARE_SIZE {
            SPARE.with(|spare| {
                let mut spare = spare.borrow_mut();
                if spare.len() < SPARE_COUNT {
                    spare.push(data);
                }
            });
        }
    }

    /// Memory for a buffer that has none. Inlined into its one caller
    /// (forced: `#[inline]` left the call of 43 instructions a request).
    #[inline(always)]
    fn take_memory(&mut self) {
        let spare = if self.initial == SPARE_SIZE {
            SPARE.with(|spare| spare.borrow_mut().pop())
        } else {
            None
        };
        self.data = spare.unwrap_or_else(|| vec![0; self.initial.max(1)]);
    }

    /// The unread bytes.
    pub fn filled(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    /// Number of unread bytes.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// True when nothing is left to read.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Marks `n` bytes as used.
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Forgets every unread byte (the allocation stays).
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// When nothing is unread, makes room for `n` bytes (at most the
    /// bound) so that the next read can take that much at once.
    pub fn reserve_empty(&mut self, n: usize) {
        let n = n.min(self.max);
        if self.is_empty() && self.data.len() < n {
            self.data.resize(n, 0);
        }
    }

    /// Bytes allocated now (grows up to the bound).
    pub fn capacity(&self) -> usize {
        self.data.len()
    }

    /// True when the buffer holds `max` unread bytes and cannot take more.
    pub fn is_full(&self) -> bool {
        self.len() >= self.max
    }

    /// Reads until the buffer starts with a complete head (at most `max`
    /// bytes) and returns its length. The one place tern waits for a head:
    /// client requests, backend responses, the demo origin, the admin
    /// listener and over-the-limit connections all use it.
    pub async fn read_head<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        r: &mut R,
        max: usize,
        deadline: Instant,
    ) -> Result<usize, HeadWaitError> {
        self.read_head_from(r, max, deadline, HeadScan::default(), |_| None)
            .await
            .map(|found| found.len)
    }

    /// Like [`IoBuf::read_head`], first offering the bytes to `parse` (a
    /// one-pass parser that reads a head whole and says how long it was,
    /// such as `tern_http::head::parse_request_prefix`): when it reads
    /// one, no search for the head's end is made. Offered once, when the
    /// first bytes are in: a head that trickles in is found as by
    /// [`IoBuf::read_head`], and parsed by the caller. Goes on from
    /// `scan`, where [`IoBuf::head_at_hand`] left off.
    pub async fn read_head_from<R, P>(
        &mut self,
        r: &mut R,
        max: usize,
        deadline: Instant,
        mut scan: HeadScan,
        mut parse: P,
    ) -> Result<FoundHead, HeadWaitError>
    where
        R: AsyncRead + Unpin + ?Sized,
        P: FnMut(&[u8]) -> Option<usize>,
    {
        // The wait of `poll_head`, bounded by `deadline`: tokio's timeout
        // polls it before the timer, so a head at hand is taken even late.
        let wait = std::future::poll_fn(|cx| self.poll_head(cx, r, max, &mut scan, &mut parse));
        tokio::time::timeout_at(deadline, wait)
            .await
            .unwrap_or(Err(HeadWaitError::TimedOut))
    }

    /// The head at the start of the buffer, without reading: `Some` when
    /// the bytes in hold a whole one (offered to `parse` first, once per
    /// `scan`) or cannot start a valid one, `None` when more must come.
    /// The first step of every wait for a head, and the whole of it for a
    /// keepalive request that came in one read: a plain function, so that
    /// such a request runs no future for it.
    #[inline]
    pub fn head_at_hand<P>(
        &self,
        scan: &mut HeadScan,
        max: usize,
        parse: &mut P,
    ) -> Option<Result<FoundHead, HeadWaitError>>
    where
        P: FnMut(&[u8]) -> Option<usize>,
    {
        if !scan.offered && !self.is_empty() {
            scan.offered = true;
            if let Some(len) = parse(self.filled()) {
                return Some(Ok(FoundHead { len, parsed: true }));
            }
        }
        match find_head_end(self.filled(), &mut scan.scanned, max) {
            Ok(Some(len)) => return Some(Ok(FoundHead { len, parsed: false })),
            Ok(None) => {}
            Err(e) => return Some(Err(HeadWaitError::Invalid(e))),
        }
        if self.is_full() {
            return Some(Err(HeadWaitError::Invalid(HttpError::HeadTooLarge)));
        }
        None
    }

    /// Reads until the buffer starts with a complete head, as
    /// [`IoBuf::read_head_from`] without its deadline: the poll of a
    /// hand-written wait that bounds it itself (a backend's response head
    /// under the connection's watchdog, polled in place by its caller
    /// rather than through three nested `async fn`s and tokio's read
    /// future, each a call per poll).
    #[inline(always)]
    pub fn poll_head<R, P>(
        &mut self,
        cx: &mut Context<'_>,
        r: &mut R,
        max: usize,
        scan: &mut HeadScan,
        parse: &mut P,
    ) -> Poll<Result<FoundHead, HeadWaitError>>
    where
        R: AsyncRead + Unpin + ?Sized,
        P: FnMut(&[u8]) -> Option<usize>,
    {
        loop {
            if let Some(found) = self.head_at_hand(scan, max, parse) {
                return Poll::Ready(found);
            }
            let any_bytes = !self.is_empty();
            match ready!(self.poll_fill_from(cx, r)) {
                Ok(0) | Err(_) => return Poll::Ready(Err(HeadWaitError::Closed { any_bytes })),
                Ok(_) => {}
            }
        }
    }

    /// Reads more bytes from `r`, compacting or growing (up to the bound)
    /// as needed. Returns the number read; 0 means end of stream (or a full
    /// buffer, which callers check with [`IoBuf::is_full`] first).
    ///
    /// A hand-written future ([`FillFrom`]), not an `async fn` around
    /// tokio's `read`: two futures, each a call per poll, on every wait
    /// for a keepalive request.
    #[inline]
    pub fn fill_from<'a, R: AsyncRead + Unpin + ?Sized>(
        &'a mut self,
        r: &'a mut R,
    ) -> FillFrom<'a, R> {
        FillFrom { buf: self, r }
    }

    /// [`IoBuf::fill_from`]'s poll. Making room is idempotent, so a poll
    /// after `Pending` finds the room made and reads into it. Forced
    /// inline: a plain `#[inline]` left it a call (callgrind), twice a
    /// keepalive request.
    #[inline(always)]
    pub fn poll_fill_from<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        r: &mut R,
    ) -> Poll<io::Result<usize>> {
        if self.data.is_empty() {
            self.take_memory();
        }
        if self.end == self.data.len() {
            if self.start > 0 {
                self.data.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.data.len() < self.max {
                let grown = (self.data.len() * 2).max(4096).min(self.max);
                self.data.resize(grown, 0);
            } else {
                return Poll::Ready(Ok(0));
            }
        }
        let mut read = ReadBuf::new(&mut self.data[self.end..]);
        ready!(Pin::new(r).poll_read(cx, &mut read))?;
        let n = read.filled().len();
        self.end += n;
        Poll::Ready(Ok(n))
    }
}

/// The future of [`IoBuf::fill_from`].
pub struct FillFrom<'a, R: ?Sized> {
    buf: &'a mut IoBuf,
    r: &'a mut R,
}

impl<R: AsyncRead + Unpin + ?Sized> Future for FillFrom<'_, R> {
    type Output = io::Result<usize>;

    // Forced: its callers are `async` polls, which nothing inlines anyway.
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.buf.poll_fill_from(cx, this.r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserves_room_only_when_empty_and_within_the_bound() {
        let mut buf = IoBuf::new(4, 16);
        buf.data[..2].copy_from_slice(b"ab");
        buf.end = 2;
        buf.reserve_empty(8);
        assert_eq!(buf.capacity(), 4, "unread bytes: no change");
        buf.consume(2);
        buf.reserve_empty(8);
        assert_eq!(buf.capacity(), 8);
        buf.reserve_empty(64);
        assert_eq!(buf.capacity(), 16, "never past the bound");
    }

    #[tokio::test]
    async fn grows_to_its_bound_and_no_further() {
        let mut buf = IoBuf::new(4, 8);
        let mut src: &[u8] = b"0123456789";
        assert_eq!(buf.fill_from(&mut src).await.unwrap(), 4);
        assert_eq!(buf.fill_from(&mut src).await.unwrap(), 4);
        assert!(buf.is_full());
        assert_eq!(buf.fill_from(&mut src).await.unwrap(), 0);
        buf.consume(6);
        assert_eq!(buf.fill_from(&mut src).await.unwrap(), 2);
        assert_eq!(buf.filled(), b"6789");
    }

    #[tokio::test]
    async fn a_lazy_buffer_takes_memory_when_read_into_and_gives_it_back_empty() {
        let mut buf = IoBuf::lazy(SPARE_SIZE, 64 * 1024);
        assert_eq!(buf.capacity(), 0);
        let mut src: &[u8] = b"GET / HTTP/1.1\r\n\r\n";
        assert_eq!(buf.fill_from(&mut src).await.unwrap(), 18);
        assert_eq!(buf.capacity(), SPARE_SIZE);
        buf.release();
        assert_eq!(buf.capacity(), SPARE_SIZE, "not empty: kept");
        buf.consume(18);
        buf.release();
        assert_eq!(buf.capacity(), 0);
        let mut src: &[u8] = b"next";
        assert_eq!(buf.fill_from(&mut src).await.unwrap(), 4);
        assert_eq!(buf.filled(), b"next");
    }
}
