//! Diagnosis for tern: `tern probe` looks at a TLS endpoint for the
//! performance traps that cost real teams days (a server that picks
//! finite-field DHE, an extra handshake round trip, a first flight larger
//! than the initial congestion window, the split-write penalty of Nagle plus
//! delayed ACKs, no resumption, no HTTP/2) and explains each with its fix;
//! `tern speed` measures what this machine's TLS crypto can do, with and
//! without the CPU features the provider uses.
//!
//! ```text
//!  probe(opts) ─┬─ handshake   rustls, browser-like offer, timed reads/writes
//!               ├─ negotiate   hand-built hellos (wire): versions, DHE, CBC, groups
//!               ├─ certinfo    chain order, expiry, key, OCSP staple
//!               ├─ http        keepalive, split-write penalty, Alt-Svc
//!               ├─ h3          the advertised HTTP/3: QUIC handshake, one GET
//!               └─ findings ──> Report (text or JSON), exit code 0/1
//! ```
//!
//! Not for: judging trust or security posture (certificates are recorded, not
//! validated against roots), load generation (`tern-bench`), or any address
//! the user did not name. No command-line parsing lives here.

#![forbid(unsafe_code)]

mod address;
pub mod certinfo;
pub mod findings;
pub mod h3;
mod handshake;
mod http;
mod negotiate;
pub mod probe;
pub mod report;
mod resumption;
pub mod speed;
pub mod suites;
pub mod wire;

pub use address::{parse_target, DEFAULT_PORT};
pub use probe::{probe, ProbeOptions};
pub use report::{Finding, Report, Severity};
pub use speed::{SpeedError, SpeedFigures, SpeedReport};

/// Why a probe could not run at all (exit status 2).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The target is neither HOST[:PORT] nor an https:// URL.
    #[error("not a TLS endpoint to probe: {0}")]
    BadTarget(String),
    /// No TLS handshake worked, and the port answered a plain HTTP request.
    #[error("the port speaks plain HTTP, not TLS: it answered a plain request with {0:?}")]
    PlainHttp(String),
    /// HOST:PORT did not resolve.
    #[error("cannot resolve {0}: {1}")]
    Resolve(String, String),
    /// The `--sni` value is not a valid DNS name.
    #[error("not a valid server name: {0}")]
    BadServerName(String),
    /// TCP connect failed or timed out.
    #[error("TCP connect failed: {0}")]
    Connect(std::io::Error),
    /// rustls refused our own configuration.
    #[error("TLS configuration: {0}")]
    Tls(rustls::Error),
    /// The TLS handshake (or I/O right after it) failed.
    #[error("TLS handshake failed: {0}")]
    Handshake(std::io::Error),
    /// Neither the browser-like offer nor any hand-built offer got a
    /// ServerHello: this is not a TLS server we can talk to.
    #[error("no TLS handshake succeeded (no offer was accepted)")]
    NoHandshake,
    /// An HTTP/1.1 exchange after the handshake failed or timed out.
    #[error("HTTP request failed: {0}")]
    Http(std::io::Error),
    /// The server answered an HTTP request with something that is not HTTP/1.1.
    #[error("no HTTP/1.1 response")]
    NoHttpResponse,
}
