//! Process-wide metrics, rendered as Prometheus text by the admin listener.
//!
//! Workers call the recording methods on every connection and request, so
//! those are relaxed atomic adds into arrays sized once at start-up, and
//! sharded by thread (`sharded.rs`) so workers on different cores do not
//! fight over cache lines. TLS versions, cipher suites, groups, request
//! protocols and status codes are small closed sets (`labels.rs`), and a
//! value outside them is counted in a catch-all slot. No lock and no
//! allocation on that path. Per-backend
//! latency, keyed by (upstream, server), is an open set: each thread keeps
//! handles to the series it uses, and only its first response from a
//! server takes a lock (`backend.rs`).
//!
//! Counters live as long as the process: a reload does not reset them, and
//! a backend that left the configuration keeps its last latency series.
//! See `docs/metrics.md` for every family and how to read it.

use crate::config::BackendAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tern_tls::{ClientCertRefusal, Negotiated};

mod acme;
mod backend;
mod dns;
mod histogram;
mod labels;
mod process;
mod render;
mod retries;
mod sharded;
mod text;

use backend::BackendLatency;
use histogram::{Histogram, GRPC_BOUNDS_US, HANDSHAKE_BOUNDS_US};
use labels::{status_index, LabelSet, STATUS_SLOTS};
use sharded::ShardedCounters;

/// All of tern's metrics.
#[derive(Debug)]
pub struct Metrics {
    /// Process start, µs since the Unix epoch.
    started_us: u64,
    /// Connections opened, closed and refused, handshake failures, reloads:
    /// see [`Scalar`].
    scalars: ShardedCounters,
    versions: LabelSet,
    ciphers: LabelSet,
    groups: LabelSet,
    /// Completed handshakes by (version, cipher, group, resumed); see
    /// [`Metrics::handshake_slot`].
    handshakes: ShardedCounters,
    /// Handshake durations: `[full, resumed]`.
    handshake_time: [Histogram; 2],
    /// Failed handshakes by [`HandshakeFailure`].
    handshake_failures: ShardedCounters,
    protocols: LabelSet,
    /// Requests by (protocol, status slot).
    requests: ShardedCounters,
    /// Bytes read from clients, per protocol.
    bytes_in: ShardedCounters,
    /// Bytes written to clients, per protocol.
    bytes_out: ShardedCounters,
    /// Failed requests by [`crate::fault::Kind`] (its side follows).
    request_errors: ShardedCounters,
    /// gRPC calls by `grpc-status` (0 to 16, then "other"); with their
    /// bytes each way and total duration.
    grpc_calls: ShardedCounters,
    grpc_bytes: ShardedCounters,
    grpc_seconds: Histogram,
    /// Backend response times by upstream name, then server.
    backends: BackendLatency,
    /// Retries on other servers, by upstream name.
    retries: retries::Retries,
    /// Resolutions of backend names.
    dns: dns::DnsResolutions,
}

impl Default for Metrics {
    fn default() -> Self {
        let versions = LabelSet::tls_versions();
        let ciphers = LabelSet::cipher_suites();
        let groups = LabelSet::groups();
        let protocols = LabelSet::protocols();
        let handshake_slots = versions.slots() * ciphers.slots() * groups.slots() * 2;
        let started_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        Metrics {
            started_us,
            scalars: ShardedCounters::new(Scalar::COUNT),
            handshakes: ShardedCounters::new(handshake_slots),
            handshake_failures: ShardedCounters::new(HandshakeFailure::ALL.len()),
            handshake_time: [
                Histogram::new(HANDSHAKE_BOUNDS_US),
                Histogram::new(HANDSHAKE_BOUNDS_US),
            ],
            requests: ShardedCounters::new(protocols.slots() * STATUS_SLOTS),
            bytes_in: ShardedCounters::new(protocols.slots()),
            bytes_out: ShardedCounters::new(protocols.slots()),
            request_errors: ShardedCounters::new(crate::fault::Kind::ALL.len()),
            grpc_calls: ShardedCounters::new(GRPC_STATUS_SLOTS),
            grpc_bytes: ShardedCounters::new(2),
            grpc_seconds: Histogram::new(GRPC_BOUNDS_US),
            backends: BackendLatency::default(),
            retries: retries::Retries::default(),
            dns: dns::DnsResolutions::default(),
            versions,
            ciphers,
            groups,
            protocols,
        }
    }
}

/// `grpc-status` slots: codes 0 to 16, then one for anything else.
const GRPC_STATUS_SLOTS: usize = 18;

/// The unlabelled counters, as slots of `Metrics::scalars`.
struct Scalar;

impl Scalar {
    const OPENED: usize = 0;
    const CLOSED: usize = 1;
    const REFUSED: usize = 2;
    const RELOADS_APPLIED: usize = 3;
    const RELOADS_REFUSED: usize = 4;
    const BACKEND_SPLIT: usize = 5;
    const QUIC_RETRIES: usize = 6;
    const ACCEPT_ERRORS: usize = 7;
    const COUNT: usize = 8;
}

/// Why a TLS handshake failed: the `reason` label of
/// `tern_tls_handshake_failures_total`. A closed set, so that a flood of
/// odd clients cannot grow the exposition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeFailure {
    /// No complete handshake within `handshake_timeout`.
    Timeout,
    /// The client closed or reset the connection mid-handshake.
    Closed,
    /// The first bytes were not a TLS handshake (plain HTTP, scanners).
    NotTls,
    /// No protocol version, cipher suite, group or signature scheme in
    /// common (old or misconfigured clients).
    Incompatible,
    /// The client aborted with an alert, typically refusing tern's
    /// certificate (unknown CA, name mismatch, expired).
    ClientAlert,
    /// A TLS message out of order or malformed inside the handshake.
    ProtocolError,
    /// tern refused the client's certificate, or its absence (mTLS).
    ClientCert(ClientCertRefusal),
    /// Anything else.
    Other,
}

impl HandshakeFailure {
    const ALL: [HandshakeFailure; 12] = [
        HandshakeFailure::Timeout,
        HandshakeFailure::Closed,
        HandshakeFailure::NotTls,
        HandshakeFailure::Incompatible,
        HandshakeFailure::ClientAlert,
        HandshakeFailure::ProtocolError,
        HandshakeFailure::ClientCert(ClientCertRefusal::NoneSent),
        HandshakeFailure::ClientCert(ClientCertRefusal::UnknownCa),
        HandshakeFailure::ClientCert(ClientCertRefusal::Expired),
        HandshakeFailure::ClientCert(ClientCertRefusal::Revoked),
        HandshakeFailure::ClientCert(ClientCertRefusal::Invalid),
        HandshakeFailure::Other,
    ];

    /// The reason for an error from the TLS acceptor.
    pub fn of(e: &std::io::Error) -> HandshakeFailure {
        use rustls::Error as Tls;
        match e.get_ref().and_then(|inner| inner.downcast_ref::<Tls>()) {
            Some(Tls::InvalidMessage(_)) => HandshakeFailure::NotTls,
            Some(Tls::PeerIncompatible(_)) => HandshakeFailure::Incompatible,
            Some(Tls::AlertReceived(_)) => HandshakeFailure::ClientAlert,
            Some(e) if ClientCertRefusal::of(e).is_some() => ClientCertRefusal::of(e)
                .map_or(HandshakeFailure::Other, HandshakeFailure::ClientCert),
            Some(
                Tls::InappropriateMessage { .. }
                | Tls::InappropriateHandshakeMessage { .. }
                | Tls::PeerMisbehaved(_)
                | Tls::DecryptError,
            ) => HandshakeFailure::ProtocolError,
            Some(_) => HandshakeFailure::Other,
            None => match e.kind() {
                std::io::ErrorKind::UnexpectedEof
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe => HandshakeFailure::Closed,
                _ => HandshakeFailure::Other,
            },
        }
    }

    /// Its slot in `Metrics::handshake_failures`.
    fn index(self) -> usize {
        HandshakeFailure::ALL
            .iter()
            .position(|w| *w == self)
            .unwrap_or(HandshakeFailure::ALL.len() - 1)
    }

    /// The refused client certificate's reason, when that is the failure.
    pub fn client_cert(self) -> Option<ClientCertRefusal> {
        match self {
            HandshakeFailure::ClientCert(why) => Some(why),
            _ => None,
        }
    }

    fn label(self) -> &'static str {
        match self {
            HandshakeFailure::Timeout => "timeout",
            HandshakeFailure::Closed => "closed",
            HandshakeFailure::NotTls => "not_tls",
            HandshakeFailure::Incompatible => "incompatible",
            HandshakeFailure::ClientAlert => "client_alert",
            HandshakeFailure::ProtocolError => "protocol_error",
            HandshakeFailure::ClientCert(ClientCertRefusal::NoneSent) => "client_cert_none_sent",
            HandshakeFailure::ClientCert(ClientCertRefusal::UnknownCa) => "client_cert_unknown_ca",
            HandshakeFailure::ClientCert(ClientCertRefusal::Expired) => "client_cert_expired",
            HandshakeFailure::ClientCert(ClientCertRefusal::Revoked) => "client_cert_revoked",
            HandshakeFailure::ClientCert(ClientCertRefusal::Invalid) => "client_cert_invalid",
            HandshakeFailure::Other => "other",
        }
    }
}

impl Metrics {
    /// A client connection was accepted.
    pub fn connection_opened(&self) {
        self.scalars.add(Scalar::OPENED, 1);
    }

    /// A client connection ended.
    pub fn connection_closed(&self) {
        self.scalars.add(Scalar::CLOSED, 1);
    }

    /// A client connection was turned away because the listener's
    /// `max_connections` was reached (answered 503, or closed at once).
    pub fn connection_refused(&self) {
        self.scalars.add(Scalar::REFUSED, 1);
    }

    /// `accept(2)` failed (out of file descriptors or memory): the
    /// connection waits in the listen backlog until the worker can take it.
    pub fn accept_error(&self) {
        self.scalars.add(Scalar::ACCEPT_ERRORS, 1);
    }

    /// A SIGHUP reload was applied (`true`) or refused with the running
    /// configuration kept (`false`).
    pub fn reload(&self, applied: bool) {
        let slot = if applied {
            Scalar::RELOADS_APPLIED
        } else {
            Scalar::RELOADS_REFUSED
        };
        self.scalars.add(slot, 1);
    }

    /// A TLS handshake completed after `took` (from accept to the end of
    /// the handshake, so it includes the client's round trips).
    pub fn handshake(&self, tls: &Negotiated, took: Duration) {
        let slot = self.handshake_slot(
            self.versions.index(tls.version),
            self.ciphers.index(&tls.cipher),
            self.groups.index(&tls.group),
            tls.resumed,
        );
        self.handshakes.add(slot, 1);
        self.handshake_time[usize::from(tls.resumed)].observe(took);
    }

    /// A TLS handshake failed or timed out.
    pub fn handshake_failed(&self, why: HandshakeFailure) {
        self.handshake_failures.add(why.index(), 1);
    }

    /// A request was answered (`protocol` is "http/1.1" or "h2"); the
    /// bytes are what tern read from and wrote to the client for it.
    pub fn request(&self, status: u16, bytes_in: u64, bytes_out: u64, protocol: &'static str) {
        self.request_in(self.protocol_slot(protocol), status, bytes_in, bytes_out);
    }

    /// The slot of request protocol `protocol` ("http/1.1", "h2", "h3"),
    /// for [`Metrics::request_in`]: a connection looks it up once.
    pub(crate) fn protocol_slot(&self, protocol: &str) -> usize {
        self.protocols.index(protocol)
    }

    /// [`Metrics::request`] for the protocol in slot `p` (from
    /// [`Metrics::protocol_slot`]): no name lookup per request.
    pub(crate) fn request_in(&self, p: usize, status: u16, bytes_in: u64, bytes_out: u64) {
        self.requests
            .add(p * STATUS_SLOTS + status_index(status), 1);
        self.bytes_in.add(p, bytes_in);
        self.bytes_out.add(p, bytes_out);
    }

    /// A new QUIC connection was asked to prove its address first (a
    /// stateless Retry: more than `quic_retry_above` handshakes were under
    /// way).
    pub(crate) fn quic_retry(&self) {
        self.scalars.add(Scalar::QUIC_RETRIES, 1);
    }

    /// A backend wrote a small response's head and body in separate writes.
    pub(crate) fn backend_split_response(&self) {
        self.scalars.add(Scalar::BACKEND_SPLIT, 1);
    }

    /// A request failed (it is counted in `request` too, with its status).
    pub(crate) fn request_error(&self, e: crate::fault::ExchangeError) {
        self.request_errors.add(e.kind().index(), 1);
    }

    /// A gRPC call ended with `grpc_status` after `took`, having moved
    /// `bytes_in` from and `bytes_out` to the client.
    pub(crate) fn grpc_call(
        &self,
        grpc_status: u16,
        took: Duration,
        bytes_in: u64,
        bytes_out: u64,
    ) {
        let slot = usize::from(grpc_status).min(GRPC_STATUS_SLOTS - 1);
        self.grpc_calls.add(slot, 1);
        self.grpc_bytes.add(0, bytes_in);
        self.grpc_bytes.add(1, bytes_out);
        self.grpc_seconds.observe(took);
    }

    /// One request's retries on other servers of `upstream`: after
    /// connect failures, after a `retry_on` status, one the budget refused.
    pub(crate) fn retries(&self, upstream: &str, connect: u64, status: u64, denied: bool) {
        self.retries.add(upstream, connect, status, denied);
    }

    /// A backend answered a request head after `took`.
    pub fn backend_response(&self, upstream: &str, server: BackendAddr, took: Duration) {
        self.backends.observe(upstream, server, took);
    }

    /// Counts one resolution of the backend name `name` of `upstream`.
    pub fn dns_resolved(&self, upstream: &str, name: &str, ok: bool) {
        self.dns.record(upstream, name, ok);
    }

    /// Index into `handshakes`.
    fn handshake_slot(&self, version: usize, cipher: usize, group: usize, resumed: bool) -> usize {
        ((version * self.ciphers.slots() + cipher) * self.groups.slots() + group) * 2
            + usize::from(resumed)
    }
}

#[cfg(test)]
mod tests;

pub(crate) use acme::health_lines as acme_health_lines;
