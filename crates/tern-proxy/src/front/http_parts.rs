//! Requests and responses of the front ends that speak in the `http`
//! crate's types (HTTP/2 and HTTP/3): the host a request names, and the
//! response head from either kind of backend head, with the fields tern
//! adds (Alt-Svc).

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Response, StatusCode};
use tern_http::head::{FieldKind, ResponseHead};
use tern_http::rewrite::{is_connection_specific, FieldEdits, FieldValue};
use tern_http::BodyFraming;

use crate::exchange::ListenerCtx;
use crate::fault::Kind;
use crate::front::backend_values::{BackendValues, LastHead};
use crate::message::{clean_trailer_map, ResponseHeadView, ResponseView, Step, Switched};

/// The host a request that arrived over HTTP/2 or HTTP/3 names: its `:authority`,
/// else its `host` field. It routes the request and becomes the backend's
/// Host (or `:authority`).
pub(crate) fn request_host(parts: &http::request::Parts) -> Option<&[u8]> {
    let authority = parts.uri.authority().map(|a| a.as_str().as_bytes());
    authority.or_else(|| {
        parts
            .headers
            .get(http::header::HOST)
            .map(HeaderValue::as_bytes)
    })
}

/// The HTTP/3 client's response head for `view`, plus the listener's
/// Alt-Svc, as its status and the list of fields h3 sends in that order
/// (`RequestStream::send_response_fields`): no `HeaderMap` to hash every
/// name into. Sensitivity marks mean nothing to h3's stateless QPACK.
pub(crate) fn for_h3_client(
    view: ResponseView<'_>,
    listener: &ListenerCtx,
) -> Result<(StatusCode, FieldList), Kind> {
    let mut fields = FieldList::new();
    let status = head_into(view, listener, MadeValues::NeverIndexed, &mut fields)?;
    Ok((status, fields))
}

/// How an HTTP/2 response carries the values tern makes per request (a
/// request ID): the h2 crate's HPACK encoder sends a never-indexed field
/// whose name is not in its table with the name as a literal (Huffman-coded
/// every time), but indexes the name of one whose name is there. So one
/// response now and then sends its ID indexable (the entry, name and
/// value, goes into the connection's table), and the others send theirs
/// never-indexed with that entry's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MadeValues {
    /// Never indexed (values that never repeat take no table space).
    NeverIndexed,
    /// Indexable: this response puts the name in the HPACK table.
    Indexable,
}

/// The HTTP/2 client's response head for `view`, request IDs sent as
/// `made` says, as the status and the list of fields h2 sends in that
/// order (`SendResponse::send_response_fields`): no `HeaderMap` to hash
/// every name into.
pub(crate) fn for_h2_client(
    view: ResponseView<'_>,
    listener: &ListenerCtx,
    made: MadeValues,
) -> Result<(StatusCode, H2Fields), Kind> {
    let mut fields = H2Fields {
        shared: None,
        // A list an earlier head of this worker left (h2 patch 0009).
        list: h2::server::spare_field_list(),
    };
    let status = head_into(view, listener, made, &mut fields)?;
    Ok((status, fields))
}

/// A response head's fields as h2 and h3 send them from a list.
pub(crate) type FieldList = Vec<(HeaderName, HeaderValue)>;

/// A response head's fields as h2 sends them: the fields a backend head
/// seen before carried, shared with every head that carries them
/// (`LastHead`; h2 writes them as the bytes they encoded to last while its
/// HPACK table has not changed, h2 patch 0015), then the head's own list.
#[derive(Debug)]
pub(crate) struct H2Fields {
    pub(crate) shared: Option<h2::server::SharedFields>,
    pub(crate) list: FieldList,
}

/// Where a response head's fields go: a `HeaderMap`, a [`FieldList`] or
/// [`H2Fields`].
trait Fields {
    fn reserve(&mut self, additional: usize);
    fn append(&mut self, name: HeaderName, value: HeaderValue);
    /// Appends the fields of a backend head seen before.
    fn append_shared(&mut self, shared: &h2::server::SharedFields) {
        for (name, value) in shared.iter() {
            self.append(name.clone(), value.clone());
        }
    }
}

impl Fields for H2Fields {
    fn reserve(&mut self, additional: usize) {
        self.list.reserve(additional);
    }

    fn append(&mut self, name: HeaderName, value: HeaderValue) {
        self.list.push((name, value));
    }

    fn append_shared(&mut self, shared: &h2::server::SharedFields) {
        // Shared only as the first fields (h2 sends them before the list).
        if self.shared.is_none() && self.list.is_empty() {
            self.shared = Some(shared.clone());
        } else {
            for (name, value) in shared.iter() {
                self.append(name.clone(), value.clone());
            }
        }
    }
}

impl Fields for http::HeaderMap {
    fn reserve(&mut self, additional: usize) {
        http::HeaderMap::reserve(self, additional);
    }

    fn append(&mut self, name: HeaderName, value: HeaderValue) {
        http::HeaderMap::append(self, name, value);
    }
}

impl Fields for FieldList {
    fn reserve(&mut self, additional: usize) {
        Vec::reserve(self, additional);
    }

    fn append(&mut self, name: HeaderName, value: HeaderValue) {
        self.push((name, value));
    }
}

/// Puts the fields of the client's response head for `view` into
/// `fields` (the backend's, less the connection-specific ones and those
/// the rules drop; Alt-Svc; the rules' own) and returns its status.
fn head_into<F: Fields>(
    view: ResponseView<'_>,
    listener: &ListenerCtx,
    made: MadeValues,
    fields: &mut F,
) -> Result<StatusCode, Kind> {
    let status = match view.head {
        ResponseHeadView::H1(head) => {
            // HTTP/2 and HTTP/3 requests carry no Upgrade: a 101 is a
            // backend error.
            if head.status == 101 {
                return Err(Kind::Invalid);
            }
            from_h1(head, view.body, view.edits, fields).ok_or(Kind::Invalid)?
        }
        ResponseHeadView::H2(parts) => {
            fields.reserve(parts.headers.len() + added(view.edits));
            for (name, value) in parts.headers.iter().filter(|(n, _)| {
                !is_connection_specific(n.as_str()) && !view.edits.drops(n.as_str())
            }) {
                fields.append(name.clone(), value.clone());
            }
            parts.status
        }
    };
    if let Some(alt_svc) = &listener.alt_svc {
        fields.append(http::header::ALT_SVC, alt_svc.clone());
    }
    // The fields the rules drop were left out as the head was copied: a
    // lookup per dropped name in the map would cost a hash each.
    add_fields(fields, view.edits, made);
    Ok(status)
}

/// Fields tern may add to a response beyond the backend's: the rules'
/// and Alt-Svc. Reserved up front, a map that would otherwise grow (and
/// rehash) under the rules' fields on every response.
fn added(edits: &FieldEdits<'_>) -> usize {
    edits.add.len() + 1
}

/// Applies the header rules' `edits` to the fields of one of tern's own
/// answers.
fn apply(headers: &mut http::HeaderMap, edits: &FieldEdits<'_>) {
    for name in edits.drop {
        headers.remove(&**name);
    }
    add_fields(headers, edits, MadeValues::NeverIndexed);
}

/// Appends the fields the header rules add, request IDs sent as `made`
/// says.
fn add_fields<F: Fields>(headers: &mut F, edits: &FieldEdits<'_>, made: MadeValues) {
    for (name, value) in &edits.add {
        // Names and literal values were checked at start-up; a variable
        // expanding to bytes a field cannot carry is tern's to skip.
        let (value, per_request) = match value {
            FieldValue::Config(b) => (config_value(b), false),
            // Shared with the request's head and the log, not copied.
            FieldValue::Made(b) => (HeaderValue::from_maybe_shared(b.clone()), true),
        };
        match (added_name(name), value) {
            (Ok(n), Ok(mut v)) => {
                // A value made for this request (a request ID) never
                // repeats: HTTP/2 sends it never-indexed, so it does not
                // take HPACK table space from the fields that do repeat
                // (but see `MadeValues`).
                v.set_sensitive(per_request && made == MadeValues::NeverIndexed);
                headers.append(n, v);
            }
            _ => tracing::debug!(
                field = name,
                "header rule value is not a valid field value; skipped"
            ),
        }
    }
}

/// Most names [`added_name`] keeps per thread.
const NAMES_KEPT: usize = 32;

/// The `HeaderName` of a field a rule adds (`name` is lowercase). The same
/// few names come with every response, and one that is not a standard
/// name (`x-request-id`) costs a check and an allocation to parse: each
/// worker thread parses each once and clones it after (a reference count).
fn added_name(name: &str) -> Result<HeaderName, http::header::InvalidHeaderName> {
    thread_local! {
        static NAMES: std::cell::RefCell<Vec<HeaderName>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    NAMES.with_borrow_mut(|names| {
        if let Some(known) = names.iter().find(|n| n.as_str() == name) {
            return Ok(known.clone());
        }
        let parsed = HeaderName::from_bytes(name.as_bytes())?;
        if names.len() < NAMES_KEPT {
            names.push(parsed.clone());
        }
        Ok(parsed)
    })
}

/// The `HeaderValue` of a literal from the configuration. The same few
/// values (HSTS, security headers) go with every response, and making one
/// checks its bytes and copies them: each worker thread makes each once
/// and clones it after (a reference count). Found by content, so a
/// reloaded configuration with other values gets them.
fn config_value(bytes: &[u8]) -> Result<HeaderValue, http::header::InvalidHeaderValue> {
    thread_local! {
        static VALUES: std::cell::RefCell<Vec<HeaderValue>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    VALUES.with_borrow_mut(|values| {
        if let Some(known) = values.iter().find(|v| v.as_bytes() == bytes) {
            return Ok(known.clone());
        }
        let made = HeaderValue::from_bytes(bytes)?;
        if values.len() < VALUES_KEPT {
            values.push(made.clone());
        }
        Ok(made)
    })
}

/// Most literal values [`config_value`] keeps per thread.
const VALUES_KEPT: usize = 32;

/// tern's own answer with `status` (nothing came from the backend): the
/// head, and the short text body it carries, with the fields `edits` add.
pub(crate) fn answer(status: u16, edits: &FieldEdits<'_>) -> (Response<()>, &'static str) {
    let (_, body) = crate::fault::answer_text(status);
    let mut response = Response::new(());
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    apply(headers, edits);
    (response, body)
}

/// What ends a client's request body whose DATA is over, given the
/// trailers its stream delivered (HTTP/2 or HTTP/3): those trailers,
/// cleaned, or the plain end; a section refused by the trailer rule is
/// the client's fault.
pub(crate) fn request_end(trailers: Option<http::HeaderMap>) -> Result<Step<'static>, Kind> {
    match trailers.map(clean_trailer_map) {
        None | Some(Ok(None)) => Ok(Step::End),
        Some(Ok(Some(t))) => Ok(Step::Trailers(t)),
        Some(Err(e)) => {
            tracing::debug!("client trailers refused: {e}");
            Err(Kind::BadBody)
        }
    }
}

/// The HTTP/2 or HTTP/3 answer to an extended CONNECT whose backend
/// opened the WebSocket (RFC 8441 section 5): 200, with the fields of the
/// backend's answer (an HTTP/1.1 backend's 101 less its connection fields
/// and `Sec-WebSocket-Accept`, the handshake's key exchange being
/// HTTP/1.1's alone; an HTTP/2 backend's 2xx as it came), the listener's
/// Alt-Svc and the response rules.
pub(crate) fn websocket_accepted(switched: Switched<'_>, listener: &ListenerCtx) -> Response<()> {
    let mut response = Response::new(());
    let headers = response.headers_mut();
    match switched.head {
        ResponseHeadView::H1(head) => {
            for (name, kind, value) in head.fields.iter_spans_raw() {
                if kind.is_connection_specific()
                    || name.eq_ignore_ascii_case(b"sec-websocket-accept")
                {
                    continue;
                }
                let raw = &head.fields.raw()[value];
                if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(raw))
                {
                    headers.append(n, v);
                }
            }
        }
        ResponseHeadView::H2(parts) => {
            for (name, value) in parts
                .headers
                .iter()
                .filter(|(n, _)| !is_connection_specific(n.as_str()))
            {
                headers.append(name.clone(), value.clone());
            }
        }
    }
    if let Some(alt_svc) = &listener.alt_svc {
        headers.append(http::header::ALT_SVC, alt_svc.clone());
    }
    // A rule's value a field cannot carry is skipped; the tunnel opens all
    // the same.
    apply(headers, switched.edits);
    response
}

/// tern's own answer to a gRPC call it could not complete: a
/// trailers-only response (HTTP 200, the gRPC status in its one HEADERS
/// frame), which every gRPC client reads as the call's status, with the
/// fields `edits` add (the response rules, the request ID, Retry-After
/// and grpc-retry-pushback-ms).
pub(crate) fn grpc_answer(code: u16, message: &str, edits: &FieldEdits<'_>) -> Response<()> {
    let mut response = Response::new(());
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert("grpc-status", HeaderValue::from(code));
    // grpc-message is percent-encoded; tern's own texts are plain ASCII
    // without '%', which need no encoding.
    if let Ok(v) = HeaderValue::from_str(message) {
        headers.insert("grpc-message", v);
    }
    apply(headers, edits);
    response
}

/// Puts the fields of the HTTP/2 or HTTP/3 response for an HTTP/1.1
/// backend's head, less those `edits` drop, into `headers` and returns its
/// status; None when a field cannot be carried (invalid name or value).
fn from_h1<F: Fields>(
    head: &ResponseHead,
    framing: BodyFraming,
    edits: &FieldEdits<'_>,
    headers: &mut F,
) -> Option<StatusCode> {
    let status = StatusCode::from_u16(head.status).ok()?;
    headers.reserve(head.fields.len() + added(edits));
    // One copy of the head shared by the values made from it (each would
    // otherwise be its own allocation), made only if a value is not found
    // again among those the backend sent before.
    let mut raw: Option<Bytes> = None;
    let names_in_connection = head.fields.connection_names_fields();
    let no_length = matches!(framing, BodyFraming::Chunked | BodyFraming::UntilClose);
    BACKEND_NAMES.with_borrow_mut(|names| {
        if let Some(fields) = names.last.find(head.fields.raw(), no_length, edits.drop) {
            headers.append_shared(fields);
            return Some(());
        }
        let keep = names.last.start(head.fields.raw().len());
        // Position among the fields carried (the hint for the next name).
        let mut carried = 0;
        // Names as bytes: each is compared, never needed as text.
        for (name, kind, value) in head.fields.iter_spans_raw() {
            if kind.is_connection_specific() || edits.drops_bytes(name) {
                continue;
            }
            // Content-Length describes the body (or, for HEAD and 304, the
            // body a GET would get); only a chunked or close-delimited
            // response has none to keep.
            if kind == FieldKind::ContentLength {
                if no_length {
                    continue;
                }
            } else if names_in_connection
                && std::str::from_utf8(name)
                    .is_ok_and(|n| head.fields.kind_has_token(FieldKind::Connection, n))
            {
                // Fields the backend named in Connection are hop-by-hop.
                continue;
            }
            let name = names.get(carried, name)?;
            let bytes = &head.fields.raw()[value.clone()];
            let value = match names.values.find(carried, bytes) {
                Some(found) => found,
                None => {
                    let raw = raw.get_or_insert_with(|| Bytes::copy_from_slice(head.fields.raw()));
                    let made = HeaderValue::from_maybe_shared(raw.slice(value)).ok()?;
                    names.values.missed(carried, bytes);
                    made
                }
            };
            carried += 1;
            if keep {
                names.last.carry(&name, &value);
            }
            headers.append(name, value);
        }
        if keep {
            names
                .last
                .keep(head.fields.raw(), no_length, edits.drop, carried);
        }
        Some(())
    })?;
    Some(status)
}

thread_local! {
    /// Each worker thread's [`BackendNames`].
    static BACKEND_NAMES: std::cell::RefCell<BackendNames> =
        const {
            std::cell::RefCell::new(BackendNames {
                seen: Vec::new(),
                values: BackendValues::new(),
                last: LastHead::new(),
            })
        };
}

/// Most backend field names [`BackendNames`] keeps per thread (each a
/// few dozen bytes); names past it are parsed every time.
const BACKEND_NAMES_KEPT: usize = 64;

/// The `HeaderName`s of the field names backends write, as written (case
/// and all). A backend sends the same few names, in the same order, with
/// every response; parsing one (lowercasing it, matching it against the
/// standard names, allocating an unknown one) costs several times more
/// than finding it again, and the name kept at the same position is the
/// first one tried.
struct BackendNames {
    seen: Vec<(Box<[u8]>, HeaderName)>,
    /// The values last carried at each position.
    values: BackendValues,
    /// The fields carried for the last head kept.
    last: LastHead,
}

impl BackendNames {
    /// The `HeaderName` of `written`, the `position`th field carried from
    /// a head; None when it is not a valid name.
    fn get(&mut self, position: usize, written: &[u8]) -> Option<HeaderName> {
        if let Some((w, n)) = self.seen.get(position) {
            if **w == *written {
                return Some(n.clone());
            }
        }
        if let Some((_, n)) = self.seen.iter().find(|(w, _)| **w == *written) {
            return Some(n.clone());
        }
        let parsed = HeaderName::from_bytes(written).ok()?;
        if self.seen.len() < BACKEND_NAMES_KEPT {
            self.seen.push((written.into(), parsed.clone()));
        }
        Some(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names_are_found_again_in_any_order_and_case() {
        let mut names = BackendNames {
            seen: Vec::new(),
            values: BackendValues::new(),
            last: LastHead::new(),
        };
        let first = ["Server", "Content-Type", "X-Custom"];
        for (i, n) in first.iter().enumerate() {
            assert_eq!(
                names.get(i, n.as_bytes()).expect(n).as_str(),
                n.to_ascii_lowercase()
            );
        }
        // Another order, another case (a different backend): the same names.
        assert_eq!(
            names.get(0, b"X-Custom").map(|n| n.to_string()).as_deref(),
            Some("x-custom")
        );
        assert_eq!(
            names.get(1, b"content-type"),
            Some(http::header::CONTENT_TYPE)
        );
        assert_eq!(names.get(2, b"Server"), Some(http::header::SERVER));
        assert_eq!(names.get(0, b"Bad Name"), None);
    }

    #[test]
    fn backend_names_kept_are_bounded() {
        let mut names = BackendNames {
            seen: Vec::new(),
            values: BackendValues::new(),
            last: LastHead::new(),
        };
        for i in 0..BACKEND_NAMES_KEPT * 2 {
            let name = format!("x-name-{i}");
            assert_eq!(
                names.get(i, name.as_bytes()).map(|n| n.to_string()),
                Some(name)
            );
        }
        assert_eq!(names.seen.len(), BACKEND_NAMES_KEPT);
    }

    #[test]
    fn config_values_are_made_once_per_thread_and_found_by_content() {
        let hsts = b"max-age=63072000; includeSubDomains".to_vec();
        let first = config_value(&hsts).expect("valid");
        // Another buffer with the same bytes (a reloaded configuration)
        // gets the value made the first time: same bytes, not a copy.
        let again = config_value(&hsts.clone()).expect("valid");
        assert_eq!(first, again);
        assert_eq!(first.as_bytes().as_ptr(), again.as_bytes().as_ptr());
        let other = config_value(b"nosniff").expect("valid");
        assert_eq!(other.as_bytes(), b"nosniff");
        assert!(config_value(b"bad\r\nvalue").is_err());
        // Past the ones kept, values are still made right.
        for i in 0..VALUES_KEPT * 2 {
            let v = format!("value-{i}");
            assert_eq!(
                config_value(v.as_bytes()).expect("valid").as_bytes(),
                v.as_bytes()
            );
        }
    }
}
