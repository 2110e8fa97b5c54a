//! Prometheus text exposition of [`Metrics`]: every family, its help text
//! and its samples, read from the counters the workers record into.

use super::labels::{status_label, STATUS_SLOTS};
use super::process::ProcessStats;
use super::text::{Exposition, Kind};
use super::{acme, HandshakeFailure, Metrics, Scalar, GRPC_STATUS_SLOTS};
use crate::config::BackendAddr;

impl Metrics {
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
        self.retries.render(&mut e);
        self.dns.render(&mut e);
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
            "New QUIC connections sent a stateless Retry (address validation) because more than quic_retry_above handshakes were under way.",
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
