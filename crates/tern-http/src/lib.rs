//! HTTP/1.1 for tern: finding and parsing message heads strictly, deciding
//! body framing, scanning chunked bodies, and rewriting heads on the way
//! through a proxy (hop-by-hop and forwarding fields). The PROXY protocol is
//! not here: `tern-proxy` reads and writes it (with the `ppp` crate).
//!
//! Used by `tern serve` (the terminator). This crate does no I/O: it works on byte slices, so every
//! rule here can be tested and fuzzed without sockets. It is not an HTTP
//! client or server.
//!
//! ```text
//!  bytes ─▶ find_head_end ─▶ parse_request ─▶ request_framing ─▶ write_request_head ─▶ backend
//!                                          └─▶ ChunkedScanner (body, forwarded as-is)
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod chunked;
mod edits;
mod error;
pub mod forwarding;
pub mod framing;
pub mod head;
mod parse;
#[cfg(any(test, feature = "reference"))]
#[doc(hidden)]
pub mod reference;
pub mod rewrite;
mod syntax;
pub mod trailers;

pub use error::HttpError;
pub use framing::BodyFraming;
pub use head::{RequestHead, ResponseHead};

/// Checks the Host rules of RFC 9112 section 3.2: an HTTP/1.1 request has
/// exactly one Host field.
pub fn check_host(head: &RequestHead) -> Result<(), HttpError> {
    let count = head.fields.all(head::FieldKind::Host).count();
    if count > 1 || (count == 0 && head.minor_version >= 1) {
        return Err(HttpError::BadHost);
    }
    Ok(())
}
