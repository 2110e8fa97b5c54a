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
mod histogram;
mod labels;
mod process;
mod sharded;
mod text;

use backend::BackendLatency;
use histogram::{Histogram, GRPC_BOUNDS_US, HANDSHAKE_BOUNDS_US};
use labels::{status_index, status_label, LabelSet, STATUS_SLOTS};
use process::ProcessStats;
use sharded::ShardedCounters;
use text::{Exposition, Kind};

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
        let p = self.protocols.index(protocol);
        self.requests
            .add(p * STATUS_SLOTS + status_index(status), 1);
        self.bytes_in.add(p, bytes_in);
        self.bytes_out.add(p, bytes_out);
    }

    /// A new QUIC connection was asked to prove its address first (a
    /// stateless Retry: the listener was over `quic_retry_above`).
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

    /// A backend answered a request head after `took`.
    pub fn backend_response(&self, upstream: &str, server: BackendAddr, took: Duration) {
        self.backends.observe(upstream, server, took);
    }

    /// Prometheus text exposition of everything, with each backend's health
    /// as (upstream, server, up).
    pub fn render(
        &self,
        health: &[(String, BackendAddr, bool)],
        acme_certs: &[tern_acme::StatusSnapshot],
    ) -> String {
        let mut e = Exposition::default();
        self.render_connections(&mut e);
        self.render_handshakes(&mut e);
        self.render_requests(&mut e);
        self.render_request_errors(&mut e);
        self.render_grpc(&mut e);
        self.render_backend_splits(&mut e);
        self.render_quic_retries(&mut e);
        self.render_backends(&mut e, health);
        self.render_reloads(&mut e);
        acme::render(&mut e, acme_certs);
        e.family(
            "process_start_time_seconds",
            Kind::Gauge,
            "Start time of the process since the Unix epoch, in seconds.",
        );
        e.sample_seconds("process_start_time_seconds", &[], self.started_us);
        render_process(&mut e, &ProcessStats::read());
        e.finish()
    }

    /// Index into `handshakes`.
    fn handshake_slot(&self, version: usize, cipher: usize, group: usize, resumed: bool) -> usize {
        ((version * self.ciphers.slots() + cipher) * self.groups.slots() + group) * 2
            + usize::from(resumed)
    }

    fn render_connections(&self, e: &mut Exposition) {
        let opened = self.scalars.get(Scalar::OPENED);
        let closed = self.scalars.get(Scalar::CLOSED);
        e.family(
            "tern_connections_open",
            Kind::Gauge,
            "Client connections open now (TLS handshake included).",
        );
        e.sample("tern_connections_open", &[], opened.saturating_sub(closed));
        e.family(
            "tern_connections_total",
            Kind::Counter,
            "Client connections accepted (connections refused over the connection limit excluded).",
        );
        e.sample("tern_connections_total", &[], opened);
        e.family(
            "tern_connections_refused_total",
            Kind::Counter,
            "Client connections turned away because max_connections was reached.",
        );
        e.sample(
            "tern_connections_refused_total",
            &[],
            self.scalars.get(Scalar::REFUSED),
        );
        e.family(
            "tern_accept_errors_total",
            Kind::Counter,
            "Failed accept(2) calls (out of file descriptors or memory); the worker backs off and the connection waits in the listen backlog.",
        );
        e.sample(
            "tern_accept_errors_total",
            &[],
            self.scalars.get(Scalar::ACCEPT_ERRORS),
        );
    }

    fn render_backend_splits(&self, e: &mut Exposition) {
        e.family(
            "tern_backend_split_responses_total",
            Kind::Counter,
            "Responses of at most 16 KiB whose body a backend wrote apart from its head (with Nagle on, each costs a delayed-ACK wait that tern cuts short with TCP_QUICKACK).",
        );
        e.sample(
            "tern_backend_split_responses_total",
            &[],
            self.scalars.get(Scalar::BACKEND_SPLIT),
        );
    }

    fn render_quic_retries(&self, e: &mut Exposition) {
        e.family(
            "tern_quic_retries_total",
            Kind::Counter,
            "New QUIC connections sent a stateless Retry (address validation) because new connections came faster than quic_retry_above.",
        );
        e.sample(
            "tern_quic_retries_total",
            &[],
            self.scalars.get(Scalar::QUIC_RETRIES),
        );
    }

    fn render_request_errors(&self, e: &mut Exposition) {
        e.family(
            "tern_request_errors_total",
            Kind::Counter,
            "Requests that failed, by the side that failed (client, backend, tern) and what went wrong.",
        );
        for k in crate::fault::Kind::ALL {
            let n = self.request_errors.get(k.index());
            if n > 0 {
                let labels = [("side", k.side().as_str()), ("kind", k.as_str())];
                e.sample("tern_request_errors_total", &labels, n);
            }
        }
    }

    fn render_grpc(&self, e: &mut Exposition) {
        e.family(
            "tern_grpc_calls_total",
            Kind::Counter,
            "gRPC calls (content-type application/grpc) by the grpc-status they ended with (from the backend's trailers, or tern's own answer); \"other\" past 16.",
        );
        for slot in 0..GRPC_STATUS_SLOTS {
            let n = self.grpc_calls.get(slot);
            if n > 0 {
                let label = if slot + 1 == GRPC_STATUS_SLOTS {
                    "other".to_string()
                } else {
                    slot.to_string()
                };
                e.sample("tern_grpc_calls_total", &[("grpc_status", &label)], n);
            }
        }
        e.family(
            "tern_grpc_bytes_total",
            Kind::Counter,
            "Bytes of gRPC calls, from (in) and to (out) clients.",
        );
        for (dir, slot) in [("in", 0), ("out", 1)] {
            e.sample(
                "tern_grpc_bytes_total",
                &[("direction", dir)],
                self.grpc_bytes.get(slot),
            );
        }
        e.family(
            "tern_grpc_call_duration_seconds",
            Kind::Histogram,
            "gRPC calls from the request's first byte to the response's last (streams included).",
        );
        e.histogram(
            "tern_grpc_call_duration_seconds",
            &[],
            &self.grpc_seconds.snapshot(),
        );
    }

    fn render_reloads(&self, e: &mut Exposition) {
        e.family(
            "tern_config_reloads_total",
            Kind::Counter,
            "SIGHUP reloads, applied or refused (a refused one leaves the running configuration serving).",
        );
        for (result, slot) in [
            ("applied", Scalar::RELOADS_APPLIED),
            ("refused", Scalar::RELOADS_REFUSED),
        ] {
            let n = self.scalars.get(slot);
            e.sample("tern_config_reloads_total", &[("result", result)], n);
        }
    }

    fn render_handshakes(&self, e: &mut Exposition) {
        e.family(
            "tern_tls_handshakes_total",
            Kind::Counter,
            "Completed TLS handshakes by protocol version, cipher suite, key-exchange group and resumption.",
        );
        for v in 0..self.versions.slots() {
            for c in 0..self.ciphers.slots() {
                for g in 0..self.groups.slots() {
                    for resumed in [false, true] {
                        let slot = self.handshake_slot(v, c, g, resumed);
                        let n = self.handshakes.get(slot);
                        if n == 0 {
                            continue;
                        }
                        let labels = [
                            ("version", self.versions.name(v)),
                            ("cipher", self.ciphers.name(c)),
                            ("group", self.groups.name(g)),
                            ("resumed", bool_label(resumed)),
                        ];
                        e.sample("tern_tls_handshakes_total", &labels, n);
                    }
                }
            }
        }
        e.family(
            "tern_tls_handshake_failures_total",
            Kind::Counter,
            "TLS handshakes that failed or timed out, by reason.",
        );
        for why in HandshakeFailure::ALL {
            e.sample(
                "tern_tls_handshake_failures_total",
                &[("reason", why.label())],
                self.handshake_failures.get(why.index()),
            );
        }
        e.family(
            "tern_tls_handshake_duration_seconds",
            Kind::Histogram,
            "Time from accepting a connection to the end of its TLS handshake, client round trips included.",
        );
        for (resumed, h) in [false, true].into_iter().zip(&self.handshake_time) {
            e.histogram(
                "tern_tls_handshake_duration_seconds",
                &[("resumed", bool_label(resumed))],
                &h.snapshot(),
            );
        }
    }

    fn render_requests(&self, e: &mut Exposition) {
        e.family(
            "tern_http_requests_total",
            Kind::Counter,
            "Requests answered, by client protocol and status code (uncommon codes by class, e.g. 4xx).",
        );
        let mut code = String::with_capacity(8);
        for p in 0..self.protocols.slots() {
            for s in 0..STATUS_SLOTS {
                let n = self.requests.get(p * STATUS_SLOTS + s);
                if n == 0 {
                    continue;
                }
                code.clear();
                let _ = std::fmt::Write::write_fmt(&mut code, format_args!("{}", status_label(s)));
                let labels = [
                    ("protocol", self.protocols.name(p)),
                    ("code", code.as_str()),
                ];
                e.sample("tern_http_requests_total", &labels, n);
            }
        }
        for (name, help, counters) in [
            (
                "tern_http_received_bytes_total",
                "Bytes read from clients in requests (head and body, after TLS), by protocol.",
                &self.bytes_in,
            ),
            (
                "tern_http_sent_bytes_total",
                "Bytes written to clients in responses (head and body, before TLS), by protocol.",
                &self.bytes_out,
            ),
        ] {
            e.family(name, Kind::Counter, help);
            for p in 0..self.protocols.slots() {
                let n = counters.get(p);
                // The known protocols always have a series; the catch-all
                // only once something landed there.
                if n == 0 && p + 1 == self.protocols.slots() {
                    continue;
                }
                e.sample(name, &[("protocol", self.protocols.name(p))], n);
            }
        }
    }

    fn render_backends(&self, e: &mut Exposition, health: &[(String, BackendAddr, bool)]) {
        e.family(
            "tern_backend_response_duration_seconds",
            Kind::Histogram,
            "Time from sending a request to a backend to receiving its response head, by upstream group and server.",
        );
        for (upstream, addr, h) in self.backends.snapshot() {
            let server = addr.to_string();
            let labels = [("upstream", upstream.as_str()), ("server", server.as_str())];
            e.histogram("tern_backend_response_duration_seconds", &labels, &h);
        }
        e.family(
            "tern_backend_up",
            Kind::Gauge,
            "1 when the server takes requests, 0 when health checks or passive ejection took it out.",
        );
        for (upstream, addr, up) in health {
            let server = addr.to_string();
            let labels = [("upstream", upstream.as_str()), ("server", server.as_str())];
            e.sample("tern_backend_up", &labels, u64::from(*up));
        }
    }
}

/// The standard process families; a figure /proc did not give is left out.
fn render_process(e: &mut Exposition, stats: &ProcessStats) {
    e.family(
        "process_cpu_seconds_total",
        Kind::Counter,
        "User and system CPU time of all threads, in seconds.",
    );
    if let Some(us) = stats.cpu_us {
        e.sample_seconds("process_cpu_seconds_total", &[], us);
    }
    for (name, kind, help, value) in [
        (
            "process_resident_memory_bytes",
            Kind::Gauge,
            "Resident memory size, in bytes.",
            stats.resident_bytes,
        ),
        (
            "process_open_fds",
            Kind::Gauge,
            "Open file descriptors (client and backend sockets included).",
            stats.open_fds,
        ),
        (
            "process_max_fds",
            Kind::Gauge,
            "Soft limit on open file descriptors.",
            stats.max_fds,
        ),
    ] {
        e.family(name, kind, help);
        if let Some(v) = value {
            e.sample(name, &[], v);
        }
    }
}

fn bool_label(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

#[cfg(test)]
mod tests;

pub(crate) use acme::health_lines as acme_health_lines;
