//! Not an API: the head parsing pipeline [`crate::parse`] replaced, kept as
//! the reference the fuzz targets `request_head` and `response_head` and
//! the unit tests compare it with: the strict syntax check ([`check_head_syntax`]), then
//! `httparse` with its default settings.
//!
//! One deliberate difference: the old check ran over the empty lines a
//! client may send before its request line too, and then took that line
//! for a field line (a space before a colon in the target refused it).
//! Here the check starts after those empty lines, as the parser does.

use crate::head::{
    find_head_end, parse_request, parse_request_prefix, parse_response, parse_response_into,
    parse_response_prefix, Fields, RequestHead, ResponseHead, MAX_HEADERS,
};
use crate::syntax::check_head_syntax;
use crate::HttpError;

/// The parts of a head both pipelines read, owned, for comparing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parts {
    /// Request: method and target. Response: the status code and reason.
    pub start: (String, Vec<u8>),
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    /// Every field, `(name as sent, value)`, in order.
    pub fields: Vec<(String, Vec<u8>)>,
}

/// Reads the request head `raw` (exactly a head's bytes) with tern's
/// parser and with the old pipeline, and panics, naming the bytes, unless
/// both refuse it or both read the same parts. Returns true when both
/// accepted it.
pub fn check_request(raw: &[u8]) -> bool {
    agree(
        parse_request(raw).map(|h| request_parts(&h)),
        request(raw),
        raw,
    )
}

/// [`check_request`] for a response head.
pub fn check_response(raw: &[u8]) -> bool {
    agree(
        parse_response(raw).map(|h| response_parts(&h)),
        response(raw),
        raw,
    )
}

/// Reads the bytes `buf` (a head and maybe what follows it, or part of
/// one) with the one-pass prefix parse, and panics, naming the bytes,
/// unless it read nothing or read what finding the head's end
/// ([`find_head_end`], with `max`) and then parsing it reads: the same
/// length, the same parts, the same Connection facts; and the same again
/// into a head that already holds it (a repeated head is not parsed) or
/// holds another. Returns true when the prefix parse read a head.
pub fn check_request_prefix(buf: &[u8], max: usize) -> bool {
    let mut head = RequestHead::default();
    let Some(len) = parse_request_prefix(buf, max, &mut head) else {
        let mut held = other_request();
        assert_eq!(parse_request_prefix(buf, max, &mut held), None, "{buf:?}");
        return false;
    };
    let exact = parse_request(&buf[..exact_end(buf, max, len)])
        .unwrap_or_else(|e| panic!("prefix read a head the parser refuses ({e:?}): {buf:?}"));
    assert_eq!(request_parts(&head), request_parts(&exact), "{buf:?}");
    same_facts(&head.fields, &exact.fields, buf);
    // Read again into the head that holds it (a repeat: not parsed) and
    // into one that holds another head: the same.
    for mut again in [head.clone(), other_request()] {
        assert_eq!(
            parse_request_prefix(buf, max, &mut again),
            Some(len),
            "{buf:?}"
        );
        assert_eq!(request_parts(&again), request_parts(&exact), "{buf:?}");
        same_facts(&again.fields, &exact.fields, buf);
    }
    true
}

/// A head that holds another request (a repeat of which `buf` may begin
/// with).
fn other_request() -> RequestHead {
    let mut head = RequestHead::default();
    let other = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let read = parse_request_prefix(other, other.len(), &mut head);
    assert_eq!(read, Some(other.len()));
    head
}

/// [`check_request_prefix`] for a response head. The bytes are also read
/// into a head that holds an earlier response (read again from the same
/// bytes when `buf` starts with them, not parsed: `parse_response_prefix`)
/// and again into the head they filled: both must read as a fresh head.
pub fn check_response_prefix(buf: &[u8], max: usize) -> bool {
    let mut reused = ResponseHead::default();
    parse_response_into(EARLIER_RESPONSE, &mut reused)
        .unwrap_or_else(|e| panic!("the earlier response is refused: {e:?}"));
    let over_earlier = parse_response_prefix(buf, max, &mut reused);
    let mut head = ResponseHead::default();
    let Some(len) = parse_response_prefix(buf, max, &mut head) else {
        assert_eq!(over_earlier, None, "{buf:?}");
        return false;
    };
    let exact = parse_response(&buf[..exact_end(buf, max, len)])
        .unwrap_or_else(|e| panic!("prefix read a head the parser refuses ({e:?}): {buf:?}"));
    assert_eq!(response_parts(&head), response_parts(&exact), "{buf:?}");
    same_facts(&head.fields, &exact.fields, buf);
    assert_eq!(over_earlier, Some(len), "{buf:?}");
    assert_eq!(response_parts(&reused), response_parts(&exact), "{buf:?}");
    same_facts(&reused.fields, &exact.fields, buf);
    assert_eq!(
        parse_response_prefix(buf, max, &mut head),
        Some(len),
        "{buf:?}"
    );
    assert_eq!(response_parts(&head), response_parts(&exact), "{buf:?}");
    same_facts(&head.fields, &exact.fields, buf);
    true
}

/// A response head a head may hold before the next response is read
/// into it; the fuzz target's dictionary starts inputs with it.
pub const EARLIER_RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nServer: nginx\r\nConnection: keep-alive\r\n\r\n";

/// Where [`find_head_end`] ends the head in `buf`; panics unless at `len`.
fn exact_end(buf: &[u8], max: usize, len: usize) -> usize {
    let end = find_head_end(buf, &mut 0, max);
    assert_eq!(
        end,
        Ok(Some(len)),
        "prefix and find_head_end disagree: {buf:?}"
    );
    len
}

fn same_facts(a: &Fields, b: &Fields, buf: &[u8]) {
    assert_eq!(a.asks_close(), b.asks_close(), "{buf:?}");
    assert_eq!(
        a.connection_names_fields(),
        b.connection_names_fields(),
        "{buf:?}"
    );
    assert_eq!(a.raw(), b.raw(), "{buf:?}");
}

/// Same verdict, same parts; a head too large for the old pipeline (with
/// nothing else wrong in it) is too large for tern's parser too.
fn agree(ours: Result<Parts, HttpError>, old: Result<Parts, HttpError>, raw: &[u8]) -> bool {
    match (&ours, &old) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "read differently: {raw:?}");
            true
        }
        (Err(a), Err(HttpError::HeadTooLarge)) => {
            assert_eq!(*a, HttpError::HeadTooLarge, "{raw:?}");
            false
        }
        (Err(_), Err(_)) => false,
        _ => panic!("verdicts differ on {raw:?}: tern's parser {ours:?}, old {old:?}"),
    }
}

/// A request head's parts as tern's parser read them.
pub fn request_parts(head: &RequestHead) -> Parts {
    Parts {
        start: (head.method().to_owned(), head.target().as_bytes().to_vec()),
        minor_version: head.minor_version,
        fields: owned_fields(head.fields.iter()),
    }
}

/// A response head's parts as tern's parser read them.
pub fn response_parts(head: &ResponseHead) -> Parts {
    Parts {
        start: (head.status.to_string(), head.reason().to_vec()),
        minor_version: head.minor_version,
        fields: owned_fields(head.fields.iter()),
    }
}

/// A request head of exactly `raw.len()` bytes read by the old pipeline.
pub fn request(raw: &[u8]) -> Result<Parts, HttpError> {
    check_head_syntax(after_empty_lines(raw))?;
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut slots);
    let status = req.parse(raw).map_err(map_httparse)?;
    if status.is_partial() {
        return Err(HttpError::Malformed("incomplete head"));
    }
    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return Err(HttpError::Malformed("incomplete request line"));
    };
    Ok(Parts {
        start: (method.to_owned(), path.as_bytes().to_vec()),
        minor_version: version,
        fields: owned_fields(req.headers.iter().map(|h| (h.name, h.value))),
    })
}

/// A response head of exactly `raw.len()` bytes read by the old pipeline.
pub fn response(raw: &[u8]) -> Result<Parts, HttpError> {
    check_head_syntax(after_empty_lines(raw))?;
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut slots);
    let status = resp.parse(raw).map_err(map_httparse)?;
    if status.is_partial() {
        return Err(HttpError::Malformed("incomplete head"));
    }
    let (Some(code), Some(version)) = (resp.code, resp.version) else {
        return Err(HttpError::Malformed("incomplete status line"));
    };
    Ok(Parts {
        start: (
            code.to_string(),
            resp.reason.unwrap_or_default().as_bytes().to_vec(),
        ),
        minor_version: version,
        fields: owned_fields(resp.headers.iter().map(|h| (h.name, h.value))),
    })
}

/// `raw` after the CRLFs that may come before a start line.
fn after_empty_lines(mut raw: &[u8]) -> &[u8] {
    while let Some(rest) = raw.strip_prefix(b"\r\n") {
        raw = rest;
    }
    raw
}

fn owned_fields<'a>(fields: impl Iterator<Item = (&'a str, &'a [u8])>) -> Vec<(String, Vec<u8>)> {
    fields.map(|(n, v)| (n.to_owned(), v.to_vec())).collect()
}

fn map_httparse(e: httparse::Error) -> HttpError {
    match e {
        httparse::Error::TooManyHeaders => HttpError::HeadTooLarge,
        httparse::Error::HeaderName => HttpError::Malformed("invalid header name"),
        httparse::Error::HeaderValue => HttpError::Malformed("invalid header value"),
        httparse::Error::NewLine => HttpError::BareLf,
        httparse::Error::Status => HttpError::Malformed("invalid status"),
        httparse::Error::Token => HttpError::Malformed("invalid token"),
        httparse::Error::Version => HttpError::Malformed("invalid HTTP version"),
    }
}
