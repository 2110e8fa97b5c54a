//! HTTP/3 slots: QUIC connections from the worker's endpoint, each carrying
//! `-m` concurrent streams (keepalive) or one request (a new connection per
//! request).

use std::net::SocketAddr;
use std::rc::Rc;

use super::{pace, Pacer, Setup, SlotCtx, Watchdog};
use crate::config::BenchConfig;
use crate::error::{BenchError, RequestError};
use crate::http3::{self, H3Established};
use crate::stats::record;
use crate::target::{Scheme, Target};
use crate::tls::KeyCache;

/// Refuses what HTTP/3 cannot be run with, before any load.
pub(super) fn check_plan(config: &BenchConfig, target: &Target) -> Result<(), BenchError> {
    if target.scheme != Scheme::Https {
        return Err(BenchError::Config(format!(
            "{}: HTTP/3 needs an https:// URL",
            target.url
        )));
    }
    if config.proxy.is_some() {
        return Err(BenchError::Config(
            "HTTP/3 cannot go through an HTTP proxy (CONNECT is TCP)".into(),
        ));
    }
    Ok(())
}

/// The UDP address QUIC connections of `target` go to.
pub(super) fn address(target: &Target) -> Result<SocketAddr, BenchError> {
    crate::conn::resolve_all(target)?
        .into_iter()
        .next()
        .ok_or_else(|| BenchError::Config(format!("{}: no address", target.url)))
}

impl SlotCtx {
    fn record_quic_setup(&self, est: &H3Established) -> Setup {
        let mut s = self.stats.borrow_mut();
        s.connections += 1;
        // The QUIC handshake is the connection's set-up and its TLS
        // handshake at once: it counts as TLS; there is no TCP connect.
        record(&mut s.tls, est.handshake);
        s.handshakes += 1;
        s.resumed += u64::from(est.resumed);
        s.handshake_bytes += est.handshake_bytes;
        *s.negotiated.entry(est.negotiated.clone()).or_insert(0) += 1;
        Setup {
            tls: est.handshake,
            resumed: est.resumed,
            ..Setup::default()
        }
    }

    fn record_quic_end(&self, conn: &quinn::Connection) {
        self.stats.borrow_mut().quic.add(&conn.stats());
    }

    async fn h3_connect(&self, key_cache: &mut KeyCache) -> Result<H3Established, RequestError> {
        let Some(connector) = &self.h3 else {
            return Err(RequestError::Connect("no QUIC endpoint".into()));
        };
        connector.connect(key_cache).await
    }
}

/// Keepalive: one QUIC connection, `-m` concurrent streams, each a closed
/// (or paced) loop; reconnects when the connection dies.
pub(super) async fn keepalive_slot(ctx: Rc<SlotCtx>, mut pacers: Vec<Option<Pacer>>) {
    let mut key_cache = KeyCache::default();
    let mut watchdog = Watchdog::new(ctx.job.config.timeout);
    while !ctx.job.budget.exhausted() {
        let attempt = std::time::Instant::now();
        let connected = watchdog
            .run(ctx.h3_connect(&mut key_cache), || RequestError::Timeout)
            .await;
        let est = match connected {
            Ok(est) => est,
            Err(e) => {
                if !ctx.job.budget.take() {
                    break;
                }
                ctx.record_error(attempt, &e);
                continue;
            }
        };
        ctx.record_quic_setup(&est);
        let mut handles = Vec::with_capacity(pacers.len());
        for mut pacer in pacers.drain(..) {
            let ctx = ctx.clone();
            let send = est.send.clone();
            handles.push(tokio::task::spawn_local(async move {
                super::stream_loop(&ctx, send, &mut pacer).await;
                pacer
            }));
        }
        for h in handles {
            if let Ok(p) = h.await {
                pacers.push(p);
            }
        }
        ctx.record_quic_end(&est.conn);
        est.conn.close(H3_NO_ERROR, b"");
    }
}

/// A new QUIC connection per request: connect, one stream, close.
pub(super) async fn oneshot_slot(ctx: Rc<SlotCtx>, mut pacers: Vec<Option<Pacer>>) {
    let mut pacer = pacers.pop().flatten();
    let mut key_cache = KeyCache::default();
    let mut watchdog = Watchdog::new(ctx.job.config.timeout);
    loop {
        let intended = pace(&mut pacer).await;
        if !ctx.job.budget.take() {
            break;
        }
        let once = async {
            let mut est = ctx.h3_connect(&mut key_cache).await?;
            let setup = ctx.record_quic_setup(&est);
            let result = http3::exchange(&mut est.send, &ctx.job.h2_request).await;
            ctx.record_quic_end(&est.conn);
            est.conn.close(H3_NO_ERROR, b"");
            result.map(|ex| (ex, setup)).map_err(|(e, _)| e)
        };
        match watchdog.run(once, || RequestError::Timeout).await {
            Ok((ex, setup)) => ctx.record_ok(intended, &ex, Some(setup)),
            Err(err) => ctx.record_error(intended, &err),
        }
    }
}

/// HTTP/3's "no error" application code (RFC 9114, 8.1).
const H3_NO_ERROR: quinn::VarInt = quinn::VarInt::from_u32(0x100);
