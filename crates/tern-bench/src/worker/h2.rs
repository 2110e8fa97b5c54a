//! HTTP/2 slots: TCP + TLS connections (ALPN h2, or prior knowledge on
//! http://), each carrying `-m` concurrent streams (keepalive) or one
//! request (a new connection per request).

use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;

use super::{pace, Pacer, Setup, SlotCtx, Watchdog};
use crate::error::RequestError;
use crate::http2;
use crate::tls::KeyCache;

/// HTTP/2 with keepalive: one connection, `-m` concurrent streams, each a
/// closed (or paced) loop; reconnects when the connection dies.
pub(super) async fn keepalive_slot(ctx: Rc<SlotCtx>, mut pacers: Vec<Option<Pacer>>) {
    let mut key_cache = KeyCache::default();
    let mut watchdog = Watchdog::new(ctx.job.config.timeout);
    while !ctx.job.budget.exhausted() {
        let attempt = Instant::now();
        let connected = watchdog
            .run(h2_connect(&ctx, &mut key_cache), || RequestError::Timeout)
            .await;
        let send = match connected {
            Ok(send) => send,
            Err(e) => {
                if !ctx.job.budget.take() {
                    break;
                }
                ctx.record_error(attempt, &e);
                continue;
            }
        };
        let mut handles = Vec::with_capacity(pacers.len());
        for mut pacer in pacers.drain(..) {
            let ctx = ctx.clone();
            let send = send.clone();
            handles.push(tokio::task::spawn_local(async move {
                super::stream_loop(&ctx, send, &mut pacer).await;
                pacer
            }));
        }
        drop(send);
        for h in handles {
            if let Ok(p) = h.await {
                pacers.push(p);
            }
        }
    }
}

/// HTTP/2 with a new connection per request: connect, one stream, close.
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
            let mut setup = None;
            let mut send = h2_connect_with(&ctx, &mut key_cache, &mut setup).await?;
            http2::exchange(&mut send, &ctx.job.h2_request)
                .await
                .map(|ex| (ex, setup))
                .map_err(|(e, _)| e)
        };
        let res = watchdog.run(once, || RequestError::Timeout).await;
        match res {
            Ok((ex, setup)) => ctx.record_ok(intended, &ex, setup),
            Err(err) => ctx.record_error(intended, &err),
        }
    }
}

async fn h2_connect(
    ctx: &SlotCtx,
    key_cache: &mut KeyCache,
) -> Result<h2::client::SendRequest<Bytes>, RequestError> {
    let mut setup = None;
    h2_connect_with(ctx, key_cache, &mut setup).await
}

async fn h2_connect_with(
    ctx: &SlotCtx,
    key_cache: &mut KeyCache,
    setup: &mut Option<Setup>,
) -> Result<h2::client::SendRequest<Bytes>, RequestError> {
    let est = ctx.connector.connect(key_cache).await?;
    *setup = Some(ctx.record_setup(&est));
    if let Some(neg) = &est.negotiated {
        if neg.alpn != "h2" {
            return Err(RequestError::Http(format!(
                "server did not negotiate h2 (ALPN {})",
                neg.alpn
            )));
        }
    }
    http2::handshake(est.stream).await
}
