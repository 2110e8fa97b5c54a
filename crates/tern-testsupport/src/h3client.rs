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
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The client's idle timeout for an established connection. It was once
/// the handshake timeout (2 s), and QUIC takes the smaller of the two
/// sides' idle timeouts: a test that spent 2 s elsewhere on a loaded
/// machine (another connection refused, a scrape) found its first
/// connection silently gone. 60 s is tern's default `idle_timeout`, so
/// the idle timeout a test sees is tern's.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

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
        Self::connect_with(source, addr, tls).await
    }

    /// As [`H3Conn::connect_from`], with the client's own TLS
    /// configuration (TLS 1.3, ALPN h3), e.g. a session store counting
    /// tickets ([`crate::tickets::TicketCountingStore`]).
    pub async fn connect_with(
        source: IpAddr,
        addr: SocketAddr,
        tls: Arc<rustls::ClientConfig>,
    ) -> Result<H3Conn, H3ConnectError> {
        let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
            .map_err(|e| H3ConnectError::Other(e.to_string()))?;
        let mut config = quinn::ClientConfig::new(Arc::new(quic));
        let mut transport = quinn::TransportConfig::default();
        transport.max_idle_timeout(Some(
            IDLE_TIMEOUT
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
        let conn = match tokio::time::timeout(HANDSHAKE_TIMEOUT, connecting).await {
            Err(_) | Ok(Err(quinn::ConnectionError::TimedOut)) => {
                return Err(H3ConnectError::NoAnswer)
            }
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(H3ConnectError::Closed(e)),
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

impl H3Conn {
    /// GET `path` (under 64 bytes) on a request stream of its own, its
    /// HEADERS frame written here (QPACK, no Huffman coding) and not by
    /// h3: the response's HEADERS frame payload (its field section) as
    /// tern encoded it, before any decoding.
    pub async fn get_raw_head(&self, path: &str) -> Result<Vec<u8>, String> {
        if path.len() >= 64 || !path.starts_with('/') {
            return Err(format!(
                "path {path:?} must start with / and be under 64 bytes"
            ));
        }
        // Field section prefix (no dynamic table: both bytes 0), then
        // :method GET and :scheme https from the static table (indexes 17
        // and 23), :authority and :path as literals naming static entries
        // 0 and 1 (RFC 9204 4.5.2, 4.5.4; Appendix A).
        let mut section = vec![0x00, 0x00, 0xc0 | 17, 0xc0 | 23, 0x50, 9];
        section.extend_from_slice(b"localhost");
        section.extend_from_slice(&[0x51, path.len() as u8]);
        section.extend_from_slice(path.as_bytes());
        // HEADERS frame: type 0x01, a one-byte length (under 64).
        let mut frame = vec![0x01, section.len() as u8];
        frame.extend_from_slice(&section);
        let (mut send, mut recv) = self.conn.open_bi().await.map_err(|e| e.to_string())?;
        send.write_all(&frame).await.map_err(|e| e.to_string())?;
        send.finish().map_err(|e| e.to_string())?;
        let stream = recv.read_to_end(1 << 20).await.map_err(|e| e.to_string())?;
        let mut at = &stream[..];
        let kind = quic_varint(&mut at).ok_or("no frame type")?;
        let len = quic_varint(&mut at).ok_or("no frame length")? as usize;
        if kind != 0x01 || at.len() < len {
            return Err(format!(
                "first frame type {kind:#x}, {len} bytes, not a HEADERS frame"
            ));
        }
        Ok(at[..len].to_vec())
    }
}

/// A QUIC variable-length integer (RFC 9000 16) read off the front of
/// `at`.
fn quic_varint(at: &mut &[u8]) -> Option<u64> {
    let first = *at.first()?;
    let len = 1usize << (first >> 6);
    let bytes = at.get(..len)?;
    let mut value = u64::from(first & 0x3f);
    for b in &bytes[1..] {
        value = value << 8 | u64::from(*b);
    }
    *at = &at[len..];
    Some(value)
}

/// The string literals of a QPACK field section without dynamic table
/// references (as tern sends), each as (Huffman-coded, bytes on the
/// wire); `Err` names what does not parse (RFC 9204 4.5).
pub fn qpack_literals(section: &[u8]) -> Result<Vec<(bool, Vec<u8>)>, String> {
    let mut at = section;
    // Required Insert Count and Delta Base: 0 without a dynamic table.
    if at.get(..2) != Some(&[0, 0][..]) {
        return Err(format!(
            "section prefix {:?} refers to a dynamic table",
            at.get(..2)
        ));
    }
    at = &at[2..];
    let mut literals = Vec::new();
    while let Some(&first) = at.first() {
        if first & 0x80 != 0 {
            // Indexed field line.
            qpack_int(&mut at, 6)?;
        } else if first & 0x40 != 0 {
            // Literal with name reference, then its value.
            qpack_int(&mut at, 4)?;
            literals.push(qpack_string(&mut at, 7)?);
        } else if first & 0x20 != 0 {
            // Literal with literal name: the name, then the value.
            literals.push(qpack_string(&mut at, 3)?);
            literals.push(qpack_string(&mut at, 7)?);
        } else {
            return Err(format!("field line {first:#04x} refers to a dynamic table"));
        }
    }
    Ok(literals)
}

/// A QPACK prefixed integer (RFC 7541 5.1) of `bits` bits off `at`.
fn qpack_int(at: &mut &[u8], bits: u32) -> Result<u64, String> {
    let mask = (1u64 << bits) - 1;
    let (&first, rest) = at.split_first().ok_or("section ends in an integer")?;
    *at = rest;
    let mut value = u64::from(first) & mask;
    if value < mask {
        return Ok(value);
    }
    for shift in (0..63).step_by(7) {
        let (&b, rest) = at.split_first().ok_or("section ends in an integer")?;
        *at = rest;
        value += u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("integer too long".into())
}

/// A QPACK string literal whose length has a `bits`-bit prefix, the
/// Huffman flag the bit above it: (Huffman-coded, its bytes).
fn qpack_string(at: &mut &[u8], bits: u32) -> Result<(bool, Vec<u8>), String> {
    let huffman = at.first().is_some_and(|b| b & (1 << bits) != 0);
    let len = qpack_int(at, bits)? as usize;
    let bytes = at.get(..len).ok_or("section ends in a string")?.to_vec();
    *at = &at[len..];
    Ok((huffman, bytes))
}

impl Drop for H3Conn {
    fn drop(&mut self) {
        self.conn.close(0u32.into(), b"");
        self.driver.abort();
    }
}
