//! HTTP/3 slots: QUIC connections from the worker's endpoint, each carrying
//! `-m` concurrent streams (keepalive) or one request (a new connection per
//! request).

use std::net::SocketAddr;

use super::slot::{Multiplexed, Protocol, Streams};
use super::{Opened, Prepared, Setup, SlotCtx};
use crate::config::BenchConfig;
use crate::error::{BenchError, RequestError};
use crate::http1::Exchange;
use crate::http3::{H3Established, H3Send};
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

/// The QUIC handshake is the connection's set-up and its TLS handshake at
/// once: it counts as TLS; there is no TCP connect, and the name was
/// resolved once for the run.
fn opened(est: &H3Established) -> Opened<'_> {
    Opened {
        dns: None,
        connect: None,
        tls: Some((est.handshake, &est.negotiated)),
        resumed: est.resumed,
        handshake_bytes: est.handshake_bytes,
        cert_compression: None,
    }
}

/// HTTP/3 as one slot runs it.
#[derive(Default)]
pub(super) struct H3(KeyCache);

impl Protocol for H3 {
    type Conn = H3Established;

    async fn open(&mut self, ctx: &SlotCtx) -> Result<(H3Established, Setup), RequestError> {
        let Some(connector) = &ctx.h3 else {
            return Err(RequestError::Connect("no QUIC endpoint".into()));
        };
        let est = connector.connect(&mut self.0).await?;
        let setup = ctx.record_setup(opened(&est));
        Ok((est, setup))
    }

    /// Waits for the server's HANDSHAKE_DONE (it has read the client's
    /// Finished, and sent its session tickets before) and the first data
    /// of its streams (its control stream: its SETTINGS, sent at the
    /// connection's start). HTTP/3 has no acknowledgement of the client's
    /// SETTINGS; they went out with the client's first 1-RTT packets. A
    /// server slow to open its control stream is waited on for at most
    /// [`SETTINGS_WAIT`], then the connection is used all the same.
    async fn settle(&mut self, conn: &mut H3Established) -> Result<(), RequestError> {
        let give_up = tokio::time::Instant::now() + SETTINGS_WAIT;
        loop {
            if let Some(reason) = conn.conn.close_reason() {
                return Err(RequestError::Connect(format!("QUIC: {reason}")));
            }
            let rx = conn.conn.stats().frame_rx;
            if (rx.handshake_done > 0 && rx.stream > 0) || tokio::time::Instant::now() >= give_up {
                return Ok(());
            }
            tokio::time::sleep(SETTLE_POLL).await;
        }
    }

    async fn send(
        &mut self,
        _ctx: &SlotCtx,
        conn: &mut H3Established,
        req: &Prepared,
    ) -> Result<Exchange, RequestError> {
        conn.send
            .exchange(&req.h2, req.expect_body())
            .await
            .map_err(|(e, _)| e)
    }

    fn close(&mut self, ctx: &SlotCtx, conn: H3Established) {
        ctx.stats_at(std::time::Instant::now())
            .quic
            .add(&conn.conn.stats());
        conn.conn.close(H3_NO_ERROR, b"");
    }
}

impl Multiplexed for H3 {
    type Streams = H3Send;

    /// The connection is kept to the end, for its statistics.
    fn share(conn: H3Established) -> (H3Send, Option<H3Established>) {
        (conn.send.clone(), Some(conn))
    }
}

/// The longest [`H3::settle`] waits for the server's settings.
const SETTINGS_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How often [`H3::settle`] looks (quinn has no event for it).
const SETTLE_POLL: std::time::Duration = std::time::Duration::from_millis(1);

/// HTTP/3's "no error" application code (RFC 9114, 8.1).
const H3_NO_ERROR: quinn::VarInt = quinn::VarInt::from_u32(0x100);
