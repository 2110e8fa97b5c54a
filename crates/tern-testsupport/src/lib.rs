//! Shared helpers for tern's integration tests; a dev-dependency only, never
//! shipped and never used by tern itself.
//!
//! Everything here is real: certificates are made with rcgen and written to
//! disk, the backend is a hyper server on a loopback socket, tern runs as its
//! own process, and clients speak TLS over TCP. Setup failures panic with a
//! message, because a failed setup is a failed test; operations whose failure
//! a test may want to observe (a refused handshake, a closed connection)
//! return `io::Result` instead.
//!
//! One module per concern:
//! - [`certs`]: a test CA and leaf certificates (ECDSA P-256, RSA-2048, expired) as PEM files
//! - [`backend`]: an HTTP/1.1 origin that reports what it received
//! - [`raw_backend`]: a scripted origin for malformed or unusual responses
//! - [`body_sink`]: an origin that records whether a request body ended or was cut
//! - [`tern`]: spawning the tern binary, readiness, captured output, signals;
//!   [`tern::Served`], the harness that starts tern in front of a backend
//! - [`client`]: a raw TLS HTTP/1.1 client and a TLS record counter
//! - [`tools`]: `openssl s_client` and `curl` runners
//! - [`tickets`]: a client session store that counts the tickets it was given

pub mod backend;
pub mod bench_target;
pub mod body_sink;
pub mod certs;
pub mod challdns;
pub mod client;
pub mod ports;
pub mod raw_backend;
pub mod tempdir;
pub mod tern;
pub mod tickets;
pub mod tools;

pub mod chromium;
pub mod grpc_interop;
pub mod h2client;
pub mod h2frames;
pub mod h3client;
pub mod haproxy;
pub mod netlink_delay;
pub mod nginx;
pub mod openssl_pki;
pub mod pebble;
pub mod prometheus;
pub mod proxy_protocol;
pub mod python_origin;
pub mod reload;
pub mod tlsfuzzer;
pub mod trap_servers;

pub mod matrix_backends;
pub mod split_backend;
pub mod until_exit;
pub mod ws_frame;

pub use rustls;
pub use serde_json;
