//! A request and a response as the exchange core sees them, whatever
//! protocol they arrived in: the neutral vocabulary between front ends,
//! the core and the backend clients (a leaf module: it imports none of
//! them).
//!
//! Heads are not converted to a common representation (that would cost a
//! copy of every field per request): a view names the parsed head as its
//! front end or backend client parsed it, and the one place that writes a
//! head for the other protocol reads it from there.

use bytes::Bytes;
use tern_http::rewrite::{ClientCertFields, FieldEdits};
use tern_http::{BodyFraming, RequestHead, ResponseHead};

/// A client request, borrowed from its front end.
#[derive(Debug)]
pub(crate) struct Request<'r> {
    /// Method, as sent.
    pub method: &'r str,
    /// Request target: as sent over HTTP/1.1, path and query over HTTP/2.
    pub target: &'r str,
    /// Host field or `:authority` (routes the request; becomes the
    /// backend's Host or `:authority`).
    pub authority: Option<&'r [u8]>,
    /// The parsed head.
    pub head: RequestView<'r>,
    /// What the client said of its body.
    pub body: BodyLen,
    /// An HTTP/1.0 client (no chunked coding, no keepalive by default).
    pub http10: bool,
    /// An HTTP/1.1 `Upgrade` request (WebSocket and the like), or an
    /// HTTP/2 extended CONNECT for a WebSocket (RFC 8441), which becomes
    /// one to an HTTP/1.1 backend.
    pub upgrade: bool,
    /// The client waits for `100 Continue` before it sends its body.
    pub expects_continue: bool,
    /// It came in TLS early data (HTTP/3 0-RTT): logged as such.
    pub early: bool,
    /// The client's verified certificate, as the backend is told it
    /// (RFC 9440 fields); `None` without one.
    pub client_cert: Option<&'r ClientCertFields>,
    /// The client takes trailers (`TE: trailers`): the backend is told so,
    /// and an HTTP/1.1 client is sent the response's trailers only then.
    pub trailers_ok: bool,
}

impl Request<'_> {
    /// True for CONNECT.
    pub(crate) fn is_connect(&self) -> bool {
        self.method == "CONNECT"
    }

    /// True for an HTTP/2 extended CONNECT that opens a WebSocket (RFC
    /// 8441): relayed to an HTTP/1.1 backend as `GET` with
    /// `Upgrade: websocket`.
    pub(crate) fn is_websocket_connect(&self) -> bool {
        self.is_connect() && self.upgrade && matches!(self.head, RequestView::H2(_))
    }

    /// True for a request that opens a WebSocket: an HTTP/1.1 `Upgrade:
    /// websocket`, or an extended CONNECT with `:protocol websocket` (RFC
    /// 8441 over HTTP/2, RFC 9220 over HTTP/3). The only upgrade an HTTP/2
    /// backend can take (as an extended CONNECT of its own).
    pub(crate) fn is_websocket(&self) -> bool {
        match self.head {
            RequestView::H1(h) => {
                self.upgrade
                    && h.fields
                        .get("upgrade")
                        .is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case(b"websocket"))
            }
            RequestView::H2(_) => self.is_websocket_connect(),
        }
    }

    /// The `Sec-WebSocket-Key` of an HTTP/1.1 WebSocket handshake.
    pub(crate) fn websocket_key(&self) -> Option<&[u8]> {
        match self.head {
            RequestView::H1(h) => h.fields.get("sec-websocket-key").map(<[u8]>::trim_ascii),
            RequestView::H2(_) => None,
        }
    }

    /// True for the methods RFC 9110 section 9.2.2 makes idempotent
    /// (GET, HEAD, OPTIONS, TRACE, PUT, DELETE): sending one twice does
    /// what sending it once does, so it may go to another server.
    #[inline]
    pub(crate) fn is_idempotent(&self) -> bool {
        matches!(
            self.method,
            "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
        )
    }

    /// True for HEAD.
    pub(crate) fn is_head(&self) -> bool {
        self.method == "HEAD"
    }

    /// True for a gRPC call (`content-type: application/grpc` and its
    /// `+proto`/`+json` forms): its failures are answered the gRPC way.
    pub(crate) fn is_grpc(&self) -> bool {
        let ct = match self.head {
            RequestView::H1(h) => h.fields.get("content-type"),
            RequestView::H2(p) => p
                .headers
                .get(http::header::CONTENT_TYPE)
                .map(http::HeaderValue::as_bytes),
        };
        ct.is_some_and(|v| {
            v.len() >= 16
                && v[..16].eq_ignore_ascii_case(b"application/grpc")
                && matches!(v.get(16), None | Some(b'+' | b';'))
        })
    }
}

/// True when an HTTP/2 or HTTP/3 request's `te` field says it takes
/// trailers (the only value those protocols allow, RFC 9113 section
/// 8.2.2).
pub(crate) fn h2_takes_trailers(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::TE)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"trailers"))
}

/// A request head as its front end parsed it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RequestView<'r> {
    /// HTTP/1.1 (tern-http's parse).
    H1(&'r RequestHead),
    /// HTTP/2 (the h2 crate's).
    H2(&'r http::request::Parts),
}

/// The request body as announced by the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyLen {
    /// No body.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Until the sender says it ended (chunked coding, or an HTTP/2 stream
    /// without content-length).
    Unknown,
}

/// A response head as the backend client parsed it, with the framing of
/// its body as tern will deliver it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResponseView<'r> {
    /// The head.
    pub head: ResponseHeadView<'r>,
    /// The body: `Empty` (HEAD, 1xx, 204, 304, or an ended stream),
    /// `Length`, `Chunked` (length unknown) or `UntilClose`.
    pub body: BodyFraming,
    /// What the header rules change on the way to the client.
    pub edits: &'r FieldEdits<'r>,
}

/// A response head as the backend client parsed it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ResponseHeadView<'r> {
    /// From an HTTP/1.1 backend.
    H1(&'r ResponseHead),
    /// From an HTTP/2 backend.
    H2(&'r http::response::Parts),
}

impl ResponseView<'_> {
    /// The status code.
    pub(crate) fn status(&self) -> u16 {
        match self.head {
            ResponseHeadView::H1(h) => h.status,
            ResponseHeadView::H2(p) => p.status.as_u16(),
        }
    }
}

/// A backend's yes to a WebSocket, as a front end relays it before the
/// tunnel starts: an HTTP/1.1 backend's `101`, or an HTTP/2 backend's
/// `2xx` to an extended CONNECT (RFC 8441).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Switched<'r> {
    /// The backend's head.
    pub head: ResponseHeadView<'r>,
    /// What the header rules change on the way to the client (HSTS,
    /// `response_headers`, the request ID), as for any response.
    pub edits: &'r FieldEdits<'r>,
    /// `Sec-WebSocket-Accept` for an HTTP/1.1 client whose handshake tern
    /// answers itself (its backend spoke RFC 8441, which has no key); None
    /// when an HTTP/1.1 backend's 101 carries the backend's own.
    pub accept: Option<&'r str>,
}

/// How the body pieces of a response must reach a front end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyForm {
    /// As framed on the HTTP/1.1 wire (chunked coding kept): an HTTP/1.1
    /// client reading an HTTP/1.1 backend's head relayed as it was.
    Wire,
    /// Payload only (chunked coding removed).
    Payload,
}

/// A piece of a body on its way through tern: borrowed from a read
/// buffer, or an HTTP/2 DATA payload (moved, never copied, between two
/// HTTP/2 peers).
#[derive(Debug)]
pub(crate) enum Piece<'a> {
    /// Bytes in a buffer tern reads into.
    Slice(&'a [u8]),
    /// A payload tern received as `Bytes`.
    Shared(Bytes),
}

impl Piece<'_> {
    /// The bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Piece::Slice(s) => s,
            Piece::Shared(b) => b,
        }
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// True when empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Owned bytes (a copy only when borrowed).
    pub(crate) fn into_bytes(self) -> Bytes {
        match self {
            Piece::Slice(s) => Bytes::copy_from_slice(s),
            Piece::Shared(b) => b,
        }
    }
}

/// One step through a body.
#[derive(Debug)]
pub(crate) enum Step<'a> {
    /// A piece; `true` when it is the last one (no trailers follow).
    Data(Piece<'a>, bool),
    /// Nothing is at hand yet (only when the caller asked not to wait).
    NotYet,
    /// The body has ended (nothing was left with the last piece).
    End,
    /// The body has ended with these trailer fields, already cleaned by
    /// [`clean_trailers`].
    Trailers(Trailers),
}

/// Trailer fields (RFC 9110 section 6.5): what an HTTP/1.1 chunked body's
/// trailer section, or HTTP/2's and HTTP/3's trailing HEADERS, carried.
pub(crate) type Trailers = http::HeaderMap;

/// Why a trailer section was not relayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TrailerError {
    /// Larger than [`tern_http::trailers::MAX_TRAILERS`].
    #[error(
        "trailer section larger than {} bytes",
        tern_http::trailers::MAX_TRAILERS
    )]
    TooLarge,
    /// An HTTP/1.1 trailer section that does not parse, or a field that
    /// the other protocol cannot carry.
    #[error("malformed trailer section")]
    Malformed,
}

/// The trailers from any protocol as they go on, by the one rule: fields
/// forbidden in a trailer section are dropped
/// ([`tern_http::trailers::is_forbidden_trailer`]), and a section past
/// [`tern_http::trailers::MAX_TRAILERS`] is refused whole. `None` when
/// nothing is left to relay.
pub(crate) fn clean_trailers<'f>(
    fields: impl Iterator<Item = (&'f str, &'f [u8])>,
) -> Result<Option<Trailers>, TrailerError> {
    use tern_http::trailers::{field_size, is_forbidden_trailer, MAX_TRAILERS};
    let mut out = Trailers::new();
    let mut size = 0;
    for (name, value) in fields {
        size += field_size(name, value);
        if size > MAX_TRAILERS {
            return Err(TrailerError::TooLarge);
        }
        if is_forbidden_trailer(name) {
            continue;
        }
        let name =
            http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| TrailerError::Malformed)?;
        let value = http::HeaderValue::from_bytes(value).map_err(|_| TrailerError::Malformed)?;
        out.append(name, value);
    }
    Ok((!out.is_empty()).then_some(out))
}

/// [`clean_trailers`] for a trailer map as HTTP/2 and HTTP/3 deliver it:
/// the map itself goes on when no field is forbidden (the usual case: a
/// gRPC call's `grpc-status` and `grpc-message`), rather than a copy
/// whose every name and value is parsed again.
pub(crate) fn clean_trailer_map(map: Trailers) -> Result<Option<Trailers>, TrailerError> {
    use tern_http::trailers::{field_size, is_forbidden_trailer, MAX_TRAILERS};
    let mut size = 0;
    let mut forbidden = false;
    for (name, value) in &map {
        size += field_size(name.as_str(), value.as_bytes());
        if size > MAX_TRAILERS {
            return Err(TrailerError::TooLarge);
        }
        forbidden |= is_forbidden_trailer(name.as_str());
    }
    if forbidden {
        return clean_trailers(map.iter().map(|(n, v)| (n.as_str(), v.as_bytes())));
    }
    Ok((!map.is_empty()).then_some(map))
}

/// [`clean_trailers`] for an HTTP/1.1 trailer section as the chunked
/// scanner captured it.
pub(crate) fn clean_trailer_section(raw: &[u8]) -> Result<Option<Trailers>, TrailerError> {
    let fields = tern_http::trailers::parse_section(raw).map_err(|_| TrailerError::Malformed)?;
    clean_trailers(fields.into_iter())
}

/// The gRPC status a response carries (`grpc-status` in its trailers, or
/// in its head for a trailers-only response), for the access log and
/// metrics.
pub(crate) fn grpc_status(fields: &http::HeaderMap) -> Option<u16> {
    // A name made once: looking up by `&str` parses it on every call.
    static GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");
    fields
        .get(&GRPC_STATUS)
        .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
        .and_then(|s| s.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailers_lose_forbidden_fields_and_keep_the_rest() {
        let raw =
            b"grpc-status: 0\r\nContent-Length: 5\r\nX-Forwarded-For: 6.6.6.6\r\nx-sum: 1\r\n\r\n";
        let t = clean_trailer_section(raw).unwrap().unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(grpc_status(&t), Some(0));
        assert_eq!(t["x-sum"], "1");
        assert_eq!(clean_trailer_section(b"host: x\r\n\r\n"), Ok(None));
    }

    #[test]
    fn a_trailer_map_loses_forbidden_fields_and_keeps_the_rest() {
        let mut map = Trailers::new();
        map.append("grpc-status", http::HeaderValue::from_static("0"));
        map.append("grpc-message", http::HeaderValue::from_static("ok"));
        let clean = clean_trailer_map(map.clone()).unwrap().unwrap();
        assert_eq!(clean, map);
        map.append("content-length", http::HeaderValue::from_static("5"));
        map.append("x-forwarded-for", http::HeaderValue::from_static("6.6.6.6"));
        let clean = clean_trailer_map(map).unwrap().unwrap();
        assert_eq!(clean.len(), 2);
        assert_eq!(grpc_status(&clean), Some(0));
        let mut only_forbidden = Trailers::new();
        only_forbidden.append("host", http::HeaderValue::from_static("x"));
        assert_eq!(clean_trailer_map(only_forbidden), Ok(None));
        let mut big = Trailers::new();
        let value = vec![b'a'; tern_http::trailers::MAX_TRAILERS];
        big.append("x-big", http::HeaderValue::from_bytes(&value).unwrap());
        assert_eq!(clean_trailer_map(big), Err(TrailerError::TooLarge));
        assert_eq!(clean_trailer_map(Trailers::new()), Ok(None));
    }

    #[test]
    fn a_trailer_section_past_the_bound_is_refused() {
        let big = vec![b'a'; tern_http::trailers::MAX_TRAILERS];
        let fields = [("x-big", &big[..])];
        assert_eq!(
            clean_trailers(fields.into_iter()),
            Err(TrailerError::TooLarge)
        );
    }
}
