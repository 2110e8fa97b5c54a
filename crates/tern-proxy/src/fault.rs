//! Why an exchange failed, and whose fault it was.
//!
//! One type for every path (any front end, any backend protocol): the side
//! decides who is told (a client that failed gets no answer, a backend that
//! failed is answered for), the kind decides the status. The access log's
//! `error=` field and the `tern_request_errors_total{side,kind}` metric show
//! both, so an operator reading a 502 knows whether to look at the backend
//! or at tern. A leaf module: front ends, the exchange core and the backend
//! clients all speak it, and it imports none of them.

use std::fmt;

/// Which party an exchange failed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The client left, stalled, or sent a body that breaks its framing.
    Client,
    /// The backend could not be reached, or answered wrongly or too late.
    Backend,
    /// tern itself cannot carry the request (not a fault of either peer).
    Tern,
}

impl Side {
    /// The label used in logs and metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Backend => "backend",
            Side::Tern => "tern",
        }
    }
}

/// What went wrong. Each kind belongs to one [`Side`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Client: closed, reset its stream, or did not take a write in time.
    ClientGone,
    /// Client: the request body broke its framing (400).
    BadBody,
    /// Client: the request body stalled for the idle timeout (408).
    UploadStalled,
    /// Client: the request cannot be expressed for the backend (a field
    /// value HTTP/2 cannot carry, an unknown method) (400).
    Unrelayable,
    /// Client: its address is denied (`deny`/`allow`): closed before the
    /// handshake on a listener, 403 on a route.
    Denied,
    /// Client: over `client_rate` (429 with Retry-After).
    RateLimited,
    /// Client: over `client_max_connections` (closed before the handshake).
    TooManyConnections,
    /// Client: kept sending past `client_rate` (`client_rate_close_after`
    /// refusals in a row): its connection closed, and its new ones closed
    /// before the handshake until its Retry-After has passed.
    KeptSending,
    /// Client: the request body is over `max_request_body` (413).
    BodyTooLarge,
    /// Client: the TLS handshake failed or timed out (closed; logged only
    /// with `log_rejected`, counted in the handshake metrics).
    HandshakeFailed,
    /// Client: the request head did not come within `header_timeout`
    /// (slowloris; closed).
    HeadTimeout,
    /// Backend: connection refused or failed (502).
    Connect,
    /// Backend: the TLS handshake failed (its certificate did not verify,
    /// it refused tern's, no common version or ALPN) (502).
    Tls,
    /// Backend: no connection within the connect timeout (504).
    ConnectTimeout,
    /// Backend: every server of the group is down (503).
    AllDown,
    /// Backend: closed or reset before a complete response head (502).
    Closed,
    /// Backend: no response head within the response timeout (504).
    Timeout,
    /// Backend: malformed response head or body (502).
    Invalid,
    /// Backend: failed while the request body went up (502).
    Upload,
    /// Backend: failed after the response head was sent; the client's
    /// response is cut short.
    Body,
    /// Backend: an HTTP/2 backend that does not offer extended CONNECT
    /// (RFC 8441's SETTINGS_ENABLE_CONNECT_PROTOCOL) was asked for a
    /// WebSocket (502).
    NoExtendedConnect,
    /// tern: a plain CONNECT, or an Upgrade other than WebSocket towards
    /// an HTTP/2 backend (501).
    NotImplemented,
}

impl Kind {
    /// The side this kind of failure is on.
    pub(crate) fn side(self) -> Side {
        match self {
            Kind::ClientGone
            | Kind::BadBody
            | Kind::UploadStalled
            | Kind::Unrelayable
            | Kind::Denied
            | Kind::RateLimited
            | Kind::TooManyConnections
            | Kind::KeptSending
            | Kind::BodyTooLarge
            | Kind::HandshakeFailed
            | Kind::HeadTimeout => Side::Client,
            Kind::NotImplemented => Side::Tern,
            _ => Side::Backend,
        }
    }

    /// The label used in logs and metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::ClientGone => "gone",
            Kind::BadBody => "bad_body",
            Kind::UploadStalled => "upload_stalled",
            Kind::Unrelayable => "unrelayable",
            Kind::Denied => "denied",
            Kind::RateLimited => "rate_limited",
            Kind::TooManyConnections => "too_many_connections",
            Kind::KeptSending => "kept_sending",
            Kind::BodyTooLarge => "body_too_large",
            Kind::HandshakeFailed => "handshake_failed",
            Kind::HeadTimeout => "head_timeout",
            Kind::Connect => "connect",
            Kind::Tls => "tls",
            Kind::ConnectTimeout => "connect_timeout",
            Kind::AllDown => "all_down",
            Kind::Closed => "closed",
            Kind::Timeout => "timeout",
            Kind::Invalid => "invalid",
            Kind::Upload => "upload",
            Kind::Body => "body",
            Kind::NoExtendedConnect => "no_extended_connect",
            Kind::NotImplemented => "not_implemented",
        }
    }

    /// Every kind, in the order of [`Kind::index`] (for metrics).
    pub(crate) const ALL: [Kind; 22] = [
        Kind::ClientGone,
        Kind::BadBody,
        Kind::UploadStalled,
        Kind::Unrelayable,
        Kind::Denied,
        Kind::RateLimited,
        Kind::TooManyConnections,
        Kind::KeptSending,
        Kind::BodyTooLarge,
        Kind::HandshakeFailed,
        Kind::HeadTimeout,
        Kind::Connect,
        Kind::Tls,
        Kind::ConnectTimeout,
        Kind::AllDown,
        Kind::Closed,
        Kind::Timeout,
        Kind::Invalid,
        Kind::Upload,
        Kind::Body,
        Kind::NoExtendedConnect,
        Kind::NotImplemented,
    ];

    /// Position in [`Kind::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The status a client that has not had one yet is answered with;
    /// `None` when no answer is due (the client is gone, or the response
    /// was already under way).
    pub(crate) fn status(self) -> Option<u16> {
        match self {
            Kind::ClientGone
            | Kind::Body
            | Kind::TooManyConnections
            | Kind::KeptSending
            | Kind::HandshakeFailed
            | Kind::HeadTimeout => None,
            Kind::Denied => Some(403),
            Kind::BodyTooLarge => Some(413),
            Kind::RateLimited => Some(429),
            Kind::BadBody | Kind::Unrelayable => Some(400),
            Kind::UploadStalled => Some(408),
            Kind::Connect
            | Kind::Tls
            | Kind::Closed
            | Kind::Invalid
            | Kind::Upload
            | Kind::NoExtendedConnect => Some(502),
            Kind::AllDown => Some(503),
            Kind::ConnectTimeout | Kind::Timeout => Some(504),
            Kind::NotImplemented => Some(501),
        }
    }
}

/// An exchange that could not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExchangeError {
    kind: Kind,
}

impl ExchangeError {
    /// A failure of `kind` (its side follows from it).
    pub(crate) fn new(kind: Kind) -> Self {
        ExchangeError { kind }
    }

    /// What went wrong.
    pub(crate) fn kind(self) -> Kind {
        self.kind
    }

    /// Whose fault it was.
    pub(crate) fn side(self) -> Side {
        self.kind.side()
    }
}

impl ExchangeError {
    /// `side:kind`, the access log's `error=` field.
    pub(crate) fn label(self) -> &'static str {
        match self.kind {
            Kind::ClientGone => "client:gone",
            Kind::BadBody => "client:bad_body",
            Kind::UploadStalled => "client:upload_stalled",
            Kind::Unrelayable => "client:unrelayable",
            Kind::Denied => "client:denied",
            Kind::RateLimited => "client:rate_limited",
            Kind::TooManyConnections => "client:too_many_connections",
            Kind::KeptSending => "client:kept_sending",
            Kind::BodyTooLarge => "client:body_too_large",
            Kind::HandshakeFailed => "client:handshake_failed",
            Kind::HeadTimeout => "client:head_timeout",
            Kind::Connect => "backend:connect",
            Kind::Tls => "backend:tls",
            Kind::ConnectTimeout => "backend:connect_timeout",
            Kind::AllDown => "backend:all_down",
            Kind::Closed => "backend:closed",
            Kind::Timeout => "backend:timeout",
            Kind::Invalid => "backend:invalid",
            Kind::Upload => "backend:upload",
            Kind::Body => "backend:body",
            Kind::NoExtendedConnect => "backend:no_extended_connect",
            Kind::NotImplemented => "tern:not_implemented",
        }
    }
}

impl From<Kind> for ExchangeError {
    fn from(kind: Kind) -> Self {
        ExchangeError::new(kind)
    }
}

impl fmt::Display for ExchangeError {
    /// `side:kind`, the form of the access log's `error=` field.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The reason phrase and one-line body tern answers `status` with, for
/// every response tern writes itself (errors and refusals alike).
pub(crate) fn answer_text(status: u16) -> (&'static str, &'static str) {
    match status {
        400 => ("Bad Request", "bad request\n"),
        403 => ("Forbidden", "forbidden\n"),
        408 => ("Request Timeout", "request timeout\n"),
        413 => ("Content Too Large", "content too large\n"),
        421 => (
            "Misdirected Request",
            "misdirected request: connect with this host name as the TLS server name\n",
        ),
        425 => (
            "Too Early",
            "too early: send it again after the handshake\n",
        ),
        429 => ("Too Many Requests", "too many requests\n"),
        431 => (
            "Request Header Fields Too Large",
            "request header fields too large\n",
        ),
        501 => ("Not Implemented", "not implemented\n"),
        503 => ("Service Unavailable", "service unavailable\n"),
        504 => ("Gateway Timeout", "gateway timeout\n"),
        _ => ("Bad Gateway", "bad gateway\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_listed_in_index_order_with_their_status() {
        for (i, k) in Kind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
        assert_eq!(Kind::Timeout.status(), Some(504));
        assert_eq!(Kind::AllDown.status(), Some(503));
        assert_eq!(Kind::Closed.status(), Some(502));
        assert_eq!(Kind::ClientGone.status(), None);
        assert_eq!(Kind::NotImplemented.side(), Side::Tern);
        assert_eq!(
            ExchangeError::new(Kind::Timeout).to_string(),
            "backend:timeout"
        );
        for k in Kind::ALL {
            let e = ExchangeError::new(k);
            assert_eq!(e.label(), format!("{}:{}", k.side().as_str(), k.as_str()));
        }
    }
}
