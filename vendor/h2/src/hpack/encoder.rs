use super::header::{HeaderRef, Name};
use super::table::{Index, Table};
#[cfg(any(test, fuzzing))]
use super::Header;
use super::huffman;
use super::repeat::Repeats;
use crate::frame::SharedFields;

use bytes::{BufMut, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};

const DEFAULT_MAX_ALLOWED_SIZE: usize = 4 * 1024;

#[derive(Debug)]
pub struct Encoder {
    table: Table,
    max_allowed_size: usize,
    size_update: Option<SizeUpdate>,
    /// Reusable buffer for the encoded header block of a single frame.
    ///
    /// A header block only has to live until it is copied into the
    /// connection write buffer, so the buffer that holds it can be reused
    /// across frames instead of being allocated and freed per frame. See
    /// `take_scratch` / `return_scratch`.
    scratch: BytesMut,
    /// tern patch: what the last field list's fields encoded to.
    repeats: Repeats,
    /// tern patch: what the last shared fields encoded to.
    shared: Option<SharedKept>,
    /// Fields written from `repeats` (the tests check they are).
    #[cfg(test)]
    repeated: usize,
    /// Blocks whose shared fields were written from `shared`.
    #[cfg(test)]
    shared_written: usize,
}

/// tern patch: the bytes the last shared fields (`SharedFields`) a block
/// carried encoded to, while the table's change count was `changes`.
///
/// The fields are known by their allocation: held weakly, it is not freed
/// (so not reused for other fields) while kept here, and the values it
/// held are not pinned by a connection that has gone idle.
#[derive(Debug)]
struct SharedKept {
    fields: std::sync::Weak<[(HeaderName, HeaderValue)]>,
    changes: u64,
    bytes: Vec<u8>,
}

/// tern patch: the longest encoding of shared fields kept. Fields that
/// repeat are in the table after their first head (an index each, a byte
/// or two); a head whose encoding stays longer than this is encoded field
/// by field every time.
const SHARED_MAX_ENCODED: usize = 256;

#[derive(Debug, Copy, Clone, Eq, PartialEq)]
enum SizeUpdate {
    One(usize),
    Two(usize, usize), // min, max
}

impl Encoder {
    pub fn new(max_size: usize, capacity: usize) -> Encoder {
        let max_size = max_size.min(DEFAULT_MAX_ALLOWED_SIZE);

        Encoder {
            table: Table::new(max_size, capacity),
            max_allowed_size: DEFAULT_MAX_ALLOWED_SIZE,
            size_update: None,
            scratch: BytesMut::new(),
            repeats: Repeats::default(),
            shared: None,
            #[cfg(test)]
            repeated: 0,
            #[cfg(test)]
            shared_written: 0,
        }
    }

    #[cfg(test)]
    fn set_max_allowed_size(&mut self, max: usize) {
        self.max_allowed_size = max;

        if self.table.max_size() > max {
            self.update_max_size(max);
        }
    }

    /// Takes the reusable buffer for one header-block encode.
    ///
    /// The buffer is returned by `return_scratch` once the encoded block has
    /// been copied into the write buffer. If it is not returned - the
    /// CONTINUATION path keeps it, since the remainder is still needed - the
    /// next call simply starts from a fresh buffer.
    pub(crate) fn take_scratch(&mut self) -> BytesMut {
        std::mem::take(&mut self.scratch)
    }

    /// Returns a fully-written header block buffer for reuse.
    pub(crate) fn return_scratch(&mut self, scratch: BytesMut) {
        self.scratch = scratch;
    }

    /// Queues a max size update.
    ///
    /// The next call to `encode` will include a dynamic size update frame.
    pub fn update_max_size(&mut self, val: usize) {
        let val = val.min(self.max_allowed_size);

        match self.size_update {
            Some(SizeUpdate::One(old)) => {
                if val > old {
                    if old > self.table.max_size() {
                        self.size_update = Some(SizeUpdate::One(val));
                    } else {
                        self.size_update = Some(SizeUpdate::Two(old, val));
                    }
                } else {
                    self.size_update = Some(SizeUpdate::One(val));
                }
            }
            Some(SizeUpdate::Two(min, _)) => {
                if val < min {
                    self.size_update = Some(SizeUpdate::One(val));
                } else {
                    self.size_update = Some(SizeUpdate::Two(min, val));
                }
            }
            None => {
                if val != self.table.max_size() {
                    // Don't bother writing a frame if the value already matches
                    // the table's max size.
                    self.size_update = Some(SizeUpdate::One(val));
                }
            }
        }
    }

    /// Encode a set of headers into the provide buffer
    ///
    /// tern patch: only the tests and the fuzz bridge encode owned fields;
    /// h2 encodes the header blocks it sends with `encode_block`.
    #[cfg(any(test, fuzzing))]
    pub fn encode<I>(&mut self, headers: I, dst: &mut BytesMut)
    where
        I: IntoIterator<Item = Header<Option<HeaderName>>>,
    {
        let span = tracing::trace_span!("hpack::encode");
        let _e = span.enter();

        self.encode_size_updates(dst);

        let mut last: Option<(Index, Header)> = None;

        for header in headers {
            match header.reify() {
                // The header has an associated name. In which case, try to
                // index it in the table.
                Ok(header) => {
                    let index = self.encode_field(header.as_ref(), dst);
                    last = Some((index, header));
                }
                // The header does not have an associated name. This means that
                // the name is the same as the previously yielded header. In
                // which case, we skip table lookup and just use the same index
                // as the previous entry.
                Err(value) => {
                    let (index, header) = last.as_ref().unwrap_or_else(|| {
                        panic!("encoding header without name, but no previous index to use for name");
                    });
                    self.encode_header_without_name(index, header.name(), &value, dst);
                }
            }
        }
    }

    /// Encodes a header block from borrowed fields: the pseudo-header
    /// fields, then each value of `fields`.
    ///
    /// tern patch: the fields stay in their HeaderMap (moving each out and
    /// dropping it cost ~1,500 instructions per HTTP/2 response head); only
    /// a field that enters the dynamic table is cloned. The further values
    /// of a name (yielded with the same `&HeaderName` as its first value)
    /// reuse the first one's index, as `encode` does for a field without a
    /// name.
    ///
    /// tern patch: then the fields of `list` in their order (a response head
    /// given as a list, see `SendResponse::send_response_fields`); each is
    /// indexed on its own (a name the list repeats is found in the table).
    pub fn encode_block<'a, P>(
        &mut self,
        pseudo: P,
        fields: &'a HeaderMap,
        shared: Option<&SharedFields>,
        list: &'a [(HeaderName, HeaderValue)],
        dst: &mut BytesMut,
    ) where
        P: IntoIterator<Item = HeaderRef<'a>>,
    {
        let span = tracing::trace_span!("hpack::encode");
        let _e = span.enter();

        self.encode_size_updates(dst);

        for header in pseudo {
            self.encode_field(header, dst);
        }

        let mut last: Option<(&HeaderName, Index)> = None;

        for (name, value) in fields {
            if let Some((last_name, ref index)) = last {
                if std::ptr::eq(last_name, name) {
                    self.encode_header_without_name(index, Name::Field(name), value, dst);
                    continue;
                }
            }

            let index = self.encode_field(HeaderRef::Field { name, value }, dst);
            last = Some((name, index));
        }

        // tern patch: the shared fields, then the list, as one list (the
        // list's positions follow the shared fields').
        let mut first = 0;
        if let Some(shared) = shared {
            self.encode_shared(shared, dst);
            first = shared.len();
        }
        self.encode_list(first, list, dst);
    }

    /// tern patch: writes `shared` as the bytes it encoded to last if it is
    /// the same allocation and the table has not changed since (the same
    /// fields encoded against the same table: the same bytes, and the table
    /// left as the encoding would leave it); else field by field
    /// (`encode_list`), keeping the bytes if that left the table unchanged.
    fn encode_shared(&mut self, shared: &SharedFields, dst: &mut BytesMut) {
        let changes = self.table.changes();
        if let Some(kept) = &self.shared {
            if kept.changes == changes && std::ptr::eq(kept.fields.as_ptr(), &**shared) {
                dst.extend_from_slice(&kept.bytes);
                #[cfg(test)]
                {
                    self.shared_written += 1;
                }
                return;
            }
        }
        let start = dst.len();
        self.encode_list(0, shared, dst);
        let encoded = &dst[start..];
        if self.table.changes() != changes || encoded.len() > SHARED_MAX_ENCODED {
            self.shared = None;
            return;
        }
        let fields = std::sync::Arc::downgrade(shared);
        match &mut self.shared {
            Some(kept) => {
                kept.fields = fields;
                kept.changes = changes;
                kept.bytes.clear();
                kept.bytes.extend_from_slice(encoded);
            }
            None => {
                self.shared = Some(SharedKept {
                    fields,
                    changes,
                    bytes: encoded.to_vec(),
                })
            }
        }
    }

    /// tern patch: a field at the same position as in the last list (the
    /// list's first at `first`), with the table unchanged since, is
    /// written as it was then (`hpack::repeat`): the fields of a
    /// connection's responses repeat.
    fn encode_list(
        &mut self,
        first: usize,
        list: &[(HeaderName, HeaderValue)],
        dst: &mut BytesMut,
    ) {
        for (offset, (name, value)) in list.iter().enumerate() {
            let position = first + offset;
            let changes = self.table.changes();
            if value.is_sensitive() {
                self.encode_sensitive(position, name, value, changes, dst);
                continue;
            }
            if let Some(encoded) = self.repeats.find(position, name, value, changes) {
                dst.extend_from_slice(encoded);
                #[cfg(test)]
                {
                    self.repeated += 1;
                }
                continue;
            }
            let start = dst.len();
            self.encode_field(HeaderRef::Field { name, value }, dst);
            let unchanged = self.table.changes() == changes;
            self.repeats.keep(
                position,
                name,
                value,
                unchanged.then(|| (&dst[start..], changes)),
            );
        }
    }

    /// tern patch: a sensitive field of a list (a request ID, new on every
    /// response) whose name is in the table is written as its name's index
    /// (never indexed) and its value as a plain literal; the name's bytes
    /// are kept at its position while the table does not change
    /// (`hpack::repeat`), so the next response's ID skips the look-up of
    /// its name. The same bytes `encode_field` writes.
    fn encode_sensitive(
        &mut self,
        position: usize,
        name: &HeaderName,
        value: &HeaderValue,
        changes: u64,
        dst: &mut BytesMut,
    ) {
        if let Some(prefix) = self.repeats.find_name(position, name, changes) {
            dst.extend_from_slice(prefix);
            encode_plain_str(value.as_bytes(), dst);
            #[cfg(test)]
            {
                self.repeated += 1;
            }
            return;
        }
        let header = HeaderRef::Field { name, value };
        let index = self.table.index(header);
        let start = dst.len();
        let prefix = match index {
            Index::Name(idx) if self.table.changes() == changes => {
                encode_int(idx, 4, 0b10000, dst);
                let end = dst.len();
                encode_plain_str(value.as_bytes(), dst);
                Some((start, end))
            }
            _ => {
                encode_header(&index, header, dst);
                None
            }
        };
        self.repeats.keep_name(
            position,
            name,
            prefix.map(|(start, end)| (&dst[start..end], changes)),
        );
    }

    fn encode_field(&mut self, header: HeaderRef<'_>, dst: &mut BytesMut) -> Index {
        let index = self.table.index(header);
        encode_header(&index, header, dst);
        index
    }

    fn encode_size_updates(&mut self, dst: &mut BytesMut) {
        match self.size_update.take() {
            Some(SizeUpdate::One(val)) => {
                self.table.resize(val);
                encode_size_update(val, dst);
            }
            Some(SizeUpdate::Two(min, max)) => {
                self.table.resize(min);
                self.table.resize(max);
                encode_size_update(min, dst);
                encode_size_update(max, dst);
            }
            None => {}
        }
    }

    fn encode_header_without_name(
        &mut self,
        last: &Index,
        last_name: Name<'_>,
        value: &HeaderValue,
        dst: &mut BytesMut,
    ) {
        match *last {
            Index::Indexed(..)
            | Index::Name(..)
            | Index::Inserted(..)
            | Index::InsertedValue(..) => {
                let idx = self.table.resolve_idx(last);

                encode_not_indexed(idx, value.as_ref(), value.is_sensitive(), dst);
            }
            Index::NotIndexed => {
                encode_not_indexed2(
                    last_name.as_slice(),
                    value.as_ref(),
                    value.is_sensitive(),
                    dst,
                );
            }
        }
    }
}

// tern patch: writes the field the index was made for (borrowed, where the
// index used to carry it).
fn encode_header(index: &Index, header: HeaderRef<'_>, dst: &mut BytesMut) {
    match *index {
        Index::Indexed(idx) => {
            encode_int(idx, 7, 0x80, dst);
        }
        Index::Name(idx) => {
            encode_not_indexed(idx, header.value_slice(), header.is_sensitive(), dst);
        }
        Index::Inserted(_) => {
            assert!(!header.is_sensitive());

            dst.put_u8(0b0100_0000);

            encode_str(header.name().as_slice(), dst);
            encode_str(header.value_slice(), dst);
        }
        Index::InsertedValue(idx, _) => {
            assert!(!header.is_sensitive());

            encode_int(idx, 6, 0b0100_0000, dst);
            encode_str(header.value_slice(), dst);
        }
        Index::NotIndexed => {
            encode_not_indexed2(
                header.name().as_slice(),
                header.value_slice(),
                header.is_sensitive(),
                dst,
            );
        }
    }
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new(4096, 0)
    }
}

fn encode_size_update(val: usize, dst: &mut BytesMut) {
    encode_int(val, 5, 0b0010_0000, dst)
}

// tern patch: the strings of a field sent without indexing (a value that
// never repeats: content-length, etag, a request ID; a sensitive value; a
// field too large for the table) go as plain literals (RFC 7541 5.2, H = 0),
// not Huffman-coded. They are coded again in every response that carries
// them, and Huffman coding costs about a dozen instructions a byte to save
// a quarter of the bytes, which cost far less than that to encrypt and
// send. Strings that go into the table (sent once) keep Huffman coding.
fn encode_not_indexed(name: usize, value: &[u8], sensitive: bool, dst: &mut BytesMut) {
    if sensitive {
        encode_int(name, 4, 0b10000, dst);
    } else {
        encode_int(name, 4, 0, dst);
    }

    encode_plain_str(value, dst);
}

fn encode_not_indexed2(name: &[u8], value: &[u8], sensitive: bool, dst: &mut BytesMut) {
    if sensitive {
        dst.put_u8(0b10000);
    } else {
        dst.put_u8(0);
    }

    encode_plain_str(name, dst);
    encode_plain_str(value, dst);
}

// tern patch: a string literal without Huffman coding (see
// `encode_not_indexed`).
fn encode_plain_str(val: &[u8], dst: &mut BytesMut) {
    encode_int(val.len(), 7, 0, dst);
    dst.put_slice(val);
}

fn encode_str(val: &[u8], dst: &mut BytesMut) {
    if !val.is_empty() {
        let idx = position(dst);

        // Push a placeholder byte for the length header
        dst.put_u8(0);

        // Encode with huffman
        huffman::encode(val, dst);

        let huff_len = position(dst) - (idx + 1);

        if encode_int_one_byte(huff_len, 7) {
            // Write the string head
            dst[idx] = 0x80 | huff_len as u8;
        } else {
            // Write the head to a placeholder
            const PLACEHOLDER_LEN: usize = 8;
            let mut buf = [0u8; PLACEHOLDER_LEN];

            let head_len = {
                let mut head_dst = &mut buf[..];
                encode_int(huff_len, 7, 0x80, &mut head_dst);
                PLACEHOLDER_LEN - head_dst.remaining_mut()
            };

            // This is just done to reserve space in the destination
            dst.put_slice(&buf[1..head_len]);

            // Shift the header forward
            for i in 0..huff_len {
                let src_i = idx + 1 + (huff_len - (i + 1));
                let dst_i = idx + head_len + (huff_len - (i + 1));
                dst[dst_i] = dst[src_i];
            }

            // Copy in the head
            for i in 0..head_len {
                dst[idx + i] = buf[i];
            }
        }
    } else {
        // Write an empty string
        dst.put_u8(0);
    }
}

/// Encode an integer into the given destination buffer
fn encode_int<B: BufMut>(
    mut value: usize,   // The integer to encode
    prefix_bits: usize, // The number of bits in the prefix
    first_byte: u8,     // The base upon which to start encoding the int
    dst: &mut B,
) {
    if encode_int_one_byte(value, prefix_bits) {
        dst.put_u8(first_byte | value as u8);
        return;
    }

    let low = (1 << prefix_bits) - 1;

    value -= low;

    dst.put_u8(first_byte | low as u8);

    while value >= 128 {
        dst.put_u8(0b1000_0000 | value as u8);

        value >>= 7;
    }

    dst.put_u8(value as u8);
}

/// Returns true if the in the int can be fully encoded in the first byte.
fn encode_int_one_byte(value: usize, prefix_bits: usize) -> bool {
    value < (1 << prefix_bits) - 1
}

fn position(buf: &BytesMut) -> usize {
    buf.len()
}

#[cfg(test)]
mod test {
    use super::*;
    use http::*;

    #[test]
    fn test_encode_method_get() {
        let mut encoder = Encoder::default();
        let res = encode(&mut encoder, vec![method("GET")]);
        assert_eq!(*res, [0x80 | 2]);
        assert_eq!(encoder.table.len(), 0);
    }

    #[test]
    fn test_encode_method_post() {
        let mut encoder = Encoder::default();
        let res = encode(&mut encoder, vec![method("POST")]);
        assert_eq!(*res, [0x80 | 3]);
        assert_eq!(encoder.table.len(), 0);
    }

    #[test]
    fn test_encode_method_patch() {
        let mut encoder = Encoder::default();
        let res = encode(&mut encoder, vec![method("PATCH")]);

        assert_eq!(res[0], 0b01000000 | 2); // Incremental indexing w/ name pulled from table
        assert_eq!(res[1], 0x80 | 5); // header value w/ huffman coding

        assert_eq!("PATCH", huff_decode(&res[2..7]));
        assert_eq!(encoder.table.len(), 1);

        let res = encode(&mut encoder, vec![method("PATCH")]);

        assert_eq!(1 << 7 | 62, res[0]);
        assert_eq!(1, res.len());
    }

    #[test]
    fn test_encode_indexed_name_literal_value() {
        let mut encoder = Encoder::default();
        let res = encode(&mut encoder, vec![header("content-language", "foo")]);

        assert_eq!(res[0], 0b01000000 | 27); // Indexed name
        assert_eq!(res[1], 0x80 | 2); // header value w/ huffman coding

        assert_eq!("foo", huff_decode(&res[2..4]));

        // Same name, new value should still use incremental
        let res = encode(&mut encoder, vec![header("content-language", "bar")]);
        assert_eq!(res[0], 0b01000000 | 27); // Indexed name
        assert_eq!(res[1], 0x80 | 3); // header value w/ huffman coding
        assert_eq!("bar", huff_decode(&res[2..5]));
    }

    #[test]
    fn test_repeated_headers_are_indexed() {
        let mut encoder = Encoder::default();
        let res = encode(&mut encoder, vec![header("foo", "hello")]);

        assert_eq!(&[0b01000000, 0x80 | 2], &res[0..2]);
        assert_eq!("foo", huff_decode(&res[2..4]));
        assert_eq!(0x80 | 4, res[4]);
        assert_eq!("hello", huff_decode(&res[5..]));
        assert_eq!(9, res.len());

        assert_eq!(1, encoder.table.len());

        let res = encode(&mut encoder, vec![header("foo", "hello")]);
        assert_eq!([0x80 | 62], *res);

        assert_eq!(encoder.table.len(), 1);
    }

    #[test]
    fn test_evicting_headers() {
        let mut encoder = Encoder::default();

        // Fill the table
        for i in 0..64 {
            let key = format!("x-hello-world-{:02}", i);
            let res = encode(&mut encoder, vec![header(&key, &key)]);

            assert_eq!(&[0b01000000, 0x80 | 12], &res[0..2]);
            assert_eq!(key, huff_decode(&res[2..14]));
            assert_eq!(0x80 | 12, res[14]);
            assert_eq!(key, huff_decode(&res[15..]));
            assert_eq!(27, res.len());

            // Make sure the header can be found...
            let res = encode(&mut encoder, vec![header(&key, &key)]);

            // Only check that it is found
            assert_eq!(0x80, res[0] & 0x80);
        }

        assert_eq!(4096, encoder.table.size());
        assert_eq!(64, encoder.table.len());

        // Find existing headers
        for i in 0..64 {
            let key = format!("x-hello-world-{:02}", i);
            let res = encode(&mut encoder, vec![header(&key, &key)]);
            assert_eq!(0x80, res[0] & 0x80);
        }

        // Insert a new header
        let key = "x-hello-world-64";
        let res = encode(&mut encoder, vec![header(key, key)]);

        assert_eq!(&[0b01000000, 0x80 | 12], &res[0..2]);
        assert_eq!(key, huff_decode(&res[2..14]));
        assert_eq!(0x80 | 12, res[14]);
        assert_eq!(key, huff_decode(&res[15..]));
        assert_eq!(27, res.len());

        assert_eq!(64, encoder.table.len());

        // Now try encoding entries that should exist in the table
        for i in 1..65 {
            let key = format!("x-hello-world-{:02}", i);
            let res = encode(&mut encoder, vec![header(&key, &key)]);
            assert_eq!(0x80 | (61 + (65 - i)), res[0]);
        }
    }

    #[test]
    fn test_large_headers_are_not_indexed() {
        let mut encoder = Encoder::new(128, 0);
        let key = "hello-world-hello-world-HELLO-zzz";

        let res = encode(&mut encoder, vec![header(key, key)]);

        // tern patch: plain literals (see `encode_not_indexed`).
        assert_eq!(&[0, 33], &res[..2]);
        assert_eq!(key.to_ascii_lowercase().as_bytes(), &res[2..35]);
        assert_eq!(33, res[35]);
        assert_eq!(key.as_bytes(), &res[36..]);

        assert_eq!(0, encoder.table.len());
        assert_eq!(0, encoder.table.size());
    }

    #[test]
    fn test_sensitive_headers_are_never_indexed() {
        use http::header::HeaderValue;

        let name = "my-password".parse().unwrap();
        let mut value = HeaderValue::from_bytes(b"12345").unwrap();
        value.set_sensitive(true);

        let header = Header::Field {
            name: Some(name),
            value,
        };

        // Now, try to encode the sensitive header

        let mut encoder = Encoder::default();
        let res = encode(&mut encoder, vec![header]);

        // tern patch: plain literals (see `encode_not_indexed`).
        assert_eq!(&[0b10000, 11], &res[..2]);
        assert_eq!(b"my-password", &res[2..13]);
        assert_eq!(5, res[13]);
        assert_eq!(b"12345", &res[14..]);

        // Now, try to encode a sensitive header w/ a name in the static table
        let name = "authorization".parse().unwrap();
        let mut value = HeaderValue::from_bytes(b"12345").unwrap();
        value.set_sensitive(true);

        let header = Header::Field {
            name: Some(name),
            value,
        };

        let mut encoder = Encoder::default();
        let res = encode(&mut encoder, vec![header]);

        assert_eq!(&[0b11111, 8], &res[..2]);
        assert_eq!(5, res[2]);
        assert_eq!(b"12345", &res[3..]);

        // Using the name component of a previously indexed header (without
        // sensitive flag set)

        let _ = encode(
            &mut encoder,
            vec![self::header("my-password", "not-so-secret")],
        );

        let name = "my-password".parse().unwrap();
        let mut value = HeaderValue::from_bytes(b"12345").unwrap();
        value.set_sensitive(true);

        let header = Header::Field {
            name: Some(name),
            value,
        };
        let res = encode(&mut encoder, vec![header]);

        assert_eq!(&[0b11111, 47], &res[..2]);
        assert_eq!(5, res[2]);
        assert_eq!(b"12345", &res[3..]);
    }

    #[test]
    fn test_content_length_value_not_indexed() {
        let mut encoder = Encoder::default();
        let res = encode(&mut encoder, vec![header("content-length", "1234")]);

        // tern patch: a plain literal (see `encode_not_indexed`).
        assert_eq!(&[15, 13, 4], &res[0..3]);
        assert_eq!(b"1234", &res[3..]);
        assert_eq!(7, res.len());
    }

    #[test]
    fn test_encoding_headers_with_same_name() {
        let mut encoder = Encoder::default();
        let name = "hello";

        // Encode first one
        let _ = encode(&mut encoder, vec![header(name, "one")]);

        // Encode second one
        let res = encode(&mut encoder, vec![header(name, "two")]);
        assert_eq!(&[0x40 | 62, 0x80 | 3], &res[0..2]);
        assert_eq!("two", huff_decode(&res[2..]));
        assert_eq!(5, res.len());

        // Encode the first one again
        let res = encode(&mut encoder, vec![header(name, "one")]);
        assert_eq!(&[0x80 | 63], &res[..]);

        // Now the second one
        let res = encode(&mut encoder, vec![header(name, "two")]);
        assert_eq!(&[0x80 | 62], &res[..]);
    }

    #[test]
    fn test_evicting_headers_when_multiple_of_same_name_are_in_table() {
        // The encoder only has space for 2 headers
        let mut encoder = Encoder::new(76, 0);

        let _ = encode(&mut encoder, vec![header("foo", "bar")]);
        assert_eq!(1, encoder.table.len());

        let _ = encode(&mut encoder, vec![header("bar", "foo")]);
        assert_eq!(2, encoder.table.len());

        // This will evict the first header, while still referencing the header
        // name
        let res = encode(&mut encoder, vec![header("foo", "baz")]);
        assert_eq!(&[0x40 | 63, 0, 0x80 | 3], &res[..3]);
        assert_eq!(2, encoder.table.len());

        // Try adding the same header again
        let res = encode(&mut encoder, vec![header("foo", "baz")]);
        assert_eq!(&[0x80 | 62], &res[..]);
        assert_eq!(2, encoder.table.len());
    }

    #[test]
    fn test_max_size_zero() {
        // Static table only
        let mut encoder = Encoder::new(0, 0);
        let res = encode(&mut encoder, vec![method("GET")]);
        assert_eq!(*res, [0x80 | 2]);
        assert_eq!(encoder.table.len(), 0);

        // tern patch: plain literals (see `encode_not_indexed`).
        let res = encode(&mut encoder, vec![header("foo", "bar")]);
        assert_eq!(&[0, 3], &res[..2]);
        assert_eq!(b"foo", &res[2..5]);
        assert_eq!(3, res[5]);
        assert_eq!(b"bar", &res[6..9]);
        assert_eq!(0, encoder.table.len());

        // Encode a custom value
        let res = encode(&mut encoder, vec![header("transfer-encoding", "chunked")]);
        assert_eq!(&[15, 42, 7], &res[..3]);
        assert_eq!(b"chunked", &res[3..]);
    }

    #[test]
    fn test_update_max_size_combos() {
        let mut encoder = Encoder::default();
        assert!(encoder.size_update.is_none());
        assert_eq!(4096, encoder.table.max_size());

        encoder.update_max_size(4096); // Default size
        assert!(encoder.size_update.is_none());

        encoder.update_max_size(0);
        assert_eq!(Some(SizeUpdate::One(0)), encoder.size_update);

        encoder.update_max_size(100);
        assert_eq!(Some(SizeUpdate::Two(0, 100)), encoder.size_update);

        let mut encoder = Encoder::default();
        encoder.set_max_allowed_size(8000);
        encoder.update_max_size(8000);
        assert_eq!(Some(SizeUpdate::One(8000)), encoder.size_update);

        encoder.update_max_size(100);
        assert_eq!(Some(SizeUpdate::One(100)), encoder.size_update);

        encoder.update_max_size(8000);
        assert_eq!(Some(SizeUpdate::Two(100, 8000)), encoder.size_update);

        encoder.update_max_size(4000);
        assert_eq!(Some(SizeUpdate::Two(100, 4000)), encoder.size_update);

        encoder.update_max_size(50);
        assert_eq!(Some(SizeUpdate::One(50)), encoder.size_update);
    }

    #[test]
    fn test_resizing_table() {
        let mut encoder = Encoder::default();

        // Add a header
        let _ = encode(&mut encoder, vec![header("foo", "bar")]);

        encoder.update_max_size(1);
        assert_eq!(1, encoder.table.len());

        let res = encode(&mut encoder, vec![method("GET")]);
        assert_eq!(&[32 | 1, 0x80 | 2], &res[..]);
        assert_eq!(0, encoder.table.len());

        let res = encode(&mut encoder, vec![header("foo", "bar")]);
        assert_eq!(0, res[0]);

        encoder.update_max_size(100);
        let res = encode(&mut encoder, vec![header("foo", "bar")]);
        assert_eq!(&[32 | 31, 69, 64], &res[..3]);

        encoder.update_max_size(0);
        let res = encode(&mut encoder, vec![header("foo", "bar")]);
        assert_eq!(&[32, 0], &res[..2]);
    }

    #[test]
    fn test_decreasing_table_size_without_eviction() {
        let mut encoder = Encoder::default();

        // Add a header
        let _ = encode(&mut encoder, vec![header("foo", "bar")]);

        encoder.update_max_size(100);
        assert_eq!(1, encoder.table.len());

        let res = encode(&mut encoder, vec![header("foo", "bar")]);
        assert_eq!(&[32 | 31, 69, 0x80 | 62], &res[..]);
    }

    #[test]
    fn test_nameless_header() {
        let mut encoder = Encoder::default();

        let res = encode(
            &mut encoder,
            vec![
                Header::Field {
                    name: Some("hello".parse().unwrap()),
                    value: HeaderValue::from_bytes(b"world").unwrap(),
                },
                Header::Field {
                    name: None,
                    value: HeaderValue::from_bytes(b"zomg").unwrap(),
                },
            ],
        );

        assert_eq!(&[0x40, 0x80 | 4], &res[0..2]);
        assert_eq!("hello", huff_decode(&res[2..6]));
        assert_eq!(0x80 | 4, res[6]);
        assert_eq!("world", huff_decode(&res[7..11]));

        // Next is not indexed
        // tern patch: a plain literal (see `encode_not_indexed`).
        assert_eq!(&[15, 47, 4], &res[11..14]);
        assert_eq!(b"zomg", &res[14..]);
    }

    #[test]
    fn test_large_size_update() {
        let mut encoder = Encoder::default();
        encoder.set_max_allowed_size(usize::MAX);

        encoder.update_max_size(1912930560);
        assert_eq!(Some(SizeUpdate::One(1912930560)), encoder.size_update);

        let mut dst = BytesMut::with_capacity(6);
        encoder.encode_size_updates(&mut dst);
        assert_eq!([63, 225, 129, 148, 144, 7], &dst[..]);
    }

    #[test]
    fn test_large_size_update_is_capped() {
        let mut encoder = Encoder::new(0, 0);

        encoder.update_max_size(1912930560);
        assert_eq!(
            Some(SizeUpdate::One(DEFAULT_MAX_ALLOWED_SIZE)),
            encoder.size_update
        );

        let mut dst = BytesMut::with_capacity(3);
        encoder.encode_size_updates(&mut dst);
        assert_eq!([63, 225, 31], &dst[..]);
        assert_eq!(DEFAULT_MAX_ALLOWED_SIZE, encoder.table.max_size());
    }

    #[test]
    #[ignore]
    fn test_evicted_overflow() {
        // Not sure what the best way to do this is.
    }

    // tern patch: a block encoded from borrowed fields (what h2 sends) is
    // the block encoded from the same fields moved out of their HeaderMap,
    // and leaves the table the same: further values of a name, a sensitive
    // value, a value too large for the table, names in and out of the
    // static table, a field inserted by the first block and found by the
    // second.
    #[test]
    fn test_borrowed_block_encodes_as_owned_fields() {
        let mut fields = HeaderMap::new();
        for (name, value) in [
            ("x-custom", "one"),
            ("content-type", "text/plain"),
            ("set-cookie", "a=1"),
            ("x-custom", "two"),
            ("content-length", "100"),
            ("x-unindexed", "v"),
            ("x-custom", "three"),
            ("set-cookie", "b=2"),
        ] {
            fields.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        let mut secret = HeaderValue::from_static("token");
        secret.set_sensitive(true);
        fields.append(header::AUTHORIZATION, secret);
        let large = "x".repeat(3100);
        fields.append(
            HeaderName::from_static("x-large"),
            HeaderValue::from_str(&large).unwrap(),
        );
        let status = StatusCode::from_u16(203).unwrap();

        let mut owned = Encoder::new(4096, 16);
        let mut borrowed = Encoder::new(4096, 16);
        for _ in 0..2 {
            let mut items: Vec<Header<Option<HeaderName>>> = vec![Header::Status(status)];
            items.extend(
                fields
                    .clone()
                    .into_iter()
                    .map(|(name, value)| Header::Field { name, value }),
            );
            let want = encode(&mut owned, items);

            let mut got = BytesMut::new();
            borrowed.encode_block([HeaderRef::Status(&status)], &fields, None, &[], &mut got);

            assert_eq!(got, want);
            assert_eq!(borrowed.table.len(), owned.table.len());
            assert_eq!(borrowed.table.size(), owned.table.size());
        }
        assert!(owned.table.len() >= 3);
    }

    // tern patch: a block given as a list encodes as the same fields owned,
    // each with its name (a repeated name is looked up again, not reused),
    // over two successive blocks; sensitive and too-large values included.
    #[test]
    fn test_listed_block_encodes_as_owned_named_fields() {
        let mut secret = HeaderValue::from_static("token");
        secret.set_sensitive(true);
        let large = "x".repeat(3100);
        let list: Vec<(HeaderName, HeaderValue)> = vec![
            (header::SERVER, HeaderValue::from_static("nginx")),
            (
                HeaderName::from_static("x-custom"),
                HeaderValue::from_static("one"),
            ),
            (header::SET_COOKIE, HeaderValue::from_static("a=1")),
            (header::SET_COOKIE, HeaderValue::from_static("b=2")),
            (header::CONTENT_LENGTH, HeaderValue::from_static("100")),
            (header::AUTHORIZATION, secret),
            (
                HeaderName::from_static("x-large"),
                HeaderValue::from_str(&large).unwrap(),
            ),
            (
                HeaderName::from_static("x-custom"),
                HeaderValue::from_static("two"),
            ),
        ];
        let status = StatusCode::OK;

        let mut owned = Encoder::new(4096, 16);
        let mut listed = Encoder::new(4096, 16);
        for _ in 0..2 {
            let mut items: Vec<Header<Option<HeaderName>>> = vec![Header::Status(status)];
            items.extend(list.iter().cloned().map(|(name, value)| Header::Field {
                name: Some(name),
                value,
            }));
            let want = encode(&mut owned, items);

            let mut got = BytesMut::new();
            listed.encode_block(
                [HeaderRef::Status(&status)],
                &HeaderMap::new(),
                None,
                &list,
                &mut got,
            );

            assert_eq!(got, want);
            assert_eq!(listed.table.len(), owned.table.len());
            assert_eq!(listed.table.size(), owned.table.size());
        }
        assert!(owned.table.len() >= 3);
    }

    // tern patch: fields written again from `hpack::repeat` are the bytes a
    // look-up in the table writes, through insertions, evictions, a size
    // update, sensitive and long values, and a list that changes length.
    #[test]
    fn repeated_fields_encode_as_a_table_look_up_does() {
        let field = |n: &str, v: &str| {
            (
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_bytes(v.as_bytes()).unwrap(),
            )
        };
        let request_id = field("x-request-id", "a");
        let long = "l".repeat(200);
        let heads = |date: &str, id: &str, n: usize| {
            let mut id_field = request_id.clone();
            id_field.1 = HeaderValue::from_bytes(id.as_bytes()).unwrap();
            id_field.1.set_sensitive(true);
            let mut list = vec![
                field("server", "nginx/1.22.1"),
                field("date", date),
                field("content-type", "text/html"),
                field("content-length", "100"),
                field("etag", "\"6931f-64\""),
                field("x-long", &long),
                id_field,
                field("accept-ranges", "bytes"),
            ];
            list.truncate(n);
            list
        };
        // A small table: the inserted dates evict the older entries.
        let mut cached = Encoder::new(256, 0);
        let mut looked_up = Encoder::new(256, 0);
        let empty = HeaderMap::new();
        let dates = ["Thu, 26 Nov 2026 13:40:00 GMT", "Thu, 26 Nov 2026 13:40:01 GMT"];
        for round in 0..40 {
            if round == 20 {
                cached.update_max_size(128);
                looked_up.update_max_size(128);
            }
            let list = heads(dates[round / 7 % 2], &round.to_string(), 8 - round % 3);
            let status = StatusCode::OK;
            let (mut a, mut b) = (BytesMut::new(), BytesMut::new());
            cached.encode_block([HeaderRef::Status(&status)], &empty, None, &list, &mut a);
            looked_up.repeats = Repeats::default();
            looked_up.encode_block([HeaderRef::Status(&status)], &empty, None, &list, &mut b);
            assert_eq!(a, b, "round {round}");
            assert_eq!(cached.table.size(), looked_up.table.size());
        }
        assert!(cached.repeated > 60, "only {} fields repeated", cached.repeated);
        assert_eq!(looked_up.repeated, 0);
    }

    /// tern patch: a sensitive request ID whose name is in the table (one
    /// ID sent indexable now and then, as tern does) is written after the
    /// name's index kept from the last list, as the look-up writes it.
    #[test]
    fn a_sensitive_fields_name_index_is_kept_and_written_as_looked_up() {
        let name = HeaderName::from_static("x-request-id");
        let server = (
            HeaderName::from_static("server"),
            HeaderValue::from_static("nginx"),
        );
        let mut cached = Encoder::new(256, 0);
        let mut looked_up = Encoder::new(256, 0);
        let empty = HeaderMap::new();
        for round in 0..30 {
            if round == 15 {
                cached.update_max_size(128);
                looked_up.update_max_size(128);
            }
            let mut id = HeaderValue::from_str(&format!("id-{round:04}")).unwrap();
            // Every seventh indexable: the name (and that value) enter
            // the table, evicting older entries of the small table.
            id.set_sensitive(round % 7 != 0);
            let list = vec![server.clone(), (name.clone(), id)];
            let status = StatusCode::OK;
            let (mut a, mut b) = (BytesMut::new(), BytesMut::new());
            cached.encode_block([HeaderRef::Status(&status)], &empty, None, &list, &mut a);
            looked_up.repeats = Repeats::default();
            looked_up.encode_block([HeaderRef::Status(&status)], &empty, None, &list, &mut b);
            assert_eq!(a, b, "round {round}");
            assert_eq!(cached.table.size(), looked_up.table.size());
        }
        // The server field and most IDs' names were written from kept bytes.
        assert!(cached.repeated > 35, "only {} fields repeated", cached.repeated);
        assert_eq!(looked_up.repeated, 0);
    }

    /// tern patch: shared fields written from the bytes kept for them are
    /// the bytes the same fields given as a list encode to (a fresh
    /// encoder's, with no kept bytes of any kind), through new dates
    /// (insertions that evict), size updates, a second `SharedFields` with
    /// equal fields and a list after the shared fields.
    #[test]
    fn shared_fields_encode_as_the_same_list_does() {
        let field = |n: &str, v: &str| {
            (
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_bytes(v.as_bytes()).unwrap(),
            )
        };
        let head = |date: &str| -> SharedFields {
            vec![
                field("server", "nginx/1.22.1"),
                field("date", date),
                field("content-type", "text/html"),
                field("content-length", "100"),
                field("etag", "\"6931f-64\""),
            ]
            .into()
        };
        let dates = ["Thu, 26 Nov 2026 13:40:00 GMT", "Thu, 26 Nov 2026 13:40:01 GMT"];
        let mut heads: Vec<SharedFields> = dates.iter().map(|d| head(d)).collect();
        let mut shared = Encoder::new(4096, 0);
        let mut listed = Encoder::new(4096, 0);
        let empty = HeaderMap::new();
        let status = StatusCode::OK;
        for round in 0..40 {
            if round == 20 {
                // Each head's fields no longer fit: inserted and evicted
                // on every head.
                shared.update_max_size(128);
                listed.update_max_size(128);
            }
            if round == 27 {
                shared.update_max_size(4096);
                listed.update_max_size(4096);
            }
            if round == 30 {
                // Equal fields in another allocation.
                heads[0] = head(dates[0]);
            }
            let fields = &heads[round / 7 % 2];
            let mut id = HeaderValue::from_str(&format!("id-{round:04}")).unwrap();
            id.set_sensitive(true);
            let list = vec![(HeaderName::from_static("x-request-id"), id)];
            let (mut a, mut b) = (BytesMut::new(), BytesMut::new());
            shared.encode_block(
                [HeaderRef::Status(&status)],
                &empty,
                Some(fields),
                &list,
                &mut a,
            );
            let mut whole: Vec<_> = fields.to_vec();
            whole.extend(list.iter().cloned());
            listed.repeats = Repeats::default();
            listed.encode_block([HeaderRef::Status(&status)], &empty, None, &whole, &mut b);
            assert_eq!(a, b, "round {round}");
            assert_eq!(shared.table.size(), listed.table.size());
        }
        // Written from kept bytes: the rounds after one that kept them (a
        // round whose encoding left the table as it was) for the same
        // allocation, the table unchanged since: 2-6, 9-13, 15-19 (20 on:
        // size updates and evictions; 28 inserts the evicted date),
        // 31-34 (30 kept the new allocation's) and 36-39.
        assert_eq!(shared.shared_written, 5 + 5 + 5 + 4 + 4);
        assert_eq!(listed.repeated, 0);
    }

    fn encode(e: &mut Encoder, hdrs: Vec<Header<Option<HeaderName>>>) -> BytesMut {
        let mut dst = BytesMut::with_capacity(1024);
        e.encode(hdrs, &mut dst);
        dst
    }

    fn method(s: &str) -> Header<Option<HeaderName>> {
        Header::Method(Method::from_bytes(s.as_bytes()).unwrap())
    }

    fn header(name: &str, val: &str) -> Header<Option<HeaderName>> {
        let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
        let value = HeaderValue::from_bytes(val.as_bytes()).unwrap();

        Header::Field {
            name: Some(name),
            value,
        }
    }

    fn huff_decode(src: &[u8]) -> BytesMut {
        let mut buf = BytesMut::new();
        huffman::decode(src, &mut buf).unwrap()
    }
}
