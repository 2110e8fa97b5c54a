//! Errors of a bench run (the run as a whole) and kinds of failed requests
//! (counted, never fatal).

use std::fmt;

/// Why a bench run could not start or finish. Failed requests are not
/// errors of the run: they are counted by [`RequestError`] kind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The URL could not be parsed or uses an unsupported scheme.
    #[error("bad URL {url:?}: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A TLS option (version, cipher suite, group, CA file) is invalid.
    #[error("TLS configuration: {0}")]
    TlsConfig(String),
    /// Another option is invalid or options contradict each other.
    #[error("invalid option: {0}")]
    Config(String),
    /// The host name of a target did not resolve.
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        /// Host name that failed.
        host: String,
        /// Resolver error.
        source: std::io::Error,
    },
    /// Reading or writing a report file failed.
    #[error("{path}: {source}")]
    File {
        /// File involved.
        path: String,
        /// I/O error.
        source: std::io::Error,
    },
    /// A JSON report could not be read.
    #[error("{path}: not a tern bench JSON report: {reason}")]
    BadReport {
        /// File involved.
        path: String,
        /// Parser message.
        reason: String,
    },
    /// Server CPU time could not be read from /proc.
    #[error("server CPU: {0}")]
    ServerCpu(String),
    /// The targets file (`--targets`) is unreadable or wrong.
    #[error("targets file: {0}")]
    Mix(#[from] crate::mix::MixError),
    /// The worker threads or runtimes could not be started.
    #[error("cannot start workers: {0}")]
    Runtime(std::io::Error),
}

/// Why one request failed. The `Display` text is the key under which the
/// failure is counted, so it carries no addresses or timings that would make
/// every failure unique.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestError {
    /// DNS resolution failed.
    Dns(String),
    /// TCP connect was refused (nothing listens).
    ConnectRefused,
    /// Another TCP connect failure.
    Connect(String),
    /// The HTTP proxy refused the CONNECT tunnel.
    Proxy(String),
    /// The TLS handshake failed; `offered` says what we proposed.
    Tls {
        /// rustls' description, including a received alert.
        detail: String,
        /// Versions, suites and groups the client offered.
        offered: String,
    },
    /// The URL's scheme is not what the port speaks (`https://` to a
    /// plain-HTTP port, `http://` to a TLS port); says which.
    SchemeMismatch(String),
    /// The request timeout (`-t`) expired.
    Timeout,
    /// The peer closed the connection before a complete response.
    Closed,
    /// The server said GOAWAY (no error) before it processed the request
    /// (HTTP/2), or before the request was sent (HTTP/3): RFC 9113 section
    /// 6.8 and RFC 9114 section 5.2 let a client send it again, as
    /// browsers do, so it goes again on a new connection and is not
    /// counted as a failure.
    Unprocessed,
    /// The response was not valid HTTP.
    Http(String),
    /// Another I/O error on an established connection.
    Io(String),
    /// A response failed a check of the targets file (`expect_status`,
    /// `expect_body`): counted as a failed request.
    Check(String),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Dns(e) => write!(f, "dns: {e}"),
            RequestError::ConnectRefused => f.write_str("connect: connection refused"),
            RequestError::Connect(e) => write!(f, "connect: {e}"),
            RequestError::Proxy(e) => write!(f, "proxy: {e}"),
            RequestError::Tls { detail, offered } => {
                write!(f, "tls handshake: {detail} (offered {offered})")
            }
            RequestError::SchemeMismatch(e) => f.write_str(e),
            RequestError::Timeout => f.write_str("timeout: no complete response in time"),
            RequestError::Closed => f.write_str("connection closed before a complete response"),
            RequestError::Unprocessed => f.write_str("GOAWAY before the request was processed"),
            RequestError::Http(e) => write!(f, "http: {e}"),
            RequestError::Io(e) => write!(f, "io: {e}"),
            RequestError::Check(e) => write!(f, "check: {e}"),
        }
    }
}
