//! A well-behaved HTTP/2 client over TLS (the `h2` crate on tokio-rustls):
//! what a browser or curl would send, for relaying tests and for latency
//! measured while another connection misbehaves.
//!
//! The `h2`, `http` and `bytes` crates are re-exported so tests use the same
//! versions as this module.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use http::{HeaderMap, Request, StatusCode};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

pub use bytes;
pub use h2;
pub use http;

/// How long a client waits for tern before calling it a failure.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A client config trusting only `ca_pem` that offers ALPN `h2` alone.
pub fn h2_client_config(ca_pem: &str) -> Arc<ClientConfig> {
    crate::client::client_config_with(
        ca_pem,
        &[&rustls::version::TLS13, &rustls::version::TLS12],
        &[b"h2"],
    )
}

/// A TLS connection to `addr` for server name `localhost`, checked to have
/// negotiated ALPN `h2`.
pub async fn tls_connect(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
) -> io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from("localhost").map_err(io::Error::other)?;
    let tls = tokio::time::timeout(IO_TIMEOUT, TlsConnector::from(config).connect(name, tcp))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
    let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    if alpn.as_deref() != Some(b"h2") {
        return Err(io::Error::other(format!(
            "server did not negotiate h2 (ALPN {:?})",
            alpn.map(|p| String::from_utf8_lossy(&p).into_owned())
        )));
    }
    Ok(tls)
}

/// One HTTP/2 connection; requests may run concurrently (`&self`).
pub struct H2Client {
    send: SendRequest<Bytes>,
    local: SocketAddr,
    driver: JoinHandle<Result<(), h2::Error>>,
}

/// A complete response.
#[derive(Debug)]
pub struct H2Response {
    /// Status code.
    pub status: StatusCode,
    /// Response header fields.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Vec<u8>,
    /// The trailer fields that ended it, if any.
    pub trailers: Option<HeaderMap>,
}

impl H2Response {
    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON; panics with the body when it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("response is not JSON ({e}): {}", self.text()))
    }

    /// The first value of header `name` as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A request body.
#[derive(Debug, Clone)]
pub enum Body {
    /// No body: HEADERS carries END_STREAM.
    Empty,
    /// These pieces, each sent as its own DATA frame(s), then END_STREAM.
    Chunks(Vec<Bytes>),
    /// These pieces, then these trailers (which carry END_STREAM).
    WithTrailers(Vec<Bytes>, HeaderMap),
}

impl H2Client {
    /// Connects with default h2 client settings.
    pub async fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> io::Result<H2Client> {
        H2Client::connect_with(addr, config, &h2::client::Builder::new()).await
    }

    /// Connects with the given h2 client settings.
    pub async fn connect_with(
        addr: SocketAddr,
        config: Arc<ClientConfig>,
        builder: &h2::client::Builder,
    ) -> io::Result<H2Client> {
        let tls = tls_connect(addr, config).await?;
        let local = tls.get_ref().0.local_addr()?;
        let (send, connection) = builder
            .handshake::<_, Bytes>(tls)
            .await
            .map_err(io::Error::other)?;
        let driver = tokio::spawn(connection);
        Ok(H2Client {
            send,
            local,
            driver,
        })
    }

    /// The client's own address: tern logs it as `client=`.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// GET `path` at authority `localhost`.
    pub async fn get(&self, path: &str) -> Result<H2Response, h2::Error> {
        self.send(request("GET", path), Body::Empty).await
    }

    /// Sends `request` with `body` and reads the whole response.
    pub async fn send(&self, request: Request<()>, body: Body) -> Result<H2Response, h2::Error> {
        let mut send = self.send.clone().ready().await?;
        let empty = matches!(&body, Body::Empty);
        let (response, mut stream) = send.send_request(request, empty)?;
        match body {
            Body::Empty => {}
            Body::Chunks(chunks) => {
                // h2 buffers what the window does not yet allow; an empty
                // last frame carries END_STREAM.
                for chunk in chunks {
                    stream.send_data(chunk, false)?;
                }
                stream.send_data(Bytes::new(), true)?;
            }
            Body::WithTrailers(chunks, trailers) => {
                for chunk in chunks {
                    stream.send_data(chunk, false)?;
                }
                stream.send_trailers(trailers)?;
            }
        }
        let response = response.await?;
        let (parts, mut recv) = response.into_parts();
        let mut body = Vec::new();
        while let Some(chunk) = recv.data().await {
            let chunk = chunk?;
            let _ = recv.flow_control().release_capacity(chunk.len());
            body.extend_from_slice(&chunk);
        }
        let trailers = recv.trailers().await?;
        Ok(H2Response {
            status: parts.status,
            headers: parts.headers,
            body,
            trailers,
        })
    }

    /// Starts `request` with a body the caller sends piece by piece on the
    /// returned stream (END_STREAM when it says so).
    pub async fn open(
        &self,
        request: Request<()>,
    ) -> Result<(h2::client::ResponseFuture, h2::SendStream<Bytes>), h2::Error> {
        let mut send = self.send.clone().ready().await?;
        send.send_request(request, false)
    }

    /// Opens a WebSocket on `path` with an extended CONNECT (RFC 8441:
    /// `:method CONNECT`, `:protocol websocket`, version 13): the response
    /// head, and the stream's halves for the caller's frames.
    pub async fn open_websocket(
        &self,
        path: &str,
    ) -> Result<(http::response::Parts, h2::SendStream<Bytes>, h2::RecvStream), h2::Error> {
        let mut connect = request("CONNECT", path);
        connect.headers_mut().insert(
            "sec-websocket-version",
            http::HeaderValue::from_static("13"),
        );
        connect
            .extensions_mut()
            .insert(h2::ext::Protocol::from_static("websocket"));
        let (response, send) = self.open(connect).await?;
        let (parts, recv) = response.await?.into_parts();
        Ok((parts, send, recv))
    }

    /// Sends `frames` (client frames, [`crate::ws_frame::client_text`]) on
    /// a WebSocket stream from [`H2Client::open_websocket`] and reads
    /// until `want` text frames came back (20 s at most for each read),
    /// then resets the stream (CANCEL), as a client that leaves without
    /// the closing handshake: Hypercorn leaves a WebSocket's stream open
    /// even after that handshake, so a tunnel to it that the client does
    /// not cut ends only at tern's `idle_timeout`.
    pub async fn websocket_texts(
        send: &mut h2::SendStream<Bytes>,
        recv: &mut h2::RecvStream,
        frames: Vec<u8>,
        want: usize,
    ) -> Result<Vec<String>, String> {
        send.send_data(Bytes::from(frames), false)
            .map_err(|e| e.to_string())?;
        let mut back = Vec::new();
        loop {
            let (texts, _) = crate::ws_frame::server_texts(&back);
            if texts.len() >= want {
                send.send_reset(h2::Reason::CANCEL);
                return Ok(texts);
            }
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(20), recv.data())
                .await
                .map_err(|_| format!("no frame within 20 s after {texts:?}"))?
                .ok_or_else(|| format!("stream ended after {texts:?}"))?
                .map_err(|e| e.to_string())?;
            let _ = recv.flow_control().release_capacity(chunk.len());
            back.extend_from_slice(&chunk);
        }
    }

    /// Whether the connection task has ended (GOAWAY, reset or close).
    pub fn is_closed(&self) -> bool {
        self.driver.is_finished()
    }
}

impl Drop for H2Client {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// A request for `https://localhost<path>` with no header fields.
pub fn request(method: &str, path: &str) -> Request<()> {
    Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"))
        .body(())
        .expect("a valid method and path")
}
