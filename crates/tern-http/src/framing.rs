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
fn transfer_encoding(fields: &Fields) -> Result<Option<bool>, HttpError> {
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
    let mut values = fields.all(FieldKind::ContentLength);
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(HttpError::DuplicateContentLength);
    }
    parse_content_length(first).map(Some)
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
}
