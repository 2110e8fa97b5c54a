//! What a connection's exchanges need to know: the listener (settings,
//! TLS acceptor, this worker's upstream groups and the routes to them), the
//! worker (metrics, access log, shutdown), and the connection itself
//! (client address, what TLS negotiated).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use tern_http::rewrite::{ClientCertFields, ClientFacts, ClientIp, FieldValue};
use tern_tls::Negotiated;
use tokio_rustls::TlsAcceptor;

use super::clients::{Bucket, ClientKey, Refused};
use crate::access_log::{Record, WorkerLog};
use crate::config::{ClientLimits, ListenerConfig, Route, Template};
use crate::fault::ExchangeError;
use crate::message::Request;
use crate::upstream::Backends;
use bytes::Bytes;

/// A listener as one worker sees it.
pub(crate) struct ListenerCtx {
    /// Validated settings.
    pub config: Arc<ListenerConfig>,
    /// TLS acceptor (shared ServerConfig: session cache and ticket keys are
    /// common to all workers, so resumption works whichever worker accepts).
    pub acceptor: TlsAcceptor,
    /// Configurations chosen by SNI (names with their own client-certificate
    /// policy); `None` when every name follows the listener.
    pub by_name: Option<Arc<tern_tls::NameConfigs>>,
    /// This worker's views of the generation's upstream groups.
    pub upstreams: Rc<Vec<Backends>>,
    /// Index of the default group in `upstreams`.
    pub default_upstream: usize,
    /// The Alt-Svc field added to responses (HTTP/3 advertised), if any.
    pub alt_svc: Option<http::HeaderValue>,
}

impl ListenerCtx {
    /// The upstream group for a request: the first route whose host matches
    /// the request's Host (port removed) or, failing that, the SNI; else the
    /// listener's default group.
    pub fn route(&self, sni: Option<&str>, host: Option<&[u8]>) -> &Backends {
        self.route_of(sni, host).0
    }

    /// The upstream group for a request, and the route that chose it (none
    /// for the default group). Inline for a listener without routes (its
    /// call was 26 instructions a request, callgrind); the walk out of line.
    #[inline]
    pub fn route_of(&self, sni: Option<&str>, host: Option<&[u8]>) -> (&Backends, Option<&Route>) {
        if !self.config.routes.is_empty() {
            if let Some(routed) = self.routed(sni, host) {
                return routed;
            }
        }
        (&self.upstreams[self.default_upstream], None)
    }

    /// The route of [`ListenerCtx::route_of`] that matches, if any.
    #[inline(never)]
    fn routed(
        &self,
        sni: Option<&str>,
        host: Option<&[u8]>,
    ) -> Option<(&Backends, Option<&Route>)> {
        let host = host.map(strip_port);
        for r in &self.config.routes {
            let hit = |name: &[u8]| host_matches(&r.host, name);
            if host.is_some_and(hit) || (host.is_none() && sni.is_some_and(|s| hit(s.as_bytes()))) {
                if let Some(b) = self.upstreams.get(r.upstream) {
                    return Some((b, Some(r)));
                }
            }
        }
        None
    }
}

impl ListenerCtx {
    /// True when a request's host falls under another client-certificate
    /// policy than the name the connection was made for (its SNI): the
    /// handshake checked the other name's policy, so the request is
    /// answered 421 (RFC 9110 section 15.5.20) instead of forwarded.
    pub fn misdirected(&self, sni: Option<&str>, host: Option<&[u8]>) -> bool {
        let (Some(names), Some(host)) = (&self.by_name, host) else {
            return false;
        };
        let host = std::str::from_utf8(strip_port(host)).ok();
        !Arc::ptr_eq(names.for_name(sni).1, names.for_name(host).1)
    }
}

/// `host:port` or `[v6]:port` without the port.
fn strip_port(host: &[u8]) -> &[u8] {
    if host.starts_with(b"[") {
        return match host.iter().position(|&b| b == b']') {
            Some(end) => &host[..=end],
            None => host,
        };
    }
    match host.iter().rposition(|&b| b == b':') {
        Some(colon) => &host[..colon],
        None => host,
    }
}

/// Exact (case-insensitive) or one-label wildcard match.
fn host_matches(pattern: &str, name: &[u8]) -> bool {
    let name = name.strip_suffix(b".").unwrap_or(name);
    match pattern.strip_prefix("*.") {
        Some(suffix) => match name.iter().position(|&b| b == b'.') {
            Some(dot) => dot > 0 && name[dot + 1..].eq_ignore_ascii_case(suffix.as_bytes()),
            None => false,
        },
        None => name.eq_ignore_ascii_case(pattern.as_bytes()),
    }
}

impl std::fmt::Debug for ListenerCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerCtx")
            .field("listen", &self.config.listen)
            .finish_non_exhaustive()
    }
}

/// Per-worker state shared by its connections.
#[derive(Debug)]
pub(crate) struct WorkerCtx {
    /// Process-wide metrics.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Access log buffer.
    pub log: WorkerLog,
    /// Becomes true when tern is shutting down.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Per-client connection counts and request buckets, shared by every
    /// worker of the process.
    pub clients: Arc<super::clients::Clients>,
}

/// What a connection's handlers need to know.
#[derive(Debug)]
pub(crate) struct ConnCtx<'a> {
    /// Client address.
    pub peer: SocketAddr,
    /// What the handshake negotiated.
    pub tls: Negotiated,
    /// Handshake duration, µs.
    pub handshake_us: u64,
    /// The listener.
    pub listener: &'a ListenerCtx,
    /// The worker.
    pub worker: &'a WorkerCtx,
    /// The client's verified certificate as RFC 9440 fields, encoded once
    /// for all the connection's requests.
    pub client_cert: Option<ClientCertFields>,
    /// Header rule values that name only the connection's variables
    /// (`${client_ip}`, `${tls_version}`, `${sni}`), made at the first
    /// request that needs them and shared by the rest: keyed by the
    /// template's address, which the listener's configuration (held for
    /// the connection's life) keeps in place.
    rendered: RefCell<Vec<(*const Template, Bytes)>>,
    /// tern's forwarding fields for HTTP/2 backends, made once.
    pub h2_forwarding: crate::upstream::h2::ForwardingCache,
    /// The request bucket of the connection's own address
    /// (`client_rate`), taken from the process's table at the first
    /// request and kept: its requests then take a token without a table
    /// lookup.
    bucket: RefCell<Option<Arc<Bucket>>>,
    /// Field lists of finished exchanges, emptied, for the rules of the
    /// next ones to fill: no allocation per request.
    spare_fields: RefCell<Vec<FieldList<'a>>>,
    /// The client's address as the forwarding fields carry it, made once.
    client_ip: ClientIp,
    /// The metrics' slot of the connection's request protocol (from its
    /// ALPN), looked up once rather than per request.
    protocol_slot: usize,
}

/// Fields a rule adds to one head.
pub(crate) type FieldList<'a> = Vec<(&'a str, FieldValue<'a>)>;

/// Spare field lists a connection keeps: two per exchange, and HTTP/2 and
/// HTTP/3 run several at once (a page load: tens of streams; h2load -m10:
/// ten). With 8 (four exchanges) a connection of ten streams freed and
/// grew two lists per request (~500 instructions, callgrind); 32 lists of
/// four fields (224 bytes each) are 7 KiB at most, kept only by a
/// connection that ran sixteen exchanges at once.
const SPARE_FIELD_LISTS: usize = 32;

impl<'a> ConnCtx<'a> {
    /// The context of a connection whose handshake negotiated `tls`.
    pub(crate) fn new(
        peer: SocketAddr,
        tls: Negotiated,
        handshake_us: u64,
        listener: &'a ListenerCtx,
        worker: &'a WorkerCtx,
    ) -> Self {
        let client_cert = tls
            .client_cert
            .as_ref()
            .and_then(|c| ClientCertFields::new(c.chain.iter().map(|d| d.as_ref())));
        let protocol = match tls.alpn.as_deref() {
            Some("h2") => "h2",
            Some("h3") => "h3",
            _ => "http/1.1",
        };
        let protocol_slot = worker.metrics.protocol_slot(protocol);
        ConnCtx {
            peer,
            tls,
            handshake_us,
            listener,
            worker,
            client_cert,
            rendered: RefCell::default(),
            h2_forwarding: Default::default(),
            bucket: RefCell::default(),
            spare_fields: RefCell::default(),
            protocol_slot,
            client_ip: ClientIp::new(peer.ip()),
        }
    }

    /// Two empty field lists (a request's and its response's), spare ones
    /// when there are: one borrow of the spares for both.
    pub(crate) fn field_lists(&self) -> (FieldList<'a>, FieldList<'a>) {
        let mut spare = self.spare_fields.borrow_mut();
        let first = spare.pop().unwrap_or_default();
        (first, spare.pop().unwrap_or_default())
    }

    /// Keeps `lists` (emptied) for a later exchange of the connection.
    pub(crate) fn give_back(&self, lists: [FieldList<'a>; 2]) {
        let mut spare = self.spare_fields.borrow_mut();
        for mut list in lists {
            list.clear();
            if list.capacity() > 0 && spare.len() < SPARE_FIELD_LISTS {
                spare.push(list);
            }
        }
    }

    /// Takes a token from the bucket of the connection's own address for
    /// a request begun at `now`, or says when to retry.
    pub(crate) fn take_token(&self, limits: &ClientLimits, now: Instant) -> Result<(), Refused> {
        let mut held = self.bucket.borrow_mut();
        if held.is_none() {
            let key = ClientKey::of(self.peer.ip(), limits.ipv6_prefix);
            *held = self.worker.clients.bucket(key, limits);
        }
        match &*held {
            Some(bucket) => bucket.take(limits, now),
            // The table is full of clients with open connections: this one
            // is not limited (looked up again at its next request).
            None => Ok(()),
        }
    }

    /// The client's address as text, made once for the connection.
    pub(crate) fn client_ip_text(&self) -> &[u8] {
        self.client_ip.text()
    }

    /// The connection's value of `template` (which names no per-request
    /// variable), made by `make` the first time.
    pub(crate) fn rendered(&self, template: &Template, make: impl FnOnce() -> Bytes) -> Bytes {
        let key: *const Template = template;
        if let Some((_, v)) = self.rendered.borrow().iter().find(|(k, _)| *k == key) {
            return v.clone();
        }
        let value = make();
        self.rendered.borrow_mut().push((key, value.clone()));
        value
    }
}

/// What the access log and the metrics learn about one request while it
/// is handled, on every path (HTTP/1.1 or HTTP/2 client, any backend).
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Status sent to the client; 0 while none was.
    pub status: u16,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub backend: Option<crate::config::BackendAddr>,
    pub backend_us: u64,
    /// Why the exchange failed, if it did.
    pub error: Option<ExchangeError>,
    /// The request came in TLS early data (HTTP/3 0-RTT).
    pub early: bool,
    /// The request's ID (ASCII), when request IDs are on.
    pub request_id: Option<bytes::Bytes>,
    /// The `grpc-status` the response ended with (its trailers, or the
    /// head of a trailers-only response, or tern's own answer).
    pub grpc_status: Option<u16>,
    /// Its retries on other servers, as the access log's `retry=` says
    /// them; `None` when there were none.
    pub retry: Option<String>,
}

impl ConnCtx<'_> {
    /// What tern tells backends about the client of `req`.
    pub(crate) fn facts<'r>(&self, req: &Request<'r>) -> ClientFacts<'r> {
        ClientFacts {
            ip: self.client_ip,
            proto: "https",
            client_cert: req.client_cert,
        }
    }

    /// Logs and counts a request (`method`, `path`) begun at `started`;
    /// one never answered is logged 499 (the client left first).
    pub(crate) fn log_request(&self, method: &str, path: &str, o: &Outcome, started: Instant) {
        let status = if o.status == 0 { 499 } else { o.status };
        self.count_request(status, o.bytes_in, o.bytes_out);
        if let Some(e) = o.error {
            self.worker.metrics.request_error(e);
        }
        let log_on = self.worker.log.is_on();
        if !log_on && o.grpc_status.is_none() {
            // Nothing reads the record or the total time (building the
            // record, its request-ID check and the clock read were about
            // 300 instructions of a keepalive request).
            return;
        }
        self.log_and_time(method, path, status, o, started, log_on);
    }

    /// The access-log record and the gRPC call's metrics of a request.
    /// Out of line: with the log off (and no gRPC) `log_request` is a few
    /// counters, whose instructions stay on a few cache lines instead of
    /// being spread around the record's code.
    #[inline(never)]
    fn log_and_time(
        &self,
        method: &str,
        path: &str,
        status: u16,
        o: &Outcome,
        started: Instant,
        log_on: bool,
    ) {
        let took = tern_deadline::since(started);
        if log_on {
            self.worker.log.log(&Record {
                client: self.peer,
                tls: &self.tls,
                handshake_us: self.handshake_us,
                early: o.early,
                method,
                path,
                status,
                bytes_in: o.bytes_in,
                bytes_out: o.bytes_out,
                backend: o.backend,
                backend_us: o.backend_us,
                total_us: took.as_micros() as u64,
                error: o.error.map(ExchangeError::label),
                request_id: o
                    .request_id
                    .as_deref()
                    .and_then(|id| std::str::from_utf8(id).ok()),
                grpc_status: o.grpc_status,
                retry: o.retry.as_deref(),
            });
        }
        if let Some(code) = o.grpc_status {
            self.worker
                .metrics
                .grpc_call(code, took, o.bytes_in, o.bytes_out);
        }
    }

    /// Counts a request in the metrics.
    fn count_request(&self, status: u16, bytes_in: u64, bytes_out: u64) {
        self.worker
            .metrics
            .request_in(self.protocol_slot, status, bytes_in, bytes_out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_exactly_or_by_one_label_wildcard() {
        assert!(host_matches("api.example.com", b"API.example.com"));
        assert!(host_matches("api.example.com", b"api.example.com."));
        assert!(host_matches("*.example.com", b"a.example.com"));
        assert!(!host_matches("*.example.com", b"example.com"));
        assert!(!host_matches("*.example.com", b"a.b.example.com"));
        assert_eq!(strip_port(b"example.com:8443"), b"example.com");
        assert_eq!(strip_port(b"[::1]:8443"), b"[::1]");
        assert_eq!(strip_port(b"example.com"), b"example.com");
    }
}
