//! Process-wide metrics, rendered as Prometheus text by the admin listener.
//!
//! Workers update counters with relaxed atomic adds (no locks on the
//! request path); the admin listener reads them when scraped.

use std::net::SocketAddr;
use std::time::Duration;

use tern_tls::Negotiated;

/// All of tern's metrics.
#[derive(Debug, Default)]
pub struct Metrics {}

impl Metrics {
    /// A client connection was accepted.
    pub fn connection_opened(&self) {}

    /// A client connection ended.
    pub fn connection_closed(&self) {}

    /// A TLS handshake completed.
    pub fn handshake(&self, _tls: &Negotiated, _took: Duration) {}

    /// A TLS handshake failed or timed out.
    pub fn handshake_failed(&self) {}

    /// A request was answered (`protocol` is "http/1.1" or "h2").
    pub fn request(&self, _status: u16, _bytes_in: u64, _bytes_out: u64, _protocol: &'static str) {}

    /// A backend answered a request head after `took`.
    pub fn backend_response(&self, _upstream: &str, _server: SocketAddr, _took: Duration) {}

    /// Prometheus text exposition of everything, with each backend's health
    /// as (upstream, server, up).
    pub fn render(&self, _health: &[(String, SocketAddr, bool)]) -> String {
        String::new()
    }
}
