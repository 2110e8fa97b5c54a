//! tern patch: h3's QPACK decoding reached from outside the crate, for
//! tern's fuzz target `fuzz/fuzz_targets/qpack_decode.rs`. Compiled only
//! with `--cfg fuzzing` (cargo fuzz sets it for every crate), so the
//! shipped crate is unchanged. A client's HEADERS frame reaches
//! `decode_stateless` directly (server/request.rs), and tern's patches
//! 0004, 0007, 0011 and 0012 rewrote its string decoding.

use std::convert::TryFrom;

use bytes::{Buf, Bytes, BytesMut};

use super::{
    decode_stateless, encode_stateless, prefix_int, prefix_string, DecoderError, HeaderField,
};
use crate::proto::headers::Header;

/// A decoded field line: its name and its value.
pub type Field = (Vec<u8>, Vec<u8>);

/// Why a field section was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Its decoded size passed the limit at this size: h3 answers 431.
    TooLarge(u64),
    /// Any other error (the connection closes with
    /// QPACK_DECOMPRESSION_FAILED), as h3 prints it.
    Invalid(String),
}

/// A field section as decoded: its fields and its size (RFC 9204 4.2.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The field lines in order.
    pub fields: Vec<Field>,
    /// The decoded size h3 compared with the limit.
    pub mem_size: u64,
}

fn decoded(result: Result<super::Decoded, DecoderError>) -> Result<Section, Refused> {
    match result {
        Ok(decoded) => Ok(Section {
            fields: decoded
                .fields
                .into_iter()
                .map(|field| (field.name.into_owned(), field.value.into_owned()))
                .collect(),
            mem_size: decoded.mem_size,
        }),
        Err(DecoderError::HeaderTooLong(size)) => Err(Refused::TooLarge(size)),
        Err(e) => Err(Refused::Invalid(e.to_string())),
    }
}

/// Decodes `block`, a HEADERS frame's payload, as a server's request
/// stream does (`decode_stateless` with its `max_field_section_size`),
/// the payload in one piece as a frame's is.
pub fn decode_field_section(block: &[u8], max_field_section_size: u64) -> Result<Section, Refused> {
    let mut buf = Bytes::copy_from_slice(block);
    decoded(decode_stateless(&mut buf, max_field_section_size))
}

/// `decode_field_section` of `block` split in two pieces at `at`, so that
/// strings across the split take the copying paths of `prefix_string`.
pub fn decode_field_section_in_two(
    block: &[u8],
    at: usize,
    max_field_section_size: u64,
) -> Result<Section, Refused> {
    let (head, tail) = block.split_at(at.min(block.len()));
    let mut buf = head.chain(tail);
    decoded(decode_stateless(&mut buf, max_field_section_size))
}

/// The request h3 makes of decoded fields (`Header::try_from`, then
/// `into_request_parts`, as `ResolvedRequest::resolve`), or its error.
pub fn request_parts(
    fields: &[Field],
) -> Result<(http::Method, http::Uri, http::HeaderMap), String> {
    let fields = fields
        .iter()
        .map(|(name, value)| HeaderField::new(name.clone(), value.clone()))
        .collect::<Vec<_>>();
    let header = Header::try_from(fields).map_err(|e| e.to_string())?;
    let (method, uri, _protocol, headers) =
        header.into_request_parts().map_err(|e| e.to_string())?;
    Ok((method, uri, headers))
}

/// `fields` encoded as a field section by `encode_stateless`.
pub fn encode_field_section(fields: &[Field]) -> Result<Vec<u8>, String> {
    let fields = fields
        .iter()
        .map(|(name, value)| HeaderField::new(name.clone(), value.clone()))
        .collect::<Vec<_>>();
    let mut block = BytesMut::new();
    encode_stateless(&mut block, &fields).map_err(|e| e.to_string())?;
    Ok(block.to_vec())
}

/// Decodes `code` as the Huffman-coded payload of a QPACK string, through
/// `prefix_string::decode` (the string's length prefixed, H bit set).
pub fn huffman_decode(code: &[u8]) -> Result<Vec<u8>, String> {
    let mut buf = BytesMut::new();
    prefix_int::encode(7, 1, code.len() as u64, &mut buf);
    buf.extend_from_slice(code);
    let mut buf = buf.freeze();
    prefix_string::decode(8, &mut buf).map_err(|e| e.to_string())
}

/// `value` Huffman-coded, as `prefix_string::encode` writes it.
pub fn huffman_encode(value: &[u8]) -> Vec<u8> {
    let mut buf = BytesMut::new();
    prefix_string::encode_into(value, &mut buf);
    buf.to_vec()
}

/// `request_parts` as a thread that decoded no head before does it (h3
/// patch 0020 keeps the last head's names and authority per thread).
pub fn request_parts_alone(
    fields: &[Field],
) -> Result<(http::Method, http::Uri, http::HeaderMap), String> {
    crate::proto::headers::without_last_head(|| request_parts(fields))
}

/// The fields that make a response head (valid names and values, not
/// pseudo-header fields), as a 200's field section twice through
/// `encode_stateless_field_list` (the second time from its kept fields,
/// h3 patch 0019), and through `encode_stateless_fields`.
pub fn encode_response_fields(fields: &[Field]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let list = fields
        .iter()
        .filter_map(|(name, value)| {
            Some((
                http::HeaderName::from_bytes(name).ok()?,
                http::HeaderValue::from_bytes(value).ok()?,
            ))
        })
        .collect::<Vec<_>>();
    let status = http::StatusCode::OK;
    let mut first = BytesMut::new();
    let mut second = BytesMut::new();
    let mut reference = BytesMut::new();
    let sizes = (
        super::encode_stateless_field_list(&mut first, status, &list),
        super::encode_stateless_field_list(&mut second, status, &list),
        super::encode_stateless_fields(
            &mut reference,
            status,
            list.iter().map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes())),
        ),
    );
    assert_eq!(sizes.0, sizes.2);
    assert_eq!(sizes.1, sizes.2);
    (first.to_vec(), second.to_vec(), reference.to_vec())
}
