//! Errors that stop `tern serve` from starting or running.

use std::net::SocketAddr;

/// Why `tern serve` could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The TLS configuration could not be built.
    #[error("listener {listen}: {source}")]
    Tls {
        /// The listener.
        listen: SocketAddr,
        /// What failed.
        source: tern_tls::TlsError,
    },
    /// The QUIC (HTTP/3) endpoint could not be set up.
    #[error("listener {listen}: HTTP/3: {message}")]
    Quic {
        /// The listener.
        listen: SocketAddr,
        /// What failed.
        message: String,
    },
    /// ACME certificates could not be set up (state directory, placeholder).
    #[error("ACME: {0}")]
    Acme(#[from] tern_acme::AcmeError),
    /// A listening socket could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What failed.
        source: std::io::Error,
    },
    /// A binary upgrade could not take over from the running tern (which
    /// keeps serving).
    #[error("upgrade through {path}: {message}")]
    Upgrade {
        /// The upgrade socket.
        path: std::path::PathBuf,
        /// What failed.
        message: String,
    },
    /// Switching to the configured user or group failed.
    #[error("cannot run as user {user}: {message}")]
    Privileges {
        /// The user.
        user: String,
        /// What failed.
        message: String,
    },
    /// Any other I/O failure (threads, runtime, access log).
    #[error("{context}: {source}")]
    Io {
        /// What tern was doing.
        context: &'static str,
        /// What failed.
        source: std::io::Error,
    },
}
