mod bitwin;
mod decode;
mod encode;

use std::convert::TryInto;
use std::fmt;
use std::num::TryFromIntError;

use bytes::{Buf, BufMut};

pub use self::bitwin::BitWindow;

pub use self::{
    decode::{Error as HuffmanDecodingError, HpackStringDecode},
    encode::{Error as HuffmanEncodingError, HpackStringEncode},
};

// tern patch: the Huffman encoder itself, for the fuzz bridge.
#[cfg(fuzzing)]
pub(crate) use self::encode::encode_into;

use crate::proto::coding::BufMutExt;
use crate::qpack::prefix_int::{self, Error as IntegerError};

#[derive(Debug, PartialEq)]
pub enum Error {
    UnexpectedEnd,
    Integer(IntegerError),
    HuffmanDecoding(HuffmanDecodingError),
    HuffmanEncoding(HuffmanEncodingError),
    BufSize(TryFromIntError),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnexpectedEnd => write!(f, "unexpected end"),
            Error::Integer(e) => write!(f, "could not parse integer: {}", e),
            Error::HuffmanDecoding(e) => write!(f, "Huffman decode failed: {:?}", e),
            Error::HuffmanEncoding(e) => write!(f, "Huffman encode failed: {:?}", e),
            Error::BufSize(_) => write!(f, "number in buffer wrong size"),
        }
    }
}

pub fn decode<B: Buf>(size: u8, buf: &mut B) -> Result<Vec<u8>, Error> {
    let (flags, len) = prefix_int::decode(size - 1, buf)?;
    let len: usize = len.try_into()?;
    if buf.remaining() < len {
        return Err(Error::UnexpectedEnd);
    }

    // tern patch: the payload copied once, not an iterator's byte by byte,
    // and Huffman decoded by `decode_into` (strict about padding, as RFC
    // 7541 5.2 asks) instead of `DecodeIter`; a Huffman code that lies in
    // one piece of `buf` (a frame's payload, as a rule) is decoded where it
    // lies, without a copy.
    if flags & 1 == 0 {
        // tern patch: a plain string lying in one piece of `buf` is copied
        // into a buffer of its length, not zeroed first (a calloc).
        let chunk = buf.chunk();
        if chunk.len() >= len {
            let payload = chunk[..len].to_vec();
            buf.advance(len);
            return Ok(payload);
        }
        let mut payload = vec![0; len];
        buf.copy_to_slice(&mut payload);
        return Ok(payload);
    }
    // A Huffman code is at least 5 bits long.
    let mut decoded = Vec::with_capacity(len * 8 / 5);
    let chunk = buf.chunk();
    if chunk.len() >= len {
        let done = decode::decode_into(&chunk[..len], &mut decoded);
        buf.advance(len);
        done?;
    } else {
        let mut payload = vec![0; len];
        buf.copy_to_slice(&mut payload);
        decode::decode_into(&payload, &mut decoded)?;
    }
    Ok(decoded)
}

/// tern patch: Huffman-encoded only when that is shorter (RFC 9204 4.1.2
/// lets the encoder choose; a response's tokens and digits seldom shrink),
/// written straight into `buf` without an intermediate `Vec`.
pub fn encode<B: BufMut>(size: u8, flags: u8, value: &[u8], buf: &mut B) -> Result<(), Error> {
    let huffman_len = encode::encoded_len(value);
    if huffman_len < value.len() {
        prefix_int::encode(size - 1, flags << 1 | 1, huffman_len.try_into()?, buf);
        encode::encode_into(value, buf);
    } else {
        prefix_int::encode(size - 1, flags << 1, value.len().try_into()?, buf);
        buf.put_slice(value);
    }
    Ok(())
}

/// tern patch: a string literal without Huffman coding, as a stateless
/// field section writes its names and values (see
/// `encoder::encode_field_stateless`).
pub fn encode_plain<B: BufMut>(size: u8, flags: u8, value: &[u8], buf: &mut B) -> Result<(), Error> {
    prefix_int::encode(size - 1, flags << 1, value.len().try_into()?, buf);
    buf.put_slice(value);
    Ok(())
}

impl From<HuffmanEncodingError> for Error {
    fn from(error: HuffmanEncodingError) -> Self {
        Error::HuffmanEncoding(error)
    }
}

impl From<IntegerError> for Error {
    fn from(error: IntegerError) -> Self {
        match error {
            IntegerError::UnexpectedEnd => Error::UnexpectedEnd,
            e => Error::Integer(e),
        }
    }
}

impl From<HuffmanDecodingError> for Error {
    fn from(error: HuffmanDecodingError) -> Self {
        Error::HuffmanDecoding(error)
    }
}

impl From<TryFromIntError> for Error {
    fn from(error: TryFromIntError) -> Self {
        Error::BufSize(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assert_matches::assert_matches;
    use std::io::Cursor;

    #[test]
    fn codec_6() {
        let mut buf = Vec::new();
        encode(6, 0b01, b"name without ref", &mut buf).unwrap();
        let mut read = Cursor::new(&buf);
        assert_eq!(
            &buf,
            &[
                0b0110_1100,
                168,
                116,
                149,
                79,
                6,
                76,
                231,
                181,
                42,
                88,
                89,
                127
            ]
        );
        assert_eq!(decode(6, &mut read).unwrap(), b"name without ref");
    }

    #[test]
    fn codec_8() {
        let mut buf = Vec::new();
        encode(8, 0b01, b"name with ref", &mut buf).unwrap();
        let mut read = Cursor::new(&buf);
        assert_eq!(
            &buf,
            &[0b1000_1010, 168, 116, 149, 79, 6, 76, 234, 88, 89, 127]
        );
        assert_eq!(decode(8, &mut read).unwrap(), b"name with ref");
    }

    #[test]
    fn codec_8_empty() {
        let mut buf = Vec::new();
        encode(8, 0b01, b"", &mut buf).unwrap();
        let mut read = Cursor::new(&buf);
        assert_eq!(&buf, &[0b1000_0000]);
        assert_eq!(decode(8, &mut read).unwrap(), b"");
    }

    #[test]
    fn decode_non_huffman() {
        let buf = vec![0b0100_0011, b'b', b'a', b'r'];
        let mut read = Cursor::new(&buf);
        assert_eq!(decode(6, &mut read).unwrap(), b"bar");
    }

    #[test]
    fn decode_too_short() {
        let buf = vec![0b0100_0011, b'b', b'a'];
        let mut read = Cursor::new(&buf);
        assert_matches!(decode(6, &mut read), Err(Error::UnexpectedEnd));
    }
}
