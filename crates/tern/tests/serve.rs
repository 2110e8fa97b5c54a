//! Integration tests of `tern serve` (HTTP/1.1): the real binary, real
//! certificates, a real hyper backend and real clients (rustls, curl,
//! openssl s_client) over loopback sockets. Every test starts its own backend
//! and its own tern on its own free port, so tests run in parallel.
//!
//! The contract these tests hold tern to is the `tern serve` command line,
//! config file, access log, error statuses and forwarding rules agreed for
//! HTTP/1.1; each module covers one concern.

use std::net::SocketAddr;
use std::time::Duration;

#[path = "serve/backend_faults.rs"]
mod backend_faults;
#[path = "serve/backend_leg.rs"]
mod backend_leg;
#[path = "serve/backends.rs"]
mod backends;
#[path = "serve/bodies.rs"]
mod bodies;
#[path = "serve/cert_compression.rs"]
mod cert_compression;
#[path = "serve/clients.rs"]
mod clients;
#[path = "serve/clients_cli.rs"]
mod clients_cli;
#[path = "serve/config.rs"]
mod config;
#[path = "serve/conformance.rs"]
mod conformance;
#[path = "serve/descriptors.rs"]
mod descriptors;
#[path = "serve/edge.rs"]
mod edge;
#[path = "serve/edge_body.rs"]
mod edge_body;
#[path = "serve/edge_clients.rs"]
mod edge_clients;
#[path = "serve/edge_flood.rs"]
mod edge_flood;
#[path = "serve/edge_h3.rs"]
mod edge_h3;
#[path = "serve/forwarded.rs"]
mod forwarded;
#[path = "serve/framing.rs"]
mod framing;
#[path = "serve/h3.rs"]
mod h3;
#[path = "serve/h3_early.rs"]
mod h3_early;
#[path = "serve/h3_packets.rs"]
mod h3_packets;
#[path = "serve/h3_retry.rs"]
mod h3_retry;
#[path = "serve/headers.rs"]
mod headers;
#[path = "serve/interop.rs"]
mod interop;
#[path = "serve/lifecycle.rs"]
mod lifecycle;
#[path = "serve/logs.rs"]
mod logs;
#[path = "serve/mtls.rs"]
mod mtls;
#[path = "serve/odd_offers.rs"]
mod odd_offers;
#[path = "serve/passthrough.rs"]
mod passthrough;
#[path = "serve/policy.rs"]
mod policy;
#[path = "serve/proxy_ssl_tlv.rs"]
mod proxy_ssl_tlv;
#[path = "serve/responses.rs"]
mod responses;
#[path = "serve/sni.rs"]
mod sni;
#[path = "serve/trailers.rs"]
mod trailers;

/// How long tests wait for an access-log line to appear.
pub const LOG_WAIT: Duration = Duration::from_secs(5);

/// `serve --listen ADDR --backend B...` (without certificates).
pub fn serve_args(listen: SocketAddr, backends: &[&str]) -> Vec<String> {
    let mut args = vec!["serve".to_string(), "--listen".into(), listen.to_string()];
    for backend in backends {
        args.push("--backend".into());
        args.push(backend.to_string());
    }
    args
}
