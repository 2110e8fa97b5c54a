//! One pass over an HTTP/1.1 head that both enforces tern's syntax rules
//! and records where each part is.
//!
//! A head is read left to right once: the start line, then each field
//! line's name (token characters up to the colon), its value (field
//! characters up to CRLF, outer whitespace left out), each byte classed by
//! one table lookup. Every byte that is not where the grammar allows it
//! refuses the head, so the rules of [`crate::syntax::check_head_syntax`]
//! (bare LF, bare CR, NUL, obsolete line folding, whitespace before a
//! colon) hold by construction: none of those bytes has a place in the
//! grammar below. What the head accepts is what `httparse` (default
//! settings) accepts after that check, and it reads the same parts: the
//! fuzz targets `request_head` and `response_head` compare the two on the
//! same bytes, and
//! `tern_http::reference` (cargo feature `reference`) keeps that pipeline for it.
//!
//! Why not `httparse` any more: it cannot refuse what tern refuses, so a
//! separate pass over the head checked the rules first, and a third pass
//! copied its results into tern's field table and classed each name.
//! Measured with callgrind on a keepalive request (100 B response from
//! nginx), the three cost about 4,000 instructions per request for the
//! request and response heads together; this pass does all of it.
//!
//! ```text
//! request-line  = method SP request-target SP HTTP-version CRLF
//! status-line   = HTTP-version SP 3DIGIT [ SP reason-phrase ] CRLF
//! field-line    = token ":" *( SP / HTAB ) field-value *( SP / HTAB ) CRLF
//! head          = *CRLF start-line *field-line CRLF
//! ```

use crate::head::{Field, FieldKind, Fields, RequestHead, ResponseHead, ResponseLine, MAX_HEADERS};
use crate::HttpError;

/// A `tchar` (RFC 9110 section 5.6.2): method and field-name bytes.
const TOKEN: u8 = 1;
/// A field-value or reason-phrase byte: HTAB, SP, visible ASCII, obs-text.
const TEXT: u8 = 2;
/// A request-target byte: visible ASCII and obs-text (as `httparse`; the
/// target must also be UTF-8).
const TARGET: u8 = 4;

/// The class bits of every byte value.
static CLASS: [u8; 256] = classes();

const fn classes() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut b = 0usize;
    while b < 256 {
        let c = b as u8;
        let mut class = 0;
        let tchar = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        if tchar {
            class |= TOKEN;
        }
        if c == b'\t' || (c >= 0x20 && c != 0x7f) {
            class |= TEXT;
        }
        if c > 0x20 && c != 0x7f {
            class |= TARGET;
        }
        table[b] = class;
        b += 1;
    }
    table
}

/// Where the run of bytes of `class` that starts at `at` ends.
#[inline]
fn scan(raw: &[u8], at: usize, class: u8) -> usize {
    match raw.get(at..) {
        Some(rest) => rest
            .iter()
            .position(|&b| CLASS[b as usize] & class == 0)
            .map_or(raw.len(), |n| at + n),
        None => raw.len(),
    }
}

/// [`scan`] for [`TOKEN`], four bytes to a step while all are token
/// characters (field names are most of the rest of a head). Measured with
/// callgrind on nginx's response head: steps of eight cost more (a name
/// is about ten bytes, and the step that fails is wasted work), and so did
/// the byte-by-byte iterator.
#[inline]
fn scan_token(raw: &[u8], at: usize) -> usize {
    let Some(rest) = raw.get(at..) else {
        return raw.len();
    };
    let mut i = 0;
    while let Some(w) = rest.get(i..i + 4) {
        if CLASS[w[0] as usize]
            & CLASS[w[1] as usize]
            & CLASS[w[2] as usize]
            & CLASS[w[3] as usize]
            & TOKEN
            == 0
        {
            break;
        }
        i += 4;
    }
    while let Some(&b) = rest.get(i) {
        if CLASS[b as usize] & TOKEN == 0 {
            break;
        }
        i += 1;
    }
    at + i
}

/// [`scan`] for [`TEXT`], eight bytes at a time: values are most of a
/// head's bytes, and a byte-by-byte scan of them cost more than the old
/// pipeline's vectorised passes.
#[inline]
fn scan_text(raw: &[u8], at: usize) -> usize {
    let Some(rest) = raw.get(at..) else {
        return raw.len();
    };
    let mut i = 0;
    while let Some(chunk) = rest.get(i..).and_then(<[u8]>::first_chunk::<8>) {
        let stops = controls(u64::from_le_bytes(*chunk));
        if stops == 0 {
            i += 8;
            continue;
        }
        i += (stops.trailing_zeros() / 8) as usize;
        // HTAB is the one control byte a value may hold.
        if rest.get(i) != Some(&b'\t') {
            return at + i;
        }
        i += 1;
    }
    scan(raw, at + i, TEXT)
}

/// The high bit of each byte of `w` (little-endian) that is a control
/// byte (below 0x20, or DEL), exact for the lowest one: a borrow carries
/// only past a byte that is itself flagged.
#[inline]
fn controls(w: u64) -> u64 {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    let del = w ^ (0x7f * ONES);
    ((w.wrapping_sub(0x20 * ONES) & !w) | (del.wrapping_sub(ONES) & !del)) & (0x80 * ONES)
}

/// Parses a request head of exactly `raw.len()` bytes into `head`. A head
/// refused leaves `head` empty (and safe to read).
pub(crate) fn request(raw: &[u8], head: &mut RequestHead) -> Result<(), HttpError> {
    request_to(raw, End::Exact, head).map(drop)
}

/// Where a head ends in the bytes handed to the parser.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// At the end of them.
    Exact,
    /// At its first empty line: more bytes may follow it.
    First,
}

/// Parses the request head at the start of `raw` (all of `raw` with
/// [`End::Exact`]); returns its length. A head refused leaves `head`
/// empty (and safe to read).
pub(crate) fn request_to(raw: &[u8], end: End, head: &mut RequestHead) -> Result<usize, HttpError> {
    let result = request_parts(raw, end, head);
    if result.is_err() {
        head.fields.forget();
        head.method = 0..0;
        head.target = 0..0;
    }
    result
}

fn request_parts(raw: &[u8], end: End, head: &mut RequestHead) -> Result<usize, HttpError> {
    fits(raw)?;
    let mut text = head.fields.reset();
    let start = skip_empty_lines(raw)?;
    let method_end = scan(raw, start, TOKEN);
    if method_end == start || raw.get(method_end) != Some(&b' ') {
        return Err(fault(raw, method_end, "invalid method"));
    }
    let target_start = method_end + 1;
    let target_end = scan(raw, target_start, TARGET);
    if target_end == target_start || raw.get(target_end) != Some(&b' ') {
        return Err(fault(raw, target_end, "invalid request target"));
    }
    let (minor_version, at) = version(raw, target_end + 1)?;
    let at = line_end(raw, at, "invalid HTTP version")?;
    // Method, space and target in one copy.
    text.extend_from_slice(&raw[start..target_end]);
    head.method = 0..method_end - start;
    head.target = target_start - start..target_end - start;
    head.minor_version = minor_version;
    let len = field_lines(raw, at, end, &mut head.fields)?;
    head.fields.set_text(text)?;
    head.fields.set_raw(&raw[..len]);
    Ok(len)
}

/// Refuses a head whose offsets would not fit the field table's `u32`s
/// (far beyond any head limit tern allows).
fn fits(raw: &[u8]) -> Result<(), HttpError> {
    if u32::try_from(raw.len()).is_err() {
        return Err(HttpError::HeadTooLarge);
    }
    Ok(())
}

/// Parses a response head of exactly `raw.len()` bytes into `head`. A head
/// refused leaves `head` empty (and safe to read).
pub(crate) fn response(raw: &[u8], head: &mut ResponseHead) -> Result<(), HttpError> {
    response_to(raw, End::Exact, head).map(drop)
}

/// [`request_to`] for a response head.
pub(crate) fn response_to(
    raw: &[u8],
    end: End,
    head: &mut ResponseHead,
) -> Result<usize, HttpError> {
    let result = response_parts(raw, end, head);
    if result.is_err() {
        head.fields.forget();
        head.status = 0;
        head.reason = 0..0;
    }
    result
}

fn response_parts(raw: &[u8], end: End, head: &mut ResponseHead) -> Result<usize, HttpError> {
    fits(raw)?;
    let text = head.fields.reset();
    let line = status_line(raw)?;
    let len = field_lines(raw, line.end, end, &mut head.fields)?;
    head.status = line.status;
    head.minor_version = line.minor_version;
    head.reason = line.reason;
    head.fields.set_text(text)?;
    head.fields.set_raw(&raw[..len]);
    head.fields.response_read = Some(ResponseLine {
        status: line.status,
        minor_version: line.minor_version,
        reason: head.reason.clone(),
    });
    Ok(len)
}

/// The parts of a response's status line.
struct StatusLine {
    minor_version: u8,
    status: u16,
    reason: std::ops::Range<usize>,
    /// Where the first field line starts.
    end: usize,
}

/// Reads the status line (after any empty lines) at the start of `raw`.
fn status_line(raw: &[u8]) -> Result<StatusLine, HttpError> {
    let start = skip_empty_lines(raw)?;
    let (minor_version, at) = version(raw, start)?;
    if raw.get(at) != Some(&b' ') {
        return Err(fault(raw, at, "invalid HTTP version"));
    }
    let status = status_code(raw, at + 1).ok_or(HttpError::Malformed("invalid status"))?;
    let mut at = at + 4;
    let mut reason = 0..0;
    if raw.get(at) == Some(&b' ') {
        let end = scan_text(raw, at + 1);
        // A reason with obs-text is read as empty (as httparse does): tern
        // does not pass on bytes whose meaning it cannot know.
        if raw[at + 1..end].is_ascii() {
            reason = at + 1..end;
        }
        at = end;
    }
    let end = line_end(raw, at, "invalid status")?;
    Ok(StatusLine {
        minor_version,
        status,
        reason,
        end,
    })
}

/// The length of the response head `head` holds when `buf` starts with
/// its bytes, `head` then being what [`response_to`] with [`End::First`]
/// would make of `buf`: that parse reads no byte past the head's first
/// empty line, and the head was read whole from exactly those bytes
/// (`Fields::response_read`, cleared by every other parse). The status
/// line's parts are set again as the parse read them, being fields a
/// caller may set.
pub(crate) fn response_again(buf: &[u8], head: &mut ResponseHead) -> Option<usize> {
    let line = head.fields.response_read.as_ref()?;
    let raw = head.fields.raw();
    if raw.is_empty() || !buf.starts_with(raw) {
        return None;
    }
    let len = raw.len();
    head.status = line.status;
    head.minor_version = line.minor_version;
    head.reason = line.reason.clone();
    Some(len)
}

/// The three digits of a status code at `at`.
fn status_code(raw: &[u8], at: usize) -> Option<u16> {
    let digits = raw
        .get(at..at + 3)
        .filter(|d| d.iter().all(u8::is_ascii_digit))?;
    Some(
        digits
            .iter()
            .fold(0u16, |n, d| n * 10 + u16::from(d - b'0')),
    )
}

/// The length of the request head `head` holds when `buf` (whose first
/// byte begins a start line) begins with that head's very bytes, within
/// `max`: parsing them again would read the same parts, so nothing is
/// parsed. Heads repeat byte for byte more often than not: a client's
/// requests for its next resource, a backend's responses (nginx's differ
/// in Date once a second). A head is refused before it fills `head` (a
/// refused parse leaves it empty), so these bytes passed every rule. The
/// version is read again from them: the one part a user of the head may
/// have set since. Costs a comparison that usually ends at the first
/// differing byte; `None` leaves the head to the parser.
pub(crate) fn request_again(buf: &[u8], max: usize, head: &mut RequestHead) -> Option<usize> {
    let raw = head.fields.raw();
    if raw.is_empty() || raw.len() > max || !buf.starts_with(raw) {
        return None;
    }
    // The start line began at the head's first byte (as `buf`'s does):
    // `target` indexes the head itself.
    let (minor_version, _) = version(raw, head.target.end + 1).ok()?;
    let len = raw.len();
    head.minor_version = minor_version;
    Some(len)
}

/// Skips empty lines before the start line (RFC 9112 section 2.2 asks a
/// server to ignore at least one): where the start line begins.
fn skip_empty_lines(raw: &[u8]) -> Result<usize, HttpError> {
    let mut at = 0;
    while let Some(b'\r' | b'\n') = raw.get(at) {
        at = line_end(raw, at, "incomplete head")?;
    }
    Ok(at)
}

/// `HTTP/1.0` or `HTTP/1.1` at `at`: the minor version and where it ends.
fn version(raw: &[u8], at: usize) -> Result<(u8, usize), HttpError> {
    match raw.get(at..at + 8) {
        Some(b"HTTP/1.1") => Ok((1, at + 8)),
        Some(b"HTTP/1.0") => Ok((0, at + 8)),
        _ => Err(HttpError::Malformed("invalid HTTP version")),
    }
}

/// Expects CRLF at `at`; returns where the next line starts.
fn line_end(raw: &[u8], at: usize, what: &'static str) -> Result<usize, HttpError> {
    match (raw.get(at), raw.get(at + 1)) {
        (Some(b'\r'), Some(b'\n')) => Ok(at + 2),
        _ => Err(fault(raw, at, what)),
    }
}

/// The field lines from `at` to the empty line that ends the head (and,
/// with [`End::Exact`], `raw`); returns where the head ends.
fn field_lines(
    raw: &[u8],
    mut at: usize,
    end: End,
    fields: &mut Fields,
) -> Result<usize, HttpError> {
    loop {
        let name_end = scan_token(raw, at);
        if name_end == at || raw.get(name_end) != Some(&b':') {
            let empty_line = match end {
                End::Exact => raw.get(at..) == Some(b"\r\n"),
                End::First => raw.get(at..at + 2) == Some(b"\r\n"),
            };
            if name_end == at && empty_line {
                return Ok(at + 2);
            }
            return Err(name_fault(raw, at, name_end));
        }
        let mut value_start = name_end + 1;
        while let Some(b' ' | b'\t') = raw.get(value_start) {
            value_start += 1;
        }
        let line_end_at = scan_text(raw, value_start);
        let next = line_end(raw, line_end_at, "invalid header value")?;
        let value_end = trim_end(raw, value_start, line_end_at);
        if fields.fields.len() == MAX_HEADERS {
            return Err(HttpError::HeadTooLarge);
        }
        let kind = FieldKind::of_token(&raw[at..name_end]);
        fields.note_kind(kind, &raw[value_start..value_end]);
        // `fits` bounded every offset.
        fields.fields.push(Field {
            line: at as u32,
            name_end: name_end as u32,
            value_start: value_start as u32,
            value_end: value_end as u32,
            kind,
        });
        at = next;
    }
}

/// Where a value from `start` to `end` ends once its trailing SP and HTAB
/// are left out.
#[inline]
fn trim_end(raw: &[u8], start: usize, mut end: usize) -> usize {
    while end > start && matches!(raw.get(end - 1), Some(b' ' | b'\t')) {
        end -= 1;
    }
    end
}

/// The error for a field line whose name does not end in a colon at
/// `name_end` (`line` is where the line starts).
fn name_fault(raw: &[u8], line: usize, name_end: usize) -> HttpError {
    match raw.get(name_end) {
        Some(b' ' | b'\t') if name_end == line => HttpError::ObsFold,
        Some(b' ' | b'\t') => HttpError::SpaceBeforeColon,
        Some(b'\r') if name_end == line && raw.get(name_end + 1) == Some(&b'\n') => {
            HttpError::Malformed("bytes after the head")
        }
        _ => fault(raw, name_end, "invalid header name"),
    }
}

/// The error for a byte at `at` that has no place there: one of the
/// smuggling faults when it is one, else `what`.
fn fault(raw: &[u8], at: usize, what: &'static str) -> HttpError {
    match (raw.get(at), raw.get(at + 1)) {
        (Some(0), _) => HttpError::Nul,
        (Some(b'\n'), _) => HttpError::BareLf,
        (Some(b'\r'), Some(b'\n')) => HttpError::Malformed(what),
        (Some(b'\r'), _) => HttpError::BareCr,
        (None, _) => HttpError::Malformed("incomplete head"),
        _ => HttpError::Malformed(what),
    }
}

#[cfg(test)]
mod tests;
