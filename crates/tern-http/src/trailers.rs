//! Trailer fields (RFC 9110 section 6.5) on the way through a proxy: the
//! one rule for which fields may travel in a trailer section, the bound on
//! its size, and the HTTP/1.1 form (the trailer section of a chunked body).
//!
//! Every protocol's trailers (HTTP/1.1 chunked trailers, HTTP/2 and HTTP/3
//! trailing HEADERS) pass through [`is_forbidden_trailer`] in both
//! directions, so a field that must not follow a body (framing, routing,
//! authentication, response control) never reaches the other peer from a
//! trailer, whatever the two legs speak.

use crate::HttpError;

/// Largest trailer section tern relays, in bytes (names, values and
/// 32 bytes of overhead a field, as HTTP/2 counts header list size): the
/// chunked scanner's bound on an HTTP/1.1 trailer section, applied to
/// every protocol alike.
pub const MAX_TRAILERS: usize = crate::chunked::MAX_TRAILERS;

/// Most fields in one HTTP/1.1 trailer section.
pub const MAX_TRAILER_FIELDS: usize = 64;

/// Fields that must not come from a trailer (RFC 9110 section 6.5.1):
/// message framing, routing, request modifiers, authentication, response
/// control data and content handling, plus HTTP/1.1's hop-by-hop fields
/// and the forwarding fields tern itself vouches for (a client must not
/// smuggle them in after the head was rewritten).
const FORBIDDEN: &[&str] = &[
    // framing
    "content-length",
    "transfer-encoding",
    "trailer",
    // hop-by-hop
    "connection",
    "keep-alive",
    "proxy-connection",
    "upgrade",
    "te",
    // routing and request modifiers
    "host",
    "expect",
    "max-forwards",
    "cache-control",
    "pragma",
    "range",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
    "if-range",
    // authentication and state
    "authorization",
    "proxy-authorization",
    "www-authenticate",
    "proxy-authenticate",
    "cookie",
    "set-cookie",
    // response control data
    "age",
    "expires",
    "date",
    "location",
    "retry-after",
    "vary",
    "warning",
    // content handling
    "content-encoding",
    "content-type",
    "content-range",
];

/// True when `name` must not travel in a trailer section: it is dropped
/// (the rest of the section goes on).
pub fn is_forbidden_trailer(name: &str) -> bool {
    name.starts_with(':')
        || FORBIDDEN.iter().any(|f| name.eq_ignore_ascii_case(f))
        || crate::forwarding::is_client_forwarding_field(name)
}

/// The size a field counts for against [`MAX_TRAILERS`].
pub fn field_size(name: &str, value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

/// The fields of an HTTP/1.1 trailer section (the field lines after the
/// last chunk, each ended by CRLF, then the empty line), as the chunked
/// scanner captured it. Forbidden fields are left in: the caller drops
/// them by [`is_forbidden_trailer`], the same for every protocol.
pub fn parse_section(raw: &[u8]) -> Result<Vec<(&str, &[u8])>, HttpError> {
    if raw == b"\r\n" || raw.is_empty() {
        return Ok(Vec::new());
    }
    let mut fields = [httparse::EMPTY_HEADER; MAX_TRAILER_FIELDS];
    match httparse::parse_headers(raw, &mut fields) {
        Ok(httparse::Status::Complete((_, fields))) => Ok(fields
            .iter()
            .map(|f| (f.name, f.value))
            .filter(|(n, _)| !n.is_empty())
            .collect()),
        Ok(httparse::Status::Partial) => Err(HttpError::BadChunk("trailer section incomplete")),
        Err(httparse::Error::TooManyHeaders) => Err(HttpError::BadChunk("too many trailer fields")),
        Err(_) => Err(HttpError::BadChunk("malformed trailer field")),
    }
}

/// Appends the end of a chunked body with `fields` as its trailer section
/// (the last chunk, the field lines, the empty line).
pub fn write_last_chunk<'a>(fields: impl Iterator<Item = (&'a str, &'a [u8])>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n");
    for (name, value) in fields {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_routing_and_auth_fields_are_forbidden_in_trailers() {
        for name in [
            "Content-Length",
            "transfer-encoding",
            "Host",
            "authorization",
            "Set-Cookie",
            "X-Forwarded-For",
            "forwarded",
            ":status",
            "content-type",
        ] {
            assert!(is_forbidden_trailer(name), "{name}");
        }
        for name in ["grpc-status", "grpc-message", "server-timing", "x-checksum"] {
            assert!(!is_forbidden_trailer(name), "{name}");
        }
    }

    #[test]
    fn a_trailer_section_parses_into_its_fields() {
        let raw = b"grpc-status: 0\r\nX-Sum:  abc \r\n\r\n";
        let fields = parse_section(raw).unwrap();
        assert_eq!(
            fields,
            vec![("grpc-status", &b"0"[..]), ("X-Sum", &b"abc"[..])]
        );
        assert!(parse_section(b"\r\n").unwrap().is_empty());
        assert!(parse_section(b"bad line\r\n\r\n").is_err());
    }

    #[test]
    fn the_last_chunk_carries_the_trailer_section() {
        let mut out = Vec::new();
        write_last_chunk([("grpc-status", &b"0"[..])].into_iter(), &mut out);
        assert_eq!(out, b"0\r\ngrpc-status: 0\r\n\r\n");
        out.clear();
        write_last_chunk(std::iter::empty(), &mut out);
        assert_eq!(out, b"0\r\n\r\n");
    }
}
