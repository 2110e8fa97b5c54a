//! `tern serve`: a TLS terminator for HTTP.
//!
//! ```text
//!  control/   server (start-up, signals, reload), workers (one thread and
//!    │        accept loop per core), QUIC endpoints (one UDP socket per
//!    │        worker, Retry under load), generations, admin listener, demo origin
//!    ▼
//!  front/     accept → PROXY header in → TLS handshake under a deadline →
//!    │          h1: read head (bounded) → strict checks (400/431)
//!    │          h2: each stream, under the abuse limits
//!    │          tcp: PROXY header out → bytes both ways
//!    │        QUIC handshake under a deadline →
//!    │          h3: each request stream, under the abuse limits
//!    ▼        (h1, h2, h3 build a message::Request and implement exchange::Front)
//!  exchange/  one exchange, any protocol pair: route once → backend client
//!    │        → bodies both ways (one write for a head and the body at hand)
//!    │        → retry a stale pooled connection once → fault → status →
//!    ▼        access-log record and metrics
//!  upstream/  groups, balancing, health, idle pools and HTTP/2 sessions; the
//!             HTTP/1.1 (h1) and HTTP/2 (h2) backend clients
//!
//!  leaves, used by all and using none of the above:
//!  io/ (bounded buffers, body pieces, h2 sends; the cheap timers are
//!  the tern-deadline crate), fault (which
//!  side failed, and the status), message (the protocol-neutral request and
//!  response views), config, metrics, access_log
//! ```
//!
//! Imports point down the picture only: front ends know the exchange core,
//! the core knows the backend clients, and nothing below imports what is
//! above it. A rule about HTTP semantics (what is forwarded, which failure
//! gets which status, when a backend connection may be reused) is written
//! in one place; front ends and backend clients only translate their
//! protocol.
//!
//! This crate owns configuration (typed, validated once), listeners and
//! workers, the connection lifecycle, backends, access logs and shutdown.
//! It parses no command line: the `tern` binary maps flags onto
//! [`config::ListenerOptions`] and calls [`run`]. TLS details live in
//! `tern-tls`, HTTP/1.1 syntax in `tern-http`.

#![forbid(unsafe_code)]

pub mod access_log;
mod cold;
pub mod config;
mod control;
mod error;
mod exchange;
mod fault;
mod front;
#[doc(hidden)]
pub mod fuzzing;
mod io;
mod message;
pub mod metrics;
mod upstream;

pub use control::server::{run, Reloader, Start};
pub use error::ServeError;
