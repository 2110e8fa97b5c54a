//! How long a message body is (RFC 9112 section 6), decided once per head.
//!
//! Every way two parsers could disagree on where a body ends is refused
//! here: Content-Length together with Transfer-Encoding, more than one
//! Content-Length, a Content-Length that is not a plain decimal number, a
//! Transfer-Encoding whose last coding is not `chunked`.

use crate::head::{trim_ows, FieldKind, Fields, RequestHead, ResponseHead};
use crate::HttpError;

/// The framing of a message body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body at all.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding; ends with the last chunk and trailers.
    Chunked,
    /// Until the sender closes the connection (responses only).
    UntilClose,
}

impl BodyFraming {
    /// True when the body ends only when the connection does.
    pub fn is_until_close(self) -> bool {
        matches!(self, BodyFraming::UntilClose)
    }
}

/// The framing of a request body. Requests without Content-Length or
/// Transfer-Encoding have no body.
pub fn request_framing(head: &RequestHead) -> Result<BodyFraming, HttpError> {
    let te = transfer_encoding(&head.fields)?;
    let cl = content_length(&head.fields)?;
    match (te, cl) {
        (Some(_), Some(_)) => Err(HttpError::ContentLengthAndTransferEncoding),
        (Some(_), None) if head.minor_version == 0 => Err(HttpError::TransferEncodingInHttp10),
        (Some(true), None) => Ok(BodyFraming::Chunked),
        // A request body that is not chunked last cannot be delimited.
        (Some(false), None) => Err(HttpError::TransferEncodingNotChunked),
        (None, Some(0)) => Ok(BodyFraming::Empty),
        (None, Some(n)) => Ok(BodyFraming::Length(n)),
        (None, None) => Ok(BodyFraming::Empty),
    }
}

/// The framing of a response body, given the request method it answers.
pub fn response_framing(
    request_is_head: bool,
    request_is_connect: bool,
    head: &ResponseHead,
) -> Result<BodyFraming, HttpError> {
    let status = head.status;
    if request_is_head || (100..200).contains(&status) || status == 204 || status == 304 {
        return Ok(BodyFraming::Empty);
    }
    if request_is_connect && (200..300).contains(&status) {
        return Ok(BodyFraming::UntilClose);
    }
    let te = transfer_encoding(&head.fields)?;
    let cl = content_length(&head.fields)?;
    match (te, cl) {
        (Some(_), Some(_)) => Err(HttpError::ContentLengthAndTransferEncoding),
        (Some(true), None) if head.minor_version >= 1 => Ok(BodyFraming::Chunked),
        (Some(_), None) => Ok(BodyFraming::UntilClose),
        (None, Some(0)) => Ok(BodyFraming::Empty),
        (None, Some(n)) => Ok(BodyFraming::Length(n)),
        (None, None) => Ok(BodyFraming::UntilClose),
    }
}

/// `Some(true)` when Transfer-Encoding is present and its last coding is
/// chunked, `Some(false)` when present otherwise, `None` when absent.
/// `chunked` anywhere but last is an error (it would be applied twice).
#[inline]
fn transfer_encoding(fields: &Fields) -> Result<Option<bool>, HttpError> {
    // Most heads have none: answered from the parser's set of kinds, not
    // by a call that sets up the walk (about 45 instructions a head).
    if !fields.has(FieldKind::TransferEncoding) {
        return Ok(None);
    }
    let mut present = false;
    let mut last_is_chunked = false;
    for value in fields.all(FieldKind::TransferEncoding) {
        for coding in value.split(|&b| b == b',') {
            let coding = trim_ows(coding);
            if coding.is_empty() {
                continue;
            }
            if last_is_chunked {
                // Something follows `chunked`.
                return Err(HttpError::TransferEncodingNotChunked);
            }
            present = true;
            last_is_chunked = coding.eq_ignore_ascii_case(b"chunked");
        }
    }
    if !present && fields.has(FieldKind::TransferEncoding) {
        return Err(HttpError::TransferEncodingNotChunked);
    }
    Ok(present.then_some(last_is_chunked))
}

/// The Content-Length, refusing duplicates and anything but 1*DIGIT.
fn content_length(fields: &Fields) -> Result<Option<u64>, HttpError> {
    match fields.only_content_length() {
        Ok(None) => Ok(None),
        Ok(Some(value)) => parse_content_length(value).map(Some),
        Err(()) => Err(HttpError::DuplicateContentLength),
    }
}

/// Parses a Content-Length value: 1 to 19 ASCII digits, nothing else.
pub fn parse_content_length(value: &[u8]) -> Result<u64, HttpError> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return Err(HttpError::BadContentLength);
    }
    Ok(value.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::head::{parse_request, parse_response};

    fn framing(raw: &str) -> Result<BodyFraming, HttpError> {
        request_framing(&parse_request(raw.as_bytes()).unwrap())
    }

    #[test]
    fn request_framing_cases() {
        assert_eq!(
            framing("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(BodyFraming::Empty)
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n"),
            Ok(BodyFraming::Length(5))
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            Ok(BodyFraming::Chunked)
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(HttpError::ContentLengthAndTransferEncoding)
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
            Err(HttpError::DuplicateContentLength)
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n"),
            Err(HttpError::BadContentLength)
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n"),
            Err(HttpError::BadContentLength)
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
            Err(HttpError::TransferEncodingNotChunked)
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            Err(HttpError::TransferEncodingNotChunked)
        );
        assert_eq!(
            framing("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(HttpError::TransferEncodingInHttp10)
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"),
            Err(HttpError::BadContentLength)
        );
    }

    #[test]
    fn response_framing_cases() {
        let r = |raw: &str| parse_response(raw.as_bytes()).unwrap();
        let ok = r("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n");
        assert_eq!(
            response_framing(false, false, &ok),
            Ok(BodyFraming::Length(3))
        );
        assert_eq!(response_framing(true, false, &ok), Ok(BodyFraming::Empty));
        let nc = r("HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\n");
        assert_eq!(response_framing(false, false, &nc), Ok(BodyFraming::Empty));
        let close = r("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!(
            response_framing(false, false, &close),
            Ok(BodyFraming::UntilClose)
        );
        let chunked = r("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(
            response_framing(false, false, &chunked),
            Ok(BodyFraming::Chunked)
        );
    }

    #[test]
    fn the_noted_content_length_follows_each_head_a_reused_head_holds() {
        use crate::head::{parse_request_into, parse_response_into, RequestHead};
        // One head refilled by the next, as a connection's heads are: the
        // field the parser noted must be this head's, never the last one's.
        let mut req = RequestHead::default();
        let mut read = |raw: &str| {
            parse_request_into(raw.as_bytes(), &mut req).unwrap();
            request_framing(&req)
        };
        let twice =
            "POST / HTTP/1.1\r\nA: 1\r\nContent-Length: 5\r\nB: 2\r\nContent-Length: 5\r\n\r\n";
        assert_eq!(read(twice), Err(HttpError::DuplicateContentLength));
        let late = "POST / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\ncontent-length: 7\r\n\r\n";
        assert_eq!(read(late), Ok(BodyFraming::Length(7)));
        let first = "POST / HTTP/1.1\r\nContent-Length: 9\r\nA: 1\r\n\r\n";
        assert_eq!(read(first), Ok(BodyFraming::Length(9)));
        assert_eq!(
            read("GET / HTTP/1.1\r\nA: 1\r\n\r\n"),
            Ok(BodyFraming::Empty)
        );
        let thrice = "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n";
        assert_eq!(read(thrice), Err(HttpError::DuplicateContentLength));
        assert_eq!(read(first), Ok(BodyFraming::Length(9)));

        let mut resp = ResponseHead::default();
        let mut answer = |raw: &str| {
            parse_response_into(raw.as_bytes(), &mut resp).unwrap();
            response_framing(false, false, &resp)
        };
        let nginx = "HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: x\r\nContent-Type: text/html\r\nContent-Length: 100\r\nConnection: keep-alive\r\n\r\n";
        assert_eq!(answer(nginx), Ok(BodyFraming::Length(100)));
        let dup = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nServer: nginx\r\nContent-Length: 100\r\n\r\n";
        assert_eq!(answer(dup), Err(HttpError::DuplicateContentLength));
        assert_eq!(
            answer("HTTP/1.1 200 OK\r\nServer: nginx\r\n\r\n"),
            Ok(BodyFraming::UntilClose)
        );
        assert_eq!(answer(nginx), Ok(BodyFraming::Length(100)));
    }
}
