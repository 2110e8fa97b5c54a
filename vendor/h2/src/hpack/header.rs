use super::{DecoderError, NeedMore};
use crate::ext::Protocol;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{Method, StatusCode};
use std::fmt;

/// HTTP/2 Header
#[derive(Debug, Clone, Eq, PartialEq)]
pub enum Header<T = HeaderName> {
    Field { name: T, value: HeaderValue },
    // TODO: Change these types to `http::uri` types.
    Authority(BytesStr),
    Method(Method),
    Scheme(BytesStr),
    Path(BytesStr),
    Protocol(Protocol),
    Status(StatusCode),
}

/// The header field name
#[derive(Debug, Clone, Eq, PartialEq, Hash)]
pub enum Name<'a> {
    Field(&'a HeaderName),
    Authority,
    Method,
    Scheme,
    Path,
    Protocol,
    Status,
}

// tern patch: a field borrowed from a header block being sent, so the
// encoder can index and write it without moving it out of its HeaderMap
// (see `Encoder::encode_block`); only what enters the table is cloned.
#[derive(Debug, Clone, Copy)]
pub enum HeaderRef<'a> {
    Field {
        name: &'a HeaderName,
        value: &'a HeaderValue,
    },
    Authority(&'a BytesStr),
    Method(&'a Method),
    Scheme(&'a BytesStr),
    Path(&'a BytesStr),
    Protocol(&'a Protocol),
    Status(&'a StatusCode),
}

#[doc(hidden)]
#[derive(Clone, Eq, PartialEq, Default)]
pub struct BytesStr(Bytes);

pub fn len(name: &HeaderName, value: &HeaderValue) -> usize {
    let n: &str = name.as_ref();
    32 + n.len() + value.len()
}

impl Header<Option<HeaderName>> {
    // tern patch: only `Encoder::encode` (tests, fuzzing) takes owned fields.
    #[cfg(any(test, fuzzing))]
    pub fn reify(self) -> Result<Header, HeaderValue> {
        use self::Header::*;

        Ok(match self {
            Field {
                name: Some(n),
                value,
            } => Field { name: n, value },
            Field { name: None, value } => return Err(value),
            Authority(v) => Authority(v),
            Method(v) => Method(v),
            Scheme(v) => Scheme(v),
            Path(v) => Path(v),
            Protocol(v) => Protocol(v),
            Status(v) => Status(v),
        })
    }
}

impl Header {
    pub fn new(name: Bytes, value: Bytes) -> Result<Header, DecoderError> {
        if name.is_empty() {
            return Err(DecoderError::NeedMore(NeedMore::UnexpectedEndOfStream));
        }
        if name[0] == b':' {
            match &name[1..] {
                b"authority" => {
                    let value = BytesStr::try_from(value)?;
                    Ok(Header::Authority(value))
                }
                b"method" => {
                    let method = Method::from_bytes(&value)?;
                    Ok(Header::Method(method))
                }
                b"scheme" => {
                    let value = BytesStr::try_from(value)?;
                    Ok(Header::Scheme(value))
                }
                b"path" => {
                    let value = BytesStr::try_from(value)?;
                    Ok(Header::Path(value))
                }
                b"protocol" => {
                    let value = Protocol::try_from(value)?;
                    Ok(Header::Protocol(value))
                }
                b"status" => {
                    let status = StatusCode::from_bytes(&value)?;
                    Ok(Header::Status(status))
                }
                _ => Err(DecoderError::InvalidPseudoheader),
            }
        } else {
            // HTTP/2 requires lower case header names
            let name = HeaderName::from_lowercase(&name)?;
            let value = HeaderValue::from_bytes(&value)?;

            Ok(Header::Field { name, value })
        }
    }

    // tern patch: the field's size, name and value are read through
    // `HeaderRef`, which the encoder indexes.
    pub fn as_ref(&self) -> HeaderRef<'_> {
        match *self {
            Header::Field {
                ref name,
                ref value,
            } => HeaderRef::Field { name, value },
            Header::Authority(ref v) => HeaderRef::Authority(v),
            Header::Method(ref v) => HeaderRef::Method(v),
            Header::Scheme(ref v) => HeaderRef::Scheme(v),
            Header::Path(ref v) => HeaderRef::Path(v),
            Header::Protocol(ref v) => HeaderRef::Protocol(v),
            Header::Status(ref v) => HeaderRef::Status(v),
        }
    }

    pub fn len(&self) -> usize {
        self.as_ref().len()
    }

    /// Returns the header name
    pub fn name(&self) -> Name<'_> {
        self.as_ref().name()
    }

    pub fn value_slice(&self) -> &[u8] {
        self.as_ref().value_slice()
    }

}

impl<'a> HeaderRef<'a> {
    pub fn len(&self) -> usize {
        match *self {
            HeaderRef::Field { name, value } => len(name, value),
            HeaderRef::Authority(v) => 32 + 10 + v.len(),
            HeaderRef::Method(v) => 32 + 7 + v.as_ref().len(),
            HeaderRef::Scheme(v) => 32 + 7 + v.len(),
            HeaderRef::Path(v) => 32 + 5 + v.len(),
            HeaderRef::Protocol(v) => 32 + 9 + v.as_str().len(),
            HeaderRef::Status(_) => 32 + 7 + 3,
        }
    }

    pub fn name(&self) -> Name<'a> {
        match *self {
            HeaderRef::Field { name, .. } => Name::Field(name),
            HeaderRef::Authority(..) => Name::Authority,
            HeaderRef::Method(..) => Name::Method,
            HeaderRef::Scheme(..) => Name::Scheme,
            HeaderRef::Path(..) => Name::Path,
            HeaderRef::Protocol(..) => Name::Protocol,
            HeaderRef::Status(..) => Name::Status,
        }
    }

    pub fn value_slice(&self) -> &'a [u8] {
        match *self {
            HeaderRef::Field { value, .. } => value.as_ref(),
            HeaderRef::Authority(v) => v.as_ref(),
            HeaderRef::Method(v) => v.as_ref().as_ref(),
            HeaderRef::Scheme(v) => v.as_ref(),
            HeaderRef::Path(v) => v.as_ref(),
            HeaderRef::Protocol(v) => v.as_ref(),
            HeaderRef::Status(v) => v.as_str().as_bytes(),
        }
    }

    pub fn is_sensitive(&self) -> bool {
        match *self {
            HeaderRef::Field { value, .. } => value.is_sensitive(),
            // TODO: Technically these other header values can be sensitive too.
            _ => false,
        }
    }

    pub fn skip_value_index(&self) -> bool {
        use http::header;

        match *self {
            HeaderRef::Field { name, .. } => matches!(
                *name,
                header::AGE
                    | header::AUTHORIZATION
                    | header::CONTENT_LENGTH
                    | header::ETAG
                    | header::IF_MODIFIED_SINCE
                    | header::IF_NONE_MATCH
                    | header::LOCATION
                    | header::COOKIE
                    | header::SET_COOKIE
            ),
            HeaderRef::Path(..) => true,
            _ => false,
        }
    }

    /// The owned field, for the encoder's table.
    pub fn to_header(self) -> Header {
        match self {
            HeaderRef::Field { name, value } => Header::Field {
                name: name.clone(),
                value: value.clone(),
            },
            HeaderRef::Authority(v) => Header::Authority(v.clone()),
            HeaderRef::Method(v) => Header::Method(v.clone()),
            HeaderRef::Scheme(v) => Header::Scheme(v.clone()),
            HeaderRef::Path(v) => Header::Path(v.clone()),
            HeaderRef::Protocol(v) => Header::Protocol(v.clone()),
            HeaderRef::Status(v) => Header::Status(*v),
        }
    }
}

// Mostly for tests
impl From<Header> for Header<Option<HeaderName>> {
    fn from(src: Header) -> Self {
        match src {
            Header::Field { name, value } => Header::Field {
                name: Some(name),
                value,
            },
            Header::Authority(v) => Header::Authority(v),
            Header::Method(v) => Header::Method(v),
            Header::Scheme(v) => Header::Scheme(v),
            Header::Path(v) => Header::Path(v),
            Header::Protocol(v) => Header::Protocol(v),
            Header::Status(v) => Header::Status(v),
        }
    }
}

impl<'a> Name<'a> {
    pub fn into_entry(self, value: Bytes) -> Result<Header, DecoderError> {
        match self {
            Name::Field(name) => Ok(Header::Field {
                name: name.clone(),
                value: HeaderValue::from_bytes(&value)?,
            }),
            Name::Authority => Ok(Header::Authority(BytesStr::try_from(value)?)),
            Name::Method => Ok(Header::Method(Method::from_bytes(&value)?)),
            Name::Scheme => Ok(Header::Scheme(BytesStr::try_from(value)?)),
            Name::Path => Ok(Header::Path(BytesStr::try_from(value)?)),
            Name::Protocol => Ok(Header::Protocol(Protocol::try_from(value)?)),
            Name::Status => {
                match StatusCode::from_bytes(&value) {
                    Ok(status) => Ok(Header::Status(status)),
                    // TODO: better error handling
                    Err(_) => Err(DecoderError::InvalidStatusCode),
                }
            }
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match *self {
            Name::Field(ref name) => name.as_ref(),
            Name::Authority => b":authority",
            Name::Method => b":method",
            Name::Scheme => b":scheme",
            Name::Path => b":path",
            Name::Protocol => b":protocol",
            Name::Status => b":status",
        }
    }
}

// ===== impl BytesStr =====

impl BytesStr {
    pub(crate) const fn from_static(value: &'static str) -> Self {
        BytesStr(Bytes::from_static(value.as_bytes()))
    }

    pub(crate) fn from(value: &str) -> Self {
        BytesStr(Bytes::copy_from_slice(value.as_bytes()))
    }

    #[doc(hidden)]
    pub fn try_from(bytes: Bytes) -> Result<Self, std::str::Utf8Error> {
        std::str::from_utf8(bytes.as_ref())?;
        Ok(BytesStr(bytes))
    }

    pub(crate) fn as_str(&self) -> &str {
        // Safety: check valid utf-8 in constructor
        unsafe { std::str::from_utf8_unchecked(self.0.as_ref()) }
    }

    pub(crate) fn into_inner(self) -> Bytes {
        self.0
    }
}

impl std::ops::Deref for BytesStr {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for BytesStr {
    fn as_ref(&self) -> &[u8] {
        self.0.as_ref()
    }
}

impl fmt::Debug for BytesStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
