//! `tern serve`: a TLS terminator for HTTP.
//!
//! ```text
//!  accept (per-worker SO_REUSEPORT socket, TCP_NODELAY)
//!    └▶ TLS handshake under a deadline (SNI → certificate, ALPN)
//!         ├▶ http: read head (bounded) → strict checks (400/431) → rewrite
//!         │        forwarding fields → backend (pooled) in one write →
//!         │        stream bodies both ways → keep the client alive
//!         └▶ tcp:  optional PROXY header → bytes both ways
//! ```
//!
//! This crate owns configuration (typed, validated once), listeners and
//! workers, the connection lifecycle, backends, access logs and shutdown.
//! It parses no command line: the `tern` binary maps flags onto
//! [`config::ListenerOptions`] and calls [`run`]. TLS details live in
//! `tern-tls`, HTTP/1.1 syntax in `tern-http`.

#![forbid(unsafe_code)]

pub mod access_log;
pub mod config;
mod control;
mod error;
mod exchange;
mod fault;
mod front;
mod io;
mod message;
pub mod metrics;
mod upstream;

pub use control::server::{run, Reloader};
pub use error::ServeError;
