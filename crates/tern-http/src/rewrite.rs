//! Writing heads on the way through: the request to the backend and the
//! response to the client.
//!
//! Hop-by-hop fields (RFC 9110 section 7.6.1, plus any field the
//! `Connection` header names) stop at tern. Client-sent forwarding fields
//! are always removed, because a client can put anything in them; tern then
//! adds its own, which the backend can trust.

use std::io::Write as _;

pub use crate::edits::{owned_by_tern, FieldEdits, FieldValue};
pub use crate::forwarding::{
    forwarding_fields, is_client_forwarding_field, ClientCertFields, ClientFacts, ClientIp,
    ForwardedFields, CLIENT_FORWARDING_FIELDS,
};
use crate::head::{FieldKind, Fields, RequestHead, ResponseHead};

/// Hop-by-hop fields removed in both directions.
const HOP_BY_HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "upgrade",
    "trailer",
];

/// The kinds [`is_hop_by_hop`] stops whatever the Connection field names.
const HOP_BY_HOP_KINDS: [FieldKind; 3] = [
    FieldKind::Connection,
    FieldKind::Upgrade,
    FieldKind::HopByHop,
];

/// How the request head to the backend asks to treat the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendConnection {
    /// Keep the backend connection for further requests.
    KeepAlive,
    /// The client asked for a protocol upgrade; pass `Upgrade` on.
    Upgrade,
    /// Close after this exchange (HTTP/1.0 clients).
    Close,
}

/// True when the request asks for a protocol upgrade (WebSocket and the like).
pub fn wants_upgrade(head: &RequestHead) -> bool {
    head.fields.kind_has_token(FieldKind::Connection, "upgrade")
        && head.fields.has(FieldKind::Upgrade)
}

/// True when the sender of these fields asked to close the connection.
pub fn wants_close(fields: &Fields) -> bool {
    fields.asks_close()
}

/// Appends the request head for the backend to `out`, with the header
/// rules' `edits`.
pub fn write_request_head(
    head: &RequestHead,
    client: &ClientFacts,
    add: ForwardedFields,
    conn: BackendConnection,
    edits: &FieldEdits<'_>,
    out: &mut Vec<u8>,
) {
    let version = if conn == BackendConnection::Close && head.minor_version == 0 {
        "HTTP/1.0"
    } else {
        "HTTP/1.1"
    };
    out.extend_from_slice(head.method().as_bytes());
    out.push(b' ');
    out.extend_from_slice(head.target().as_bytes());
    out.push(b' ');
    out.extend_from_slice(version.as_bytes());
    out.extend_from_slice(b"\r\n");
    copy_fields(
        &head.fields,
        FieldKind::bits(&HOP_BY_HOP_KINDS) | FieldKind::ClientForwarding.bit(),
        conn == BackendConnection::Upgrade,
        edits,
        out,
    );
    write_forwarding_fields(out, client, add, head.fields.first(FieldKind::Host));
    put_added(out, edits);
    match conn {
        BackendConnection::KeepAlive => {}
        BackendConnection::Upgrade => put_field(out, b"Connection", b"upgrade"),
        BackendConnection::Close => put_field(out, b"Connection", b"close"),
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends tern's forwarding fields for `client` (the ones `add` asks for).
fn write_forwarding_fields(
    out: &mut Vec<u8>,
    client: &ClientFacts,
    add: ForwardedFields,
    host: Option<&[u8]>,
) {
    forwarding_fields(client, add, host, |name, pieces| {
        put_field_pieces(out, name.as_bytes(), pieces)
    });
}

/// Whether a request field that arrived over HTTP/2 goes on to an HTTP/2
/// backend. Host stops (the authority travels as `:authority`), and so do
/// connection-specific fields (forbidden in HTTP/2, RFC 9113 section
/// 8.2.2) and client forwarding fields. Content-Length and split `cookie`
/// fields stay: HTTP/2 allows both.
pub fn keeps_h2_request_field_for_h2(name: &str) -> bool {
    !(name.eq_ignore_ascii_case("host")
        || is_connection_specific(name)
        || is_client_forwarding_field(name))
}

/// The fields of an HTTP/1.1 request that go on to an HTTP/2 backend, in
/// arrival order: what [`write_request_head`] keeps, minus Host (it becomes
/// `:authority`), Transfer-Encoding (HTTP/2 frames the body itself) and
/// Expect (tern answers `100-continue` itself, and HTTP/2 has no use for
/// it once the body is on its way).
pub fn h1_request_fields_for_h2(head: &RequestHead) -> impl Iterator<Item = (&str, &[u8])> {
    let has_connection = head.fields.connection_names_fields();
    head.fields
        .iter_kinds()
        .filter(move |&(name, _, kind)| match kind {
            FieldKind::ClientForwarding
            | FieldKind::Host
            | FieldKind::TransferEncoding
            | FieldKind::Expect => false,
            _ => !is_hop_by_hop(name, kind, &head.fields, has_connection),
        })
        .map(|(name, value, _)| (name, value))
}

/// Fields that are connection-specific in HTTP/1.1 and forbidden in
/// HTTP/2 (RFC 9113 section 8.2.2); dropped when converting a response.
pub fn is_connection_specific(name: &str) -> bool {
    HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h))
        || name.eq_ignore_ascii_case("transfer-encoding")
}

/// How an HTTP/2 request's body reaches an HTTP/1.1 backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H1BodyFraming {
    /// No body.
    Empty,
    /// The client declared a length (validated against what arrives).
    Length(u64),
    /// Unknown length: tern chunk-encodes it.
    Chunked,
}

/// Appends an HTTP/1.1 request head for a request that arrived over HTTP/2:
/// `host` (the `:authority`, else the `host` field) becomes Host, split `cookie` fields are joined with "; "
/// (RFC 9113 section 8.2.3), connection-specific and client forwarding
/// fields are dropped, tern's forwarding fields, the header rules' `edits`
/// and the body framing added.
#[allow(clippy::too_many_arguments)]
pub fn write_request_head_from_h2<'a>(
    method: &str,
    target: &str,
    host: Option<&[u8]>,
    fields: impl Iterator<Item = (&'a str, &'a [u8])>,
    body: H1BodyFraming,
    client: &ClientFacts,
    add: ForwardedFields,
    edits: &FieldEdits<'_>,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if let Some(h) = host {
        put_field(out, b"Host", h);
    }
    let mut cookies: Vec<&[u8]> = Vec::new();
    for (name, value) in fields {
        if name.eq_ignore_ascii_case("host")
            || name.eq_ignore_ascii_case("content-length")
            || is_connection_specific(name)
            || is_client_forwarding_field(name)
            || edits.drops(name)
        {
            continue;
        }
        if name.eq_ignore_ascii_case("cookie") {
            cookies.push(value);
            continue;
        }
        put_field(out, name.as_bytes(), value);
    }
    if !cookies.is_empty() {
        put_field(out, b"cookie", &cookies.join(&b"; "[..]));
    }
    match body {
        H1BodyFraming::Empty => {}
        H1BodyFraming::Length(n) => put_field(out, b"Content-Length", n.to_string().as_bytes()),
        H1BodyFraming::Chunked => put_field(out, b"Transfer-Encoding", b"chunked"),
    }
    write_forwarding_fields(out, client, add, host);
    put_added(out, edits);
    out.extend_from_slice(b"\r\n");
}

/// Appends the response head for the client to `out`, with the header
/// rules' `edits`. `close` adds `Connection: close` (tern will close the
/// client connection after it).
pub fn write_response_head(
    head: &ResponseHead,
    close: bool,
    edits: &FieldEdits<'_>,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    // Status codes are three digits (httparse guarantees it); no formatter.
    let code = head.status;
    out.extend_from_slice(&[
        b'0' + (code / 100 % 10) as u8,
        b'0' + (code / 10 % 10) as u8,
        b'0' + (code % 10) as u8,
        b' ',
    ]);
    out.extend_from_slice(head.reason());
    out.extend_from_slice(b"\r\n");
    let upgrade = head.status == 101;
    copy_fields(
        &head.fields,
        FieldKind::bits(&HOP_BY_HOP_KINDS),
        upgrade,
        edits,
        out,
    );
    put_added(out, edits);
    if upgrade {
        put_field(out, b"Connection", b"upgrade");
    } else if close {
        put_field(out, b"Connection", b"close");
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends an HTTP/1.1 response head for a response that arrived over
/// HTTP/2 from a backend. Connection-specific fields are dropped (an
/// HTTP/2 peer may not send them; tern does not trust that it did not);
/// Content-Length is kept as sent. `chunked` adds
/// `Transfer-Encoding: chunked` (a body of unknown length), `close` adds
/// `Connection: close`; the header rules' `edits` apply.
pub fn write_response_head_from_h2<'a>(
    status: u16,
    reason: &str,
    fields: impl Iterator<Item = (&'a str, &'a [u8])>,
    chunked: bool,
    close: bool,
    edits: &FieldEdits<'_>,
    out: &mut Vec<u8>,
) {
    let _ = write!(out, "HTTP/1.1 {status:03} {reason}\r\n");
    for (name, value) in fields {
        if !is_connection_specific(name) && !edits.drops(name) {
            put_field(out, name.as_bytes(), value);
        }
    }
    put_added(out, edits);
    if chunked {
        put_field(out, b"Transfer-Encoding", b"chunked");
    }
    if close {
        put_field(out, b"Connection", b"close");
    }
    out.extend_from_slice(b"\r\n");
}

/// A response tern makes itself (errors, 100 Continue), head and body in one buffer.
pub fn write_simple_response(
    status: u16,
    reason: &str,
    body: &str,
    close: bool,
    out: &mut Vec<u8>,
) {
    let _ = write!(
        out,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n{}\r\n{body}",
        body.len(),
        if close { "connection: close\r\n" } else { "" },
    );
}

/// Whether a field stops at tern. `named_by_connection` is false when the
/// head has no Connection field, which spares the per-field token search in
/// the common case.
fn is_hop_by_hop(name: &str, kind: FieldKind, fields: &Fields, named_by_connection: bool) -> bool {
    match kind {
        FieldKind::Connection | FieldKind::Upgrade | FieldKind::HopByHop => true,
        // Fields named by Connection are hop-by-hop too, except the ones
        // that frame the message or route it: dropping those would change
        // what the next hop reads.
        FieldKind::ContentLength | FieldKind::TransferEncoding | FieldKind::Host => false,
        _ => named_by_connection && fields.kind_has_token(FieldKind::Connection, name),
    }
}

/// Appends the lines of `fields` that go on: none of a kind in `dropped`
/// (Upgrade only when `upgrade`), none a Connection field names, none a
/// header rule drops. Which those are depends on the head and on `dropped`
/// and the rules' names only: a head written again with the same ones
/// copies the lines kept from its last write (`head::kept`).
fn copy_fields(
    fields: &Fields,
    mut dropped: u16,
    upgrade: bool,
    edits: &FieldEdits<'_>,
    out: &mut Vec<u8>,
) {
    if upgrade {
        dropped &= !FieldKind::Upgrade.bit();
    }
    // A head that carries none of the kinds stopped (most requests) goes
    // in one copy after a glance at its names' lengths, which costs no
    // more than the kept lines would: they are for the others (a
    // response's `Connection: keep-alive`).
    let keeps = fields.kinds & dropped != 0 || fields.connection_names_fields();
    if keeps && fields.kept.put(dropped, edits.drop, out) {
        return;
    }
    let start = out.len();
    if !fields.connection_names_fields() {
        // Which fields stop depends on their kind, and the rules' names.
        fields.copy_lines_except(out, dropped, edits);
    } else {
        fields.copy_lines(out, |name, kind| {
            dropped & kind.bit() == 0
                && (kind == FieldKind::Upgrade || !is_hop_by_hop(name, kind, fields, true))
                && !edits.drops(name)
        });
    }
    if keeps {
        fields.kept.keep(dropped, edits.drop, &out[start..]);
    }
}

/// Appends the fields the header rules add.
fn put_added(out: &mut Vec<u8>, edits: &FieldEdits<'_>) {
    for (name, value) in edits.added() {
        put_field(out, name.as_bytes(), value);
    }
}

#[inline]
fn put_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    put_field_pieces(out, name, &[value]);
}

/// [`put_field`] for a value given as its pieces, in order. Inlined: the
/// head writers call it per field of every request and response.
#[inline(always)]
fn put_field_pieces(out: &mut Vec<u8>, name: &[u8], pieces: &[&[u8]]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    for piece in pieces {
        out.extend_from_slice(piece);
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests;
