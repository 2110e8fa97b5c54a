//! Backend server addresses as users write them: `HOST:PORT`,
//! `unix:/path`, or a URL (`http://10.0.0.5:8080`, `https://api.internal`,
//! `h2c://app:8080`) whose scheme also says how to speak to the server.

use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Where a backend server listens.
///
/// `Copy`, because every request carries its backend's address (access
/// log, metrics, retries): a Unix path is interned once per distinct path
/// for the life of the process (see [`intern`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendAddr {
    /// TCP.
    Tcp(SocketAddr),
    /// A Unix-domain stream socket.
    Unix(&'static Path),
}

impl fmt::Display for BackendAddr {
    /// `10.0.0.5:8080`, `[::1]:8080` or `unix:/run/app.sock`: the forms a
    /// server is written in, so logs and metrics name it as the config does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendAddr::Tcp(a) => a.fmt(f),
            BackendAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

impl BackendAddr {
    /// An authority (`Host`, `:authority`) naming the server, for requests
    /// that carry none of their own (health checks, HTTP/1.0 clients): its
    /// address, or `localhost` for a Unix socket (a path is no host).
    pub fn authority(&self) -> String {
        match self {
            BackendAddr::Tcp(a) => a.to_string(),
            BackendAddr::Unix(_) => "localhost".to_string(),
        }
    }
}

impl From<SocketAddr> for BackendAddr {
    fn from(a: SocketAddr) -> Self {
        BackendAddr::Tcp(a)
    }
}

/// The scheme of a server written as a URL: what it says about the
/// protocol and TLS of its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `http://`: cleartext (HTTP/1.1 unless the group says h2c).
    Http,
    /// `https://`: TLS (HTTP/1.1 unless the group says h2).
    Https,
    /// `h2c://`: HTTP/2 over cleartext, prior knowledge.
    H2c,
}

impl Scheme {
    /// As written, with `://`.
    pub fn prefix(self) -> &'static str {
        match self {
            Scheme::Http => "http://",
            Scheme::Https => "https://",
            Scheme::H2c => "h2c://",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Scheme::Https => 443,
            Scheme::Http | Scheme::H2c => 80,
        }
    }
}

/// One server as written, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// Where it listens.
    pub addr: BackendAddr,
    /// The scheme, when written as a URL.
    pub scheme: Option<Scheme>,
    /// The host as written (a DNS name or an IP address, brackets
    /// removed); `None` for a Unix socket. The default TLS server name.
    pub host: Option<String>,
}

/// Most bytes of a Unix socket path (`sun_path` on Linux is 108 bytes,
/// with the terminating NUL).
const MAX_UNIX_PATH: usize = 107;

/// Parses and resolves one server; a relative Unix path is taken from
/// `base` (the config file's directory). The error is one line saying
/// what is wrong and which forms are accepted.
pub fn parse_server(text: &str, base: &Path) -> Result<ServerSpec, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("an empty server address".into());
    }
    if let Some(path) = text.strip_prefix("unix:") {
        return unix(text, path, base);
    }
    let (scheme, rest) = match text.split_once("://") {
        Some((scheme, rest)) => {
            let scheme = match scheme.to_ascii_lowercase().as_str() {
                "http" => Scheme::Http,
                "https" => Scheme::Https,
                "h2c" => Scheme::H2c,
                _ => {
                    return Err(format!(
                        "{text:?}: unknown scheme {scheme:?} (http://, https://, h2c://, \
                         or unix:/path, or HOST:PORT)"
                    ))
                }
            };
            (Some(scheme), authority_of(text, rest)?)
        }
        None => (None, text),
    };
    let (host, port) = split_host_port(text, rest, scheme.map(Scheme::default_port))?;
    let addr = resolve(text, &host, port)?;
    Ok(ServerSpec {
        addr: BackendAddr::Tcp(addr),
        scheme,
        host: Some(host),
    })
}

fn unix(text: &str, path: &str, base: &Path) -> Result<ServerSpec, String> {
    if path.starts_with("//") {
        return Err(format!(
            "{text:?}: a Unix socket is written unix:/path/to.sock (one slash after the colon)"
        ));
    }
    if path.is_empty() {
        return Err(format!("{text:?}: no socket path after unix:"));
    }
    let path = base.join(path);
    if path.as_os_str().len() > MAX_UNIX_PATH {
        return Err(format!(
            "{text:?}: a Unix socket path is at most {MAX_UNIX_PATH} bytes ({} here)",
            path.as_os_str().len()
        ));
    }
    Ok(ServerSpec {
        addr: BackendAddr::Unix(intern(path)),
        scheme: None,
        host: None,
    })
}

/// The `host[:port]` of a URL's remainder; a path other than `/`, a
/// query, a fragment or user info is refused (a server is where requests
/// go, not which ones).
fn authority_of<'a>(text: &str, rest: &'a str) -> Result<&'a str, String> {
    let (authority, tail) = match rest.find(['/', '?', '#']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if !(tail.is_empty() || tail == "/") {
        return Err(format!(
            "{text:?}: a backend URL names a server only, not a path ({tail:?}); \
             requests keep their own path"
        ));
    }
    if authority.contains('@') {
        return Err(format!("{text:?}: user info (user@) is not supported"));
    }
    if authority.is_empty() {
        return Err(format!("{text:?}: no host"));
    }
    Ok(authority)
}

/// `host:port`, `[v6]:port`, or with `default_port` (a URL) a bare host.
fn split_host_port(
    text: &str,
    authority: &str,
    default_port: Option<u16>,
) -> Result<(String, u16), String> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let Some((host, after)) = v6.split_once(']') else {
            return Err(format!("{text:?}: unclosed [ in an IPv6 address"));
        };
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(format!("{text:?}: expected :PORT after ]")),
            },
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, _)) if host.contains(':') => {
                return Err(format!(
                    "{text:?}: an IPv6 address is written in brackets, [::1]:8080"
                ))
            }
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(format!("{text:?}: no host"));
    }
    let port = match (port, default_port) {
        (Some(p), _) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("{text:?}: port {p:?} is not a number in 1..=65535"))?,
        (None, Some(p)) => p,
        (None, None) => {
            return Err(format!(
                "{text:?}: no port; write HOST:PORT, a URL (http://HOST, https://HOST), \
                 or unix:/path"
            ))
        }
    };
    Ok((host.to_string(), port))
}

/// The first address `host` resolves to.
fn resolve(text: &str, host: &str, port: u16) -> Result<SocketAddr, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{text:?}: cannot resolve {host:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("{text:?}: {host:?} resolves to no address"))
}

/// A `&'static` copy of `path`, made once per distinct path: configs are
/// reloaded, but the set of socket paths an operator ever names is small,
/// so this bounded leak buys a `Copy` address for every request.
fn intern(path: PathBuf) -> &'static Path {
    static PATHS: Mutex<Vec<&'static Path>> = Mutex::new(Vec::new());
    let mut paths = PATHS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(known) = paths.iter().find(|p| **p == path.as_path()) {
        return known;
    }
    let leaked: &'static Path = Box::leak(path.into_boxed_path());
    paths.push(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ServerSpec, String> {
        parse_server(text, Path::new("/etc/tern"))
    }

    fn tcp(text: &str) -> SocketAddr {
        text.parse().expect("socket address")
    }

    #[test]
    fn host_port_and_urls_name_tcp_servers() {
        let cases = [
            ("127.0.0.1:8080", None, "127.0.0.1:8080", "127.0.0.1"),
            (
                "http://127.0.0.1:8080",
                Some(Scheme::Http),
                "127.0.0.1:8080",
                "127.0.0.1",
            ),
            (
                "http://127.0.0.1:8080/",
                Some(Scheme::Http),
                "127.0.0.1:8080",
                "127.0.0.1",
            ),
            (
                "http://127.0.0.1",
                Some(Scheme::Http),
                "127.0.0.1:80",
                "127.0.0.1",
            ),
            ("HTTPS://[::1]", Some(Scheme::Https), "[::1]:443", "::1"),
            (
                "https://[::1]:8443",
                Some(Scheme::Https),
                "[::1]:8443",
                "::1",
            ),
            (
                "h2c://127.0.0.1:9000",
                Some(Scheme::H2c),
                "127.0.0.1:9000",
                "127.0.0.1",
            ),
            ("[::1]:8080", None, "[::1]:8080", "::1"),
        ];
        for (text, scheme, addr, host) in cases {
            let spec = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(spec.scheme, scheme, "{text}");
            assert_eq!(spec.addr, BackendAddr::Tcp(tcp(addr)), "{text}");
            assert_eq!(spec.host.as_deref(), Some(host), "{text}");
        }
    }

    #[test]
    fn a_name_keeps_its_host_for_tls() {
        let spec = parse("https://localhost").expect("localhost resolves");
        assert_eq!(spec.host.as_deref(), Some("localhost"));
        assert!(
            matches!(spec.addr, BackendAddr::Tcp(a) if a.port() == 443 && a.ip().is_loopback())
        );
    }

    #[test]
    fn unix_paths_are_absolute_or_taken_from_the_config_directory() {
        let spec = parse("unix:/run/app.sock").expect("absolute");
        assert_eq!(spec.addr, BackendAddr::Unix(Path::new("/run/app.sock")));
        assert_eq!(spec.host, None);
        assert_eq!(spec.addr.to_string(), "unix:/run/app.sock");
        let spec = parse("unix:app.sock").expect("relative");
        assert_eq!(
            spec.addr,
            BackendAddr::Unix(Path::new("/etc/tern/app.sock"))
        );
    }

    #[test]
    fn the_same_path_is_interned_once() {
        let (a, b) = (parse("unix:/run/x.sock"), parse("unix:/run/x.sock"));
        match (a.map(|s| s.addr), b.map(|s| s.addr)) {
            (Ok(BackendAddr::Unix(a)), Ok(BackendAddr::Unix(b))) => {
                assert!(std::ptr::eq(a, b), "two copies of one path")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_forms_say_what_is_wrong() {
        let long = format!("unix:/{}", "a".repeat(120));
        let cases = [
            ("", "empty"),
            ("127.0.0.1", "no port"),
            ("backend", "no port"),
            ("ftp://10.0.0.1", "unknown scheme \"ftp\""),
            ("h2://10.0.0.1", "unknown scheme"),
            ("http://10.0.0.1:8080/api", "not a path"),
            ("http://10.0.0.1:8080?x=1", "not a path"),
            ("http://user@10.0.0.1", "user info"),
            ("http://", "no host"),
            ("http://:8080", "no host"),
            ("10.0.0.1:0", "1..=65535"),
            ("10.0.0.1:http", "1..=65535"),
            ("10.0.0.1:70000", "1..=65535"),
            ("::1:8080", "brackets"),
            ("[::1", "unclosed"),
            ("[::1]8080", "expected :PORT"),
            ("unix:", "no socket path"),
            ("unix:///run/app.sock", "one slash"),
            (long.as_str(), "at most 107 bytes"),
            ("no-such-host.invalid:80", "cannot resolve"),
        ];
        for (text, want) in cases {
            match parse(text) {
                Ok(spec) => panic!("{text:?} accepted as {spec:?}"),
                Err(e) => assert!(e.contains(want), "{text:?}: {e}"),
            }
        }
    }
}
