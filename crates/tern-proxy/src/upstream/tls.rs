//! TLS to the servers of `protocol = "h2"` groups: the client handshake on
//! a connected socket, and the checks that make a server usable for HTTP/2
//! (its certificate chains to `tls_ca` and carries the expected name, both
//! checked by rustls; it selected ALPN `h2`).

use std::io;

use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::Socket;
use crate::config::BackendTls;

/// The ALPN protocol id of HTTP/2 over TLS (RFC 9113 section 3.2).
const ALPN_H2: &[u8] = b"h2";

/// Completes a TLS handshake over `tcp` with a server that comes from
/// configuration entry `server` of the group (its expected name).
/// Not bounded in time here: every caller holds a deadline around it
/// (the connect timeout, or the health check's).
pub(super) async fn handshake(
    tls: &BackendTls,
    server: usize,
    tcp: Socket,
) -> io::Result<TlsStream<Socket>> {
    let Some(name) = tls.server_names.get(server).cloned() else {
        return Err(io::Error::other("TLS: no server name for this server"));
    };
    let connector = TlsConnector::from(tls.client.clone());
    let stream = connector.connect(name, tcp).await.map_err(|e| {
        let refused_h2 = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .is_some_and(|inner| {
                *inner
                    == rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol)
            });
        // The alert's name alone does not tell an operator which protocol
        // was missing.
        let hint = if refused_h2 {
            " (the server does not offer ALPN h2)"
        } else {
            ""
        };
        io::Error::new(e.kind(), format!("TLS handshake: {e}{hint}"))
    })?;
    match stream.get_ref().1.alpn_protocol() {
        Some(ALPN_H2) => Ok(stream),
        // A server that knows ALPN but not h2 usually refuses the
        // handshake (no_application_protocol alert, above); one that
        // ignores ALPN gets here.
        Some(other) => Err(io::Error::other(format!(
            "TLS: the server selected ALPN {:?}, not h2",
            String::from_utf8_lossy(other)
        ))),
        None => Err(io::Error::other(
            "TLS: the server selected no ALPN protocol, so not h2 (HTTP/2)",
        )),
    }
}
