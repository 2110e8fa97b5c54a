use std::{
    borrow::Cow,
    convert::TryFrom,
    fmt,
    iter::{IntoIterator, Iterator},
    str::FromStr,
};

use bytes::Bytes;
use http::{
    header::{self, HeaderName, HeaderValue},
    uri::{self, Authority, Parts, PathAndQuery, Scheme, Uri},
    Extensions, HeaderMap, Method, StatusCode,
};

use crate::{ext::Protocol, qpack::HeaderField};

#[derive(Debug)]
#[cfg_attr(test, derive(PartialEq, Clone))]
pub struct Header {
    pseudo: Pseudo,
    fields: HeaderMap,
}

#[allow(clippy::len_without_is_empty)]
impl Header {
    /// Creates a new `Header` frame data suitable for sending a request
    pub fn request(
        method: Method,
        uri: Uri,
        fields: HeaderMap,
        ext: Extensions,
    ) -> Result<Self, HeaderError> {
        match (uri.authority(), fields.get("host")) {
            (None, None) => Err(HeaderError::MissingAuthority),
            (Some(a), Some(h)) if a.as_str() != h => Err(HeaderError::ContradictedAuthority),
            _ => Ok(Self {
                pseudo: Pseudo::request(method, uri, ext),
                fields,
            }),
        }
    }

    pub fn response(status: StatusCode, fields: HeaderMap) -> Self {
        Self {
            pseudo: Pseudo::response(status),
            fields,
        }
    }

    pub fn trailer(fields: HeaderMap) -> Self {
        Self {
            //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3
            //# Pseudo-header fields MUST NOT appear in trailer
            //# sections.
            pseudo: Pseudo::default(),
            fields,
        }
    }

    pub fn into_request_parts(
        self,
    ) -> Result<(Method, Uri, Option<Protocol>, HeaderMap), HeaderError> {
        // tern patch: the URI made from the pseudo-header fields as they
        // were parsed, not through `Uri::builder()`, which parsed (and
        // copied into a new allocation) :path and :authority a second time
        // from their text; `Uri::from_parts` makes the same checks as the
        // builder's `build`.
        let mut uri = uri::Parts::default();
        uri.path_and_query = self.pseudo.path;
        uri.scheme = self.pseudo.scheme;

        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.1
        //# If the :scheme pseudo-header field identifies a scheme that has a
        //# mandatory authority component (including "http" and "https"), the
        //# request MUST contain either an :authority pseudo-header field or a
        //# Host header field.

        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.1
        //= type=TODO
        //# If the scheme does not have a mandatory authority component and none
        //# is provided in the request target, the request MUST NOT contain the
        //# :authority pseudo-header or Host header fields.
        // tern patch: looked up by its `HeaderName`, not a string parsed
        // into one first.
        uri.authority = match (self.pseudo.authority, self.fields.get(header::HOST)) {
            (None, None) => return Err(HeaderError::MissingAuthority),
            (Some(a), None) => Some(a),
            (None, Some(h)) => Some(
                Authority::try_from(h.as_bytes())
                    .map_err(|e| HeaderError::InvalidRequest(e.into()))?,
            ),
            //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.1
            //# If both fields are present, they MUST contain the same value.
            (Some(a), Some(h)) if a.as_str() != h => {
                return Err(HeaderError::ContradictedAuthority)
            }
            (Some(a), Some(_)) => Some(a),
        };

        Ok((
            self.pseudo.method.ok_or(HeaderError::MissingMethod)?,
            // When empty host field is built into an uri it fails
            //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.1
            //# If these fields are present, they MUST NOT be
            //# empty.
            Uri::from_parts(uri).map_err(|e| HeaderError::InvalidRequest(e.into()))?,
            self.pseudo.protocol,
            self.fields,
        ))
    }

    pub fn into_response_parts(self) -> Result<(StatusCode, HeaderMap), HeaderError> {
        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.2
        //= type=implication
        //# For responses, a single ":status" pseudo-header field is defined that
        //# carries the HTTP status code; see Section 15 of [HTTP].  This pseudo-
        //# header field MUST be included in all responses; otherwise, the
        //# response is malformed (see Section 4.1.2).
        Ok((
            self.pseudo.status.ok_or(HeaderError::MissingStatus)?,
            self.fields,
        ))
    }

    pub fn into_fields(self) -> HeaderMap {
        self.fields
    }

    pub fn len(&self) -> usize {
        self.pseudo.len() + self.fields.len()
    }

    pub fn size(&self) -> usize {
        self.pseudo.len() + self.fields.len()
    }

    /// tern patch: calls `f` with each field's name and value, in the order
    /// of `into_iter`, borrowed instead of copied into a `HeaderField`.
    pub fn for_each_field<E>(
        &self,
        mut f: impl FnMut(&[u8], &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let p = &self.pseudo;
        if let Some(method) = &p.method {
            f(b":method", method.as_str().as_bytes())?;
        }
        if let Some(scheme) = &p.scheme {
            f(b":scheme", scheme.as_str().as_bytes())?;
        }
        if let Some(authority) = &p.authority {
            f(b":authority", authority.as_str().as_bytes())?;
        }
        if let Some(path) = &p.path {
            f(b":path", path.as_str().as_bytes())?;
        }
        if let Some(status) = &p.status {
            f(b":status", status.as_str().as_bytes())?;
        }
        if let Some(protocol) = &p.protocol {
            f(b":protocol", protocol.as_str().as_bytes())?;
        }
        for (name, value) in self.fields.iter() {
            f(name.as_str().as_bytes(), value.as_bytes())?;
        }
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn authory_mut(&mut self) -> &mut Option<Authority> {
        &mut self.pseudo.authority
    }
}

impl IntoIterator for Header {
    type Item = HeaderField;
    type IntoIter = HeaderIter;
    fn into_iter(self) -> Self::IntoIter {
        HeaderIter {
            pseudo: Some(self.pseudo),
            last_header_name: None,
            fields: self.fields.into_iter(),
        }
    }
}

pub struct HeaderIter {
    pseudo: Option<Pseudo>,
    last_header_name: Option<HeaderName>,
    fields: header::IntoIter<HeaderValue>,
}

impl Iterator for HeaderIter {
    type Item = HeaderField;

    fn next(&mut self) -> Option<Self::Item> {
        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3
        //# All pseudo-header fields MUST appear in the header section before
        //# regular header fields.
        if let Some(ref mut pseudo) = self.pseudo {
            if let Some(method) = pseudo.method.take() {
                return Some((":method", method.as_str()).into());
            }

            if let Some(scheme) = pseudo.scheme.take() {
                return Some((":scheme", scheme.as_str().as_bytes()).into());
            }

            if let Some(authority) = pseudo.authority.take() {
                return Some((":authority", authority.as_str().as_bytes()).into());
            }

            if let Some(path) = pseudo.path.take() {
                return Some((":path", path.as_str().as_bytes()).into());
            }

            if let Some(status) = pseudo.status.take() {
                return Some((":status", status.as_str()).into());
            }

            if let Some(protocol) = pseudo.protocol.take() {
                return Some((":protocol", protocol.as_str().as_bytes()).into());
            }
        }

        self.pseudo = None;

        for (new_header_name, header_value) in self.fields.by_ref() {
            if let Some(new) = new_header_name {
                self.last_header_name = Some(new);
            }
            if let (Some(ref n), v) = (&self.last_header_name, header_value) {
                return Some((n.as_str(), v.as_bytes()).into());
            }
        }

        None
    }
}

// tern patch: the header maps of received heads, emptied, are kept per
// thread and reused (with their capacity) for the next heads: a map was
// two allocations (its indices and its entries) made and freed per
// request. Bounded: at most `SPARE_MAX` maps per thread, none that grew
// past `SPARE_CAPACITY_MAX` fields (h2 patch 0009 does the same).
std::thread_local! {
    static SPARE_MAPS: std::cell::RefCell<Vec<HeaderMap>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

const SPARE_MAX: usize = 256;
const SPARE_CAPACITY_MAX: usize = 64;

/// tern patch: a received head's fields once the caller is done with
/// them, kept (emptied) for the next head this thread decodes.
pub(crate) fn give_back_header_map(mut map: HeaderMap) {
    if map.capacity() == 0 || map.capacity() > SPARE_CAPACITY_MAX {
        return;
    }
    map.clear();
    let _ = SPARE_MAPS.try_with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SPARE_MAX {
            s.push(map);
        }
    });
}

/// tern patch: an empty map with room for `len` fields, one a received
/// head gave back when there is one.
fn spare_header_map(len: usize) -> HeaderMap {
    match SPARE_MAPS.try_with(|s| s.borrow_mut().pop()) {
        Ok(Some(mut map)) => {
            map.reserve(len);
            map
        }
        _ => HeaderMap::with_capacity(len),
    }
}

impl TryFrom<Vec<HeaderField>> for Header {
    type Error = HeaderError;
    fn try_from(mut headers: Vec<HeaderField>) -> Result<Self, Self::Error> {
        // tern patch: a map given back by an earlier head, when there is one.
        let mut fields = spare_header_map(headers.len());
        let mut pseudo = Pseudo::default();
        // tern patch: the names and authority of this thread's last head,
        // taken for this one and put back after it (`LastHead`).
        let mut last = LAST_HEAD.try_with(|l| l.take()).unwrap_or_default();
        let parsed = parse_fields(&mut headers, &mut fields, &mut pseudo, &mut last);
        let _ = LAST_HEAD.try_with(|l| l.set(last));
        // tern patch: the list, emptied, serves the thread's next head.
        crate::qpack::give_back_field_list(headers);
        parsed?;
        Ok(Header { pseudo, fields })
    }
}

/// tern patch: the body of `Header::try_from`, with the thread's
/// `LastHead` at hand.
fn parse_fields(
    headers: &mut Vec<HeaderField>,
    fields: &mut HeaderMap,
    pseudo: &mut Pseudo,
    last: &mut LastHead,
) -> Result<(), HeaderError> {
    for (position, field) in headers.drain(..).enumerate() {
        let (name, value) = field.into_inner();
        match Field::parse(name, value, position, last)? {
            Field::Method(m) => {
                pseudo.method = Some(m);
                pseudo.len += 1;
            }
            Field::Scheme(s) => {
                pseudo.scheme = Some(s);
                pseudo.len += 1;
            }
            Field::Authority(a) => {
                pseudo.authority = Some(a);
                pseudo.len += 1;
            }
            Field::Path(p) => {
                pseudo.path = Some(p);
                pseudo.len += 1;
            }
            Field::Status(s) => {
                pseudo.status = Some(s);
                pseudo.len += 1;
            }
            Field::Header((n, v)) => {
                fields.append(n, v);
            }
            Field::Protocol(p) => {
                pseudo.protocol = Some(p);
                pseudo.len += 1;
            }
        }
    }
    Ok(())
}

// tern patch: per thread, the field names of the last head decoded, by
// position, and its authority. A client's heads on a connection (and the
// heads of the clients of one site) repeat their names in the same order
// and their authority; a name or authority with the same bytes as the one
// kept is that one (the kept one was made from the same bytes by the same
// checks), cloned instead of checked and made again: a standard name's
// look-up was ~170 instructions, an authority's UTF-8 check and parse
// ~390 (callgrind). Bounded: `LAST_NAMES` names of at most
// `LAST_NAME_MAX` bytes, an authority of at most `LAST_AUTHORITY_MAX`.
std::thread_local! {
    static LAST_HEAD: std::cell::Cell<LastHead> = const {
        std::cell::Cell::new(LastHead { names: Vec::new(), authority: None })
    };
}

/// tern patch: `f` run with this thread's `LastHead` taken away (as a
/// thread that decoded no head before), then put back; for the fuzz
/// target's comparison.
#[cfg(any(fuzzing, test))]
pub(crate) fn without_last_head<R>(f: impl FnOnce() -> R) -> R {
    let kept = LAST_HEAD.with(|l| l.take());
    let r = f();
    LAST_HEAD.with(|l| l.set(kept));
    r
}

const LAST_NAMES: usize = 32;
const LAST_NAME_MAX: usize = 64;
const LAST_AUTHORITY_MAX: usize = 255;

#[derive(Default)]
struct LastHead {
    /// By position in the head (pseudo-header fields included); `None`
    /// where the field was a pseudo-header field or not kept.
    names: Vec<Option<HeaderName>>,
    authority: Option<Authority>,
}

impl LastHead {
    /// The name at `position`: the one kept there if its bytes are
    /// `name`, else made (and kept).
    fn name(&mut self, position: usize, name: &[u8]) -> Result<HeaderName, HeaderError> {
        if let Some(Some(kept)) = self.names.get(position) {
            if kept.as_str().as_bytes() == name {
                return Ok(kept.clone());
            }
        }
        let made = HeaderName::from_lowercase(name).map_err(|_| HeaderError::invalid_name(name))?;
        if position < LAST_NAMES && name.len() <= LAST_NAME_MAX {
            if self.names.len() <= position {
                self.names.resize(position + 1, None);
            }
            self.names[position] = Some(made.clone());
        }
        Ok(made)
    }

    /// The authority of `value`: the one kept if its bytes are `value`,
    /// else made (and kept).
    fn authority(&mut self, name: &[u8], value: Cow<'static, [u8]>) -> Result<Authority, HeaderError> {
        if let Some(kept) = &self.authority {
            if kept.as_str().as_bytes() == value.as_ref() {
                return Ok(kept.clone());
            }
        }
        let made = shared_value(name, value, Authority::from_maybe_shared)?;
        if made.as_str().len() <= LAST_AUTHORITY_MAX {
            self.authority = Some(made.clone());
        }
        Ok(made)
    }
}

enum Field {
    Method(Method),
    Scheme(Scheme),
    Authority(Authority),
    Path(PathAndQuery),
    Status(StatusCode),
    Protocol(Protocol),
    Header((HeaderName, HeaderValue)),
}

impl Field {
    fn parse(
        name: Cow<'static, [u8]>,
        value: Cow<'static, [u8]>,
        position: usize,
        last: &mut LastHead,
    ) -> Result<Self, HeaderError> {
        let name = name.as_ref();
        if name.is_empty() {
            return Err(HeaderError::InvalidHeaderName("name is empty".into()));
        }

        //= https://www.rfc-editor.org/rfc/rfc9114#section-10.3
        //# Requests or responses containing invalid field names MUST be treated
        //# as malformed.

        //= https://www.rfc-editor.org/rfc/rfc9114#section-10.3
        //# Any request or response that contains a
        //# character not permitted in a field value MUST be treated as
        //# malformed.

        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.2
        //= type=implication
        //# A request or
        //# response containing uppercase characters in field names MUST be
        //# treated as malformed.

        // tern patch: a field's value, the authority and the path keep the
        // bytes the decoder made for them (`shared`) instead of a copy;
        // `from_maybe_shared` on `Bytes` makes the same checks as
        // `from_bytes` and `from_str` (http's `from_shared`).
        if name[0] != b':' {
            let name_ = last.name(position, name)?;
            let len = value.len();
            return Ok(Field::Header((
                name_,
                HeaderValue::from_maybe_shared(shared(value))
                    .map_err(|_| HeaderError::invalid_value_of_len(name, len))?,
            )));
        }

        Ok(match name {
            // tern patch: the two schemes of HTTP/3 without a parse.
            b":scheme" => Field::Scheme(match value.as_ref() {
                b"https" => Scheme::HTTPS,
                b"http" => Scheme::HTTP,
                _ => try_value(name, value)?,
            }),
            //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.1
            //# If these fields are present, they MUST NOT be
            //# empty.
            b":authority" => Field::Authority(last.authority(name, value)?),
            b":path" => Field::Path(shared_value(name, value, PathAndQuery::from_maybe_shared)?),
            b":method" => Field::Method(
                Method::from_bytes(value.as_ref())
                    .map_err(|_| HeaderError::invalid_value(name, value))?,
            ),
            b":status" => Field::Status(
                StatusCode::from_bytes(value.as_ref())
                    .map_err(|_| HeaderError::invalid_value(name, value))?,
            ),
            b":protocol" => Field::Protocol(try_value(name, value)?),
            _ => return Err(HeaderError::invalid_name(name)),
        })
    }
}

/// tern patch: the bytes of a decoded string as `Bytes`, without a copy
/// (a decoded string is owned; a static table's, static).
fn shared(value: Cow<'static, [u8]>) -> Bytes {
    match value {
        Cow::Borrowed(s) => Bytes::from_static(s),
        Cow::Owned(v) => Bytes::from(v),
    }
}

/// tern patch: `try_value` for a value made from the decoded bytes
/// themselves: the same UTF-8 check, then `make` on the bytes, which
/// checks them as `from_str` does.
fn shared_value<R, E>(
    name: &[u8],
    value: Cow<'static, [u8]>,
    make: impl FnOnce(Bytes) -> Result<R, E>,
) -> Result<R, HeaderError> {
    std::str::from_utf8(&value).map_err(|_| HeaderError::invalid_value(name, &value))?;
    let len = value.len();
    make(shared(value)).map_err(|_| HeaderError::invalid_value_of_len(name, len))
}

fn try_value<N, V, R>(name: N, value: V) -> Result<R, HeaderError>
where
    N: AsRef<[u8]>,
    V: AsRef<[u8]>,
    R: FromStr,
{
    let (name, value) = (name.as_ref(), value.as_ref());
    let s = std::str::from_utf8(value).map_err(|_| HeaderError::invalid_value(name, value))?;
    R::from_str(s).map_err(|_| HeaderError::invalid_value(name, value))
}

/// Pseudo-header fields have the same purpose as data from the first line of HTTP/1.X,
/// but are conveyed along with other headers. For example ':method' and ':path' in a
/// request, and ':status' in a response. They must be placed before all other fields,
/// start with ':', and be lowercase.
/// See RFC7540 section 8.1.2.1. for more details.
#[derive(Debug, Default)]
#[cfg_attr(test, derive(PartialEq, Clone))]
struct Pseudo {
    //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3
    //= type=implication
    //# Endpoints MUST NOT
    //# generate pseudo-header fields other than those defined in this
    //# document.

    // Request
    method: Option<Method>,
    scheme: Option<Scheme>,
    authority: Option<Authority>,
    path: Option<PathAndQuery>,

    // Response
    status: Option<StatusCode>,

    protocol: Option<Protocol>,

    len: usize,
}

#[allow(clippy::len_without_is_empty)]
impl Pseudo {
    fn request(method: Method, uri: Uri, ext: Extensions) -> Self {
        let Parts {
            scheme,
            authority,
            path_and_query,
            ..
        } = uri::Parts::from(uri);

        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.1
        //= type=implication
        //# This pseudo-header field MUST NOT be empty for "http" or "https"
        //# URIs; "http" or "https" URIs that do not contain a path component
        //# MUST include a value of / (ASCII 0x2f).
        let path = path_and_query.map_or_else(
            || PathAndQuery::from_static("/"),
            |path| {
                if path.path().is_empty() && method != Method::OPTIONS {
                    PathAndQuery::from_static("/")
                } else {
                    path
                }
            },
        );

        // If the method is connect, the `:protocol` pseudo-header MAY be defined
        //
        // See: [https://www.rfc-editor.org/rfc/rfc8441#section-4]
        let protocol = if method == Method::CONNECT {
            ext.get::<Protocol>().copied()
        } else {
            None
        };

        let len = 3 + authority.is_some() as usize + protocol.is_some() as usize;

        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3
        //= type=implication
        //# Pseudo-header fields defined for requests MUST NOT appear
        //# in responses; pseudo-header fields defined for responses MUST NOT
        //# appear in requests.

        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.1
        //= type=implication
        //# All HTTP/3 requests MUST include exactly one value for the :method,
        //# :scheme, and :path pseudo-header fields, unless the request is a
        //# CONNECT request; see Section 4.4.
        Self {
            method: Some(method),
            scheme: scheme.or(Some(Scheme::HTTPS)),
            authority,
            path: Some(path),
            status: None,
            protocol,
            len,
        }
    }

    fn response(status: StatusCode) -> Self {
        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3
        //= type=implication
        //# Pseudo-header fields defined for requests MUST NOT appear
        //# in responses; pseudo-header fields defined for responses MUST NOT
        //# appear in requests.
        Pseudo {
            method: None,
            scheme: None,
            authority: None,
            path: None,
            status: Some(status),
            len: 1,
            protocol: None,
        }
    }

    fn len(&self) -> usize {
        self.len
    }
}

#[derive(Debug)]
pub enum HeaderError {
    InvalidHeaderName(String),
    InvalidHeaderValue(String),
    InvalidRequest(http::Error),
    MissingMethod,
    MissingStatus,
    MissingAuthority,
    ContradictedAuthority,
}

impl HeaderError {
    fn invalid_name<N>(name: N) -> Self
    where
        N: AsRef<[u8]>,
    {
        HeaderError::InvalidHeaderName(format!("{:?}", name.as_ref()))
    }

    /// tern patch: `invalid_value` for a value handed on without a copy
    /// (the bytes went with it): its length instead of its bytes.
    fn invalid_value_of_len<N>(name: N, len: usize) -> Self
    where
        N: AsRef<[u8]>,
    {
        HeaderError::InvalidHeaderValue(format!(
            "{:?} ({len} bytes)",
            String::from_utf8_lossy(name.as_ref())
        ))
    }

    fn invalid_value<N, V>(name: N, value: V) -> Self
    where
        N: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        HeaderError::InvalidHeaderValue(format!(
            "{:?} {:?}",
            String::from_utf8_lossy(name.as_ref()),
            value.as_ref()
        ))
    }
}

impl std::error::Error for HeaderError {}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::InvalidHeaderName(h) => write!(f, "invalid header name: {}", h),
            HeaderError::InvalidHeaderValue(v) => write!(f, "invalid header value: {}", v),
            HeaderError::InvalidRequest(r) => write!(f, "invalid request: {}", r),
            HeaderError::MissingMethod => write!(f, "missing method in request headers"),
            HeaderError::MissingStatus => write!(f, "missing status in response headers"),
            HeaderError::MissingAuthority => write!(f, "missing authority"),
            HeaderError::ContradictedAuthority => {
                write!(f, "uri and authority field are in contradiction")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assert_matches::assert_matches;

    #[test]
    fn request_has_no_authority_nor_host() {
        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.1
        //= type=test
        //# If the :scheme pseudo-header field identifies a scheme that has a
        //# mandatory authority component (including "http" and "https"), the
        //# request MUST contain either an :authority pseudo-header field or a
        //# Host header field.
        let headers = Header::try_from(vec![(b":method", Method::GET.as_str()).into()]).unwrap();
        assert!(headers.pseudo.authority.is_none());
        assert_matches!(
            headers.into_request_parts(),
            Err(HeaderError::MissingAuthority)
        );
    }

    #[test]
    fn request_has_empty_authority() {
        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.1
        //= type=test
        //# If these fields are present, they MUST NOT be
        //# empty.
        assert_matches!(
            Header::try_from(vec![
                (b":method", Method::GET.as_str()).into(),
                (b":authority", b"").into(),
            ]),
            Err(HeaderError::InvalidHeaderValue(_))
        );
    }

    #[test]
    fn request_has_empty_host() {
        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.1
        //= type=test
        //# If these fields are present, they MUST NOT be
        //# empty.
        let headers = Header::try_from(vec![
            (b":method", Method::GET.as_str()).into(),
            (b"host", b"").into(),
        ])
        .unwrap();
        assert_matches!(
            headers.into_request_parts(),
            Err(HeaderError::InvalidRequest(_))
        );
    }

    /// tern patch: values handed on without a copy are checked as the
    /// copies were: a bad byte, an authority or a path that does not
    /// parse, a path that is not UTF-8 are refused; good ones (a static
    /// table string, a decoded one with spare capacity) kept as they were.
    #[test]
    fn invalid_field_values_are_refused() {
        let get = |field: (&[u8], &[u8])| {
            Header::try_from(vec![
                (b":method", Method::GET.as_str()).into(),
                HeaderField::from(field),
            ])
        };
        for bad in [
            (&b"x-a"[..], &b"a\x01b"[..]),
            (b"x-a", b"a\x7fb"),
            (b"x-a", b"a\nb"),
            (b":authority", b"a b"),
            (b":authority", b"a/b"),
            (b":path", b"/a b"),
            (b":path", b"/\xff"),
        ] {
            assert_matches!(get(bad), Err(HeaderError::InvalidHeaderValue(_)), "{bad:?}");
        }
        let mut spare = Vec::with_capacity(64);
        spare.extend_from_slice(b"text/html, */*");
        let header = Header::try_from(vec![
            (b":method", Method::GET.as_str()).into(),
            HeaderField {
                name: Cow::Borrowed(b"accept"),
                value: Cow::Owned(spare),
            },
            HeaderField {
                name: Cow::Borrowed(b"accept-encoding"),
                value: Cow::Borrowed(b"gzip, deflate, br"),
            },
            (b":scheme", b"https").into(),
            (b":authority", b"example.com").into(),
            (b":path", b"/a?b").into(),
        ])
        .unwrap();
        assert_eq!(header.fields["accept"], "text/html, */*");
        assert_eq!(header.fields["accept-encoding"], "gzip, deflate, br");
        let (_, uri, _, _) = header.into_request_parts().unwrap();
        assert_eq!(uri, "https://example.com/a?b");
    }

    /// tern patch: the URI made from the parsed pseudo-header fields is
    /// the one `Uri::builder()` made from their text, and what it refused
    /// is refused.
    #[test]
    fn request_uri_is_the_one_the_builder_made_from_the_fields() {
        let cases: [&[(&[u8], &[u8])]; 6] = [
            &[(b":scheme", b"https"), (b":authority", b"example.com:8443"), (b":path", b"/a/b?c=d")],
            &[(b":scheme", b"http"), (b":authority", b"[::1]:80"), (b":path", b"*")],
            &[(b":scheme", b"https"), (b"host", b"example.com"), (b":path", b"/")],
            &[(b":scheme", b"https"), (b":authority", b"h"), (b"host", b"h"), (b":path", b"/x")],
            &[(b":authority", b"example.com"), (b":path", b"/")],
            &[(b":scheme", b"https"), (b"host", b"a b"), (b":path", b"/")],
        ];
        for fields in cases {
            let mut list: Vec<HeaderField> = vec![(b":method", Method::GET.as_str()).into()];
            list.extend(fields.iter().map(|(n, v)| HeaderField::from((*n, *v))));
            let header = Header::try_from(list).unwrap();
            let mut builder = Uri::builder();
            if let Some(p) = &header.pseudo.path {
                builder = builder.path_and_query(p.as_str().as_bytes());
            }
            if let Some(s) = &header.pseudo.scheme {
                builder = builder.scheme(s.as_str().as_bytes());
            }
            let authority = header.pseudo.authority.as_ref().map(|a| a.as_str().as_bytes());
            let authority = authority.or(header.fields.get("host").map(|h| h.as_bytes()));
            builder = builder.authority(authority.unwrap());
            let built = builder.build().ok();
            let made = header.into_request_parts().ok().map(|(_, uri, _, _)| uri);
            assert_eq!(made, built, "{fields:?}");
        }
    }

    #[test]
    fn request_has_authority() {
        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.1
        //= type=test
        //# If the :scheme pseudo-header field identifies a scheme that has a
        //# mandatory authority component (including "http" and "https"), the
        //# request MUST contain either an :authority pseudo-header field or a
        //# Host header field.
        let headers = Header::try_from(vec![
            (b":method", Method::GET.as_str()).into(),
            (b":authority", b"test.com").into(),
        ])
        .unwrap();
        assert_matches!(headers.into_request_parts(), Ok(_));
    }

    #[test]
    fn request_has_host() {
        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.1
        //= type=test
        //# If the :scheme pseudo-header field identifies a scheme that has a
        //# mandatory authority component (including "http" and "https"), the
        //# request MUST contain either an :authority pseudo-header field or a
        //# Host header field.
        let headers = Header::try_from(vec![
            (b":method", Method::GET.as_str()).into(),
            (b"host", b"test.com").into(),
        ])
        .unwrap();
        assert!(headers.pseudo.authority.is_none());
        assert_matches!(headers.into_request_parts(), Ok(_));
    }

    #[test]
    fn request_has_same_host_and_authority() {
        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.1
        //= type=test
        //# If both fields are present, they MUST contain the same value.
        let headers = Header::try_from(vec![
            (b":method", Method::GET.as_str()).into(),
            (b":authority", b"test.com").into(),
            (b"host", b"test.com").into(),
        ])
        .unwrap();
        assert_matches!(headers.into_request_parts(), Ok(_));
    }
    #[test]
    fn request_has_different_host_and_authority() {
        //= https://www.rfc-editor.org/rfc/rfc9114#section-4.3.1
        //= type=test
        //# If both fields are present, they MUST contain the same value.
        let headers = Header::try_from(vec![
            (b":method", Method::GET.as_str()).into(),
            (b":authority", b"authority.com").into(),
            (b"host", b"host.com").into(),
        ])
        .unwrap();
        assert_matches!(
            headers.into_request_parts(),
            Err(HeaderError::ContradictedAuthority)
        );
    }

    #[test]
    fn preserves_duplicate_headers() {
        let headers = Header::try_from(vec![
            (b":method", Method::GET.as_str()).into(),
            (b":authority", b"test.com").into(),
            (b"set-cookie", b"foo=foo").into(),
            (b"set-cookie", b"bar=bar").into(),
            (b"other-header", b"other-header-value").into(),
        ])
        .unwrap();

        assert_eq!(
            headers
                .clone()
                .into_iter()
                .filter(|h| h.name.as_ref() == b"set-cookie")
                .collect::<Vec<_>>(),
            vec![
                HeaderField {
                    name: std::borrow::Cow::Borrowed(b"set-cookie"),
                    value: std::borrow::Cow::Borrowed(b"foo=foo")
                },
                HeaderField {
                    name: std::borrow::Cow::Borrowed(b"set-cookie"),
                    value: std::borrow::Cow::Borrowed(b"bar=bar")
                }
            ]
        );
        assert_eq!(
            headers
                .into_iter()
                .filter(|h| h.name.as_ref() == b"other-header")
                .collect::<Vec<_>>(),
            vec![HeaderField {
                name: std::borrow::Cow::Borrowed(b"other-header"),
                value: std::borrow::Cow::Borrowed(b"other-header-value")
            },]
        );
    }

    /// tern patch: heads whose names and authority repeat the last head's
    /// (`LastHead`) decode as heads that do not: the same names, values,
    /// URIs and refusals, for names and authorities kept, changed, of
    /// other case, invalid and too long to keep.
    #[test]
    fn heads_decode_the_same_whatever_the_last_head_was() {
        fn head(authority: &str, names: &[&str]) -> Vec<HeaderField> {
            let mut fields: Vec<HeaderField> = vec![
                (":method", "GET").into(),
                (":scheme", "https").into(),
                (":authority", authority).into(),
                (":path", "/").into(),
            ];
            for name in names {
                fields.push(HeaderField::new(name.as_bytes().to_vec(), b"v".to_vec()));
            }
            fields
        }
        let long_name = "x".repeat(LAST_NAME_MAX + 1);
        let long_authority = format!("{}.example", "a".repeat(LAST_AUTHORITY_MAX));
        let heads = [
            head("a.example", &["user-agent", "accept"]),
            head("a.example", &["user-agent", "accept"]),
            head("a.example:8443", &["accept", "user-agent", "x-custom"]),
            head("a.example:8443", &["accept", "User-Agent"]),
            head("a.example:8443", &["accept", "user-agent", "x-custom"]),
            head("a b", &["accept"]),
            head("a.example", &["accept", &long_name, &long_name]),
            head(&long_authority, &["accept", &long_name, "user-agent"]),
            head(&long_authority, &["accept", "bad name"]),
            head("a.example", &[]),
            head("a.example", &["user-agent", "accept", "host"]),
        ];
        for (i, fields) in heads.iter().enumerate() {
            // Without a last head (taken away), then with the one the
            // heads before left.
            let alone = without_last_head(|| Header::try_from(fields.clone()));
            let after = Header::try_from(fields.clone());
            match (alone, after) {
                (Ok(alone), Ok(after)) => {
                    assert_eq!(alone, after, "head {i}");
                    assert_eq!(
                        alone.into_request_parts().map(|(m, u, _, h)| (m, u, h)).ok(),
                        after.into_request_parts().map(|(m, u, _, h)| (m, u, h)).ok(),
                        "head {i}"
                    );
                }
                (Err(alone), Err(after)) => {
                    assert_eq!(format!("{alone:?}"), format!("{after:?}"), "head {i}")
                }
                (alone, after) => panic!("head {i}: {alone:?} alone, {after:?} after"),
            }
        }
        // Kept: names only up to their bound, authorities too.
        let last = LAST_HEAD.with(|l| l.take());
        assert!(last.names.len() <= LAST_NAMES);
        assert!(last.names.iter().flatten().all(|n| n.as_str().len() <= LAST_NAME_MAX));
        assert!(last.authority.is_some_and(|a| a.as_str().len() <= LAST_AUTHORITY_MAX));
    }
}
