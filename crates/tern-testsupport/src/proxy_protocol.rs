//! Both ends of the PROXY protocol around tern:
//!
//! - in front of tern, a client that writes a PROXY header (v1 text, v2
//!   binary, or any raw bytes) and then speaks TLS, as an L4 balancer would
//!   ([`get_after_header`], [`refused_after_header`]);
//! - behind tern, a backend that parses the v2 header tern sends in TCP mode
//!   with the `ppp` crate and reports its addresses and TLVs ([`PpBackend`]).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

use crate::client::{find, Response, IO_TIMEOUT};

/// A v1 header for a TCP connection from `src` to `dst` (same family).
pub fn v1_header(src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
    let family = if src.is_ipv4() { "TCP4" } else { "TCP6" };
    format!(
        "PROXY {family} {} {} {} {}\r\n",
        src.ip(),
        dst.ip(),
        src.port(),
        dst.port()
    )
    .into_bytes()
}

/// A v2 PROXY header (no TLVs) for a TCP connection from `src` to `dst`.
pub fn v2_header(src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
    ppp::v2::Builder::with_addresses(
        ppp::v2::Version::Two | ppp::v2::Command::Proxy,
        ppp::v2::Protocol::Stream,
        (src, dst),
    )
    .build()
    .expect("a v2 header with two addresses builds")
}

/// Connects to `addr`, writes `header` as it is, does a TLS handshake for
/// `server_name`, sends `GET path` with `Connection: close` and reads the
/// response to the end.
pub fn get_after_header(
    addr: SocketAddr,
    header: &[u8],
    server_name: &str,
    config: Arc<ClientConfig>,
    path: &str,
) -> io::Result<Response> {
    let mut tls = tls_after_header(addr, header, server_name, config)?;
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {server_name}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )?;
    tls.flush()?;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match tls.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            // A close without close_notify after a whole response is fine.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && !raw.is_empty() => break,
            Err(e) => return Err(e),
        }
    }
    parse_response(&raw)
}

/// Writes `header` and tries a TLS handshake; true when tern closed the
/// connection (or failed the handshake) instead of completing it.
pub fn refused_after_header(
    addr: SocketAddr,
    header: &[u8],
    server_name: &str,
    config: Arc<ClientConfig>,
) -> bool {
    tls_after_header(addr, header, server_name, config).is_err()
}

fn tls_after_header(
    addr: SocketAddr,
    header: &[u8],
    server_name: &str,
    config: Arc<ClientConfig>,
) -> io::Result<StreamOwned<ClientConnection, TcpStream>> {
    let mut tcp = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(IO_TIMEOUT))?;
    tcp.set_write_timeout(Some(IO_TIMEOUT))?;
    tcp.write_all(header)?;
    let name = ServerName::try_from(server_name.to_string())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
    let mut tls = StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        // An EOF before the handshake ends is an UnexpectedEof error.
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Ok(tls)
}

/// A whole `Connection: close` response: head, then a body delimited by
/// Content-Length or by the close.
fn parse_response(raw: &[u8]) -> io::Result<Response> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_string());
    let end = find(raw, b"\r\n\r\n").ok_or_else(|| bad("no complete response head"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| bad("head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("bad status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_string(), v.trim().to_string()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok());
    if let Some(length) = length {
        if body.len() < length {
            return Err(bad("body shorter than Content-Length"));
        }
        body.truncate(length);
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// What a [`PpBackend`] read from one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenHeader {
    /// Source address in the header (the client as tern saw it).
    pub source: SocketAddr,
    /// Destination address in the header (tern's listener).
    pub destination: SocketAddr,
    /// `PP2_TYPE_ALPN` value, if present.
    pub alpn: Option<Vec<u8>>,
    /// `PP2_TYPE_AUTHORITY` (SNI) value, if present.
    pub authority: Option<Vec<u8>>,
    /// `PP2_TYPE_SSL` value (client flags, verify result, sub-TLVs), if present.
    pub ssl: Option<Vec<u8>>,
    /// Bytes that followed the header in the same connection, up to the
    /// first `\n` (the client's payload).
    pub payload_line: Vec<u8>,
}

/// A backend that expects a PROXY v2 header on each connection, parses it
/// with `ppp`, reports it, reads one line of payload and answers
/// `pong <source>\n`. Stops on drop (after its next accept).
pub struct PpBackend {
    addr: SocketAddr,
    seen: mpsc::Receiver<Result<SeenHeader, String>>,
    _thread: JoinHandle<()>,
}

impl PpBackend {
    /// Starts on a free port of 127.0.0.1.
    pub fn start() -> PpBackend {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the PROXY v2 backend");
        let addr = listener.local_addr().expect("backend address");
        let (tx, seen) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let report = serve_one(stream);
                if tx.send(report).is_err() {
                    return;
                }
            }
        });
        PpBackend {
            addr,
            seen,
            _thread: thread,
        }
    }

    /// Where the backend listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The next connection's header, waiting up to `timeout`.
    pub fn next_header(&self, timeout: Duration) -> Result<SeenHeader, String> {
        self.seen
            .recv_timeout(timeout)
            .map_err(|e| format!("no connection reached the backend: {e}"))?
    }
}

fn serve_one(mut stream: TcpStream) -> Result<SeenHeader, String> {
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    // Fixed part: 12-byte signature, version/command, family, 2-byte length.
    let mut fixed = [0u8; 16];
    stream
        .read_exact(&mut fixed)
        .map_err(|e| format!("reading the v2 header: {e}"))?;
    let len = usize::from(u16::from_be_bytes([fixed[14], fixed[15]]));
    let mut header = fixed.to_vec();
    header.resize(16 + len, 0);
    stream
        .read_exact(&mut header[16..])
        .map_err(|e| format!("reading the v2 addresses and TLVs: {e}"))?;
    let parsed = ppp::v2::Header::try_from(&header[..])
        .map_err(|e| format!("ppp refuses the header {header:02x?}: {e}"))?;
    let (source, destination) = match parsed.addresses {
        ppp::v2::Addresses::IPv4(a) => (
            SocketAddr::from((a.source_address, a.source_port)),
            SocketAddr::from((a.destination_address, a.destination_port)),
        ),
        ppp::v2::Addresses::IPv6(a) => (
            SocketAddr::from((a.source_address, a.source_port)),
            SocketAddr::from((a.destination_address, a.destination_port)),
        ),
        other => return Err(format!("unexpected addresses {other:?}")),
    };
    let mut alpn = None;
    let mut authority = None;
    let mut ssl = None;
    for tlv in parsed.tlvs() {
        let tlv = tlv.map_err(|e| format!("bad TLV: {e}"))?;
        if tlv.kind == u8::from(ppp::v2::Type::ALPN) {
            alpn = Some(tlv.value.to_vec());
        } else if tlv.kind == u8::from(ppp::v2::Type::Authority) {
            authority = Some(tlv.value.to_vec());
        } else if tlv.kind == u8::from(ppp::v2::Type::SSL) {
            ssl = Some(tlv.value.to_vec());
        }
    }
    let mut payload_line = Vec::new();
    let mut byte = [0u8; 1];
    while payload_line.len() < 1024 {
        match stream.read(&mut byte) {
            Ok(1) if byte[0] == b'\n' => break,
            Ok(1) => payload_line.push(byte[0]),
            _ => break,
        }
    }
    let _ = stream.write_all(format!("pong {source}\n").as_bytes());
    Ok(SeenHeader {
        source,
        destination,
        alpn,
        authority,
        ssl,
        payload_line,
    })
}
