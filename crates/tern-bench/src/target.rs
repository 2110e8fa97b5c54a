//! Target URLs: parsed once into scheme, host, port and request path.

use std::fmt;

use crate::error::BenchError;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// Plain TCP.
    Http,
    /// TLS.
    Https,
}

/// A parsed target URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URL as given on the command line.
    pub url: String,
    /// Scheme.
    pub scheme: Scheme,
    /// Host without brackets (`::1`, `example.com`, `127.0.0.1`).
    pub host: String,
    /// Port (explicit or the scheme's default).
    pub port: u16,
    /// Path and query, at least `/`.
    pub path: String,
    /// The protocol for this target when it is not the run's (a protocol
    /// comparison runs one URL once per protocol).
    pub http: Option<crate::config::HttpVersion>,
}

impl Target {
    /// Parses `scheme://host[:port][/path][?query]`. Userinfo and fragments
    /// are refused rather than silently dropped.
    pub fn parse(url: &str) -> Result<Target, BenchError> {
        let bad = |reason: &str| BenchError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let (scheme, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (Scheme::Https, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (Scheme::Http, rest)
        } else {
            return Err(bad("scheme must be http:// or https://"));
        };
        if url.contains('#') {
            return Err(bad("fragments are not sent to servers; remove '#...'"));
        }
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'?' => (&rest[..i], format!("/{}", &rest[i..])),
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        if authority.contains('@') {
            return Err(bad("user info in URLs is not supported; use -a user:pass"));
        }
        let default_port = match scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        let (host, port) = split_host_port(authority, default_port).map_err(bad)?;
        if host.is_empty() {
            return Err(bad("missing host"));
        }
        Ok(Target {
            url: url.to_string(),
            scheme,
            host,
            port,
            path,
            http: None,
        })
    }

    /// The `Host` header value: host, with brackets for IPv6, and the port
    /// when it is not the scheme's default.
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let default = match self.scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// Splits `host:port`, `[v6]:port`, `host` or `[v6]`.
pub(crate) fn split_host_port(
    authority: &str,
    default_port: u16,
) -> Result<(String, u16), &'static str> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("unclosed '[' in host")?;
        let port = match after {
            "" => default_port,
            p => p
                .strip_prefix(':')
                .ok_or("junk after ']'")?
                .parse()
                .map_err(|_| "bad port")?,
        };
        return Ok((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Ok((h.to_string(), p.parse().map_err(|_| "bad port")?)),
        Some(_) => Err("IPv6 addresses must be in brackets"),
        None => Ok((authority.to_string(), default_port)),
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_ports_and_paths() {
        let t = Target::parse("https://[::1]:8443/a?b=1").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("::1", 8443, "/a?b=1")
        );
        assert_eq!(t.authority(), "[::1]:8443");
        let t = Target::parse("http://example.com?q").unwrap();
        assert_eq!((t.port, t.path.as_str()), (80, "/?q"));
        assert_eq!(t.authority(), "example.com");
    }

    #[test]
    fn refuses_bad_urls() {
        for url in [
            "ftp://x/",
            "http://",
            "http://a:b:c/",
            "http://h:99999/",
            "https://u@h/",
            "x",
        ] {
            assert!(Target::parse(url).is_err(), "{url} should be refused");
        }
    }
}
