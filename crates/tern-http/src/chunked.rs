//! A strict, incremental scanner for the chunked transfer coding.
//!
//! tern forwards chunked bodies as they are (no re-encoding), so the scanner
//! does not copy payload: it walks the bytes, checks every chunk-size line,
//! extension and trailer against RFC 9112 section 7.1, and says how many of
//! the bytes given belong to the body and whether the body has ended. Memory
//! is constant: the only state is a few counters.

use crate::HttpError;

/// Longest chunk-size line (size, extensions) accepted, in bytes. Chunk
/// extensions are unused in practice and a classic place to hide smuggling;
/// a bound keeps a client from streaming an endless one.
pub const MAX_CHUNK_LINE: usize = 4096;

/// Largest total size of the trailer section, in bytes.
pub const MAX_TRAILERS: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading hex digits of a chunk size.
    Size {
        digits: u8,
    },
    /// Whitespace after the size, before `;` or CR.
    SizeWs,
    /// Inside a chunk extension: name, `=`, value or quoted string.
    Ext(ExtState),
    /// Expecting LF after the CR ending a size line.
    SizeLf,
    /// Inside chunk data, this many bytes to go.
    Data,
    /// Expecting CR then LF after chunk data.
    DataCr,
    DataLf,
    /// At the start of a trailer line (or the final empty line).
    TrailerStart,
    /// Inside a trailer field line.
    TrailerLine,
    TrailerLf,
    /// Expecting the LF of the final empty line.
    FinalLf,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExtState {
    /// After `;` (optional whitespace, then a name).
    BeforeName,
    Name,
    /// After a name: whitespace, `=`, `;` or CR.
    AfterName,
    /// After `=`: whitespace then a token or quoted string.
    BeforeValue,
    Token,
    Quoted,
    QuotedEscape,
    /// After a value: whitespace, `;` or CR.
    AfterValue,
}

/// The result of scanning some bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    /// How many of the given bytes belong to the body (all of them unless `done`).
    pub consumed: usize,
    /// The body ended within the consumed bytes.
    pub done: bool,
}

/// Incremental chunked-body scanner. Feed it the body bytes in order.
#[derive(Debug, Clone)]
pub struct ChunkedScanner {
    state: State,
    size: u64,
    remaining: u64,
    line_len: usize,
    trailer_len: usize,
    payload: u64,
    /// The trailer section, captured when decoding (bounded by
    /// [`MAX_TRAILERS`]; no allocation for a body without trailers).
    trailers: Vec<u8>,
}

impl Default for ChunkedScanner {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedScanner {
    /// A scanner at the start of a chunked body.
    pub fn new() -> Self {
        ChunkedScanner {
            state: State::Size { digits: 0 },
            size: 0,
            remaining: 0,
            line_len: 0,
            trailer_len: 0,
            payload: 0,
            trailers: Vec::new(),
        }
    }

    /// True once the last chunk and trailers have been seen.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Payload bytes (chunk data, without framing) seen so far.
    pub fn payload_bytes(&self) -> u64 {
        self.payload
    }

    /// Scans `input`, which continues the body. Stops at the body's end.
    pub fn scan(&mut self, input: &[u8]) -> Result<Scan, HttpError> {
        self.walk(input, None)
    }

    /// The trailer section seen by [`ChunkedScanner::decode`] (field lines
    /// and the final empty line; empty when the body had no trailers), for
    /// [`crate::trailers::parse_section`]. Taken: a second call returns
    /// nothing.
    pub fn take_trailers(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.trailers)
    }

    /// Like [`ChunkedScanner::scan`], and appends the payload (chunk data
    /// without framing) to `payload`: for relaying a chunked HTTP/1.1 body
    /// into a protocol with its own framing (HTTP/2 DATA frames). The
    /// trailer section is kept for [`ChunkedScanner::take_trailers`].
    pub fn decode(&mut self, input: &[u8], payload: &mut Vec<u8>) -> Result<Scan, HttpError> {
        self.walk(input, Some(payload))
    }

    fn walk(&mut self, input: &[u8], mut sink: Option<&mut Vec<u8>>) -> Result<Scan, HttpError> {
        let mut i = 0;
        while i < input.len() {
            if self.state == State::Data {
                let take = self.remaining.min((input.len() - i) as u64);
                if let Some(out) = sink.as_deref_mut() {
                    out.extend_from_slice(&input[i..i + take as usize]);
                }
                self.remaining -= take;
                self.payload += take;
                i += take as usize;
                if self.remaining == 0 {
                    self.state = State::DataCr;
                }
                continue;
            }
            let in_trailers = matches!(
                self.state,
                State::TrailerStart | State::TrailerLine | State::TrailerLf | State::FinalLf
            );
            self.step(input[i])?;
            if in_trailers && sink.is_some() {
                // Bounded: `step` refused a section past MAX_TRAILERS.
                self.trailers.push(input[i]);
            }
            i += 1;
            if self.state == State::Done {
                return Ok(Scan {
                    consumed: i,
                    done: true,
                });
            }
        }
        Ok(Scan {
            consumed: i,
            done: self.state == State::Done,
        })
    }

    fn step(&mut self, b: u8) -> Result<(), HttpError> {
        use ExtState as E;
        let bad = |why| Err(HttpError::BadChunk(why));
        if matches!(
            self.state,
            State::Size { .. } | State::SizeWs | State::Ext(_)
        ) {
            self.line_len += 1;
            if self.line_len > MAX_CHUNK_LINE {
                return bad("chunk-size line too long");
            }
        }
        if matches!(
            self.state,
            State::TrailerStart | State::TrailerLine | State::TrailerLf | State::FinalLf
        ) {
            self.trailer_len += 1;
            if self.trailer_len > MAX_TRAILERS {
                return bad("trailers too large");
            }
        }
        self.state = match self.state {
            State::Size { digits } => match b {
                b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                    if digits >= 16 {
                        return bad("chunk size too large");
                    }
                    let v = (b as char).to_digit(16).unwrap_or(0) as u64;
                    self.size = (self.size << 4) | v;
                    State::Size { digits: digits + 1 }
                }
                _ if digits == 0 => return bad("chunk size is not hexadecimal"),
                b'\r' => State::SizeLf,
                b';' => State::Ext(E::BeforeName),
                b' ' | b'\t' => State::SizeWs,
                _ => return bad("invalid character after chunk size"),
            },
            State::SizeWs => match b {
                b' ' | b'\t' => State::SizeWs,
                b';' => State::Ext(E::BeforeName),
                b'\r' => State::SizeLf,
                _ => return bad("invalid character after chunk size"),
            },
            State::Ext(e) => State::Ext(match (e, b) {
                (E::BeforeName, b' ' | b'\t') => E::BeforeName,
                (E::BeforeName | E::Name, t) if is_tchar(t) => E::Name,
                (E::Name | E::AfterName, b' ' | b'\t') => E::AfterName,
                (E::Name | E::AfterName, b'=') => E::BeforeValue,
                (E::Name | E::AfterName | E::Token | E::AfterValue, b';') => E::BeforeName,
                (E::Name | E::AfterName | E::Token | E::AfterValue, b'\r') => {
                    self.state = State::SizeLf;
                    return Ok(());
                }
                (E::BeforeValue, b' ' | b'\t') => E::BeforeValue,
                (E::BeforeValue, b'"') => E::Quoted,
                (E::BeforeValue | E::Token, t) if is_tchar(t) => E::Token,
                (E::Token | E::AfterValue, b' ' | b'\t') => E::AfterValue,
                (E::Quoted, b'"') => E::AfterValue,
                (E::Quoted, b'\\') => E::QuotedEscape,
                (E::Quoted, c) if is_qdtext(c) => E::Quoted,
                (E::QuotedEscape, c) if c == b'\t' || (0x20..0x7f).contains(&c) || c >= 0x80 => {
                    E::Quoted
                }
                _ => return bad("invalid chunk extension"),
            }),
            State::SizeLf => {
                if b != b'\n' {
                    return bad("chunk-size line not ended by CRLF");
                }
                self.line_len = 0;
                if self.size == 0 {
                    State::TrailerStart
                } else {
                    self.remaining = self.size;
                    self.size = 0;
                    State::Data
                }
            }
            State::Data => unreachable_data(),
            State::DataCr => match b {
                b'\r' => State::DataLf,
                _ => return bad("chunk data longer than its size"),
            },
            State::DataLf => match b {
                b'\n' => State::Size { digits: 0 },
                _ => return bad("chunk data not ended by CRLF"),
            },
            State::TrailerStart => match b {
                b'\r' => State::FinalLf,
                b' ' | b'\t' => return bad("obsolete line folding in trailers"),
                b'\n' => return bad("bare LF in trailers"),
                0 => return bad("NUL in trailers"),
                _ => State::TrailerLine,
            },
            State::TrailerLine => match b {
                b'\r' => State::TrailerLf,
                b'\n' => return bad("bare LF in trailers"),
                0 => return bad("NUL in trailers"),
                _ => State::TrailerLine,
            },
            State::TrailerLf => match b {
                b'\n' => State::TrailerStart,
                _ => return bad("bare CR in trailers"),
            },
            State::FinalLf => match b {
                b'\n' => State::Done,
                _ => return bad("bare CR after last chunk"),
            },
            State::Done => State::Done,
        };
        Ok(())
    }
}

/// `Data` is handled in bulk by `scan`; reaching it per byte would be a bug,
/// and treating the byte as data keeps the count right regardless.
fn unreachable_data() -> State {
    State::DataCr
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_qdtext(b: u8) -> bool {
    b == b'\t'
        || b == b' '
        || b == 0x21
        || (0x23..=0x5b).contains(&b)
        || (0x5d..=0x7e).contains(&b)
        || b >= 0x80
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(body: &[u8]) -> Result<Scan, HttpError> {
        ChunkedScanner::new().scan(body)
    }

    #[test]
    fn scans_a_body_with_extensions_and_trailers() {
        let body = b"5;a=b;c=\"d e\"\r\nhello\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        let s = scan_all(body).unwrap();
        assert!(s.done);
        assert_eq!(&body[s.consumed..], b"NEXT");
    }

    #[test]
    fn scans_byte_by_byte_the_same_as_at_once() {
        let body = b"a\r\n0123456789\r\n3 ; x\r\nabc\r\n0\r\n\r\n";
        let mut sc = ChunkedScanner::new();
        let mut total = 0;
        for b in body.iter() {
            let s = sc.scan(std::slice::from_ref(b)).unwrap();
            total += s.consumed;
        }
        assert!(sc.is_done());
        assert_eq!(total, body.len());
        assert_eq!(sc.payload_bytes(), 13);
    }

    #[test]
    fn refuses_bad_sizes_and_extensions() {
        for bad in [
            &b"x\r\n"[..],
            b"-1\r\n",
            b"0x5\r\n",
            b"5\n",
            b"11111111111111111\r\n",
            b"5;\r\n",
            b"5;a=\"x\r\n",
            b"5 x\r\n",
            b"5\r\nhelloX",
            b"0\r\nA: b\n\r\n",
        ] {
            assert!(
                scan_all(bad).is_err(),
                "{:?} accepted",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn decode_keeps_the_trailer_section() {
        let mut s = ChunkedScanner::new();
        let mut out = Vec::new();
        let body = b"3\r\nabc\r\n0\r\ngrpc-status: 0\r\n\r\nNEXT";
        let scan = s.decode(body, &mut out).unwrap();
        assert!(scan.done);
        assert_eq!(scan.consumed, body.len() - 4);
        assert_eq!(s.take_trailers(), b"grpc-status: 0\r\n\r\n");
        let mut s = ChunkedScanner::new();
        s.decode(b"0\r\n\r\n", &mut out).unwrap();
        assert_eq!(s.take_trailers(), b"\r\n");
    }

    #[test]
    fn decode_yields_the_payload_only() {
        let mut out = Vec::new();
        let mut sc = ChunkedScanner::new();
        let s = sc
            .decode(
                b"5;x=y\r\nhello\r\n6\r\n world\r\n0\r\nT: 1\r\n\r\n",
                &mut out,
            )
            .unwrap();
        assert!(s.done);
        assert_eq!(out, b"hello world");
    }

    #[test]
    fn bounds_the_chunk_line() {
        let mut line = b"5;".to_vec();
        line.extend(std::iter::repeat_n(b'a', MAX_CHUNK_LINE));
        assert_eq!(
            scan_all(&line).unwrap_err(),
            HttpError::BadChunk("chunk-size line too long")
        );
    }
}
