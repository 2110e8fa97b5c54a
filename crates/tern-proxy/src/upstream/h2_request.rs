//! The HTTP/2 request head tern sends a backend for a client's request
//! (any front end): `:scheme`, `:authority` and `:path`, the client's
//! end-to-end fields and tern's forwarding fields. It runs once per
//! request, so what the client's HTTP/2 or HTTP/3 head already holds
//! parsed is shared, not parsed again.

use http::uri::{Authority, PathAndQuery};
use http::{HeaderName, HeaderValue, Method, Uri};
use tern_http::forwarding::ForwardedFields;
use tern_http::rewrite::{
    forwarding_fields, h1_request_fields_for_h2, keeps_h2_request_field_for_h2, ClientFacts,
    FieldEdits,
};

use crate::message::{Request, RequestView};

/// Why a request could not be turned into an HTTP/2 request.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BuildError {
    /// The authority or path does not form a URI.
    #[error("request target: {0}")]
    Target(#[from] http::Error),
    /// A field name or value HTTP/2 cannot carry.
    #[error("field {0:?} cannot be sent over HTTP/2")]
    Field(String),
}

/// The HTTP/2 request head for a backend: `:scheme` that of the hop to the
/// backend, `:authority` from the client's Host or `:authority` (else the
/// server's address), the client's end-to-end fields, and tern's
/// forwarding fields. An HTTP/2 or HTTP/3 client's parsed fields, path and
/// authority are shared with the backend's head (reference counts), not
/// parsed and copied again: this runs per request, and re-parsing was a
/// tenth of a gRPC call's instructions.
pub(super) fn backend_request(
    scheme: &str,
    method: &Method,
    req: &Request<'_>,
    server: crate::config::BackendAddr,
    forwarding: Forwarding<'_>,
    edits: &FieldEdits<'_>,
) -> Result<http::Request<()>, BuildError> {
    let mut request = http::Request::new(());
    *request.method_mut() = method.clone();
    *request.uri_mut() = backend_uri(scheme, req, server)?;
    let mut fields = Fields {
        map: request.headers_mut(),
        bad: None,
    };
    match req.head {
        RequestView::H1(head) => {
            // RFC 8441 has no key exchange: an HTTP/1.1 client's key
            // stops at tern, which answers it.
            let key = |n: &str| req.upgrade && n.eq_ignore_ascii_case("sec-websocket-key");
            for (name, value) in
                h1_request_fields_for_h2(head).filter(|(n, _)| !edits.drops(n) && !key(n))
            {
                fields.put(name, value);
            }
        }
        RequestView::H2(parts) => {
            // Room for tern's fields too: a map that grows rehashes.
            fields.map.reserve(parts.headers.len() + ADDED_FIELDS);
            let kept = parts.headers.iter().filter(|(n, _)| {
                keeps_h2_request_field_for_h2(n.as_str()) && !edits.drops(n.as_str())
            });
            for (name, value) in kept {
                fields.map.append(name.clone(), value.clone());
            }
        }
    }
    if req.trailers_ok {
        // The one TE value HTTP/2 allows; gRPC servers require it.
        fields
            .map
            .append(http::header::TE, HeaderValue::from_static("trailers"));
    }
    forwarding.put(req.authority, &mut fields);
    for (name, value) in edits.added() {
        fields.put(name, value);
    }
    match fields.bad {
        Some(name) => Err(BuildError::Field(name)),
        None => Ok(request),
    }
}

/// Fields tern may add to an HTTP/2 client's request: TE and the three
/// forwarding fields.
const ADDED_FIELDS: usize = 4;

/// A backend request's fields as they are made, and the first one HTTP/2
/// cannot carry.
struct Fields<'m> {
    map: &'m mut http::HeaderMap,
    bad: Option<String>,
}

impl Fields<'_> {
    fn put(&mut self, name: &str, value: &[u8]) {
        match HeaderName::from_bytes(name.as_bytes()) {
            Ok(n) => self.put_value(n, value),
            Err(_) => self.bad = Some(name.to_string()),
        }
    }

    fn put_value(&mut self, name: HeaderName, value: &[u8]) {
        match HeaderValue::from_bytes(value) {
            Ok(v) => {
                self.map.append(name, v);
            }
            Err(_) => self.bad = Some(name.to_string()),
        }
    }
}

/// What tern tells an HTTP/2 backend about the client: the facts, the
/// fields the listener adds, and the connection's fields already made.
#[derive(Clone, Copy)]
pub(crate) struct Forwarding<'a> {
    pub facts: &'a ClientFacts<'a>,
    pub fields: ForwardedFields,
    pub made: &'a ForwardingCache,
}

/// tern's forwarding fields as HTTP/2 backend requests carry them, made at
/// a connection's first request and shared (reference counts) by the
/// next ones: their values change only with the client (one per
/// connection) and with the host `Forwarded` names. Three parsed and
/// copied values a request fewer.
#[derive(Debug, Default)]
pub(crate) struct ForwardingCache(std::cell::RefCell<Option<MadeForwarding>>);

#[derive(Debug)]
struct MadeForwarding {
    host: Option<Box<[u8]>>,
    fields: Vec<(HeaderName, HeaderValue)>,
}

impl Forwarding<'_> {
    /// Appends the fields for a request to `host` to `out`.
    fn put(self, host: Option<&[u8]>, out: &mut Fields<'_>) {
        let mut made = self.made.0.borrow_mut();
        if let Some(m) = made.as_ref().filter(|m| m.host.as_deref() == host) {
            for (name, value) in &m.fields {
                out.map.append(name.clone(), value.clone());
            }
            return;
        }
        let mut fields = Vec::with_capacity(3);
        let mut whole = true;
        forwarding_fields(self.facts, self.fields, host, |n, pieces| {
            let name = forwarding_name(n).or_else(|| HeaderName::from_bytes(n.as_bytes()).ok());
            let value = match pieces {
                [one] => HeaderValue::from_bytes(one),
                _ => HeaderValue::from_bytes(&pieces.concat()),
            };
            match (name, value) {
                (Some(name), Ok(value)) => fields.push((name, value)),
                _ => {
                    out.bad = Some(n.to_string());
                    whole = false;
                }
            }
        });
        for (name, value) in &fields {
            out.map.append(name.clone(), value.clone());
        }
        if whole {
            *made = Some(MadeForwarding {
                host: host.map(Box::from),
                fields,
            });
        }
    }
}

/// The name of one of tern's forwarding fields, without parsing it (and,
/// for the ones the http crate does not know, without allocating it);
/// `None` for a field added to `forwarding_fields` since, which is parsed.
fn forwarding_name(name: &'static str) -> Option<HeaderName> {
    static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
    static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
    static CLIENT_CERT: HeaderName = HeaderName::from_static("client-cert");
    static CLIENT_CERT_CHAIN: HeaderName = HeaderName::from_static("client-cert-chain");
    Some(match name {
        "X-Forwarded-For" => X_FORWARDED_FOR.clone(),
        "X-Forwarded-Proto" => X_FORWARDED_PROTO.clone(),
        "Forwarded" => http::header::FORWARDED,
        "Client-Cert" => CLIENT_CERT.clone(),
        "Client-Cert-Chain" => CLIENT_CERT_CHAIN.clone(),
        _ => return None,
    })
}

/// The backend request's URI: the backend hop's scheme, the client's
/// authority (else the server's address) and path. An HTTP/2 or HTTP/3
/// client's own authority and path are shared, not parsed again.
fn backend_uri(
    scheme: &str,
    req: &Request<'_>,
    server: crate::config::BackendAddr,
) -> Result<Uri, BuildError> {
    let mut parts = http::uri::Parts::default();
    parts.scheme = Some(match scheme {
        "https" => http::uri::Scheme::HTTPS,
        _ => http::uri::Scheme::HTTP,
    });
    let client_uri = match req.head {
        RequestView::H2(p) => Some(&p.uri),
        RequestView::H1(_) => None,
    };
    parts.authority = Some(
        match (req.authority, client_uri.and_then(|u| u.authority())) {
            (Some(a), Some(same)) if same.as_str().as_bytes() == a => same.clone(),
            (Some(a), _) => Authority::try_from(a).map_err(http::Error::from)?,
            (None, _) => Authority::try_from(server.authority()).map_err(http::Error::from)?,
        },
    );
    parts.path_and_query = Some(match client_uri.and_then(|u| u.path_and_query()) {
        Some(same) if same.as_str() == req.target => same.clone(),
        _ => PathAndQuery::try_from(origin_form(req.target)).map_err(http::Error::from)?,
    });
    Ok(Uri::from_parts(parts).map_err(http::Error::from)?)
}

/// The request target in origin form: a client may send absolute form
/// (`http://host/path`), whose authority already went into `:authority`
/// via Host (RFC 9112 section 3.2.2 makes them agree).
fn origin_form(target: &str) -> &str {
    if target.starts_with('/') || target == "*" {
        return target;
    }
    match target.find("://") {
        Some(i) => {
            let rest = &target[i + 3..];
            rest.find('/').map_or("/", |slash| &rest[slash..])
        }
        None => target,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::BodyLen;
    use tern_http::rewrite::ClientCertFields;

    fn h2_request<'r>(parts: &'r http::request::Parts) -> Request<'r> {
        Request {
            method: parts.method.as_str(),
            target: parts.uri.path_and_query().map_or("/", |p| p.as_str()),
            authority: parts.uri.authority().map(|a| a.as_str().as_bytes()),
            head: RequestView::H2(parts),
            body: BodyLen::Empty,
            http10: false,
            upgrade: false,
            expects_continue: false,
            early: false,
            client_cert: None,
            trailers_ok: true,
        }
    }

    #[test]
    fn an_h2_clients_request_keeps_its_fields_and_gains_terns() {
        let (parts, ()) = http::Request::post("https://api.test:8443/pkg.Svc/Call?x=1")
            .header("content-type", "application/grpc")
            .header("grpc-timeout", "1S")
            .header("x-forwarded-for", "6.6.6.6")
            .header("connection", "close")
            .body(())
            .unwrap()
            .into_parts();
        let req = h2_request(&parts);
        let facts = ClientFacts {
            ip: "192.0.2.9".parse().unwrap(),
            proto: "https",
            client_cert: None,
        };
        let server = crate::config::BackendAddr::from(
            "127.0.0.1:9".parse::<std::net::SocketAddr>().unwrap(),
        );
        let made = ForwardingCache::default();
        let forwarding = Forwarding {
            facts: &facts,
            fields: ForwardedFields::default(),
            made: &made,
        };
        let expected = |host: &str| {
            [
                ("content-type", "application/grpc".to_string()),
                ("grpc-timeout", "1S".to_string()),
                ("te", "trailers".to_string()),
                ("x-forwarded-for", "192.0.2.9".to_string()),
                ("x-forwarded-proto", "https".to_string()),
                (
                    "forwarded",
                    format!("for=192.0.2.9;proto=https;host=\"{host}\""),
                ),
            ]
        };
        let fields_of = |out: &http::Request<()>| -> Vec<(String, String)> {
            out.headers()
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_string()))
                .collect()
        };
        let same = |got: Vec<(String, String)>, want: [(&str, String); 6]| {
            let want: Vec<(String, String)> =
                want.into_iter().map(|(n, v)| (n.to_string(), v)).collect();
            assert_eq!(got, want);
        };
        // The second request takes the connection's fields as made; a
        // request to another host gets its own Forwarded.
        for _ in 0..2 {
            let out = backend_request(
                "http",
                &Method::POST,
                &req,
                server,
                forwarding,
                &FieldEdits::NONE,
            )
            .unwrap();
            assert_eq!(
                out.uri().to_string(),
                "http://api.test:8443/pkg.Svc/Call?x=1"
            );
            same(fields_of(&out), expected("api.test:8443"));
        }
        let (other, ()) = http::Request::post("https://b.test/pkg.Svc/Call?x=1")
            .header("content-type", "application/grpc")
            .header("grpc-timeout", "1S")
            .body(())
            .unwrap()
            .into_parts();
        let out = backend_request(
            "https",
            &Method::POST,
            &h2_request(&other),
            server,
            forwarding,
            &FieldEdits::NONE,
        )
        .unwrap();
        assert_eq!(out.uri().to_string(), "https://b.test/pkg.Svc/Call?x=1");
        same(fields_of(&out), expected("b.test"));
    }

    #[test]
    fn every_forwarding_field_has_its_name_at_hand() {
        let cert = ClientCertFields::new([&b"leaf"[..], &b"ca"[..]]).unwrap();
        let facts = ClientFacts {
            ip: "2001:db8::1".parse().unwrap(),
            proto: "https",
            client_cert: Some(&cert),
        };
        let mut names = Vec::new();
        forwarding_fields(
            &facts,
            ForwardedFields::default(),
            Some(b"h.test"),
            |n, _| names.push(n),
        );
        assert_eq!(names.len(), 5);
        for name in names {
            let made = forwarding_name(name).unwrap_or_else(|| panic!("{name} not at hand"));
            assert_eq!(made.as_str(), name.to_ascii_lowercase());
        }
        assert!(forwarding_name("X-Other").is_none());
    }
}
