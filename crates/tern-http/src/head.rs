//! HTTP/1.1 message heads: finding their end, strict syntax checks, parsing.
//!
//! A head is parsed in one pass (the `parse` module) that refuses what RFC
//! 9112 lets a lenient parser accept and a request smuggler exploits: bare
//! LF, bare CR, NUL, obsolete line folding and whitespace between a field
//! name and its colon. A head either passes all of them or is refused, so
//! the backend never sees a head that two parsers could read two ways.

use std::ops::Range;

use crate::edits::FieldEdits;
pub use crate::syntax::{check_head_syntax, find_head_end};
use crate::HttpError;

mod kept;
mod kind;
pub(crate) use kind::length_bit;
use kind::token_eq;
pub use kind::FieldKind;

/// Most header fields a head may carry; more is answered like an oversized head (431).
pub const MAX_HEADERS: usize = 128;

/// Default bound on the size of a request head (request line and fields): 64 KiB.
/// A client that sends more without finishing its head gets 431.
pub const DEFAULT_MAX_HEAD_BYTES: usize = 64 * 1024;

/// The bit of [`Fields::kinds`] (above every [`FieldKind`]'s) set when a
/// Connection field names some field other than `keep-alive`.
const CONNECTION_NAMES_FIELDS: u16 = 1 << 15;

/// The bit of [`Fields::kinds`] set when a Connection field lists `close`.
const CONNECTION_CLOSE: u16 = 1 << 14;

/// The bit of [`Fields::kinds`] set when more than one Content-Length
/// field came (refused by the framing rules, whatever their values).
const CONTENT_LENGTH_TWICE: u16 = 1 << 13;

// The bits above lie beyond every kind's ([`FieldKind::bit`]).
const _: () = assert!((1 << (FieldKind::Other as u16)) < CONTENT_LENGTH_TWICE);

/// A header field, by where its parts lie in [`Fields::raw`] (a head is
/// far below 4 GiB: the parser refuses larger ones).
#[derive(Debug, Clone)]
pub(crate) struct Field {
    /// Where the field's line, and so its name, starts: the line ends
    /// where the next one starts (the last, before the head's empty line).
    pub(crate) line: u32,
    pub(crate) name_end: u32,
    pub(crate) value_start: u32,
    pub(crate) value_end: u32,
    pub(crate) kind: FieldKind,
}

impl Field {
    fn name(&self) -> Range<usize> {
        self.line as usize..self.name_end as usize
    }

    fn value(&self) -> Range<usize> {
        self.value_start as usize..self.value_end as usize
    }
}

/// The parts of a head shared by requests and responses: the raw bytes and
/// the fields found in them, in the order received.
///
/// A `Fields` can be refilled by the next head on the same connection,
/// keeping its allocations: a keepalive request parses without allocating.
#[derive(Debug, Clone, Default)]
pub struct Fields {
    raw: Vec<u8>,
    /// A request's method and target (the parser checked the target is
    /// UTF-8, so keeping them as a `String` hands out `&str` without
    /// validating it again). Field names are read from `raw`: they are
    /// short tokens, and copying them here cost more per head than
    /// checking the few that are ever asked for.
    text: String,
    pub(crate) fields: Vec<Field>,
    /// One bit per [`FieldKind`] present: a lookup of a kind the head does
    /// not carry (most heads have no Transfer-Encoding, Upgrade, Expect...)
    /// returns at once instead of walking every field.
    pub(crate) kinds: u16,
    /// Where the first Content-Length field is in `fields` (meaningful
    /// while `kinds` has [`FieldKind::ContentLength`]): the framing rules
    /// read it without a walk of every field, twice, per head.
    length_at: u8,
    /// Set when everything above is what the parser read from exactly
    /// `raw`, a response head it accepted whole, with that head's status
    /// line: the next response that starts with the same bytes reads the
    /// same (`parse::response_again`).
    pub(crate) response_read: Option<ResponseLine>,
    /// The field lines last written from this head, for writing it again
    /// (forgotten whenever the head changes).
    pub(crate) kept: kept::KeptLines,
}

/// A response's status line as the parser read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResponseLine {
    pub(crate) status: u16,
    pub(crate) minor_version: u8,
    pub(crate) reason: Range<usize>,
}

impl Fields {
    /// The name of `f`, as sent.
    #[inline]
    fn name(&self, f: &Field) -> &str {
        // The parser records only token characters (ASCII) as a name, so
        // this never fails.
        std::str::from_utf8(&self.raw[f.name()]).unwrap_or_default()
    }

    /// Iterates `(name, value)` pairs in the order received (names as sent).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.fields
            .iter()
            .map(move |f| (self.name(f), &self.raw[f.value()]))
    }

    /// Iterates `(name, value, kind)` in the order received.
    pub fn iter_kinds(&self) -> impl Iterator<Item = (&str, &[u8], FieldKind)> {
        self.fields
            .iter()
            .map(move |f| (self.name(f), &self.raw[f.value()], f.kind))
    }

    /// Iterates `(name, kind, value range)` in the order received, each
    /// name as its bytes (no UTF-8 check per name, about a hundred
    /// instructions each: the response heads compare bytes anyway) and each
    /// range indexing [`Fields::raw`]: a caller that needs owned values can
    /// copy the raw bytes once and share them among all values.
    pub fn iter_spans_raw(&self) -> impl Iterator<Item = (&[u8], FieldKind, Range<usize>)> {
        self.fields
            .iter()
            .map(move |f| (&self.raw[f.name()], f.kind, f.value()))
    }

    /// The raw bytes the value ranges of [`Fields::iter_spans_raw`] index.
    pub fn raw(&self) -> &[u8] {
        &self.raw
    }

    /// Bytes held for raw heads (kept across refills).
    pub fn raw_capacity(&self) -> usize {
        self.raw.capacity()
    }

    /// The value of the first field named `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|f| self.raw[f.name()].eq_ignore_ascii_case(name.as_bytes()))
            .map(|f| &self.raw[f.value()])
    }

    /// All values of fields named `name` (case-insensitive).
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        // Compared as bytes: no name is made a `&str` to be compared.
        self.fields
            .iter()
            .filter(move |f| self.raw[f.name()].eq_ignore_ascii_case(name.as_bytes()))
            .map(move |f| &self.raw[f.value()])
    }

    /// The value of the first field of `kind`.
    pub fn first(&self, kind: FieldKind) -> Option<&[u8]> {
        self.all(kind).next()
    }

    /// All values of fields of `kind`.
    pub fn all(&self, kind: FieldKind) -> impl Iterator<Item = &[u8]> + '_ {
        let fields = if self.has(kind) {
            &self.fields[..]
        } else {
            &[]
        };
        fields
            .iter()
            .filter(move |f| f.kind == kind)
            .map(move |f| &self.raw[f.value()])
    }

    /// True when some field has `kind`.
    pub fn has(&self, kind: FieldKind) -> bool {
        self.kinds & kind.bit() != 0
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True when the head has no fields.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// True when a comma-separated field named `name` lists `token`
    /// (case-insensitive), as `Connection: keep-alive, Upgrade` lists `upgrade`.
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.get_all(name).any(|v| list_has(v, token))
    }

    /// Like [`Fields::has_token`] for fields of `kind`.
    pub fn kind_has_token(&self, kind: FieldKind, token: &str) -> bool {
        self.all(kind).any(|v| list_has(v, token))
    }

    /// True when a `Connection` field names some field other than
    /// `keep-alive` (which is hop-by-hop anyway): only then can a field be
    /// hop-by-hop because Connection names it, and only then is it worth
    /// looking each field up in the Connection tokens.
    pub fn connection_names_fields(&self) -> bool {
        self.kinds & CONNECTION_NAMES_FIELDS != 0
    }

    /// Notes a field of `kind` with `value`, about to be pushed as the
    /// next of `fields`, in the set of kinds present (and whether a
    /// Connection field names other fields, and where the Content-Length
    /// is: found once while parsing, asked for by every head written from
    /// this one).
    #[inline]
    pub(crate) fn note_kind(&mut self, kind: FieldKind, value: &[u8]) {
        match kind {
            FieldKind::Connection => self.note_connection(value),
            FieldKind::ContentLength if self.has(kind) => self.kinds |= CONTENT_LENGTH_TWICE,
            FieldKind::ContentLength => {
                // A head has at most MAX_HEADERS (128) fields: the index fits.
                self.length_at = u8::try_from(self.fields.len()).unwrap_or(u8::MAX);
            }
            _ => {}
        }
        self.kinds |= kind.bit();
    }

    /// The Content-Length field's value when the head has exactly one
    /// (`Ok(None)`: none; `Err(())`: more than one), as the parser noted it.
    pub(crate) fn only_content_length(&self) -> Result<Option<&[u8]>, ()> {
        if !self.has(FieldKind::ContentLength) {
            return Ok(None);
        }
        if self.kinds & CONTENT_LENGTH_TWICE != 0 {
            return Err(());
        }
        match self.fields.get(usize::from(self.length_at)) {
            Some(f) if f.kind == FieldKind::ContentLength => Ok(Some(&self.raw[f.value()])),
            // Not where the parser noted it (cannot happen: the note and the
            // fields are filled and cleared together): the walk decides.
            _ => {
                let mut all = self.all(FieldKind::ContentLength);
                match (all.next(), all.next()) {
                    (first, None) => Ok(first),
                    _ => Err(()),
                }
            }
        }
    }

    /// The tokens of a Connection field's `value`, for [`Fields::note_kind`].
    fn note_connection(&mut self, value: &[u8]) {
        // The usual value is answered without splitting it. token_eq is
        // exact for field-value bytes too: of those, only the letters'
        // other case becomes a lowercase letter or '-' with the 0x20 bit
        // set (CR would become '-', and a value holds none).
        if token_eq(value, b"keep-alive") {
            return;
        }
        for token in value.split(|&b| b == b',').map(trim_ows) {
            if token.eq_ignore_ascii_case(b"close") {
                self.kinds |= CONNECTION_CLOSE;
            }
            if !token.is_empty() && !token.eq_ignore_ascii_case(b"keep-alive") {
                self.kinds |= CONNECTION_NAMES_FIELDS;
            }
        }
    }

    /// True when a Connection field lists `close`: the sender closes the
    /// connection after this message.
    pub fn asks_close(&self) -> bool {
        self.kinds & CONNECTION_CLOSE != 0
    }

    /// Appends the lines (name to CRLF) of the fields `keep` accepts to
    /// `out`, byte for byte as received: the head passed the strict syntax
    /// check, so they need no rewriting. Consecutive kept lines go in one
    /// copy; a field per copy (name, ": ", value, CRLF) cost four.
    pub fn copy_lines(&self, out: &mut Vec<u8>, mut keep: impl FnMut(&str, FieldKind) -> bool) {
        self.copy_runs(out, |f| !keep(self.name(f), f.kind));
    }

    /// Like [`Fields::copy_lines`] when no Connection field names other
    /// fields: the lines of kinds outside `dropped` (a set of
    /// [`FieldKind::bits`]) whose names `edits` does not drop. A head that
    /// carries none of those kinds and no name of a dropped name's length
    /// goes in one copy; no other name is compared.
    pub fn copy_lines_except(&self, out: &mut Vec<u8>, dropped: u16, edits: &FieldEdits<'_>) {
        let lengths = edits.dropped_lengths();
        let goes = |f: &Field| {
            dropped & f.kind.bit() != 0
                || (lengths & length_bit(f.name().len()) != 0
                    && edits.drops_bytes(&self.raw[f.name()]))
        };
        if self.kinds & dropped == 0 && !self.fields.iter().any(goes) {
            if let Some(first) = self.fields.first() {
                out.extend_from_slice(&self.raw[first.line as usize..self.fields_end()]);
            }
            return;
        }
        self.copy_runs(out, goes);
    }

    /// Appends the lines of the fields `skip` refuses, consecutive lines
    /// in one copy.
    fn copy_runs(&self, out: &mut Vec<u8>, mut skip: impl FnMut(&Field) -> bool) {
        let fields_end = self.fields_end();
        let mut run = 0..0;
        for (i, f) in self.fields.iter().enumerate() {
            if skip(f) {
                continue;
            }
            let start = f.line as usize;
            let end = self
                .fields
                .get(i + 1)
                .map_or(fields_end, |next| next.line as usize);
            if run.end != start {
                out.extend_from_slice(&self.raw[run]);
                run = start..start;
            }
            run.end = end;
        }
        out.extend_from_slice(&self.raw[run]);
    }

    /// Where the last field line ends: the head ends with CRLF CRLF (the
    /// parser refuses bare LFs), so before the final CRLF.
    fn fields_end(&self) -> usize {
        self.raw.len().saturating_sub(2)
    }

    /// Empties this value for the next head, keeping its allocations;
    /// returns the text store as bytes, to be filled and handed back with
    /// [`Fields::set_text`].
    pub(crate) fn reset(&mut self) -> Vec<u8> {
        self.kept.clear();
        self.fields.clear();
        self.kinds = 0;
        self.response_read = None;
        let mut text = std::mem::take(&mut self.text).into_bytes();
        text.clear();
        text
    }

    /// Keeps the bytes of the head just read (the fields' places index them).
    pub(crate) fn set_raw(&mut self, raw: &[u8]) {
        self.raw.clear();
        self.raw.extend_from_slice(raw);
    }

    /// Drops what a refused head left half-read: no field refers to a
    /// text store that was not handed back.
    pub(crate) fn forget(&mut self) {
        self.kept.clear();
        self.fields.clear();
        self.kinds = 0;
        self.response_read = None;
        self.raw.clear();
    }

    /// Takes back the text store filled since [`Fields::reset`]: one UTF-8
    /// check for all of it (a method is an ASCII token, so only a request
    /// target can fail it).
    pub(crate) fn set_text(&mut self, text: Vec<u8>) -> Result<(), HttpError> {
        self.text = String::from_utf8(text)
            .map_err(|_| HttpError::Malformed("request target is not UTF-8"))?;
        Ok(())
    }
}

fn list_has(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| trim_ows(t).eq_ignore_ascii_case(token.as_bytes()))
}

/// A parsed request head.
#[derive(Debug, Clone, Default)]
pub struct RequestHead {
    pub(crate) method: Range<usize>,
    pub(crate) target: Range<usize>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    /// The header fields.
    pub fields: Fields,
}

impl RequestHead {
    /// The method, as sent (methods are case-sensitive).
    pub fn method(&self) -> &str {
        &self.fields.text[self.method.clone()]
    }

    /// The request target, as sent.
    pub fn target(&self) -> &str {
        &self.fields.text[self.target.clone()]
    }

    /// True for `HEAD`, whose response never has a body.
    pub fn is_head(&self) -> bool {
        self.method() == "HEAD"
    }
}

/// Parses a request head of exactly `raw.len()` bytes (as found by
/// [`find_head_end`]), refusing what the strict syntax rules refuse.
pub fn parse_request(raw: &[u8]) -> Result<RequestHead, HttpError> {
    let mut head = RequestHead::default();
    parse_request_into(raw, &mut head)?;
    Ok(head)
}

/// Like [`parse_request`], refilling `head` (and keeping its allocations).
pub fn parse_request_into(raw: &[u8], head: &mut RequestHead) -> Result<(), HttpError> {
    crate::parse::request(raw, head)
}

/// Reads the request head at the start of `buf` in one pass, when all of
/// it is there and it passes every rule: its length, and `head` filled, as
/// [`find_head_end`] (from the start of `buf`, with `max`) and then
/// [`parse_request_into`] would have found. `None` leaves the answer to
/// those two: a head not all there yet, refused, or beyond `max`.
///
/// The usual head arrives whole in one read, and then this saves a search
/// for its end before parsing it: a parser that reached the head's first
/// empty line with every line ended by CRLF has found that end (the
/// first LF followed by LF or CRLF). Empty lines before the start line are
/// left to the two (find_head_end could take one for the end). A head
/// that repeats the one `head` holds byte for byte is not parsed again.
pub fn parse_request_prefix(buf: &[u8], max: usize, head: &mut RequestHead) -> Option<usize> {
    prefix_allowed(buf)?;
    if let Some(len) = crate::parse::request_again(buf, max, head) {
        return Some(len);
    }
    crate::parse::request_to(buf, crate::parse::End::First, head)
        .ok()
        .filter(|&len| len <= max)
}

/// [`parse_request_prefix`] for a response head ([`parse_response_into`]).
///
/// A backend that sends the same head again (a static file's within the
/// second of its Date, a fixed API answer) is not parsed again: when `buf`
/// starts with the bytes of the head `head` holds, `head` is what a parse
/// would make of them, and it is kept (one comparison where the parse
/// cost about 2,400 instructions for nginx's head).
pub fn parse_response_prefix(buf: &[u8], max: usize, head: &mut ResponseHead) -> Option<usize> {
    prefix_allowed(buf)?;
    if let Some(len) = crate::parse::response_again(buf, head) {
        return Some(len).filter(|&len| len <= max);
    }
    crate::parse::response_to(buf, crate::parse::End::First, head)
        .ok()
        .filter(|&len| len <= max)
}

fn prefix_allowed(buf: &[u8]) -> Option<()> {
    match buf.first() {
        Some(b'\r' | b'\n') | None => None,
        Some(_) => Some(()),
    }
}

/// A parsed response head.
#[derive(Debug, Clone, Default)]
pub struct ResponseHead {
    /// The status code.
    pub status: u16,
    pub(crate) reason: Range<usize>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    /// The header fields.
    pub fields: Fields,
}

impl ResponseHead {
    /// The reason phrase, as sent (may be empty).
    pub fn reason(&self) -> &[u8] {
        &self.fields.raw[self.reason.clone()]
    }

    /// True for 1xx responses other than 101: more responses follow.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }
}

/// Parses a response head of exactly `raw.len()` bytes. Backends get the
/// same strict syntax check as clients: a response that could be read two
/// ways is as dangerous as a request.
pub fn parse_response(raw: &[u8]) -> Result<ResponseHead, HttpError> {
    let mut head = ResponseHead::default();
    parse_response_into(raw, &mut head)?;
    Ok(head)
}

/// Like [`parse_response`], refilling `head` (and keeping its allocations).
pub fn parse_response_into(raw: &[u8], head: &mut ResponseHead) -> Result<(), HttpError> {
    crate::parse::response(raw, head)
}

/// Trims optional whitespace (SP / HTAB) from both ends.
pub fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests;
