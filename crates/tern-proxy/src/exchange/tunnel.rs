//! A WebSocket to an HTTP/2 backend group (`h2c` or `h2`), from any front
//! end: the one place that opens it, as an extended CONNECT stream (RFC
//! 8441) to a backend whose SETTINGS offer it.
//!
//! Phases: the backend stream opens with `:method CONNECT`, `:protocol
//! websocket` (raced against the client cancelling) → its response head
//! (within `backend_response_timeout`) → a 2xx opens the client's side
//! ([`Front::upgrade`]: a 101 to an HTTP/1.1 client, whose handshake key
//! tern answers, or a 200 to an HTTP/2 or HTTP/3 extended CONNECT), and
//! the backend stream, read and written as bytes
//! ([`crate::io::h2stream::H2Io`]), is the tunnel's backend side; any
//! other status is relayed as an ordinary response.

use std::time::Instant;

use super::policy::Edits;
use super::{to_h2, ConnCtx, Front, Outcome};
use crate::fault::Kind;
use crate::io::h2stream::H2Io;
use crate::message::{Request, RequestView, ResponseHeadView, Switched};
use crate::upstream::h2::Opened;
use crate::upstream::{Backends, Tries};

pub(super) async fn websocket_to_h2<F: Front>(
    front: &mut F,
    req: &Request<'_>,
    ctx: &ConnCtx<'_>,
    (backends, tries): (&Backends, &mut Tries),
    edits: &Edits<'_>,
    o: &mut Outcome,
) -> Result<(), Kind> {
    let limits = &ctx.listener.config.limits;
    let accept = match req.head {
        // Without a key there is no handshake tern could answer.
        RequestView::H1(_) => Some(websocket_accept(
            req.websocket_key().ok_or(Kind::Unrelayable)?,
        )),
        RequestView::H2(_) => None,
    };
    let facts = ctx.facts(req);
    // `held` keeps the tunnel counted in flight on its server.
    let Opened {
        response,
        mut upstream,
        stream: held,
    } = to_h2::open_stream(front, req, ctx, (backends, tries), &facts, edits, o).await?;
    let sent = Instant::now();
    let head = {
        let (_, reset) = front.split();
        tokio::select! {
            r = tokio::time::timeout(limits.backend_response_timeout, response) => r,
            () = reset => {
                upstream.send_reset(h2::Reason::CANCEL);
                return Err(Kind::ClientGone);
            }
        }
    };
    let answer = match to_h2::response_head(head, ctx, backends, &held, o, sent) {
        Ok(answer) => answer,
        Err(kind) => {
            upstream.send_reset(h2::Reason::CANCEL);
            return Err(kind);
        }
    };
    let with_cookie = backends
        .set_cookie(tries, held.addr)
        .map(|c| super::with_set_cookie(&edits.response, c));
    let response_edits = with_cookie.as_ref().unwrap_or(&edits.response);
    if !answer.status().is_success() {
        // A refusal (403, 404, ...) is an ordinary response; tern's side
        // of the stream, never ended, is closed after it.
        let relayed = to_h2::relay(
            front,
            req,
            answer,
            response_edits,
            false,
            limits.backend_response_timeout,
            o,
        )
        .await;
        upstream.send_reset(h2::Reason::CANCEL);
        return relayed;
    }
    let (parts, recv) = answer.into_parts();
    let switched = Switched {
        head: ResponseHeadView::H2(&parts),
        edits: response_edits,
        accept: accept.as_deref(),
    };
    let mut backend = H2Io::new(upstream, recv);
    let result = front.upgrade(switched, &mut backend, &[]).await;
    backend.finish();
    drop(held);
    result
}

/// `Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key` (RFC 6455
/// section 4.2.2: base64 of the SHA-1 of the key and the protocol's GUID).
fn websocket_accept(key: &[u8]) -> String {
    use aws_lc_rs::digest::{Context, SHA1_FOR_LEGACY_USE_ONLY};
    use base64::Engine as _;
    let mut sha1 = Context::new(&SHA1_FOR_LEGACY_USE_ONLY);
    sha1.update(key);
    sha1.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64::engine::general_purpose::STANDARD.encode(sha1.finish())
}

#[cfg(test)]
mod tests {
    #[test]
    fn accept_is_rfc_6455s_example() {
        // RFC 6455 section 1.3.
        assert_eq!(
            super::websocket_accept(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }
}
