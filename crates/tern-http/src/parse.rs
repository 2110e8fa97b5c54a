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

use crate::head::{Field, FieldKind, Fields, RequestHead, ResponseHead, MAX_HEADERS};
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
    let start = skip_empty_lines(raw)?;
    let (minor_version, at) = version(raw, start)?;
    if raw.get(at) != Some(&b' ') {
        return Err(fault(raw, at, "invalid HTTP version"));
    }
    let digits = raw
        .get(at + 1..at + 4)
        .filter(|d| d.iter().all(u8::is_ascii_digit))
        .ok_or(HttpError::Malformed("invalid status"))?;
    let status = digits
        .iter()
        .fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
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
    let at = line_end(raw, at, "invalid status")?;
    let len = field_lines(raw, at, end, &mut head.fields)?;
    head.status = status;
    head.minor_version = minor_version;
    head.reason = reason;
    head.fields.set_text(text)?;
    head.fields.set_raw(&raw[..len]);
    Ok(len)
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
mod tests {
    use crate::head::{parse_request, parse_response, MAX_HEADERS};
    use crate::reference;
    use crate::HttpError;

    fn req(raw: &[u8]) -> Result<reference::Parts, HttpError> {
        parse_request(raw).map(|h| reference::request_parts(&h))
    }

    fn resp(raw: &[u8]) -> Result<reference::Parts, HttpError> {
        parse_response(raw).map(|h| reference::response_parts(&h))
    }

    #[test]
    fn a_request_reads_its_line_and_fields_with_outer_whitespace_left_out() {
        let p = req(b"\r\nPATCH /a?b=%20 HTTP/1.0\r\nHost:x\r\nX-A: \t v : w \t\r\nX-Empty:  \r\nX-Bin: \x80\xff\r\n\r\n")
            .unwrap();
        assert_eq!(p.start, ("PATCH".into(), b"/a?b=%20".to_vec()));
        assert_eq!(p.minor_version, 0);
        let fields: Vec<(&str, &[u8])> = p
            .fields
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        assert_eq!(
            fields,
            [
                ("Host", &b"x"[..]),
                ("X-A", b"v : w"),
                ("X-Empty", b""),
                ("X-Bin", b"\x80\xff")
            ]
        );
    }

    #[test]
    fn a_response_reads_its_status_and_reason_in_every_form() {
        for (raw, status, reason) in [
            (&b"HTTP/1.1 200 OK\r\n\r\n"[..], "200", &b"OK"[..]),
            (b"HTTP/1.1 404\r\n\r\n", "404", b""),
            (b"HTTP/1.1 204 \r\n\r\n", "204", b""),
            (
                b"HTTP/1.0 500 Bad\tthing : now\r\n\r\n",
                "500",
                b"Bad\tthing : now",
            ),
            // obs-text in a reason: read as no reason, as httparse does.
            (b"HTTP/1.1 200 \xe9t\xe9\r\n\r\n", "200", b""),
        ] {
            let p = resp(raw).unwrap();
            assert_eq!(p.start, (status.to_string(), reason.to_vec()), "{raw:?}");
        }
    }

    #[test]
    fn each_smuggling_fault_is_refused_and_named() {
        use HttpError::*;
        for (raw, want) in [
            (&b"GET / HTTP/1.1\nHost: x\r\n\r\n"[..], BareLf),
            (b"GET / HTTP/1.1\r\nHost: x\n\r\n", BareLf),
            (b"GET / HTTP/1.1\r\nHost: x\r\n\n", BareLf),
            (b"\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", BareLf),
            (b"GET / HTTP/1.1\r\nHost: x\ry\r\n\r\n", BareCr),
            (b"GET / HTTP/1.1\r\nHo\rst: x\r\n\r\n", BareCr),
            (b"GET / HTTP/1.1\r\nHost: x\0\r\n\r\n", Nul),
            (b"GET / HTTP/1.1\r\nHo\0st: x\r\n\r\n", Nul),
            (b"GET /\0 HTTP/1.1\r\nHost: x\r\n\r\n", Nul),
            (b"GET / HTTP/1.1\r\n Host: x\r\n\r\n", ObsFold),
            (b"GET / HTTP/1.1\r\nHost: x\r\n\tfolded\r\n\r\n", ObsFold),
            (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", SpaceBeforeColon),
            (b"GET / HTTP/1.1\r\nHost\t: x\r\n\r\n", SpaceBeforeColon),
        ] {
            assert_eq!(req(raw).unwrap_err(), want, "{raw:?}");
        }
    }

    #[test]
    fn what_the_grammar_has_no_place_for_is_refused() {
        for raw in [
            &b"GET  / HTTP/1.1\r\n\r\n"[..],
            b"GET /  HTTP/1.1\r\n\r\n",
            b"GET  HTTP/1.1\r\n\r\n",
            b"G(T / HTTP/1.1\r\n\r\n",
            b"GET / HTTP/2.0\r\n\r\n",
            b"GET / HTTP/1.1 \r\n\r\n",
            b"GET / http/1.1\r\n\r\n",
            b"GET /\xff HTTP/1.1\r\n\r\n",
            b"GET /\x7f HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\n: x\r\n\r\n",
            b"GET / HTTP/1.1\r\nX@Y: 1\r\n\r\n",
            b"GET / HTTP/1.1\r\nX-A 1\r\n\r\n",
            b"GET / HTTP/1.1\r\nX-A: \x01\r\n\r\n",
            b"GET / HTTP/1.1\r\nX-A: a\x7fb\r\n\r\n",
            b"GET / HTTP/1.1\r\nX-A: 1\r\n",
            b"GET / HTTP/1.1\r\nX-A: 1\r\n\r\nX",
            b"GET / HTTP/1.1\r\n\r\nX-A: 1\r\n\r\n",
            b"",
        ] {
            let err = req(raw).unwrap_err();
            assert_eq!(err.status(), 400, "{raw:?}");
        }
        for raw in [
            &b"HTTP/1.1 20 OK\r\n\r\n"[..],
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 2x0 OK\r\n\r\n",
            b"HTTP/1.1  200 OK\r\n\r\n",
            b"HTTP/1.1 200 O\x01K\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n",
            b"HTTP/1.2 200 OK\r\n\r\n",
        ] {
            assert_eq!(resp(raw).unwrap_err().status(), 400, "{raw:?}");
        }
    }

    #[test]
    fn more_fields_than_the_limit_are_answered_as_too_large() {
        let head = |n: usize| {
            let mut s = b"GET / HTTP/1.1\r\n".to_vec();
            for i in 0..n {
                s.extend_from_slice(format!("x-{i}: v\r\n").as_bytes());
            }
            s.extend_from_slice(b"\r\n");
            s
        };
        assert_eq!(req(&head(MAX_HEADERS)).unwrap().fields.len(), MAX_HEADERS);
        assert_eq!(
            req(&head(MAX_HEADERS + 1)).unwrap_err(),
            HttpError::HeadTooLarge
        );
    }

    #[test]
    fn the_word_scans_stop_where_the_byte_scan_does() {
        let alphabet = [
            b'a', b' ', b'\t', b'\r', b'\n', 0, 0x1f, 0x7f, 0x80, 0xff, b'~', b':', b'(',
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..50_000 {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let len = (seed >> 58) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|i| {
                    // Mostly plain text, so runs are long enough to matter.
                    let r = (seed >> (i % 50)) as usize;
                    if r % 7 == 0 {
                        alphabet[(r / 7) % alphabet.len()]
                    } else {
                        b'a'
                    }
                })
                .collect();
            for at in 0..=len {
                assert_eq!(
                    super::scan_text(&bytes, at),
                    super::scan(&bytes, at, super::TEXT),
                    "{bytes:?} from {at}"
                );
                assert_eq!(
                    super::scan_token(&bytes, at),
                    super::scan(&bytes, at, super::TOKEN),
                    "{bytes:?} from {at}"
                );
            }
        }
    }

    #[test]
    fn a_refused_head_leaves_a_reused_head_empty_and_readable() {
        let mut head = crate::head::RequestHead::default();
        crate::head::parse_request_into(
            b"POST /a-long-target HTTP/1.1\r\nHost: x\r\nX-Long-Name: v\r\n\r\n",
            &mut head,
        )
        .unwrap();
        crate::head::parse_request_into(
            b"GET / HTTP/1.1\r\nHost: x\r\nBad\0: v\r\n\r\n",
            &mut head,
        )
        .unwrap_err();
        assert_eq!((head.method(), head.target()), ("", ""));
        assert_eq!(head.fields.iter().count(), 0);
        let mut resp = crate::head::ResponseHead::default();
        crate::head::parse_response_into(
            b"HTTP/1.1 200 A long reason\r\nX-A: 1\r\n\r\n",
            &mut resp,
        )
        .unwrap();
        crate::head::parse_response_into(b"HTTP/1.1 200 OK\r\n\r", &mut resp).unwrap_err();
        assert_eq!((resp.status, resp.reason()), (0, &b""[..]));
        assert_eq!(resp.fields.iter().count(), 0);
    }

    fn xorshift(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    /// Replaces, inserts or removes one byte of `head` (never left empty).
    fn mutate(head: &mut Vec<u8>, alphabet: &[u8], next: &mut impl FnMut() -> u64) {
        let at = (next() % head.len() as u64) as usize;
        let byte = alphabet[(next() % alphabet.len() as u64) as usize];
        match next() % 3 {
            0 => head[at] = byte,
            1 => head.insert(at, byte),
            _ => {
                head.remove(at);
            }
        }
        if head.is_empty() {
            head.push(byte);
        }
    }

    /// The differential check the fuzz target makes, over heads mutated
    /// from a few real ones: same verdict, same parts.
    #[test]
    fn the_parser_reads_what_the_old_pipeline_read() {
        let bases: [&[u8]; 6] = [
            b"GET /a?b HTTP/1.1\r\nHost: x\r\nX-A: b : c\r\nConnection: keep-alive\r\n\r\n",
            b"GET /long/target?q=1 HTTP/1.1\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) Gecko\r\nAccept: text/html,application/xhtml+xml\r\n\r\n",
            b"HTTP/1.1 200 Everything Is Fine Here\r\nDate: Thu, 26 Nov 2026 05:00:00 GMT\r\nETag: \"6543a1b2-64\"\r\n\r\n",
            b"\r\nPOST / HTTP/1.0\r\nContent-Length:  2 \r\nX:\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 100\r\nX-E:\t\r\n\r\n",
            b"HTTP/1.0 404\r\nA: \x80\r\n\r\n",
        ];
        let alphabet = [
            b'\r', b'\n', b' ', b'\t', b':', b'a', 0, 0x7f, 0x80, b'/', b'1', b'(',
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || xorshift(&mut seed);
        let mut agreed_ok = 0;
        for round in 0..60_000 {
            let mut head = bases[round % bases.len()].to_vec();
            for _ in 0..1 + next() % 3 {
                mutate(&mut head, &alphabet, &mut next);
            }
            let both_read = if head.starts_with(b"HTTP/") || round % 4 >= 2 {
                reference::check_response(&head)
            } else {
                reference::check_request(&head)
            };
            agreed_ok += usize::from(both_read);
        }
        assert!(agreed_ok > 1_000, "only {agreed_ok} mutated heads parsed");
    }

    /// The prefix parse reads a head only where finding its end and then
    /// parsing it read the same, whatever follows it: nothing, a body, a
    /// second head, a part of one, empty lines; and refuses to read heads
    /// that begin with empty lines or end past the limit.
    #[test]
    fn the_prefix_parse_reads_what_finding_the_end_then_parsing_reads() {
        let heads: [&[u8]; 7] = [
            b"GET /a?b HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, x-a\r\n\r\n",
            b"POST / HTTP/1.0\r\nContent-Length: 2\r\nX:\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 3\r\n\r\n",
            b"HTTP/1.1 204\r\nConnection: close\r\n\r\n",
            b"GET / HTTP/1.1\r\n\r\n",
            b"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nA: b\n\r\n",
        ];
        let tails: [&[u8]; 7] = [
            b"",
            b"abc",
            b"\r\n",
            b"\n",
            b"GET / HTTP/1.1\r\nHost: y\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n",
            b"\r\n\r\n",
        ];
        let alphabet = [b'\r', b'\n', b' ', b':', b'a', 0, 0x80];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || xorshift(&mut seed);
        let mut read = 0;
        for round in 0..40_000 {
            let mut buf = heads[round % heads.len()].to_vec();
            if round % 3 != 0 {
                mutate(&mut buf, &alphabet, &mut next);
            }
            buf.extend_from_slice(tails[(next() % tails.len() as u64) as usize]);
            let cut = buf.len() - (next() % 4) as usize * usize::from(round % 5 == 0);
            let buf = &buf[..cut];
            let max = if round % 7 == 0 { 40 } else { 64 * 1024 };
            let found = if buf.starts_with(b"HTTP/") {
                reference::check_response_prefix(buf, max)
            } else {
                reference::check_request_prefix(buf, max)
            };
            read += usize::from(found);
        }
        assert!(read > 5_000, "only {read} buffers read by the prefix parse");
        let mut head = crate::head::RequestHead::default();
        assert_eq!(
            crate::head::parse_request_prefix(heads[5], 1024, &mut head),
            None,
            "a head after empty lines is left to find_head_end"
        );
        assert_eq!(
            crate::head::parse_request_prefix(heads[0], heads[0].len() - 1, &mut head),
            None,
            "a head past the limit is left to find_head_end"
        );
    }
}
