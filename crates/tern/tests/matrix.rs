//! Conformance matrix of `tern serve`: the same cases on every path a
//! request can take through tern,
//!
//! ```text
//!   client ──TLS──▶ tern ──▶ backend
//!   HTTP/1.1 front        ×  HTTP/1.1 backend (protocol = "http1")
//!   HTTP/2 front (ALPN)   ×  h2c backend      (protocol = "h2c")
//!                         ×  h2 backend       (protocol = "h2", HTTP/2 over TLS)
//! ```
//!
//! six paths, one `#[test]` per (path, case): a failure names both, e.g.
//! `h2_front_h1_backend::stale_connection_closed_as_request_arrives_is_retried_once`.
//! Run one path with `cargo test -p tern --test matrix h2_front_h1_backend`,
//! one case everywhere with `cargo test -p tern --test matrix head_`.
//!
//! Real processes and sockets throughout: the tern binary configured by a
//! TOML file, the hyper echo backend of tern-testsupport and its scripted
//! backends (`matrix_backends`, `split_backend`), a rustls HTTP/1.1 client
//! and the `h2` crate's client. Each path's tern and backends start once
//! and serve all of that path's cases (`matrix/fixture.rs`).
//!
//! Cases (`matrix/cases.rs`): a GET with a small body; HEAD without body
//! and with Content-Length; 204 and 304 without body; uploads with and
//! without a length; a pooled backend connection closed while idle, and
//! one closed just as the next request arrives (retried once, processed
//! once); refused backend 502; every server down 503; silent backend 504
//! after `backend_response_timeout`; forged forwarding fields replaced;
//! a small request reaching the backend in one TCP segment.
//!
//! Cases that fail show where tern has drifted from this contract; they
//! are not ignored, so the failure stays visible until the code is fixed.
//! When this matrix was written (tern at f892e52) these failed, every run:
//!
//! - `stale_connection_closed_as_request_arrives_is_retried_once` on
//!   `h2_front_h1_backend` (HTTP/2 streams to HTTP/1.1 backends are never
//!   retried) and on all four h2c/h2 paths (a stream the backend's GOAWAY
//!   left unprocessed is answered 502, not retried);
//! - `small_request_reaches_backend_in_one_segment` on `h2_front_h1_backend`
//!   (head and body written separately: two segments, though one `read()`)
//!   and on all four h2c/h2 paths (HEADERS and DATA in separate writes);
//! - `head_has_no_body_and_keeps_content_length` on `h2_front_h2c_backend`
//!   and `h2_front_h2_backend`: the hyper backend sends DATA on a HEAD
//!   response over HTTP/2, and tern resets the client's stream
//!   (INTERNAL_ERROR) after the head instead of ending it there, as its
//!   HTTP/1.1 front does.

#[path = "matrix/cases.rs"]
mod cases;
#[path = "matrix/client.rs"]
mod client;
#[path = "matrix/fixture.rs"]
mod fixture;

/// The binary under test, built by cargo for this test target.
pub fn tern_bin() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_tern"))
}

/// Invokes `$m!(args...; every case)`: the one list of cases.
macro_rules! with_every_case {
    ($m:ident, $($args:tt)*) => {
        $m!($($args)*;
            get_returns_a_small_body,
            head_has_no_body_and_keeps_content_length,
            status_204_has_no_body,
            status_304_has_no_body,
            upload_with_content_length_arrives_intact,
            upload_without_length_arrives_intact,
            stale_connection_closed_while_idle_is_replaced,
            stale_connection_closed_as_request_arrives_is_retried_once,
            refused_backend_is_502,
            all_servers_down_is_503,
            silent_backend_is_504_after_response_timeout,
            forged_forwarding_fields_are_replaced,
            small_request_reaches_backend_in_one_segment,
        );
    };
}

/// A module named for the path holding one test per case.
macro_rules! path_tests {
    ($module:ident, $front:ident, $backend:ident; $($case:ident,)+) => {
        mod $module {
            $(
                #[test]
                fn $case() {
                    crate::cases::$case(crate::fixture::Path {
                        front: crate::client::Front::$front,
                        backend: crate::fixture::Proto::$backend,
                    });
                }
            )+
        }
    };
}

macro_rules! matrix {
    ($($module:ident: $front:ident -> $backend:ident,)+) => {
        $( with_every_case!(path_tests, $module, $front, $backend); )+
    };
}

matrix! {
    h1_front_h1_backend: Http1 -> Http1,
    h1_front_h2c_backend: Http1 -> H2c,
    h1_front_h2_backend: Http1 -> H2,
    h2_front_h1_backend: Http2 -> Http1,
    h2_front_h2c_backend: Http2 -> H2c,
    h2_front_h2_backend: Http2 -> H2,
}
