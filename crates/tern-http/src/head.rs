//! HTTP/1.1 message heads: finding their end, strict syntax checks, parsing.
//!
//! Parsing is done by `httparse`; before it runs, the raw head is checked
//! for the things RFC 9112 lets a lenient parser accept and a request
//! smuggler exploits: bare LF, bare CR, NUL, obsolete line folding and
//! whitespace between a field name and its colon. A head either passes all
//! of them or is refused, so the backend never sees a head that two parsers
//! could read two ways.

use std::ops::Range;

use crate::HttpError;

/// Most header fields a head may carry; more is answered like an oversized head (431).
pub const MAX_HEADERS: usize = 128;

/// Default bound on the size of a request head (request line and fields): 64 KiB.
/// A client that sends more without finishing its head gets 431.
pub const DEFAULT_MAX_HEAD_BYTES: usize = 64 * 1024;

/// Where a complete head ends in a buffer that starts with it.
///
/// Returns `Ok(Some(len))` with the length including the final empty line,
/// `Ok(None)` when more bytes are needed, and an error when `max` bytes have
/// arrived without an end (the head is too large).
///
/// `scanned` is a resumption hint: bytes before it were already searched, so
/// repeated calls as data trickles in stay linear.
pub fn find_head_end(
    buf: &[u8],
    scanned: &mut usize,
    max: usize,
) -> Result<Option<usize>, HttpError> {
    // Back up 2 bytes so a terminator split across reads is still found.
    let start = scanned.saturating_sub(2);
    let window = &buf[..buf.len().min(max)];
    // The head ends at the first empty line. Accept LF LF and LF CR LF here
    // so that a head with bare LFs is *found* and then refused by
    // `check_head_syntax`, instead of waiting for a CRLFCRLF that never comes.
    for lf in memchr::memchr_iter(b'\n', &window[start..]) {
        let p = start + lf;
        match (window.get(p + 1), window.get(p + 2)) {
            (Some(b'\n'), _) => return Ok(Some(p + 2)),
            (Some(b'\r'), Some(b'\n')) => return Ok(Some(p + 3)),
            _ => {}
        }
    }
    *scanned = window.len();
    if buf.len() >= max {
        return Err(HttpError::HeadTooLarge);
    }
    Ok(None)
}

/// Checks the raw bytes of a head (ending with its empty line) for what RFC
/// 9112 forbids but lenient parsers accept.
pub fn check_head_syntax(head: &[u8]) -> Result<(), HttpError> {
    let mut line_start = 0;
    let mut i = 0;
    while i < head.len() {
        match head[i] {
            b'\n' => {
                if i == 0 || head[i - 1] != b'\r' {
                    return Err(HttpError::BareLf);
                }
                line_start = i + 1;
                if let Some(&next) = head.get(line_start) {
                    if next == b' ' || next == b'\t' {
                        return Err(HttpError::ObsFold);
                    }
                }
            }
            b'\r' if head.get(i + 1) != Some(&b'\n') => return Err(HttpError::BareCr),
            0 => return Err(HttpError::Nul),
            b':' if line_start > 0 => {
                // First colon on a field line: the byte before it must be part
                // of the name, not whitespace. Lines past their first colon are
                // skipped to the end quickly.
                if i > line_start && matches!(head[i - 1], b' ' | b'\t') {
                    return Err(HttpError::SpaceBeforeColon);
                }
                match memchr::memchr(b'\n', &head[i..]) {
                    Some(off) => {
                        // Keep checking the value for NUL / bare CR.
                        let end = i + off;
                        if let Some(p) = memchr::memchr2(0, b'\r', &head[i..end]) {
                            let at = i + p;
                            if head[at] == 0 {
                                return Err(HttpError::Nul);
                            }
                            if at + 1 != end {
                                return Err(HttpError::BareCr);
                            }
                        }
                        i = end;
                        continue;
                    }
                    None => return Err(HttpError::Malformed("field line without end")),
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// A header field as byte ranges: the name into [`Fields::names`], the
/// value into [`Fields::raw`].
#[derive(Debug, Clone)]
struct Field {
    name: Range<usize>,
    value: Range<usize>,
}

/// The parts of a head shared by requests and responses: the raw bytes and
/// the fields found in them, in the order received.
#[derive(Debug, Clone)]
pub struct Fields {
    raw: Vec<u8>,
    /// All field names, concatenated. httparse checked they are tokens
    /// (ASCII), so keeping them as one `String` lets `iter` hand out `&str`
    /// without validating UTF-8 again on every lookup.
    names: String,
    fields: Vec<Field>,
}

impl Fields {
    /// Iterates `(name, value)` pairs in the order received (names as sent).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.fields
            .iter()
            .map(move |f| (&self.names[f.name.clone()], &self.raw[f.value.clone()]))
    }

    /// The value of the first field named `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// All values of fields named `name` (case-insensitive).
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
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
        self.get_all(name).any(|v| {
            v.split(|&b| b == b',')
                .any(|t| trim_ows(t).eq_ignore_ascii_case(token.as_bytes()))
        })
    }

    fn from_parsed(raw: &[u8], headers: &[httparse::Header<'_>]) -> Self {
        let base = raw.as_ptr() as usize;
        let mut names = String::with_capacity(headers.iter().map(|h| h.name.len()).sum());
        let fields = headers
            .iter()
            .map(|h| {
                let start = names.len();
                names.push_str(h.name);
                let vstart = h.value.as_ptr() as usize - base;
                Field {
                    name: start..names.len(),
                    value: vstart..vstart + h.value.len(),
                }
            })
            .collect();
        Fields {
            raw: raw.to_vec(),
            names,
            fields,
        }
    }

    fn slice(&self, r: &Range<usize>) -> &[u8] {
        &self.raw[r.clone()]
    }
}

/// A parsed request head.
#[derive(Debug, Clone)]
pub struct RequestHead {
    method: Range<usize>,
    target: Range<usize>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    /// The header fields.
    pub fields: Fields,
}

impl RequestHead {
    /// The method, as sent (methods are case-sensitive).
    pub fn method(&self) -> &str {
        std::str::from_utf8(self.fields.slice(&self.method)).unwrap_or("")
    }

    /// The request target, as sent.
    pub fn target(&self) -> &str {
        std::str::from_utf8(self.fields.slice(&self.target)).unwrap_or("")
    }

    /// True for `HEAD`, whose response never has a body.
    pub fn is_head(&self) -> bool {
        self.method() == "HEAD"
    }
}

/// Parses a request head of exactly `raw.len()` bytes (as found by
/// [`find_head_end`]) after checking its syntax strictly.
pub fn parse_request(raw: &[u8]) -> Result<RequestHead, HttpError> {
    check_head_syntax(raw)?;
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let status = req.parse(raw).map_err(map_httparse)?;
    if status.is_partial() {
        return Err(HttpError::Malformed("incomplete head"));
    }
    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return Err(HttpError::Malformed("incomplete request line"));
    };
    let headers = req.headers;
    let fields = Fields::from_parsed(raw, headers);
    let base = raw.as_ptr() as usize;
    let method =
        (method.as_ptr() as usize - base)..(method.as_ptr() as usize - base + method.len());
    let target = (path.as_ptr() as usize - base)..(path.as_ptr() as usize - base + path.len());
    Ok(RequestHead {
        method,
        target,
        minor_version: version,
        fields,
    })
}

/// A parsed response head.
#[derive(Debug, Clone)]
pub struct ResponseHead {
    /// The status code.
    pub status: u16,
    reason: Range<usize>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    /// The header fields.
    pub fields: Fields,
}

impl ResponseHead {
    /// The reason phrase, as sent (may be empty).
    pub fn reason(&self) -> &[u8] {
        self.fields.slice(&self.reason)
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
    check_head_syntax(raw)?;
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let status = resp.parse(raw).map_err(map_httparse)?;
    if status.is_partial() {
        return Err(HttpError::Malformed("incomplete head"));
    }
    let (Some(code), Some(version)) = (resp.code, resp.version) else {
        return Err(HttpError::Malformed("incomplete status line"));
    };
    let reason = resp.reason.unwrap_or("");
    let headers = resp.headers;
    let fields = Fields::from_parsed(raw, headers);
    let base = raw.as_ptr() as usize;
    let reason = if reason.is_empty() {
        0..0
    } else {
        (reason.as_ptr() as usize - base)..(reason.as_ptr() as usize - base + reason.len())
    };
    Ok(ResponseHead {
        status: code,
        reason,
        minor_version: version,
        fields,
    })
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
mod tests {
    use super::*;

    fn req(raw: &str) -> Result<RequestHead, HttpError> {
        parse_request(raw.as_bytes())
    }

    #[test]
    fn parses_a_plain_request() {
        let h = req("GET /a?b HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nx-a: 2\r\n\r\n").unwrap();
        assert_eq!(h.method(), "GET");
        assert_eq!(h.target(), "/a?b");
        assert_eq!(h.minor_version, 1);
        assert_eq!(h.fields.get("host"), Some(&b"x"[..]));
        assert_eq!(h.fields.get_all("X-A").count(), 2);
    }

    #[test]
    fn refuses_smuggling_syntax() {
        assert_eq!(
            req("GET / HTTP/1.1\nHost: x\n\n").unwrap_err(),
            HttpError::BareLf
        );
        assert_eq!(
            req("GET / HTTP/1.1\r\nHost: x\n\r\n").unwrap_err(),
            HttpError::BareLf
        );
        assert_eq!(
            req("GET / HTTP/1.1\r\nHost: x\r\n y\r\n\r\n").unwrap_err(),
            HttpError::ObsFold
        );
        assert_eq!(
            req("GET / HTTP/1.1\r\nHost : x\r\n\r\n").unwrap_err(),
            HttpError::SpaceBeforeColon
        );
        assert_eq!(
            req("GET / HTTP/1.1\r\nHost: x\0y\r\n\r\n").unwrap_err(),
            HttpError::Nul
        );
        assert_eq!(
            req("GET / HTTP/1.1\r\nHost: x\ry\r\n\r\n").unwrap_err(),
            HttpError::BareCr
        );
    }

    #[test]
    fn finds_head_end_across_reads_and_bounds_size() {
        let mut scanned = 0;
        let mut buf = b"GET / HTTP/1.1\r\nHost: x\r\n\r".to_vec();
        assert_eq!(find_head_end(&buf, &mut scanned, 1024).unwrap(), None);
        buf.push(b'\n');
        assert_eq!(
            find_head_end(&buf, &mut scanned, 1024).unwrap(),
            Some(buf.len())
        );
        let big = vec![b'a'; 100];
        let mut scanned = 0;
        assert_eq!(
            find_head_end(&big, &mut scanned, 100).unwrap_err(),
            HttpError::HeadTooLarge
        );
    }

    #[test]
    fn too_many_fields_is_too_large() {
        let mut s = String::from("GET / HTTP/1.1\r\n");
        for i in 0..=MAX_HEADERS {
            s.push_str(&format!("x-{i}: v\r\n"));
        }
        s.push_str("\r\n");
        assert_eq!(req(&s).unwrap_err(), HttpError::HeadTooLarge);
    }

    #[test]
    fn parses_response_and_tokens() {
        let raw = b"HTTP/1.1 101 Switching Protocols\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n";
        let h = parse_response(raw).unwrap();
        assert_eq!(h.status, 101);
        assert_eq!(h.reason(), b"Switching Protocols");
        assert!(h.fields.has_token("connection", "upgrade"));
        assert!(!h.is_interim());
    }
}
