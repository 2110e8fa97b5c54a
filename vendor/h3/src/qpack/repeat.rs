//! tern patch: a response head's field section encoded statelessly, each
//! field that repeats the field at its position in the worker thread's
//! last head written as the bytes it encoded to then.
//!
//! A stateless field line (no dynamic table: `encode_field_stateless`) is
//! a function of the field's name and value alone, so the bytes kept for
//! the same name and value are the bytes the encoding writes. A backend's
//! response fields (server, content-type, content-length, etag,
//! last-modified, accept-ranges, date within its second) come in the same
//! order on every response, and each cost two static-table searches and
//! the prefixed integers and strings (~280 instructions a field, callgrind):
//! a kept field costs the comparison of its name and value and one copy.
//!
//! Kept per thread (the encoding depends on no connection): at most
//! [`MAX_FIELDS`] positions of at most [`MAX_VALUE`] + [`MAX_ENCODED`]
//! bytes each, room made once (under 2 KiB a thread). Of a field whose
//! value is new on every response (sensitive: a request ID) or long, only
//! the name's part is kept, when the name is in no static entry (a
//! literal, ~100 instructions to find and write); else nothing.

use std::cell::RefCell;

use bytes::{BufMut, BytesMut};
use http::{HeaderName, HeaderValue, StatusCode};

use super::block::{HeaderPrefix, Indexed};
use super::encoder::{encode_field_stateless, EncoderError};
use super::static_::StaticTable;
use super::prefix_string;

/// Positions kept: the fields of a typical response head.
const MAX_FIELDS: usize = 12;

/// Longest value kept (`date`, `etag`, `last-modified` and `server` fit).
const MAX_VALUE: usize = 48;

/// Longest encoding kept: a value after its name's index, or a name and a
/// value, each after its length (a name of a kept field is a
/// `HeaderName`, whose encoding is bounded by its length).
const MAX_ENCODED: usize = 2 * MAX_VALUE + 8;

thread_local! {
    static KEPT: RefCell<Kept> = const { RefCell::new(Kept { entries: Vec::new() }) };
}

struct Kept {
    entries: Vec<Entry>,
}

struct Entry {
    /// None: nothing kept at this position.
    name: Option<HeaderName>,
    /// The name's length (for the field's size, RFC 9204 4.2.2).
    name_len: usize,
    /// `bytes` holds only the name's part of the line: a name not in the
    /// static table written as a literal, kept for a value that is new on
    /// every head (a sensitive value: a request ID) or too long to keep;
    /// the value is written after it.
    name_only: bool,
    /// The value's bytes, then the field line's encoded bytes (or the
    /// name's part alone).
    bytes: Vec<u8>,
    value_len: usize,
}

/// What is kept at a position for a field.
enum Found<'a> {
    /// The field's whole line.
    Line(&'a [u8]),
    /// The line's name part (the value goes after it).
    Name(&'a [u8]),
}

impl Kept {
    /// What is kept at `position` for `name: value`, and the field's size.
    #[inline]
    fn find(&self, position: usize, name: &HeaderName, value: &HeaderValue) -> Option<(Found<'_>, usize)> {
        let e = self.entries.get(position)?;
        if e.name.as_ref() != Some(name) {
            return None;
        }
        let size = e.name_len + value.len() + 32;
        if e.name_only {
            return Some((Found::Name(&e.bytes), size));
        }
        let (kept, encoded) = e.bytes.split_at(e.value_len);
        (kept == value.as_bytes()).then_some((Found::Line(encoded), size))
    }

    /// Keeps `encoded` as `name: value`'s field line at `position` (or its
    /// name part, or nothing, for a field whose line is not worth keeping).
    fn keep(&mut self, position: usize, name: &HeaderName, value: &HeaderValue, encoded: &[u8]) {
        if position > self.entries.len() || position >= MAX_FIELDS {
            return;
        }
        if position == self.entries.len() {
            // Room for every position at once: no growth past it.
            self.entries.reserve_exact(MAX_FIELDS - position);
            self.entries.push(Entry {
                name: None,
                name_len: 0,
                name_only: false,
                // Made once: a kept field never needs more.
                bytes: Vec::with_capacity(MAX_VALUE + MAX_ENCODED),
                value_len: 0,
            });
        }
        let e = &mut self.entries[position];
        let name_text = name.as_str().as_bytes();
        let whole = !value.is_sensitive() && value.len() <= MAX_VALUE && encoded.len() <= MAX_ENCODED;
        if !whole
            && (name_text.len() > MAX_VALUE || StaticTable::find_name(name_text).is_some())
        {
            e.name = None;
            return;
        }
        if e.name.as_ref() != Some(name) {
            e.name = Some(name.clone());
        }
        e.name_len = name_text.len();
        e.bytes.clear();
        if whole {
            e.name_only = false;
            e.bytes.extend_from_slice(value.as_bytes());
            e.bytes.extend_from_slice(encoded);
            e.value_len = value.len();
        } else {
            // A name in no static entry: `encode_field_stateless` wrote it
            // as a plain literal (no static pair has it either), then the
            // value plainly; its part is written here the same way.
            e.name_only = true;
            if prefix_string::encode_plain(4, 0b0010, name_text, &mut e.bytes).is_err() {
                e.name = None;
            }
            e.value_len = 0;
        }
    }
}

/// The stateless field section of a response head given as its status
/// and its fields, written after what `block` holds; the same bytes and
/// size as [`super::encode_stateless_fields`] of the same head.
pub fn encode_stateless_field_list(
    block: &mut BytesMut,
    status: StatusCode,
    fields: &[(HeaderName, HeaderValue)],
) -> Result<u64, EncoderError> {
    HeaderPrefix::new(0, 0, 0, 0).encode(block);
    let status_text = status.as_str().as_bytes();
    match StaticTable::find_status(status.as_u16()) {
        Some(index) => Indexed::Static(index).encode(block),
        None => encode_field_stateless(block, b":status", status_text)?,
    }
    // HeaderField::mem_size
    let size = (b":status".len() + status_text.len() + 32) as u64;
    let kept = KEPT.try_with(|kept| {
        let mut kept = kept.borrow_mut();
        let mut size = size;
        for (position, (name, value)) in fields.iter().enumerate() {
            match kept.find(position, name, value) {
                Some((Found::Line(line), field)) => {
                    block.put_slice(line);
                    size += field as u64;
                    continue;
                }
                Some((Found::Name(part), field)) => {
                    block.put_slice(part);
                    prefix_string::encode_plain(8, 0, value.as_bytes(), block)?;
                    size += field as u64;
                    continue;
                }
                None => {}
            }
            let name_text = name.as_str().as_bytes();
            let start = block.len();
            encode_field_stateless(block, name_text, value.as_bytes())?;
            kept.keep(position, name, value, &block[start..]);
            size += (name_text.len() + value.len() + 32) as u64;
        }
        Ok::<u64, EncoderError>(size)
    });
    match kept {
        Ok(size) => size,
        // The thread is ending: encoded without its kept fields.
        Err(_) => {
            let mut size = size;
            for (name, value) in fields {
                let name_text = name.as_str().as_bytes();
                encode_field_stateless(block, name_text, value.as_bytes())?;
                size += (name_text.len() + value.len() + 32) as u64;
            }
            Ok(size)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(status: StatusCode, fields: &[(HeaderName, HeaderValue)]) -> (Vec<u8>, u64) {
        let mut block = BytesMut::new();
        let size = super::super::encode_stateless_fields(
            &mut block,
            status,
            fields
                .iter()
                .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes())),
        )
        .unwrap();
        (block.to_vec(), size)
    }

    #[test]
    fn repeated_fields_encode_as_without_kept_bytes() {
        let long = "x".repeat(MAX_VALUE + 1);
        let mut hits = 0;
        for round in 0..40u32 {
            let date = format!("Thu, 26 Nov 2026 22:{:02}:00 GMT", round / 3);
            let mut id = HeaderValue::from_str(&format!("req-{round}")).unwrap();
            id.set_sensitive(true);
            let mut fields = vec![
                (http::header::SERVER, HeaderValue::from_static("nginx/1.22.1")),
                (http::header::DATE, HeaderValue::from_str(&date).unwrap()),
                (http::header::CONTENT_TYPE, HeaderValue::from_static("text/html")),
                (
                    http::header::CONTENT_LENGTH,
                    HeaderValue::from_str(&(100 + round % 2).to_string()).unwrap(),
                ),
                (http::header::ACCEPT_RANGES, HeaderValue::from_static("bytes")),
                (HeaderName::from_static("x-request-id"), id),
                (HeaderName::from_static("x-long"), HeaderValue::from_str(&long).unwrap()),
                (HeaderName::from_static("x-custom"), HeaderValue::from_static("")),
            ];
            // Lists of other lengths and orders, and more fields than kept.
            match round % 5 {
                1 => fields.truncate(3),
                2 => fields.swap(0, 2),
                3 => {
                    for i in 0..MAX_FIELDS {
                        fields.push((http::header::VARY, HeaderValue::from(i as u32)));
                    }
                }
                _ => {}
            }
            let status = if round % 7 == 6 { StatusCode::IM_A_TEAPOT } else { StatusCode::OK };
            let before: usize = KEPT.with(|k| {
                let k = k.borrow();
                fields
                    .iter()
                    .enumerate()
                    .filter(|(i, (n, v))| k.find(*i, n, v).is_some())
                    .count()
            });
            hits += before;
            let mut block = BytesMut::new();
            let size = encode_stateless_field_list(&mut block, status, &fields).unwrap();
            assert_eq!((block.to_vec(), size), reference(status, &fields), "round {round}");
        }
        // Sensitive and long values are never kept; most of the rest is.
        assert!(hits > 100, "{hits} fields written from kept bytes");
        KEPT.with(|k| {
            let k = k.borrow();
            assert!(k.entries.len() <= MAX_FIELDS);
            for e in &k.entries {
                assert!(e.bytes.capacity() <= MAX_VALUE + MAX_ENCODED);
            }
        });
    }
}
