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
use tern_http::rewrite::FieldEdits;
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
    /// An HTTP/1.1 `Upgrade` request (WebSocket and the like).
    pub upgrade: bool,
    /// The client waits for `100 Continue` before it sends its body.
    pub expects_continue: bool,
    /// It came in TLS early data (HTTP/3 0-RTT): logged as such.
    pub early: bool,
}

impl Request<'_> {
    /// True for CONNECT.
    pub(crate) fn is_connect(&self) -> bool {
        self.method == "CONNECT"
    }

    /// True for HEAD.
    pub(crate) fn is_head(&self) -> bool {
        self.method == "HEAD"
    }
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
    /// A piece; `true` when it is the last one.
    Data(Piece<'a>, bool),
    /// Nothing is at hand yet (only when the caller asked not to wait).
    NotYet,
    /// The body has ended (nothing was left with the last piece).
    End,
}
