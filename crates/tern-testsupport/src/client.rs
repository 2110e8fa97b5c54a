//! Clients for talking to tern: a blocking rustls client that can send any
//! bytes (well-formed or not) and read raw HTTP/1.1 responses, a TLS record
//! counter, and runners for `openssl` and `curl`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{
    ClientConfig, ClientConnection, RootCertStore, StreamOwned, SupportedProtocolVersion,
};

/// How long a client waits for tern before calling it a failure.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The connection ended before a byte of the response came, cleanly or by
/// a reset: what a server closing a kept-alive connection while it sat
/// idle looks like to the client, which may send its request again on a
/// new connection (RFC 9112 section 9.3.1).
#[derive(Debug)]
pub struct ClosedBeforeResponse;

impl std::fmt::Display for ClosedBeforeResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection closed or reset before a byte of the response")
    }
}

impl std::error::Error for ClosedBeforeResponse {}

/// Whether `e`, from [`HttpConn::get`], means the connection ended before
/// any byte of the response ([`ClosedBeforeResponse`]).
pub fn closed_before_response(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.is::<ClosedBeforeResponse>())
}

/// `e` as a [`ClosedBeforeResponse`] when it is the connection closing
/// under the client (a reset, an abort, a write to a closed socket).
fn as_closed(e: io::Error) -> io::Error {
    use io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    match e.kind() {
        BrokenPipe | ConnectionAborted | ConnectionReset => {
            io::Error::new(e.kind(), ClosedBeforeResponse)
        }
        _ => e,
    }
}

/// A client config trusting only `ca_pem`, offering TLS 1.3 and 1.2 and ALPN
/// `http/1.1`, with the aws-lc-rs provider passed explicitly.
pub fn client_config(ca_pem: &str) -> Arc<ClientConfig> {
    client_config_with(
        ca_pem,
        &[&rustls::version::TLS13, &rustls::version::TLS12],
        &[b"http/1.1"],
    )
}

/// Like [`client_config`] with chosen protocol versions and ALPN protocols.
pub fn client_config_with(
    ca_pem: &str,
    versions: &[&'static SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> Arc<ClientConfig> {
    client_config_for(
        ca_pem,
        rustls::crypto::aws_lc_rs::default_provider(),
        versions,
        alpn,
    )
}

/// Like [`client_config_with`] with a chosen provider: other key-exchange
/// groups or cipher suites, in the client's own order of preference.
pub fn client_config_for(
    ca_pem: &str,
    provider: rustls::crypto::CryptoProvider,
    versions: &[&'static SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(cert.expect("CA PEM parses"))
            .expect("CA certificate is acceptable");
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .expect("protocol versions supported by the provider")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// One parsed HTTP/1.1 response.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Header fields in arrival order, names as sent.
    pub headers: Vec<(String, String)>,
    /// Body with any chunked encoding removed.
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as (lossy) UTF-8.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON; panics with the body when it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }
}

/// A TLS connection to tern speaking HTTP/1.1 by hand.
pub struct HttpConn {
    tls: StreamOwned<ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

impl HttpConn {
    /// Connects to `addr`, sends SNI `server_name`, and completes the handshake.
    pub fn connect(
        addr: SocketAddr,
        server_name: &str,
        config: Arc<ClientConfig>,
    ) -> io::Result<HttpConn> {
        let tcp = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        HttpConn::over(tcp, server_name, config)
    }

    /// Like [`HttpConn::connect`], from the local address `source` (e.g.
    /// 127.0.0.2: a second client on loopback).
    pub fn connect_from(
        source: std::net::IpAddr,
        addr: SocketAddr,
        server_name: &str,
        config: Arc<ClientConfig>,
    ) -> io::Result<HttpConn> {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            None,
        )?;
        socket.bind(&SocketAddr::new(source, 0).into())?;
        socket.connect_timeout(&addr.into(), IO_TIMEOUT)?;
        HttpConn::over(socket.into(), server_name, config)
    }

    /// The TLS handshake over a connected `tcp`.
    fn over(tcp: TcpStream, server_name: &str, config: Arc<ClientConfig>) -> io::Result<HttpConn> {
        tcp.set_nodelay(true)?;
        tcp.set_read_timeout(Some(IO_TIMEOUT))?;
        tcp.set_write_timeout(Some(IO_TIMEOUT))?;
        let name = ServerName::try_from(server_name.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
        let mut tls = StreamOwned::new(conn, tcp);
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock)?;
        }
        Ok(HttpConn {
            tls,
            buf: Vec::new(),
        })
    }

    /// The rustls connection: negotiated version, cipher, group, peer certificates.
    pub fn tls(&self) -> &ClientConnection {
        &self.tls.conn
    }

    /// This client's address, as tern should log it.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tls.sock.local_addr()
    }

    /// Changes how long reads wait.
    pub fn set_read_timeout(&self, timeout: Duration) -> io::Result<()> {
        self.tls.sock.set_read_timeout(Some(timeout))
    }

    /// Writes `bytes` as they are and flushes them.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.tls.write_all(bytes)?;
        self.tls.flush()
    }

    /// Sends `GET path` for `host` and reads the response.
    pub fn get(&mut self, host: &str, path: &str) -> io::Result<Response> {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
            .map_err(as_closed)?;
        self.read_response(false)
    }

    /// Reads the next response (an interim 1xx counts as one).
    /// `head_request` says the request was HEAD, so no body follows.
    pub fn read_response(&mut self, head_request: bool) -> io::Result<Response> {
        let head_end = loop {
            if let Some(pos) = find(&self.buf, b"\r\n\r\n") {
                break pos + 4;
            }
            let n = match self.fill() {
                Ok(n) => n,
                Err(e) if self.buf.is_empty() => return Err(as_closed(e)),
                Err(e) => return Err(e),
            };
            if n == 0 && self.buf.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    ClosedBeforeResponse,
                ));
            }
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "connection closed before a full response head; got {:?}",
                        String::from_utf8_lossy(&self.buf)
                    ),
                ));
            }
        };
        let head: Vec<u8> = self.buf.drain(..head_end).collect();
        let (status, headers) = parse_head(&head)?;
        let mut response = Response {
            status,
            headers,
            body: Vec::new(),
        };
        let bodiless =
            head_request || (100..200).contains(&status) || status == 204 || status == 304;
        if bodiless {
            return Ok(response);
        }
        let chunked = response
            .header("transfer-encoding")
            .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
        if chunked {
            response.body = self.read_chunked()?;
        } else if let Some(len) = response.header("content-length") {
            let len: usize = len.trim().parse().map_err(|_| bad("bad Content-Length"))?;
            response.body = self.read_exact_body(len)?;
        } else {
            response.body = self.read_to_close()?;
        }
        Ok(response)
    }

    /// Reads until the peer closes (close_notify, FIN or reset) and returns
    /// everything not yet consumed. Read errors end the read; a timeout is an error.
    pub fn read_to_close(&mut self) -> io::Result<Vec<u8>> {
        loop {
            match self.fill() {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if is_close(&e) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(std::mem::take(&mut self.buf))
    }

    /// Reads at least `n` unconsumed bytes (or until close) and returns them all.
    pub fn read_at_least(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            if self.fill()? == 0 {
                break;
            }
        }
        Ok(std::mem::take(&mut self.buf))
    }

    /// True when the peer has closed the connection (reads return EOF or reset)
    /// within `timeout`; false when the connection is still open.
    pub fn closed_within(&mut self, timeout: Duration) -> bool {
        if self.set_read_timeout(timeout).is_err() {
            return true;
        }
        loop {
            match self.fill() {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if is_close(&e) => return true,
                Err(_) => return false,
            }
        }
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.tls.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    fn read_exact_body(&mut self, len: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < len {
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("body ended after {} of {len} bytes", self.buf.len()),
                ));
            }
        }
        Ok(self.buf.drain(..len).collect())
    }

    fn read_line(&mut self) -> io::Result<Vec<u8>> {
        loop {
            if let Some(pos) = find(&self.buf, b"\r\n") {
                let mut line: Vec<u8> = self.buf.drain(..pos + 2).collect();
                line.truncate(pos);
                return Ok(line);
            }
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "chunked body cut",
                ));
            }
        }
    }

    fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line()?;
            let text = String::from_utf8_lossy(&line);
            let size_text = text.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| bad(&format!("bad chunk size line {text:?}")))?;
            if size == 0 {
                // Trailers, then the empty line.
                while !self.read_line()?.is_empty() {}
                return Ok(body);
            }
            body.extend(self.read_exact_body(size)?);
            if !self.read_line()?.is_empty() {
                return Err(bad("chunk not followed by CRLF"));
            }
        }
    }
}

/// Connects, sends one GET and returns the response (a fresh connection each call).
pub fn get(
    addr: SocketAddr,
    server_name: &str,
    config: Arc<ClientConfig>,
    path: &str,
) -> io::Result<Response> {
    let mut conn = HttpConn::connect(addr, server_name, config)?;
    conn.get(server_name, path)
}

/// What [`count_response_records`] saw.
#[derive(Debug)]
pub struct RecordCount {
    /// TLS application-data records that carried bytes of the response.
    pub data_records: usize,
    /// The decrypted response bytes.
    pub plaintext: Vec<u8>,
}

/// Sends `request` over a fresh connection and counts the TLS records that
/// carry the (Content-Length framed) response, reading the raw TCP stream and
/// handing rustls one record at a time. Records that decrypt to nothing (TLS 1.3
/// session tickets, key updates) are not counted.
pub fn count_response_records(
    addr: SocketAddr,
    server_name: &str,
    config: Arc<ClientConfig>,
    request: &[u8],
) -> io::Result<RecordCount> {
    let mut tcp = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(IO_TIMEOUT))?;
    let name = ServerName::try_from(server_name.to_string())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp)?;
    }
    // Anything rustls already buffered past the handshake would escape the count.
    let mut plaintext = Vec::new();
    drain_plaintext(&mut conn, &mut plaintext)?;
    let already = plaintext.len();
    conn.writer().write_all(request)?;
    while conn.wants_write() {
        conn.write_tls(&mut tcp)?;
    }

    let mut raw = Vec::new();
    let mut data_records = 0;
    let mut chunk = [0u8; 16 * 1024];
    while !response_complete(&plaintext[already..]) {
        // Split off whole records: 1 byte type, 2 bytes version, 2 bytes length.
        while raw.len() >= 5 {
            let len = u16::from_be_bytes([raw[3], raw[4]]) as usize;
            if raw.len() < 5 + len {
                break;
            }
            let record: Vec<u8> = raw.drain(..5 + len).collect();
            let mut slice = &record[..];
            while !slice.is_empty() {
                conn.read_tls(&mut slice)?;
            }
            conn.process_new_packets().map_err(io::Error::other)?;
            let before = plaintext.len();
            drain_plaintext(&mut conn, &mut plaintext)?;
            if plaintext.len() > before {
                data_records += 1;
            }
        }
        if response_complete(&plaintext[already..]) {
            break;
        }
        let n = tcp.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed before the response was complete",
            ));
        }
        raw.extend_from_slice(&chunk[..n]);
    }
    Ok(RecordCount {
        data_records,
        plaintext: plaintext.split_off(already),
    })
}

/// What the first read after sending a ClientHello brought.
#[derive(Debug)]
pub struct FirstFlight {
    /// Bytes in that first read.
    pub bytes: usize,
    /// Whether those bytes alone completed the server's handshake flight
    /// (the client could answer without reading again).
    pub complete: bool,
}

/// Sends a ClientHello and reads once, as soon as anything arrives. A server
/// that writes its whole flight at once (DESIGN.md) completes it in that read;
/// one that writes it in pieces with TCP_NODELAY usually does not.
pub fn first_flight(
    addr: SocketAddr,
    server_name: &str,
    config: Arc<ClientConfig>,
) -> io::Result<FirstFlight> {
    let mut tcp = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(IO_TIMEOUT))?;
    let name = ServerName::try_from(server_name.to_string())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
    while conn.wants_write() {
        conn.write_tls(&mut tcp)?;
    }
    let mut chunk = vec![0u8; 64 * 1024];
    let n = tcp.read(&mut chunk)?;
    let mut slice = &chunk[..n];
    while !slice.is_empty() {
        conn.read_tls(&mut slice)?;
        conn.process_new_packets().map_err(io::Error::other)?;
    }
    Ok(FirstFlight {
        bytes: n,
        complete: match conn.protocol_version() {
            // The server's Finished ends its flight; the client is done too.
            Some(rustls::ProtocolVersion::TLSv1_3) => !conn.is_handshaking(),
            // After ServerHelloDone the client has its ClientKeyExchange ready.
            // (Not a TLS 1.3 test: there the middlebox-compatibility CCS makes
            // the client want to write right after ServerHello.)
            Some(_) => conn.wants_write(),
            None => false,
        },
    })
}

fn drain_plaintext(conn: &mut ClientConnection, out: &mut Vec<u8>) -> io::Result<()> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match conn.reader().read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// True when `bytes` hold a whole response framed by Content-Length.
fn response_complete(bytes: &[u8]) -> bool {
    let Some(pos) = find(bytes, b"\r\n\r\n") else {
        return false;
    };
    let Ok((_, headers)) = parse_head(&bytes[..pos + 4]) else {
        return false;
    };
    let len = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    bytes.len() >= pos + 4 + len
}

fn parse_head(head: &[u8]) -> io::Result<(u16, Vec<(String, String)>)> {
    let text = std::str::from_utf8(head).map_err(|_| bad("response head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(bad(&format!("bad status line {status_line:?}")));
    }
    let status: u16 = parts
        .next()
        .unwrap_or("")
        .parse()
        .map_err(|_| bad(&format!("bad status line {status_line:?}")))?;
    let mut headers = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| bad(&format!("bad header line {line:?}")))?;
        headers.push((name.to_string(), value.trim().to_string()));
    }
    Ok((status, headers))
}

/// Position of `needle` in `haystack`.
pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn bad(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

fn is_close(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}
