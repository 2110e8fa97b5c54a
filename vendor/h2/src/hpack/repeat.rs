//! tern patch: the bytes each field of the last field list (a response head
//! given as a list, `SendResponse::send_response_fields`) encoded to, kept
//! per position, so a field that repeats is written again without a table
//! look-up.
//!
//! A field's encoding is a function of the field (name, value, whether it
//! is sensitive) and of the dynamic table (its entries and its size
//! limit). An entry is kept only for a field whose encoding left the table
//! as it was (found indexed, or sent without indexing), together with the
//! table's change count at that time (`Table::changes`); it is used only
//! while that count has not moved and for the same field. So the bytes
//! written are the bytes the look-up would write, and the table is as the
//! look-up would leave it.
//!
//! Sensitive values (request IDs, which differ on every response) are not
//! kept, only the bytes of their name's index when the name is in the
//! table (`Encoder::encode_sensitive`); long fields are not kept at all:
//! memory per connection stays within [`MAX_FIELDS`]
//! entries of [`MAX_VALUE`] + [`MAX_ENCODED`] bytes each, and the entries'
//! records (under 2.2 KiB).

use http::header::{HeaderName, HeaderValue};

/// Positions kept: the fields of a typical response head.
const MAX_FIELDS: usize = 12;

/// Longest value kept (`date`, `etag`, `last-modified` and `server` fit).
const MAX_VALUE: usize = 48;

/// Longest encoding kept (an indexed field is one or two bytes; a value
/// sent after its name's index a few more than the value).
const MAX_ENCODED: usize = MAX_VALUE + 8;

#[derive(Debug, Default)]
pub(crate) struct Repeats {
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    /// None: nothing kept at this position.
    name: Option<HeaderName>,
    /// `bytes` holds a sensitive field's name part only (its value is new
    /// every time: [`Repeats::find_name`]).
    name_only: bool,
    /// The table's change count the encoding is valid for.
    changes: u64,
    /// The value's bytes, then the field's encoded bytes.
    bytes: Vec<u8>,
    value_len: usize,
}

impl Repeats {
    /// The encoded bytes of the field at `position` if it is the field kept
    /// there and the table has not changed since (`changes`).
    #[inline]
    pub(crate) fn find(
        &self,
        position: usize,
        name: &HeaderName,
        value: &HeaderValue,
        changes: u64,
    ) -> Option<&[u8]> {
        let e = self.entries.get(position)?;
        if e.changes != changes
            || value.is_sensitive()
            || e.name_only
            || e.name.as_ref() != Some(name)
        {
            return None;
        }
        let (kept, encoded) = e.bytes.split_at(e.value_len);
        (kept == value.as_bytes()).then_some(encoded)
    }

    /// The bytes a sensitive field named `name` at `position` began with
    /// (its name's index, never indexed), if kept there and the table has
    /// not changed since (`changes`).
    #[inline]
    pub(crate) fn find_name(
        &self,
        position: usize,
        name: &HeaderName,
        changes: u64,
    ) -> Option<&[u8]> {
        let e = self.entries.get(position)?;
        (e.changes == changes && e.name_only && e.name.as_ref() == Some(name))
            .then_some(&e.bytes[..])
    }

    /// Keeps `prefix` as the name part of the sensitive field at
    /// `position`, valid while the table's change count is `changes`;
    /// `None` keeps nothing there.
    pub(crate) fn keep_name(
        &mut self,
        position: usize,
        name: &HeaderName,
        prefix: Option<(&[u8], u64)>,
    ) {
        let Some(e) = self.entry(position) else {
            return;
        };
        match prefix {
            Some((prefix, changes)) if prefix.len() <= MAX_ENCODED => {
                if e.name.as_ref() != Some(name) {
                    e.name = Some(name.clone());
                }
                e.name_only = true;
                e.changes = changes;
                e.bytes.clear();
                e.bytes.extend_from_slice(prefix);
                e.value_len = 0;
            }
            _ => e.name = None,
        }
    }

    /// The entry at `position`, made if it is the next one; None past
    /// [`MAX_FIELDS`] or a gap.
    fn entry(&mut self, position: usize) -> Option<&mut Entry> {
        if position > self.entries.len() || position >= MAX_FIELDS {
            return None;
        }
        if position == self.entries.len() {
            // Room for every position at once: no growth past it.
            self.entries.reserve_exact(MAX_FIELDS - position);
            self.entries.push(Entry {
                name: None,
                name_only: false,
                changes: 0,
                // Its room, made once: a kept field never needs more.
                bytes: Vec::with_capacity(MAX_VALUE + MAX_ENCODED),
                value_len: 0,
            });
        }
        self.entries.get_mut(position)
    }

    /// Keeps `encoded` as the field at `position`'s bytes, valid while the
    /// table's change count is `changes`; `None` when the encoding changed
    /// the table (nothing is kept).
    pub(crate) fn keep(
        &mut self,
        position: usize,
        name: &HeaderName,
        value: &HeaderValue,
        encoded: Option<(&[u8], u64)>,
    ) {
        let Some(e) = self.entry(position) else {
            return;
        };
        match encoded {
            Some((encoded, changes))
                if !value.is_sensitive() && value.len() <= MAX_VALUE && encoded.len() <= MAX_ENCODED =>
            {
                if e.name.as_ref() != Some(name) {
                    e.name = Some(name.clone());
                }
                e.name_only = false;
                e.changes = changes;
                e.bytes.clear();
                e.bytes.extend_from_slice(value.as_bytes());
                e.bytes.extend_from_slice(encoded);
                e.value_len = value.len();
            }
            _ => e.name = None,
        }
    }
}
