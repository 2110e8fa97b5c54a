//! HTTP/2 slots: TCP + TLS connections (ALPN h2, or prior knowledge on
//! http://), each carrying `-m` concurrent streams (keepalive) or one
//! request (a new connection per request).

use bytes::Bytes;

use super::slot::{Multiplexed, Protocol, Streams};
use super::{Prepared, Setup, SlotCtx};
use crate::error::RequestError;
use crate::http1::Exchange;
use crate::http2;
use crate::tls::KeyCache;

type SendRequest = h2::client::SendRequest<Bytes>;

/// HTTP/2 as one slot runs it.
#[derive(Default)]
pub(super) struct H2 {
    keys: KeyCache,
    /// The PING handle of the connection last opened.
    ping: Option<h2::PingPong>,
}

impl Protocol for H2 {
    type Conn = SendRequest;

    async fn open(&mut self, ctx: &SlotCtx) -> Result<(SendRequest, Setup), RequestError> {
        let est = ctx.connector.connect(&mut self.keys).await?;
        let setup = ctx.record_setup(est.opened());
        if let Some(neg) = &est.negotiated {
            if neg.alpn != "h2" {
                return Err(RequestError::Http(format!(
                    "server did not negotiate h2 (ALPN {})",
                    neg.alpn
                )));
            }
        }
        let h = http2::handshake(est.stream).await?;
        self.ping = h.ping;
        Ok((h.send, setup))
    }

    /// A PING's round trip: the server has read the client's SETTINGS and
    /// sent its own.
    async fn settle(&mut self, _conn: &mut SendRequest) -> Result<(), RequestError> {
        match self.ping.take() {
            Some(mut ping) => http2::settings_exchanged(&mut ping).await,
            None => Ok(()),
        }
    }

    async fn send(
        &mut self,
        _ctx: &SlotCtx,
        conn: &mut SendRequest,
        req: &Prepared,
    ) -> Result<Exchange, RequestError> {
        conn.exchange(&req.h2, req.expect_body())
            .await
            .map_err(|(e, _)| e)
    }

    fn close(&mut self, _ctx: &SlotCtx, conn: SendRequest) {
        drop(conn);
    }
}

impl Multiplexed for H2 {
    type Streams = SendRequest;

    /// The connection ends when its last handle is dropped: one is kept
    /// until [`Protocol::close`], so a kept-alive round's connections
    /// close after its end.
    fn share(conn: SendRequest) -> (SendRequest, Option<SendRequest>) {
        (conn.clone(), Some(conn))
    }
}
