//! An HTTP/3 client from a chosen local address (quinn and the `h3`
//! crate), for tests of what tern does per client address over QUIC:
//! access lists and per-client limits. aioquic (tests/serve/clients) is
//! the client no one here wrote; this one binds where a test says.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::task::JoinHandle;

/// How long a handshake may take before the client gives up (a denied
/// address gets no answer at all, so this is how long the test waits).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a closed connection may take to drain (its closing period is
/// three probe timeouts: milliseconds on loopback).
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// One HTTP/3 connection; closed on drop.
pub struct H3Conn {
    conn: quinn::Connection,
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    driver: JoinHandle<()>,
    endpoint: quinn::Endpoint,
}

/// Why no connection came up.
#[derive(Debug)]
pub enum H3ConnectError {
    /// No answer within [`HANDSHAKE_TIMEOUT`].
    NoAnswer,
    /// The server closed or refused the connection.
    Closed(quinn::ConnectionError),
    /// Anything else (local setup, the HTTP/3 layer).
    Other(String),
}

impl H3Conn {
    /// Connects from `source` (port chosen by the system) to `addr` as
    /// `localhost`, trusting only `ca_pem`.
    pub async fn connect_from(
        source: IpAddr,
        addr: SocketAddr,
        ca_pem: &str,
    ) -> Result<H3Conn, H3ConnectError> {
        let tls = crate::client::client_config_with(ca_pem, &[&rustls::version::TLS13], &[b"h3"]);
        let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
            .map_err(|e| H3ConnectError::Other(e.to_string()))?;
        let mut config = quinn::ClientConfig::new(Arc::new(quic));
        let mut transport = quinn::TransportConfig::default();
        transport.max_idle_timeout(Some(
            HANDSHAKE_TIMEOUT
                .try_into()
                .map_err(|e: quinn::VarIntBoundsExceeded| H3ConnectError::Other(e.to_string()))?,
        ));
        config.transport_config(Arc::new(transport));
        let mut endpoint = quinn::Endpoint::client(SocketAddr::new(source, 0))
            .map_err(|e| H3ConnectError::Other(e.to_string()))?;
        endpoint.set_default_client_config(config);
        let connecting = endpoint
            .connect(addr, "localhost")
            .map_err(|e| H3ConnectError::Other(e.to_string()))?;
        let conn = match connecting.await {
            Ok(c) => c,
            Err(quinn::ConnectionError::TimedOut) => return Err(H3ConnectError::NoAnswer),
            Err(e) => return Err(H3ConnectError::Closed(e)),
        };
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .map_err(|e| H3ConnectError::Other(e.to_string()))?;
        let driver = tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok(H3Conn {
            conn,
            send,
            driver,
            endpoint,
        })
    }

    /// What quinn counted on this connection so far (frames and
    /// datagrams received from the server, among others).
    pub fn stats(&self) -> quinn::ConnectionStats {
        self.conn.stats()
    }

    /// Closes the connection (H3_NO_ERROR) and waits until its endpoint
    /// has drained it (three probe timeouts, quinn's closing period, in
    /// which anything the server still sends arrives; at most
    /// [`DRAIN_TIMEOUT`]): then what quinn counted on it.
    pub async fn close_and_drain(self) -> quinn::ConnectionStats {
        self.conn.close(quinn::VarInt::from_u32(0x100), b"");
        let drained = tokio::time::timeout(DRAIN_TIMEOUT, self.endpoint.wait_idle()).await;
        assert!(
            drained.is_ok(),
            "the client's endpoint did not drain in {DRAIN_TIMEOUT:?}"
        );
        self.conn.stats()
    }

    /// GET `path`: the status and the body.
    pub async fn get(&mut self, path: &str) -> Result<(u16, Vec<u8>), String> {
        let req = http::Request::builder()
            .method("GET")
            .uri(format!("https://localhost{path}"))
            .body(())
            .map_err(|e| e.to_string())?;
        let mut stream = self
            .send
            .send_request(req)
            .await
            .map_err(|e| e.to_string())?;
        stream.finish().await.map_err(|e| e.to_string())?;
        let response = stream.recv_response().await.map_err(|e| e.to_string())?;
        let mut body = Vec::new();
        while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
            body.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
        }
        Ok((response.status().as_u16(), body))
    }
}

impl H3Conn {
    /// Waits until the connection is closed (by either side) and says why.
    pub async fn closed(&self) -> quinn::ConnectionError {
        self.conn.closed().await
    }

    /// Opens a WebSocket on `path` with an extended CONNECT (RFC 9220,
    /// `:protocol = websocket`), sends `message` and reads until as many
    /// bytes came back (an echo), then ends its side. The response status
    /// and the bytes read.
    pub async fn websocket_echo(
        &mut self,
        path: &str,
        message: &[u8],
    ) -> Result<(u16, Vec<u8>), String> {
        let (status, mut stream) = self.open_websocket(path).await?;
        if status != 200 {
            return Ok((status, Vec::new()));
        }
        stream
            .send_data(Bytes::copy_from_slice(message))
            .await
            .map_err(|e| e.to_string())?;
        let mut back = Vec::new();
        while back.len() < message.len() {
            match stream.recv_data().await.map_err(|e| e.to_string())? {
                Some(mut chunk) => back.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining())),
                None => break,
            }
        }
        stream.finish().await.map_err(|e| e.to_string())?;
        Ok((status, back))
    }
}

/// A request stream of [`H3Conn`].
type H3Stream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

impl H3Conn {
    /// Sends an extended CONNECT for a WebSocket on `path` (RFC 9220,
    /// `:protocol = websocket`, version 13): the response status and the
    /// stream.
    async fn open_websocket(&mut self, path: &str) -> Result<(u16, H3Stream), String> {
        let mut req = http::Request::builder()
            .method("CONNECT")
            .uri(format!("https://localhost{path}"))
            .header("sec-websocket-version", "13")
            .body(())
            .map_err(|e| e.to_string())?;
        req.extensions_mut().insert(h3::ext::Protocol::WEBSOCKET);
        let mut stream = self
            .send
            .send_request(req)
            .await
            .map_err(|e| e.to_string())?;
        let response = stream.recv_response().await.map_err(|e| e.to_string())?;
        Ok((response.status().as_u16(), stream))
    }

    /// Opens a WebSocket on `path` with an extended CONNECT (RFC 9220),
    /// sends `frames` (client frames, [`crate::ws_frame::client_text`])
    /// and reads until `want` text frames came back, then cancels the
    /// stream (as [`crate::h2client::H2Client::websocket_texts`] does, and
    /// why). The response status and the texts.
    pub async fn websocket_texts(
        &mut self,
        path: &str,
        frames: &[u8],
        want: usize,
    ) -> Result<(u16, Vec<String>), String> {
        let (status, mut stream) = self.open_websocket(path).await?;
        if status != 200 {
            return Ok((status, Vec::new()));
        }
        stream
            .send_data(Bytes::copy_from_slice(frames))
            .await
            .map_err(|e| e.to_string())?;
        let mut back = Vec::new();
        loop {
            let (texts, _) = crate::ws_frame::server_texts(&back);
            if texts.len() >= want {
                stream.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
                return Ok((status, texts));
            }
            match stream.recv_data().await.map_err(|e| e.to_string())? {
                Some(mut chunk) => back.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining())),
                None => return Err(format!("stream ended after {texts:?}")),
            }
        }
    }
}

impl Drop for H3Conn {
    fn drop(&mut self) {
        self.conn.close(0u32.into(), b"");
        self.driver.abort();
    }
}
