//! The plain-HTTP listener (`http_listen`): answers ACME HTTP-01 challenges
//! and sends every other request to the same URL over HTTPS with a 308
//! (method and body kept). It runs on the control plane's runtime with the
//! bounded one-request server of [`super::oneshot`]: port 80 of a TLS
//! front end carries challenges and the first visit of a typed URL, not
//! traffic.

use std::sync::Arc;

use tern_acme::HttpTokens;
use tokio::net::TcpListener;

use crate::control::oneshot::{self, Request, Response};

/// Connections served at once; more are closed on accept.
const MAX_CONNECTIONS: usize = 512;

/// Where HTTP-01 validators ask (RFC 8555 section 8.3).
const CHALLENGE_PREFIX: &str = "/.well-known/acme-challenge/";

/// Serves until the runtime stops. Redirects go to `https_port`.
pub(crate) async fn serve(listener: TcpListener, https_port: u16, tokens: Arc<HttpTokens>) {
    let respond = move |request: &Request| respond(request, https_port, &tokens);
    oneshot::serve("plain HTTP", listener, MAX_CONNECTIONS, Arc::new(respond)).await;
}

fn respond(request: &Request, https_port: u16, tokens: &HttpTokens) -> Response {
    if let Some(token) = request.path.strip_prefix(CHALLENGE_PREFIX) {
        if !request.is_get_or_head() {
            return Response::only_get_and_head();
        }
        return match tokens.answer(token) {
            Some(key_authorization) => {
                let mut r = Response::text(200, "OK", &key_authorization);
                r.content_type = "application/octet-stream";
                r
            }
            None => Response::text(404, "Not Found", "no such ACME challenge\n"),
        };
    }
    let Some(host) = request.host.as_deref().and_then(host_without_port) else {
        return Response::text(
            400,
            "Bad Request",
            "a Host field is needed to redirect to https\n",
        );
    };
    let port = if https_port == 443 {
        String::new()
    } else {
        format!(":{https_port}")
    };
    let target = if request.target.starts_with('/') {
        request.target.as_str()
    } else {
        "/"
    };
    let location = format!("https://{host}{port}{target}");
    let mut r = Response::text(308, "Permanent Redirect", &format!("{location}\n"));
    r.extra = format!("location: {location}\r\n");
    r
}

/// The host of a Host field, without its port; None if it holds anything
/// but a DNS name or an IP address (nothing else may reach Location).
fn host_without_port(field: &str) -> Option<&str> {
    let field = field.trim();
    let host = if let Some(rest) = field.strip_prefix('[') {
        let end = rest.find(']')?;
        &field[..end + 2]
    } else {
        field.split(':').next()?
    };
    let ok = !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'[' | b']' | b':'));
    ok.then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, target: &str, host: Option<&str>) -> Request {
        Request {
            method: method.into(),
            path: target.split('?').next().unwrap().into(),
            target: target.into(),
            host: host.map(str::to_string),
            has_origin: false,
        }
    }

    #[test]
    fn redirects_keep_host_path_and_query_and_drop_the_port() {
        let tokens = HttpTokens::default();
        let r = respond(
            &request("GET", "/a/b?c=d", Some("Example.com:80")),
            8443,
            &tokens,
        );
        assert_eq!(r.status, 308);
        assert_eq!(r.extra, "location: https://Example.com:8443/a/b?c=d\r\n");
        let r = respond(&request("POST", "/", Some("[::1]:8080")), 443, &tokens);
        assert_eq!(r.extra, "location: https://[::1]/\r\n");
        assert_eq!(
            respond(&request("GET", "/", None), 443, &tokens).status,
            400
        );
        let evil = respond(&request("GET", "/", Some("a.com/@evil.com")), 443, &tokens);
        assert_eq!(evil.status, 400);
        let unknown = respond(
            &request("GET", "/.well-known/acme-challenge/x", Some("a.com")),
            443,
            &tokens,
        );
        assert_eq!(unknown.status, 404);
    }
}
