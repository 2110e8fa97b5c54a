//! The edge rules every request passes in the exchange core, whatever
//! protocol it came in: the route's access list (403), the client's
//! request rate (429), the declared body size (413), then the header
//! rules and the request ID it carries both ways.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tern_http::rewrite::{FieldEdits, FieldValue};
use tern_http::ResponseHead;

use super::clients::{ClientKey, Refused};
use super::{ClientBody, ConnCtx};
use crate::config::{admits, HeaderRules, Part, RequestIdFormat, Route, Template, Var};
use crate::fault::Kind;
use crate::message::{BodyLen, Request, RequestView, Step};

/// Longest field a trusted proxy may name a client or a request with.
const MAX_FORWARDED_ID: usize = 128;

/// What the rules did to one request: the edits to its head and to its
/// response's, and its ID.
#[derive(Debug, Default)]
pub(crate) struct Edits<'a> {
    /// Fields of the request sent to the backend.
    pub request: FieldEdits<'a>,
    /// Fields of the response sent to the client (also on tern's own
    /// answers).
    pub response: FieldEdits<'a>,
    /// The request's ID, for the access log (ASCII; shared with the
    /// fields that carry it); None while the log is off.
    pub id: Option<Bytes>,
    /// `max_request_body`, checked as the body goes up.
    pub body_limit: Option<u64>,
    /// Request body bytes seen so far (inline and streamed together).
    pub body_seen: Cell<u64>,
}

impl Edits<'_> {
    /// Counts `n` more request body bytes: `BodyTooLarge` past the limit.
    /// Before the head went up the client gets 413 and the backend
    /// nothing; after, the backend request is aborted, and the client gets
    /// 413 unless its response had begun (then its stream is reset).
    pub(crate) fn count_body(&self, n: usize) -> Result<(), Kind> {
        let seen = self.body_seen.get() + n as u64;
        self.body_seen.set(seen);
        match self.body_limit {
            Some(limit) if seen > limit => Err(Kind::BodyTooLarge),
            _ => Ok(()),
        }
    }

    /// `body`, with its pieces counted against `max_request_body`.
    pub(crate) fn cap<'b, B: ClientBody>(&'b self, body: &'b mut B) -> Capped<'b, B> {
        Capped {
            inner: body,
            edits: self,
        }
    }
}

/// A client's request body whose pieces are counted against
/// `max_request_body` (bodies without a Content-Length, or longer than it
/// claimed: HTTP/1.1 chunked, HTTP/2 and HTTP/3 streams).
pub(crate) struct Capped<'b, B> {
    inner: &'b mut B,
    edits: &'b Edits<'b>,
}

impl<B: ClientBody> ClientBody for Capped<'_, B> {
    async fn step(&mut self, wait: bool) -> Result<Step<'_>, Kind> {
        let edits = self.edits;
        let step = self.inner.step(wait).await?;
        if let Step::Data(piece, _) = &step {
            edits.count_body(piece.len())?;
        }
        Ok(step)
    }

    async fn send_continue(&mut self) -> Result<(), Kind> {
        self.inner.send_continue().await
    }

    async fn interim(&mut self, head: &ResponseHead) -> Result<(), Kind> {
        self.inner.interim(head).await
    }
}

/// A request the rules turn away.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Refusal {
    /// Why (its status follows).
    pub kind: Kind,
    /// For 429: seconds until the client's next token (`Retry-After`).
    pub retry_after: Option<u32>,
    /// The connection's own address was over its rate (not a client a
    /// trusted proxy named): the connection may be closed for it.
    pub by_address: bool,
}

impl Refusal {
    fn of(kind: Kind) -> Self {
        Refusal {
            kind,
            retry_after: None,
            by_address: false,
        }
    }
}

/// Refuses a request (begun at `started`) the rules turn away.
pub(crate) fn admit(
    req: &Request<'_>,
    ctx: &ConnCtx<'_>,
    route: Option<&Route>,
    started: Instant,
) -> Result<(), Refusal> {
    let edge = &ctx.listener.config.edge;
    if let Some(r) = route {
        if !admits(&r.allow, &r.deny, ctx.peer.ip()) {
            return Err(Refusal::of(Kind::Denied));
        }
    }
    if let (Some(limit), BodyLen::Length(n)) = (edge.max_request_body, req.body) {
        if n > limit {
            return Err(Refusal::of(Kind::BodyTooLarge));
        }
    }
    let limits = &edge.client;
    if limits.rate.is_some() {
        let named = edge
            .client_id
            .as_ref()
            .filter(|c| c.trusts(ctx.peer.ip()))
            .and_then(|c| client_field(req, &c.header))
            .map(last_element)
            .filter(|id| !id.is_empty())
            .map(|id| ClientKey::of_id(id, limits.ipv6_prefix));
        let by_address = named.is_none();
        let taken = match named {
            Some(key) => ctx.worker.clients.request(key, limits, started),
            None => ctx.take_token(limits, started),
        };
        if let Err(Refused::Rate(after)) = taken {
            return Err(Refusal {
                kind: Kind::RateLimited,
                retry_after: Some(after),
                by_address,
            });
        }
    }
    Ok(())
}

/// The edits the listener's rules make to `req` and its response (their
/// field lists go back to the connection with [`give_back`]).
pub(crate) fn edits<'a>(req: &Request<'_>, ctx: &ConnCtx<'a>) -> Edits<'a> {
    let listener: &'a super::ListenerCtx = ctx.listener;
    let edge = &listener.config.edge;
    // Built in place from its parts: filling a default `Edits` field by
    // field dropped the lists it replaced (~70 instructions, callgrind).
    let (request_add, response_add) = ctx.field_lists();
    let mut request = FieldEdits {
        drop: &edge.request_headers.drop,
        add: request_add,
    };
    let mut response = FieldEdits {
        drop: &edge.response_headers.drop,
        add: response_add,
    };
    let id = edge.request_id.as_ref().map(|settings| {
        let trusted = ctx.listener.config.accept_proxy.is_some()
            || edge
                .client_id
                .as_ref()
                .is_some_and(|c| c.trusts(ctx.peer.ip()));
        let kept = trusted
            .then(|| client_field(req, &settings.header))
            .flatten()
            .filter(|v| v.iter().all(u8::is_ascii_graphic))
            .map(cut);
        let id = kept.unwrap_or_else(|| new_id(settings.format));
        (&*settings.header, id)
    });
    let id_text = id.as_ref().map_or(&b""[..], |(_, v)| &v[..]);
    // `render` is called for added fields only: the default rules drop
    // the ID's field and add none, and two calls that found nothing to
    // add were ~50 instructions of a request (callgrind).
    if !edge.request_headers.add.is_empty() {
        render(&edge.request_headers, ctx, id_text, &mut request);
    }
    if !edge.response_headers.add.is_empty() {
        render(&edge.response_headers, ctx, id_text, &mut response);
    }
    let mut logged_id = None;
    if let Some((name, value)) = id {
        // The ID's field is among the rules' drops (config::edge): the
        // client's never passes, nor a backend's in the response. One
        // copy of the value serves both heads and the log; with the log
        // off nothing reads the log's (one clone and drop fewer).
        if ctx.worker.log.is_on() {
            logged_id = Some(value.clone());
        }
        request.add.push((name, FieldValue::Made(value.clone())));
        response.add.push((name, FieldValue::Made(value)));
    }
    Edits {
        request,
        response,
        id: logged_id,
        body_limit: edge.max_request_body,
        body_seen: Cell::new(0),
    }
}

/// Keeps the field lists of a finished exchange's `edits` for the next.
/// Inlined (forced): its call took `edits` by value, a copy of the whole
/// set once per request.
#[inline(always)]
pub(crate) fn give_back<'a>(edits: Edits<'a>, ctx: &ConnCtx<'a>) {
    ctx.give_back([edits.request.add, edits.response.add]);
}

/// Appends the fields `rules` add to `out` (its drops are set by the
/// caller). Out of line: the default rules add none, and its loop
/// inlined (twice) spread `edits`' own path over more cache lines.
#[inline(never)]
fn render<'c>(rules: &'c HeaderRules, ctx: &ConnCtx<'_>, id: &[u8], out: &mut FieldEdits<'c>) {
    for (name, template) in &rules.add {
        let value = match template.literal() {
            Some(text) => FieldValue::Config(text.as_bytes()),
            None if template.per_request() => FieldValue::Made(fill(template, ctx, id).into()),
            // The same on every request of the connection: made once.
            None => FieldValue::Made(ctx.rendered(template, || fill(template, ctx, id).into())),
        };
        out.add.push((name, value));
    }
}

fn fill(template: &Template, ctx: &ConnCtx<'_>, id: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(64);
    for part in &template.0 {
        match part {
            Part::Text(t) => v.extend_from_slice(t.as_bytes()),
            Part::Var(Var::ClientIp) => v.extend_from_slice(ctx.client_ip_text()),
            Part::Var(Var::RequestId) => v.extend_from_slice(id),
            Part::Var(Var::TlsVersion) => v.extend_from_slice(ctx.tls.version.as_bytes()),
            Part::Var(Var::Sni) => {
                // SNI is a DNS name (checked by rustls): safe in a field.
                v.extend_from_slice(ctx.tls.sni.as_deref().unwrap_or("").as_bytes())
            }
        }
    }
    v
}

/// A field a trusted proxy sent (a request ID, the client's identity),
/// when it is short visible ASCII (spaces between list elements allowed).
fn client_field<'r>(req: &'r Request<'_>, header: &str) -> Option<&'r [u8]> {
    let value = match req.head {
        RequestView::H1(head) => head.fields.get(header),
        RequestView::H2(parts) => parts.headers.get(header).map(|v| v.as_bytes()),
    }?;
    let ok = !value.is_empty()
        && value.len() <= MAX_FORWARDED_ID
        && value.iter().all(|b| b.is_ascii_graphic() || *b == b' ')
        && value.iter().any(|b| b.is_ascii_graphic());
    ok.then_some(value)
}

/// The last element of a list field (`X-Forwarded-For: a, b` names `b`,
/// the address the nearest, trusted, proxy saw), trimmed.
fn last_element(value: &[u8]) -> &[u8] {
    let last = value.rsplit(|&b| b == b',').next().unwrap_or(value);
    last.trim_ascii()
}

/// Bytes request IDs are cut from: one allocation per this many bytes
/// (about 30 IDs) instead of two per ID (its bytes, and the shared header
/// its first clone makes). A chunk lives while one of its IDs does: an
/// exchange that lasts (a WebSocket) keeps at most this much alive.
const ID_CHUNK: usize = 1024;

/// `text` as shared bytes cut from this thread's current ID chunk.
fn cut(text: &[u8]) -> Bytes {
    thread_local! {
        static CHUNK: RefCell<BytesMut> = RefCell::new(BytesMut::new());
    }
    CHUNK.with_borrow_mut(|chunk| {
        if chunk.capacity() - chunk.len() < text.len() {
            *chunk = BytesMut::with_capacity(ID_CHUNK.max(text.len()));
        }
        chunk.extend_from_slice(text);
        chunk.split().freeze()
    })
}

/// Each byte's two lowercase hex digits: one load and one store a byte
/// where a digit at a time took twice the work (~115 instructions per ID,
/// callgrind).
const HEX_PAIRS: [[u8; 2]; 256] = {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        pairs[i] = [HEX[i >> 4], HEX[i & 0xf]];
        i += 1;
    }
    pairs
};

/// A new request ID (ASCII), made in a fixed buffer: no formatting
/// machinery, and its bytes cut from a shared chunk.
fn new_id(format: RequestIdFormat) -> Bytes {
    let random: u128 = rand::random();
    let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let text: &[u8] = match format {
        RequestIdFormat::Random => {
            for (pair, byte) in buf.chunks_exact_mut(2).zip(random.to_be_bytes()) {
                pair.copy_from_slice(&HEX_PAIRS[usize::from(byte)]);
            }
            &buf[..32]
        }
        RequestIdFormat::UuidV7 => {
            let millis = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            let bytes = random.to_be_bytes();
            let mut rand10 = [0u8; 10];
            rand10.copy_from_slice(&bytes[..10]);
            uuid::Builder::from_unix_timestamp_millis(millis, &rand10)
                .into_uuid()
                .hyphenated()
                .encode_lower(&mut buf)
                .as_bytes()
        }
    };
    cut(text)
}

/// The field `Retry-After: N` for a 429.
pub(crate) fn retry_after(seconds: u32) -> (&'static str, FieldValue<'static>) {
    ("retry-after", FieldValue::Made(seconds.to_string().into()))
}

/// The field `grpc-retry-pushback-ms` for a gRPC call refused for its
/// client's rate: a gRPC client whose retry policy covers the status
/// waits this long before its next attempt (gRFC A6), where Retry-After
/// means nothing to it.
pub(crate) fn grpc_pushback(seconds: u32) -> (&'static str, FieldValue<'static>) {
    let ms = u64::from(seconds) * 1000;
    (
        "grpc-retry-pushback-ms",
        FieldValue::Made(ms.to_string().into()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_field_names_its_last_element() {
        assert_eq!(last_element(b"198.51.100.7, 203.0.113.9 "), b"203.0.113.9");
        assert_eq!(last_element(b"tenant-a"), b"tenant-a");
        assert_eq!(last_element(b"a, "), b"");
    }

    #[test]
    fn ids_are_random_hex_or_uuidv7() {
        let a = new_id(RequestIdFormat::Random);
        let b = new_id(RequestIdFormat::Random);
        assert_eq!(a.len(), 32);
        assert!(a.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
        assert_ne!(a, b);
        let u = uuid::Uuid::try_parse_ascii(&new_id(RequestIdFormat::UuidV7)).unwrap();
        assert_eq!(u.get_version_num(), 7);
    }
}
