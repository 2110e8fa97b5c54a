//! TCP mode (stud/hitch style): after the handshake, bytes flow both ways
//! between the client and a backend, optionally after a PROXY protocol
//! header that tells the backend who the client is.

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::config::ProxyProtocol;
use crate::exchange::ConnCtx;

/// Relays a terminated TLS connection to a backend.
pub(crate) async fn serve<S>(client: &mut S, ctx: &ConnCtx<'_>, proxy: Option<ProxyProtocol>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let limits = &ctx.listener.config.limits;
    let backends = ctx.listener.route(ctx.tls.sni.as_deref(), None);
    let mut backend = match backends.get(limits.backend_connect_timeout).await {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(client = %ctx.peer, "backend unavailable: {e}");
            return;
        }
    };
    if let Some(version) = proxy {
        let local = backend.stream.local_addr();
        let header = super::proxy_header::encode(
            version,
            ctx.peer,
            ctx.listener.config.listen,
            &ctx.tls,
            local,
        );
        if tokio::time::timeout(
            limits.backend_connect_timeout,
            backend.stream.write_all(&header),
        )
        .await
        .is_err()
        {
            return;
        }
    }
    crate::io::body::tunnel(client, &mut backend.stream, limits.idle_timeout).await;
}
