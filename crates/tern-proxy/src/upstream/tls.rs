//! The TLS client handshake with a group's server on a connected socket
//! (Unix or TCP): the certificate chains to `tls_ca` or the system's CAs
//! and carries the expected name (both checked by rustls), and for
//! `protocol = "h2"` the server selected ALPN `h2`. Sessions are resumed
//! from the group's client settings, shared by every worker.

use std::io;

use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::Socket;
use crate::config::BackendTls;

/// The ALPN protocol id of HTTP/2 over TLS (RFC 9113 section 3.2).
const ALPN_H2: &[u8] = b"h2";

/// Completes a TLS handshake with server `server` of the group over
/// `socket`. Not bounded in time here: every caller holds a deadline
/// around it (the connect timeout, or the health check's).
pub(super) async fn handshake(
    tls: &BackendTls,
    server: usize,
    socket: Socket,
) -> io::Result<TlsStream<Socket>> {
    let Some(name) = tls.server_names.get(server).cloned() else {
        return Err(io::Error::other("TLS: no server name for this server"));
    };
    let wants_h2 = tls.client.alpn_protocols.iter().any(|p| p == ALPN_H2);
    let connector = TlsConnector::from(tls.client.clone());
    let stream = connector.connect(name, socket).await.map_err(|e| {
        let refused_alpn = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .is_some_and(|inner| {
                *inner
                    == rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol)
            });
        // The alert's name alone does not tell an operator which protocol
        // was missing.
        let hint = match (refused_alpn, wants_h2) {
            (true, true) => " (the server does not offer ALPN h2)",
            (true, false) => " (the server offers none of the ALPN ids in tls_alpn)",
            _ => "",
        };
        io::Error::new(e.kind(), format!("TLS handshake: {e}{hint}"))
    })?;
    if !wants_h2 {
        // rustls refuses an ALPN id that was not offered; none selected is
        // how most HTTP/1.1 servers answer.
        return Ok(stream);
    }
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
