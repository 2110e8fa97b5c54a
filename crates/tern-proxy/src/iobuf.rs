//! A read buffer with a hard size bound.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

/// Bytes read but not yet used, in a buffer that never grows past its bound.
#[derive(Debug)]
pub struct IoBuf {
    data: Vec<u8>,
    start: usize,
    end: usize,
    max: usize,
}

impl IoBuf {
    /// A buffer starting at `initial` bytes that may grow to `max`.
    pub fn new(initial: usize, max: usize) -> Self {
        IoBuf {
            data: vec![0; initial.min(max)],
            start: 0,
            end: 0,
            max,
        }
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

    /// True when the buffer holds `max` unread bytes and cannot take more.
    pub fn is_full(&self) -> bool {
        self.len() >= self.max
    }

    /// Reads more bytes from `r`, compacting or growing (up to the bound)
    /// as needed. Returns the number read; 0 means end of stream (or a full
    /// buffer, which callers check with [`IoBuf::is_full`] first).
    pub async fn fill_from<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        r: &mut R,
    ) -> io::Result<usize> {
        if self.end == self.data.len() {
            if self.start > 0 {
                self.data.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.data.len() < self.max {
                let grown = (self.data.len() * 2).max(4096).min(self.max);
                self.data.resize(grown, 0);
            } else {
                return Ok(0);
            }
        }
        let n = r.read(&mut self.data[self.end..]).await?;
        self.end += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
