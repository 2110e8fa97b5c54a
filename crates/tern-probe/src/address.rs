//! What `tern probe` is pointed at: `HOST[:PORT]`, `[V6][:PORT]`, a bare
//! IPv6 address or an `https://` URL, and what to say when the port turns
//! out to speak plain HTTP.

use std::io::{Read, Write};
use std::net::{Ipv6Addr, SocketAddr, TcpStream};
use std::time::Duration;

use crate::ProbeError;

/// Port used when the target names none.
pub const DEFAULT_PORT: u16 = 443;

/// Host (no brackets) and port of a target; an `https://` URL's path is
/// ignored, an `http://` one is refused (there is no TLS to probe). The
/// target comes from the command line: any text gives a host and port or
/// a one-line error (fuzz target probe_target).
pub fn parse_target(target: &str) -> Result<(String, u16), ProbeError> {
    let bad = |why: &str| ProbeError::BadTarget(why.to_string());
    if let Ok(ip) = target.parse::<Ipv6Addr>() {
        return Ok((ip.to_string(), DEFAULT_PORT));
    }
    let authority = if target.contains("://") {
        let uri: http::Uri = target
            .parse()
            .map_err(|e| bad(&format!("not a URL ({e})")))?;
        match uri.scheme_str() {
            Some("https") => {}
            Some("http") => {
                return Err(bad(
                    "an http:// URL is plain HTTP, and tern probe looks at TLS: \
                     use https:// or HOST:PORT",
                ))
            }
            _ => return Err(bad("the URL scheme must be https://")),
        }
        uri.authority()
            .cloned()
            .ok_or_else(|| bad("the URL names no host"))?
    } else {
        target
            .parse::<http::uri::Authority>()
            .map_err(|e| bad(&format!("expected HOST:PORT or an https:// URL ({e})")))?
    };
    if authority.as_str().contains('@') {
        return Err(bad("user info (user@) has no meaning to a TLS probe"));
    }
    let host = authority.host();
    // http's Authority takes any port text and then has no port: refuse it.
    let port = match authority.as_str()[host.len()..].strip_prefix(':') {
        None => DEFAULT_PORT,
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| bad(&format!("port {p:?} is not a number from 0 to 65535")))?,
    };
    let bracketed = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    if let Some(inner) = bracketed {
        // http's Authority takes any text between brackets.
        return match inner.parse::<Ipv6Addr>() {
            Ok(ip) => Ok((ip.to_string(), port)),
            Err(_) => Err(bad(&format!("[{inner:?}] is not an IPv6 address"))),
        };
    }
    if host.is_empty() {
        return Err(bad("missing host"));
    }
    // http's Authority also takes brackets, commas and the like in the
    // middle of a name: a probe's host is a DNS name or an IPv4 address.
    if !host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(bad(&format!(
            "{host:?} is not a host name or an IP address"
        )));
    }
    Ok((host.to_string(), port))
}

/// The status line `addr` answers a plain HTTP/1.0 request with, when it
/// answers in HTTP: asked only after no TLS handshake worked, to say why.
pub(crate) fn plain_http_status(addr: SocketAddr, timeout: Duration) -> Option<String> {
    let mut tcp = TcpStream::connect_timeout(&addr, timeout).ok()?;
    tcp.set_read_timeout(Some(timeout)).ok()?;
    tcp.set_write_timeout(Some(timeout)).ok()?;
    tcp.write_all(b"HEAD / HTTP/1.0\r\n\r\n").ok()?;
    let mut head = [0u8; 64];
    let mut len = 0;
    while len < head.len() {
        match tcp.read(&mut head[len..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => len += n,
        }
        if head[..len].contains(&b'\n') {
            break;
        }
    }
    let head = &head[..len];
    if !head.starts_with(b"HTTP/") {
        return None;
    }
    let line = head.split(|b| *b == b'\r' || *b == b'\n').next()?;
    Some(String::from_utf8_lossy(line).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(s: &str) -> (String, u16) {
        parse_target(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn targets_split_into_host_and_port() {
        let t = |h: &str, p| (h.to_string(), p);
        assert_eq!(parsed("example.test:8443"), t("example.test", 8443));
        assert_eq!(parsed("example.test"), t("example.test", 443));
        assert_eq!(parsed("127.0.0.1:1"), t("127.0.0.1", 1));
        assert_eq!(parsed("[::1]:8443"), t("::1", 8443));
        assert_eq!(parsed("[::1]"), t("::1", 443));
        assert_eq!(parsed("::1"), t("::1", 443));
    }

    /// The fuzz target probe_target's property on odd inputs: a host and
    /// port written back as HOST:PORT parse to themselves; errors are one
    /// line.
    #[test]
    fn a_parsed_target_written_back_parses_to_itself() {
        for text in [
            "https://[::ffff:127.0.0.1]:1/",
            "https://a.b%41:5/",
            "[fe80::1%25eth0]:9",
            "x:0",
            "https://x:65535?q",
            "https://:443/",
            "[::1]:",
            "h:\u{e9}",
            "a b:1",
            "https://[v1.x]/",
            // Found by the fuzz target: brackets inside a name.
            "F,[]44333",
            "a[b]:1",
        ] {
            match parse_target(text) {
                Ok((host, port)) => {
                    let again = if host.contains(':') {
                        format!("[{host}]:{port}")
                    } else {
                        format!("{host}:{port}")
                    };
                    assert_eq!(parse_target(&again).ok(), Some((host, port)), "{text:?}");
                }
                Err(e) => assert!(!e.to_string().contains('\n'), "{text:?}: {e}"),
            }
        }
    }

    #[test]
    fn https_urls_are_targets_and_http_urls_are_refused_saying_why() {
        let t = |h: &str, p| (h.to_string(), p);
        assert_eq!(parsed("https://127.0.0.1:22443/"), t("127.0.0.1", 22443));
        assert_eq!(parsed("https://example.test/a?b"), t("example.test", 443));
        assert_eq!(parsed("https://[::1]:8443"), t("::1", 8443));
        let refusal = |s: &str| parse_target(s).err().map(|e| e.to_string());
        assert!(refusal("http://127.0.0.1:8080/").is_some_and(|e| e.contains("plain HTTP")));
        assert!(refusal("ftp://x/").is_some_and(|e| e.contains("https://")));
        assert!(refusal("example.test:https").is_some());
        assert!(refusal("u@example.test").is_some());
        assert!(refusal("F,[]44333").is_some_and(|e| e.contains("not a host name")));
        assert!(refusal("[::g]:1").is_some_and(|e| e.contains("IPv6")));
    }
}
