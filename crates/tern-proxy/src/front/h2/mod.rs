//! HTTP/2 front end: each client stream becomes one exchange
//! ([`crate::exchange::run`]) with whichever backend its route chooses.
//!
//! Abuse limits (each a config field, see `H2Limits`):
//!
//! | limit | answers |
//! |---|---|
//! | max concurrent streams | a client holding unbounded work in flight |
//! | max header list size | HPACK bombs and CONTINUATION floods (RUSTSEC-2024-0332) |
//! | header table size | memory pinned by the HPACK dynamic table |
//! | stream resets per second → GOAWAY | rapid reset (CVE-2023-44487): streams opened and cancelled faster than the budget |
//! | send buffer per stream + reading the backend only when the client's window allows | slow readers pinning memory with tiny flow-control windows |
//!
//! The h2 crate also bounds resets of streams not yet accepted
//! (`max_pending_accept_reset_streams`) and locally caused resets.

mod slots;
mod stream;

use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::StreamExt;
use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::{CONNECTION_WINDOW, STREAM_WINDOW};
use crate::exchange::ConnCtx;
use tern_deadline::Watchdog;

/// Serves HTTP/2 on a terminated TLS connection until the client leaves,
/// idles out, misbehaves or tern shuts down.
pub(crate) async fn serve<S>(io: S, ctx: &ConnCtx<'_>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let lim = ctx.listener.config.h2;
    let limits = &ctx.listener.config.limits;
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(lim.max_concurrent_streams)
        .max_header_list_size(lim.max_header_list_size)
        .header_table_size(lim.header_table_size)
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_send_buffer_size(lim.max_send_buffer as usize)
        .max_pending_accept_reset_streams(20)
        .max_local_error_reset_streams(Some(256))
        // Extended CONNECT (RFC 8441): WebSockets over this connection.
        .enable_connect_protocol();
    let mut conn = match tokio::time::timeout(
        limits.header_timeout,
        builder.handshake::<_, Bytes>(io),
    )
    .await
    {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            tracing::debug!(client = %ctx.peer, "h2 preface failed: {e}");
            return;
        }
        Err(_) => return,
    };
    // Declared before `streams`, whose futures borrow it.
    let shared = stream::Shared::default();
    let mut streams = slots::Slots::new();
    let mut resets = ResetBudget::new(lim.max_resets_per_second);
    let mut refusals = super::RateRefusals::default();
    // Made once: a fresh `wait_for` per turn of the loop would register
    // (and drop) a waiter every time.
    let mut shutdown_rx = ctx.worker.shutdown.clone();
    let shutdown = async move {
        let _ = shutdown_rx.wait_for(|s| *s).await;
    };
    tokio::pin!(shutdown);
    let mut going_away = false;
    // Set when tern itself sends GOAWAY to an idle or abusive client: from
    // then on the connection is closed at `idle`'s deadline, read or not (a
    // client that never reads would otherwise hold it forever, its GOAWAY
    // unsent).
    let mut closing = false;
    // Moved each time the connection falls idle (every burst of streams):
    // a store, not a timer-wheel update.
    let mut idle = Watchdog::new(Instant::now() + limits.idle_timeout);
    loop {
        tokio::select! {
            accepted = conn.accept() => match accepted {
                // Boxed in place, as HTTP/3's: pushing the future itself
                // would copy it (the whole exchange) on its way into its
                // slot. The box is a block
                // an earlier stream of the worker gave back (tern_blocks):
                // the future is past malloc's per-thread cache.
                Some(Ok(first)) => {
                    // Then the other streams the same read brought, taken
                    // without a poll of the whole connection each (h2
                    // patch 0019): one poll reads a burst of HEADERS.
                    let mut next = Some(first);
                    while let Some((request, respond)) = next {
                        streams.push(tern_blocks::boxed(|| stream::handle(request, respond, ctx, &shared)));
                        next = conn.accept_queued();
                    }
                }
                Some(Err(e)) => {
                    tracing::debug!(client = %ctx.peer, "h2 connection error: {e}");
                    break;
                }
                None => break,
            },
            Some(first) = streams.next(), if !streams.is_empty() => {
                // Every stream that is ready ends in this turn, before the
                // connection is polled again: their frames then leave in one
                // flush (one TLS write) instead of one flush per stream.
                let mut end = Some(first);
                while let Some(e) = end {
                    let slow_down = match e {
                        stream::End::RateLimited(after) => Some(after),
                        _ => None,
                    };
                    if e == stream::End::ClientReset && !resets.spend() && !going_away {
                        tracing::warn!(client = %ctx.peer, budget = lim.max_resets_per_second, "too many stream resets (rapid reset): GOAWAY");
                        conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                        going_away = true;
                        closing = true;
                        idle.set(Instant::now() + GOAWAY_WAIT);
                    } else if e != stream::End::ClientReset && !going_away && refusals.kept_sending(slow_down, ctx) {
                        // The streams under way (the last 429 among them)
                        // are answered; no new one is taken.
                        conn.graceful_shutdown();
                        going_away = true;
                        closing = true;
                        idle.set(Instant::now() + GOAWAY_WAIT);
                    }
                    end = streams.next().now_or_never().flatten();
                }
                if streams.is_empty() && !closing {
                    // The worker turn's time (tern_deadline::now): a clock
                    // read per burst of streams spared, the deadline at
                    // most one turn early.
                    idle.set(tern_deadline::now() + limits.idle_timeout);
                }
            },
            _ = &mut shutdown, if !going_away => {
                conn.graceful_shutdown();
                going_away = true;
            }
            // Streams still running when tern closes finish first (each has
            // its own write deadline); then the connection closes.
            _ = idle.run(std::future::pending::<()>()), if streams.is_empty() && (closing || !going_away) => {
                if closing {
                    tracing::debug!(client = %ctx.peer, "h2 client did not take its GOAWAY in time: closed");
                    break;
                }
                conn.graceful_shutdown();
                going_away = true;
                closing = true;
                idle.set(Instant::now() + GOAWAY_WAIT);
            }
        }
    }
    // The connection is over, but streams may still run (a WebSocket
    // tunnel, a request waiting on its backend). Dropping the connection
    // fails their reads and writes, so each ends now and leaves its
    // access-log line instead of vanishing with this future.
    drop(conn);
    let drained = async { while streams.next().await.is_some() {} };
    if tokio::time::timeout(STREAMS_END_WAIT, drained)
        .await
        .is_err()
    {
        tracing::debug!(client = %ctx.peer, "h2 streams still running after the connection closed: dropped");
    }
}

/// How long the streams of a closed connection get to end and log.
const STREAMS_END_WAIT: Duration = Duration::from_secs(5);

/// How long a connection tern sends GOAWAY to (idle, or abusive) may take
/// to read it and end; then it is closed.
const GOAWAY_WAIT: Duration = Duration::from_secs(1);

/// Client-caused stream resets allowed per second.
struct ResetBudget {
    per_second: u32,
    window_start: Instant,
    spent: u32,
}

impl ResetBudget {
    fn new(per_second: u32) -> Self {
        ResetBudget {
            per_second,
            window_start: Instant::now(),
            spent: 0,
        }
    }

    /// Counts one reset; false when the budget of this second is exceeded.
    fn spend(&mut self) -> bool {
        let now = Instant::now();
        if now.duration_since(self.window_start) >= Duration::from_secs(1) {
            self.window_start = now;
            self.spent = 0;
        }
        self.spent += 1;
        self.spent <= self.per_second
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_budget_refuses_past_its_rate() {
        let mut b = ResetBudget::new(3);
        assert!(b.spend() && b.spend() && b.spend());
        assert!(!b.spend());
    }
}
