//! The slot loop, once for every protocol: take a ticket from the budget,
//! pace, run one request under the slot's watchdog, record it, stop when
//! the budget is spent. In a round that keeps its connections alive, a
//! slot opens its connection before the round's clock starts and closes
//! it after the round's end (see `lines`). What differs per protocol is
//! behind [`Protocol`]
//! (open a connection, send one request on it, close it) and, for the
//! protocols that multiplex, [`Multiplexed`] (the handle every stream loop
//! sends on).

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::lines::SlotPass;
use super::{pace, Pacer, Prepared, Setup, SlotCtx, Watchdog};
use crate::error::RequestError;
use crate::http1::Exchange;
use crate::http2::H2Request;

/// One protocol as a slot runs it. A value lives as long as its slot, so
/// it keeps what the slot reuses from one connection to the next (the TLS
/// session cache, HTTP/1.1's read buffer).
pub(super) trait Protocol {
    /// An open connection.
    type Conn;

    /// Opens a connection and records its set-up.
    async fn open(&mut self, ctx: &SlotCtx) -> Result<(Self::Conn, Setup), RequestError>;

    /// Waits, on a connection just opened before a round's clock starts,
    /// for what the server still does to set it up (HTTP/2 and HTTP/3:
    /// the settings exchange).
    async fn settle(&mut self, _conn: &mut Self::Conn) -> Result<(), RequestError> {
        Ok(())
    }

    /// Sends `req` on `conn` and reads the whole response.
    async fn send(
        &mut self,
        ctx: &SlotCtx,
        conn: &mut Self::Conn,
        req: &Prepared,
    ) -> Result<Exchange, RequestError>;

    /// Ends a connection that is not used again.
    fn close(&mut self, ctx: &SlotCtx, conn: Self::Conn);

    /// Lets go of a connection whose request timed out.
    fn abandon(&mut self, conn: Self::Conn) {
        drop(conn);
    }
}

/// A protocol whose connections carry concurrent streams (HTTP/2, HTTP/3).
pub(super) trait Multiplexed: Protocol {
    /// What each stream loop sends on.
    type Streams: Streams + Clone + 'static;

    /// The handle for the stream loops, and what of the connection is kept
    /// until they have all ended (then given to [`Protocol::close`]).
    fn share(conn: Self::Conn) -> (Self::Streams, Option<Self::Conn>);
}

/// The sending half of a multiplexed connection (HTTP/2, HTTP/3): each
/// stream loop has its own handle.
pub(super) trait Streams {
    /// Sends one request on a new stream and reads the whole response,
    /// looking for `expect_body` in it; on error, whether the connection
    /// is dead.
    async fn exchange(
        &mut self,
        req: &H2Request,
        expect_body: Option<&[u8]>,
    ) -> Result<Exchange, (RequestError, bool)>;
}

impl Streams for ::h2::client::SendRequest<bytes::Bytes> {
    async fn exchange(
        &mut self,
        req: &H2Request,
        expect_body: Option<&[u8]>,
    ) -> Result<Exchange, (RequestError, bool)> {
        crate::http2::exchange(self, req, expect_body).await
    }
}

impl Streams for crate::http3::H3Send {
    async fn exchange(
        &mut self,
        req: &H2Request,
        expect_body: Option<&[u8]>,
    ) -> Result<Exchange, (RequestError, bool)> {
        crate::http3::exchange(self, req, expect_body).await
    }
}

/// One request at a time on one connection, opened when there is none and
/// kept while the plan and the server allow (HTTP/1.1, and every protocol
/// with a new connection per request).
pub(super) async fn serial_slot<P: Protocol>(ctx: Rc<SlotCtx>, mut proto: P, slot: usize) {
    let (mut conn, pass) = before_start(&ctx, &mut proto).await;
    let mut pacer = Pacer::new(&ctx.job, slot, slot);
    let per_request = ctx.job.config.plan.connection_per_request();
    let mut watchdog = Watchdog::new(ctx.job.config.timeout);
    loop {
        let intended = pace(&mut pacer).await;
        let Some(ticket) = ctx.job.budget.take() else {
            break;
        };
        let req = ctx.job.request(ticket);
        let once = async {
            let mut setup = None;
            let c = match conn.take() {
                Some(c) => conn.insert(c),
                None => {
                    let (c, s) = proto.open(&ctx).await?;
                    setup = Some(s);
                    conn.insert(c)
                }
            };
            let res = proto.send(&ctx, c, req).await;
            // Closed as soon as it is done with, before the request is
            // recorded; a request that times out never gets here and its
            // connection is abandoned instead.
            if !matches!(&res, Ok(ex) if ex.reusable && !per_request) {
                if let Some(c) = conn.take() {
                    proto.close(&ctx, c);
                }
            }
            res.map(|ex| (ex, setup))
        };
        match watchdog.run(once, || RequestError::Timeout).await {
            Ok((ex, setup)) => ctx.record_checked(intended, &ex, setup, req),
            Err(err) => {
                ctx.record_error(intended, &err);
                // Still here only when the request timed out.
                if let Some(c) = conn.take() {
                    proto.abandon(c);
                }
            }
        }
    }
    after_end(&ctx, &mut proto, conn, pass).await;
}

/// One connection at a time (connection `conn` of the run), each carrying
/// the job's streams; reconnects when the connection dies.
pub(super) async fn multiplexed_slot<P: Multiplexed>(ctx: Rc<SlotCtx>, mut proto: P, conn: usize) {
    let streams = ctx.job.streams;
    let (mut ready, pass) = before_start(&ctx, &mut proto).await;
    let mut pacers: Vec<Option<Pacer>> = (0..streams)
        .map(|s| Pacer::new(&ctx.job, conn * streams + s, conn))
        .collect();
    let mut watchdog = Watchdog::new(ctx.job.config.timeout);
    let mut last: Option<P::Conn> = None;
    while !ctx.job.budget.exhausted() {
        if let Some(dead) = last.take() {
            proto.close(&ctx, dead);
        }
        let attempt = Instant::now();
        let connected = match ready.take() {
            Some(conn) => Ok(conn),
            None => watchdog
                .run(proto.open(&ctx), || RequestError::Timeout)
                .await
                .map(|(conn, _)| conn),
        };
        let (send, kept) = match connected {
            Ok(conn) => P::share(conn),
            Err(e) => {
                if ctx.job.budget.take().is_none() {
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
                stream_loop(&ctx, send, &mut pacer).await;
                pacer
            }));
        }
        drop(send);
        for h in handles {
            if let Ok(p) = h.await {
                pacers.push(p);
            }
        }
        last = kept;
    }
    // Set up but never used: the budget was spent before it sent.
    let last = last.or_else(|| ready.and_then(|conn| P::share(conn).1));
    after_end(&ctx, &mut proto, last, pass).await;
}

/// The longest a kept-alive round waits for a connection's set-up when
/// requests have no timeout (`-t 0`): a dead target must not hold it.
const SET_UP_LIMIT: Duration = Duration::from_secs(crate::config::defaults::TIMEOUT_S);

/// In a round that keeps its connections alive: opens the slot's
/// connection, waits for the settings exchange, and waits for the round's
/// clock to start. A connection that fails or times out is counted as such
/// and the slot opens another inside the round, as it would have without
/// a start line (its failure is then a request's, as before). Returns
/// the connection and the slot's pass to the finish line; nothing, at
/// once, in other rounds.
async fn before_start<P: Protocol>(
    ctx: &SlotCtx,
    proto: &mut P,
) -> (Option<P::Conn>, Option<SlotPass>) {
    let Some(passage) = ctx.passage.as_ref() else {
        return (None, None);
    };
    let mut pass = passage.slot();
    let limit = ctx.job.config.timeout.unwrap_or(SET_UP_LIMIT);
    let set_up = async {
        let (mut conn, _) = proto.open(ctx).await?;
        proto.settle(&mut conn).await?;
        Ok(conn)
    };
    let conn = Watchdog::new(Some(limit))
        .run(set_up, || RequestError::Timeout)
        .await
        .ok();
    ctx.record_set_up(conn.is_some());
    pass.set_up().await;
    (conn, Some(pass))
}

/// After the slot's last request: in a round that keeps its connections
/// alive, waits until the round's end was read, then closes the slot's
/// connection (its close is no part of the round).
async fn after_end<P: Protocol>(
    ctx: &SlotCtx,
    proto: &mut P,
    conn: Option<P::Conn>,
    pass: Option<SlotPass>,
) {
    if let Some(mut pass) = pass {
        pass.finished().await;
    }
    if let Some(conn) = conn {
        proto.close(ctx, conn);
    }
}

/// One stream of a multiplexed connection: a closed (or paced) loop of
/// requests until the budget ends or the connection dies.
async fn stream_loop<S: Streams>(ctx: &SlotCtx, mut send: S, pacer: &mut Option<Pacer>) {
    let mut watchdog = Watchdog::new(ctx.job.config.timeout);
    loop {
        let intended = pace(pacer).await;
        let Some(ticket) = ctx.job.budget.take() else {
            return;
        };
        let req = ctx.job.request(ticket);
        let res = watchdog
            .run(send.exchange(&req.h2, req.expect_body()), || {
                (RequestError::Timeout, false)
            })
            .await;
        match res {
            Ok(ex) => ctx.record_checked(intended, &ex, None, req),
            // Sent again on the next connection.
            Err((RequestError::Unprocessed, _)) => {
                ctx.job.budget.give_back();
                return;
            }
            Err((err, connection_dead)) => {
                ctx.record_error(intended, &err);
                if connection_dead {
                    return;
                }
            }
        }
    }
}
