//! Full and resumed handshakes with rustls over a blocking socket that
//! timestamps every read and write, so we can tell the round trips and the
//! bytes of the server's first flight.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, HandshakeKind};
use tern_tls::verify::SignatureOnlyVerifier;

use crate::ProbeError;

/// The provider every probe connection uses: aws-lc-rs, passed explicitly.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A client configuration with the given versions and ALPN, recording into
/// `verifier`. Resumption uses rustls's in-memory store, shared by every
/// connection made from the returned config.
pub fn client_config(
    versions: &[&'static rustls::SupportedProtocolVersion],
    alpn: &[&[u8]],
    verifier: Arc<SignatureOnlyVerifier>,
) -> Result<Arc<ClientConfig>, ProbeError> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .map_err(ProbeError::Tls)?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// A socket that notes when each read and write happened and how big it was.
pub struct TimedSocket {
    pub inner: TcpStream,
    pub reads: Vec<(Instant, usize)>,
    pub writes: Vec<(Instant, usize)>,
}

impl Read for TimedSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            self.reads.push((Instant::now(), n));
        }
        Ok(n)
    }
}

impl Write for TimedSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.writes.push((Instant::now(), n));
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Timings and results of one handshake.
#[derive(Debug, Clone)]
pub struct HandshakeTiming {
    /// TCP connect time: one round trip plus the server's accept.
    pub connect: Duration,
    /// From the ClientHello write to the handshake's end on our side.
    pub handshake: Duration,
    /// From the ClientHello write to the first byte of the server's answer.
    pub first_byte: Duration,
    /// From the first to the last byte of the server's first flight: zero
    /// when the flight arrives in one window, a round trip or more when the
    /// server's writes or its congestion window held part of it back.
    pub flight_spread: Duration,
    /// Bytes the server sent before our second flight.
    pub flight_bytes: usize,
    pub version: Option<rustls::ProtocolVersion>,
    pub suite: Option<rustls::CipherSuite>,
    pub group: Option<rustls::NamedGroup>,
    pub alpn: Option<Vec<u8>>,
    pub kind: Option<HandshakeKind>,
    /// The algorithm the server compressed its certificate chain with
    /// (RFC 8879), if it did.
    pub cert_compression: Option<rustls::CertificateCompressionAlgorithm>,
}

/// An established connection, ready for HTTP.
pub struct Established {
    pub conn: ClientConnection,
    pub sock: TimedSocket,
    pub timing: HandshakeTiming,
}

/// Connects to `addr` and completes a handshake with `config`.
pub fn handshake(
    addr: SocketAddr,
    server_name: &ServerName<'static>,
    config: Arc<ClientConfig>,
    nodelay: bool,
    timeout: Duration,
) -> Result<Established, ProbeError> {
    let start = Instant::now();
    let tcp = TcpStream::connect_timeout(&addr, timeout).map_err(ProbeError::Connect)?;
    let connect = start.elapsed();
    tcp.set_nodelay(nodelay).map_err(ProbeError::Connect)?;
    tcp.set_read_timeout(Some(timeout))
        .map_err(ProbeError::Connect)?;
    tcp.set_write_timeout(Some(timeout))
        .map_err(ProbeError::Connect)?;
    let mut conn = ClientConnection::new(config, server_name.clone()).map_err(ProbeError::Tls)?;
    let mut sock = TimedSocket {
        inner: tcp,
        reads: Vec::new(),
        writes: Vec::new(),
    };
    let hello_sent = Instant::now();
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).map_err(ProbeError::Handshake)?;
    }
    let done = Instant::now();
    while conn.wants_write() {
        conn.write_tls(&mut sock).map_err(ProbeError::Handshake)?;
    }
    // Our Finished is the last handshake write (TLS 1.2 and 1.3 alike; the
    // compatibility ChangeCipherSpec of TLS 1.3 may come earlier), and the
    // server's first flight is everything we read before it.
    let our_finished = sock.writes.last().map_or(done, |w| w.0);
    let flight: Vec<_> = sock.reads.iter().filter(|r| r.0 <= our_finished).collect();
    let flight_bytes = flight.iter().map(|r| r.1).sum();
    let first_byte = flight.first().map_or(Duration::ZERO, |r| r.0 - hello_sent);
    let flight_spread = match (flight.first(), flight.last()) {
        (Some(a), Some(b)) => b.0 - a.0,
        _ => Duration::ZERO,
    };
    let timing = HandshakeTiming {
        connect,
        handshake: done - hello_sent,
        first_byte,
        flight_spread,
        flight_bytes,
        version: conn.protocol_version(),
        suite: conn.negotiated_cipher_suite().map(|s| s.suite()),
        group: conn.negotiated_key_exchange_group().map(|g| g.name()),
        alpn: conn.alpn_protocol().map(|p| p.to_vec()),
        kind: conn.handshake_kind(),
        cert_compression: conn.certificate_compression(),
    };
    Ok(Established { conn, sock, timing })
}

impl Established {
    /// Writes `data` as one TLS record in one socket write.
    pub fn send(&mut self, data: &[u8]) -> io::Result<()> {
        self.conn.writer().write_all(data)?;
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.sock)?;
        }
        Ok(())
    }

    /// Reads plaintext until `done(&buf)` says the message is complete, the
    /// peer closes, or the socket's read timeout passes. Returns the bytes.
    pub fn receive_until(&mut self, done: impl Fn(&[u8]) -> bool) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match self.conn.reader().read(&mut chunk) {
                Ok(0) => return Ok(out),
                Ok(n) => {
                    out.extend_from_slice(&chunk[..n]);
                    if done(&out) {
                        return Ok(out);
                    }
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(out),
                Err(e) => return Err(e),
            }
            let n = self.conn.read_tls(&mut self.sock)?;
            if n == 0 {
                return Ok(out);
            }
            self.conn
                .process_new_packets()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            // Answer key updates and the like.
            while self.conn.wants_write() {
                self.conn.write_tls(&mut self.sock)?;
            }
        }
    }
}
