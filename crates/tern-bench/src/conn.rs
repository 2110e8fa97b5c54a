//! Opening connections: DNS, TCP (with TCP_NODELAY before any byte is sent),
//! an optional HTTP proxy tunnel, and TLS, each phase timed.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::error::{BenchError, RequestError};
use crate::target::{split_host_port, Scheme, Target};
use crate::tls::{self, KeyCache, Negotiated};

/// Largest CONNECT response head accepted from a proxy.
const MAX_PROXY_HEAD: usize = 8 * 1024;

/// Opens connections to one target, the same way every time.
#[derive(Clone)]
pub struct Connector {
    host: String,
    port: u16,
    /// Set when the host is an IP literal: no DNS phase at all.
    literal: Option<IpAddr>,
    proxy: Option<(String, u16)>,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    /// What we offer, for TLS error messages.
    offer: String,
    /// Source address connections are made from (`--laddr`).
    local: Option<IpAddr>,
}

/// A connection and what it took to open it.
pub struct Established {
    /// The stream, ready for HTTP.
    pub stream: Stream,
    /// DNS lookup time (zero for IP literals).
    pub dns: Duration,
    /// TCP connect time (proxy tunnel included).
    pub connect: Duration,
    /// TLS handshake time (zero for plain HTTP).
    pub tls: Duration,
    /// TLS parameters, `None` for plain HTTP.
    pub negotiated: Option<Negotiated>,
    /// Whether the TLS session was resumed.
    pub resumed: bool,
    /// Bytes received from the server during the handshake.
    pub handshake_bytes: u64,
    /// The algorithm the server's certificate chain came compressed with
    /// (RFC 8879), if it did.
    pub cert_compression: Option<&'static str>,
}

impl Connector {
    /// A connector for `target` with the worker's TLS configuration.
    pub fn new(
        target: &Target,
        tls_config: Option<Arc<rustls::ClientConfig>>,
        sni: Option<&str>,
        proxy: Option<&str>,
    ) -> Result<Connector, BenchError> {
        let proxy = proxy
            .map(|p| {
                let p = p.strip_prefix("http://").unwrap_or(p).trim_end_matches('/');
                split_host_port(p, 3128)
                    .map_err(|r| BenchError::Config(format!("proxy {p:?}: {r}")))
            })
            .transpose()?;
        let (tls, offer) = match (target.scheme, tls_config) {
            (Scheme::Https, Some(config)) => {
                let name = sni.unwrap_or(&target.host).to_string();
                let server_name = ServerName::try_from(name.clone())
                    .map_err(|e| BenchError::TlsConfig(format!("server name {name:?}: {e}")))?;
                let offer = tls::describe_offer(&config);
                (Some((TlsConnector::from(config), server_name)), offer)
            }
            (Scheme::Https, None) => {
                return Err(BenchError::TlsConfig(
                    "https target without TLS configuration".into(),
                ))
            }
            (Scheme::Http, _) => (None, String::new()),
        };
        Ok(Connector {
            host: target.host.clone(),
            port: target.port,
            literal: target.host.parse().ok(),
            proxy,
            tls,
            offer,
            local: None,
        })
    }

    /// Makes every connection from `local` (any port): several load
    /// processes on one machine show up as distinct clients.
    pub fn bind_to(mut self, local: Option<IpAddr>) -> Connector {
        self.local = local;
        self
    }

    /// Opens one connection. `key_cache` avoids re-parsing the server
    /// certificate on every handshake.
    pub async fn connect(&self, key_cache: &mut KeyCache) -> Result<Established, RequestError> {
        let t0 = Instant::now();
        let (dial_host, dial_port) = match &self.proxy {
            Some((h, p)) => (h.as_str(), *p),
            None => (self.host.as_str(), self.port),
        };
        let addr = match (&self.proxy, self.literal) {
            (None, Some(ip)) => SocketAddr::new(ip, self.port),
            _ => resolve(dial_host, dial_port).await?,
        };
        let t1 = Instant::now();
        let connected = match self.local {
            None => TcpStream::connect(addr).await,
            Some(local) => {
                let socket = match local {
                    IpAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
                    IpAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
                }
                .and_then(|s| s.bind(SocketAddr::new(local, 0)).map(|()| s))
                .map_err(|e| RequestError::Connect(format!("bind {local}: {}", e.kind())))?;
                socket.connect(addr).await
            }
        };
        let tcp = connected.map_err(|e| match e.kind() {
            io::ErrorKind::ConnectionRefused => RequestError::ConnectRefused,
            _ => RequestError::Connect(e.kind().to_string()),
        })?;
        // Before the first byte: the ClientHello and the request must not
        // wait for an ACK (Nagle + delayed ACK).
        tcp.set_nodelay(true)
            .map_err(|e| RequestError::Connect(format!("TCP_NODELAY: {e}")))?;
        let mut io = CountingIo {
            inner: tcp,
            read: 0,
            first: [0; FIRST_BYTES],
        };
        if self.proxy.is_some() {
            tunnel(&mut io, &self.host, self.port).await?;
        }
        let t2 = Instant::now();
        let Some((connector, name)) = &self.tls else {
            return Ok(Established {
                stream: Stream::Plain(io),
                dns: t1 - t0,
                connect: t2 - t1,
                tls: Duration::ZERO,
                negotiated: None,
                resumed: false,
                handshake_bytes: 0,
                cert_compression: None,
            });
        };
        io.read = 0;
        let tls = connector
            .connect(name.clone(), io)
            .into_fallible()
            .await
            .map_err(|(e, io)| self.tls_error(e, &io))?;
        let t3 = Instant::now();
        let (io, conn) = tls.get_ref();
        let negotiated = tls::negotiated(conn, key_cache);
        let resumed = conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
        let handshake_bytes = io.read;
        let cert_compression = conn
            .certificate_compression()
            .map(tern_tls::compression::algorithm_name);
        Ok(Established {
            stream: Stream::Tls(Box::new(tls)),
            dns: t1 - t0,
            connect: t2 - t1,
            tls: t3 - t2,
            negotiated: Some(negotiated),
            resumed,
            handshake_bytes,
            cert_compression,
        })
    }

    fn tls_error(&self, e: io::Error, io: &CountingIo<TcpStream>) -> RequestError {
        if let Some(mismatch) = crate::mismatch::not_tls(io.first_bytes()) {
            return mismatch;
        }
        let detail = match e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            Some(tls) => tls.to_string(),
            None if e.kind() == io::ErrorKind::UnexpectedEof => {
                "server closed the connection during the handshake".to_string()
            }
            None => e.to_string(),
        };
        RequestError::Tls {
            detail,
            offered: self.offer.clone(),
        }
    }
}

async fn resolve(host: &str, port: u16) -> Result<SocketAddr, RequestError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let mut addrs = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| RequestError::Dns(e.to_string()))?;
    addrs
        .next()
        .ok_or_else(|| RequestError::Dns(format!("{host}: no addresses")))
}

/// Resolves a target's host to all its addresses (for the disclosure).
pub fn resolve_all(target: &Target) -> Result<Vec<SocketAddr>, BenchError> {
    use std::net::ToSocketAddrs;
    if let Ok(ip) = target.host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, target.port)]);
    }
    (target.host.as_str(), target.port)
        .to_socket_addrs()
        .map(Iterator::collect)
        .map_err(|source| BenchError::Resolve {
            host: target.host.clone(),
            source,
        })
}

/// Asks an HTTP proxy for a tunnel to `host:port`.
async fn tunnel(io: &mut CountingIo<TcpStream>, host: &str, port: u16) -> Result<(), RequestError> {
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let req = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    io.write_all(req.as_bytes())
        .await
        .map_err(|e| RequestError::Proxy(e.kind().to_string()))?;
    // Read byte by byte up to the blank line: the tunnelled bytes that follow
    // belong to TLS and must not be consumed here. Only done once per
    // connection, through a proxy.
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > MAX_PROXY_HEAD {
            return Err(RequestError::Proxy(
                "CONNECT response head too large".into(),
            ));
        }
        let n = io
            .read(&mut byte)
            .await
            .map_err(|e| RequestError::Proxy(e.kind().to_string()))?;
        if n == 0 {
            return Err(RequestError::Proxy("closed during CONNECT".into()));
        }
        head.push(byte[0]);
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(&head) {
        Ok(httparse::Status::Complete(_)) if resp.code == Some(200) => Ok(()),
        Ok(_) => Err(RequestError::Proxy(format!(
            "CONNECT refused with status {}",
            resp.code.unwrap_or(0)
        ))),
        Err(e) => Err(RequestError::Proxy(format!("bad CONNECT response: {e}"))),
    }
}

/// How many of the first bytes read a [`CountingIo`] keeps.
const FIRST_BYTES: usize = 12;

/// A stream that counts the bytes read through it (handshake bytes), and
/// keeps the first few: when a TLS handshake fails, they tell a plain-HTTP
/// answer from a broken TLS server.
#[derive(Debug)]
pub struct CountingIo<T> {
    inner: T,
    read: u64,
    first: [u8; FIRST_BYTES],
}

impl<T> CountingIo<T> {
    /// The first bytes read since the count was last reset.
    fn first_bytes(&self) -> &[u8] {
        &self.first[..(self.read as usize).min(FIRST_BYTES)]
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for CountingIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        let kept = self.read as usize;
        if kept < FIRST_BYTES {
            let new = &buf.filled()[before..];
            let n = new.len().min(FIRST_BYTES - kept);
            self.first[kept..kept + n].copy_from_slice(&new[..n]);
        }
        self.read += (buf.filled().len() - before) as u64;
        res
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for CountingIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A plain or TLS connection.
pub enum Stream {
    /// `http://`.
    Plain(CountingIo<TcpStream>),
    /// `https://`.
    Tls(Box<TlsStream<CountingIo<TcpStream>>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
