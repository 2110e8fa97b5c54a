//! What a slot records: each opened connection's phases and what it
//! negotiated, each request's latency or failure, into the worker's
//! figures (one per stage of a load shape).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Control, Job, Passage, Prepared};
use crate::conn::{Connector, Established};
use crate::error::RequestError;
use crate::http1::Exchange;
use crate::http3::H3Connector;
use crate::progress::LiveShard;
use crate::stats::{record, RequestRecord, Stats};
use crate::tls::Negotiated;

/// What opening one connection went through; see `SlotCtx::record_setup`.
pub(super) struct Opened<'a> {
    /// Name lookup (TCP only: QUIC resolves once per run).
    pub(super) dns: Option<Duration>,
    /// TCP connect (none over QUIC).
    pub(super) connect: Option<Duration>,
    /// The TLS (or QUIC) handshake and what it negotiated; none for http://.
    pub(super) tls: Option<(Duration, &'a Negotiated)>,
    pub(super) resumed: bool,
    pub(super) handshake_bytes: u64,
    /// The algorithm the server's chain came compressed with (RFC 8879;
    /// TLS over TCP only: quinn does not say).
    pub(super) cert_compression: Option<&'static str>,
}

impl Established {
    pub(super) fn opened(&self) -> Opened<'_> {
        Opened {
            dns: Some(self.dns),
            connect: Some(self.connect),
            tls: self.negotiated.as_ref().map(|n| (self.tls, n)),
            resumed: self.resumed,
            handshake_bytes: self.handshake_bytes,
            cert_compression: self.cert_compression,
        }
    }
}

/// Connection set-up phases, for per-request records.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Setup {
    pub(super) dns: Duration,
    pub(super) connect: Duration,
    pub(super) tls: Duration,
    pub(super) resumed: bool,
}

pub(super) struct SlotCtx {
    pub(super) job: Arc<Job>,
    pub(super) connector: Connector,
    /// HTTP/3 targets: this worker's QUIC endpoint.
    pub(super) h3: Option<H3Connector>,
    /// One per stage of a load shape (else one): a request counts in the
    /// stage its intended send time falls in, a connection in the one it
    /// opened in.
    pub(super) stats: Rc<RefCell<Vec<Stats>>>,
    /// The live view's shard of this worker, while a view is drawn.
    pub(super) live: Option<LiveShard>,
    pub(super) control: Arc<Control>,
    /// The worker's way past the start and finish lines of a round that
    /// keeps its connections alive; `None` in other rounds.
    pub(super) passage: Option<Rc<Passage>>,
}

impl SlotCtx {
    /// The figures of the stage `at` falls in.
    pub(super) fn stats_at(&self, at: Instant) -> std::cell::RefMut<'_, Stats> {
        let k = self.job.shape.as_ref().map_or(0, |shape| {
            shape.stage_at(at.saturating_duration_since(self.job.budget.start()))
        });
        std::cell::RefMut::map(self.stats.borrow_mut(), |all| &mut all[k])
    }

    /// Counts a connection set up before the round's clock started, or
    /// one that failed or timed out then.
    pub(super) fn record_set_up(&self, ok: bool) {
        // Before the clock: no stage yet (a load shape sets up nothing).
        let mut s = self.stats.borrow_mut();
        if ok {
            s[0].set_up += 1;
        } else {
            s[0].set_up_failed += 1;
        }
    }

    /// Counts one opened connection, whatever the protocol, and returns its
    /// phases for the per-request record. A phase the connection did not go
    /// through (`None`) is left out of its histogram, so a report never
    /// shows it as measured.
    pub(super) fn record_setup(&self, opened: Opened<'_>) -> Setup {
        let mut s = self.stats_at(Instant::now());
        s.connections += 1;
        if let Some(dns) = opened.dns {
            record(&mut s.dns, dns);
        }
        if let Some(connect) = opened.connect {
            record(&mut s.connect, connect);
        }
        let mut setup = Setup {
            dns: opened.dns.unwrap_or_default(),
            connect: opened.connect.unwrap_or_default(),
            ..Setup::default()
        };
        if let Some((tls, negotiated)) = opened.tls {
            record(&mut s.tls, tls);
            s.handshakes += 1;
            s.resumed += u64::from(opened.resumed);
            s.handshake_bytes += opened.handshake_bytes;
            *s.negotiated.entry(negotiated.clone()).or_insert(0) += 1;
            setup.tls = tls;
            setup.resumed = opened.resumed;
            if let Some(alg) = opened.cert_compression {
                *s.cert_compressed.entry(alg.to_string()).or_insert(0) += 1;
            }
        }
        setup
    }

    pub(super) fn record_ok(&self, intended: Instant, ex: &Exchange, setup: Option<Setup>) {
        let now = ex.done;
        let total = now.saturating_duration_since(intended);
        if let Some(Ok(mut live)) = self.live.as_ref().map(|l| l.lock()) {
            record(&mut live, total);
        }
        let mut s = self.stats_at(intended);
        record(&mut s.total, total);
        record(&mut s.ttfb, ex.ttfb);
        record(&mut s.body, ex.body);
        *s.status.entry(ex.status).or_insert(0) += 1;
        s.body_bytes += ex.body_bytes;
        let at = now.saturating_duration_since(self.job.budget.start());
        s.bump_series(at, false);
        s.record_second(at, total);
        if self.job.config.record_requests {
            let setup = setup.unwrap_or_default();
            s.records.push(RequestRecord {
                offset: intended.saturating_duration_since(self.job.budget.start()),
                total,
                dns: setup.dns,
                connect: setup.connect,
                tls: setup.tls,
                ttfb: ex.ttfb,
                body: ex.body,
                status: ex.status,
                resumed: setup.resumed,
            });
        }
        drop(s);
        self.control.done.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a response, as a failure when it fails `req`'s checks.
    pub(super) fn record_checked(
        &self,
        intended: Instant,
        ex: &Exchange,
        setup: Option<Setup>,
        req: &Prepared,
    ) {
        match req.check.verdict(ex.status, ex.body_found) {
            None => self.record_ok(intended, ex, setup),
            Some(why) => self.record_error(intended, &RequestError::Check(why)),
        }
    }

    pub(super) fn record_error(&self, intended: Instant, err: &RequestError) {
        let now = Instant::now();
        let mut s = self.stats_at(intended);
        s.count_error(
            err.to_string(),
            now.saturating_duration_since(self.job.budget.start()),
        );
        if self.job.config.record_requests {
            s.records.push(RequestRecord {
                offset: intended.saturating_duration_since(self.job.budget.start()),
                total: now.saturating_duration_since(intended),
                dns: Duration::ZERO,
                connect: Duration::ZERO,
                tls: Duration::ZERO,
                ttfb: Duration::ZERO,
                body: Duration::ZERO,
                status: 0,
                resumed: false,
            });
        }
        drop(s);
        self.control.done.fetch_add(1, Ordering::Relaxed);
        self.control.failed.fetch_add(1, Ordering::Relaxed);
    }
}
