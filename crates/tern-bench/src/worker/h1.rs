//! HTTP/1.1 slots: one connection, one request at a time, reconnecting
//! when the plan or the server says so.

use super::slot::Protocol;
use super::{Prepared, Setup, SlotCtx};
use crate::error::RequestError;
use crate::http1::{Exchange, H1Conn};
use crate::tls::KeyCache;

/// HTTP/1.1 as one slot runs it.
#[derive(Default)]
pub(super) struct H1 {
    key_cache: KeyCache,
    /// The read buffer of the last connection, for the next one.
    spare: Option<Box<[u8]>>,
}

impl Protocol for H1 {
    type Conn = H1Conn;

    async fn open(&mut self, ctx: &SlotCtx) -> Result<(H1Conn, Setup), RequestError> {
        let est = ctx.connector.connect(&mut self.key_cache).await?;
        let setup = ctx.record_setup(est.opened());
        Ok((H1Conn::new(est.stream, self.spare.take()), setup))
    }

    async fn send(
        &mut self,
        _ctx: &SlotCtx,
        conn: &mut H1Conn,
        req: &Prepared,
    ) -> Result<Exchange, RequestError> {
        conn.exchange(&req.h1, req.expect_body()).await
    }

    fn close(&mut self, _ctx: &SlotCtx, conn: H1Conn) {
        self.abandon(conn);
    }

    fn abandon(&mut self, conn: H1Conn) {
        self.spare = Some(conn.into_buffer());
    }
}
