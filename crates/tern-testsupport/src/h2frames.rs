//! HTTP/2 written frame by frame (RFC 9113), for the clients a real library
//! refuses to be: floods of HEADERS+RST_STREAM, endless CONTINUATION,
//! oversized header lists, readers that never open their window.
//!
//! Header blocks are HPACK literals without indexing and without Huffman
//! coding (RFC 7541 section 6.2.2), so the bytes on the wire are exactly the
//! fields the test chose, and nothing depends on a dynamic table.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

/// The client connection preface.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types.
pub mod kind {
    /// DATA
    pub const DATA: u8 = 0x0;
    /// HEADERS
    pub const HEADERS: u8 = 0x1;
    /// RST_STREAM
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS
    pub const SETTINGS: u8 = 0x4;
    /// PING
    pub const PING: u8 = 0x6;
    /// GOAWAY
    pub const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags.
pub mod flag {
    /// END_STREAM (DATA, HEADERS)
    pub const END_STREAM: u8 = 0x1;
    /// ACK (SETTINGS, PING)
    pub const ACK: u8 = 0x1;
    /// END_HEADERS (HEADERS, CONTINUATION)
    pub const END_HEADERS: u8 = 0x4;
}

/// SETTINGS identifiers.
pub mod setting {
    /// SETTINGS_HEADER_TABLE_SIZE
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_MAX_CONCURRENT_STREAMS
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_HEADER_LIST_SIZE
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// Error codes (RST_STREAM, GOAWAY).
pub mod code {
    /// NO_ERROR
    pub const NO_ERROR: u32 = 0x0;
    /// PROTOCOL_ERROR
    pub const PROTOCOL_ERROR: u32 = 0x1;
    /// CANCEL
    pub const CANCEL: u32 = 0x8;
    /// REFUSED_STREAM
    pub const REFUSED_STREAM: u32 = 0x7;
    /// COMPRESSION_ERROR
    pub const COMPRESSION_ERROR: u32 = 0x9;
    /// ENHANCE_YOUR_CALM
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;
}

/// One frame as received.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier (reserved bit cleared).
    pub stream: u32,
    /// Payload.
    pub payload: Vec<u8>,
}

impl Frame {
    /// The parameters of a SETTINGS frame, in order.
    pub fn settings(&self) -> Vec<(u16, u32)> {
        self.payload
            .chunks_exact(6)
            .map(|p| {
                (
                    u16::from_be_bytes([p[0], p[1]]),
                    u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
                )
            })
            .collect()
    }

    /// `(last stream id, error code)` of a GOAWAY frame.
    pub fn goaway(&self) -> Option<(u32, u32)> {
        if self.kind != kind::GOAWAY || self.payload.len() < 8 {
            return None;
        }
        let p = &self.payload;
        Some((
            u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff,
            u32::from_be_bytes([p[4], p[5], p[6], p[7]]),
        ))
    }

    /// The error code of a RST_STREAM frame.
    pub fn rst_code(&self) -> Option<u32> {
        if self.kind != kind::RST_STREAM || self.payload.len() != 4 {
            return None;
        }
        let p = &self.payload;
        Some(u32::from_be_bytes([p[0], p[1], p[2], p[3]]))
    }
}

/// The bytes of one frame.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    assert!(len < 1 << 24, "frame payload of {len} bytes");
    let mut out = Vec::with_capacity(9 + len);
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A SETTINGS frame with `params`.
pub fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(params.len() * 6);
    for (id, value) in params {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    frame(kind::SETTINGS, 0, 0, &payload)
}

/// A RST_STREAM frame.
pub fn rst_stream(stream: u32, error_code: u32) -> Vec<u8> {
    frame(kind::RST_STREAM, 0, stream, &error_code.to_be_bytes())
}

/// An HPACK header block of literal fields (no indexing, no Huffman).
#[derive(Debug, Clone, Default)]
pub struct HeaderBlock {
    bytes: Vec<u8>,
}

impl HeaderBlock {
    /// An empty block.
    pub fn new() -> HeaderBlock {
        HeaderBlock::default()
    }

    /// The pseudo-header fields of an https request for authority `localhost`.
    pub fn request(method: &str, path: &str) -> HeaderBlock {
        let mut block = HeaderBlock::new();
        block
            .field(":method", method.as_bytes())
            .field(":scheme", b"https")
            .field(":authority", b"localhost")
            .field(":path", path.as_bytes());
        block
    }

    /// Appends a dynamic table size update (RFC 7541 section 6.3); valid
    /// only at the start of a block.
    pub fn table_size_update(&mut self, size: usize) -> &mut Self {
        hpack_int(&mut self.bytes, 0x20, 5, size);
        self
    }

    /// Appends `name: value` as a literal without indexing, new name.
    pub fn field(&mut self, name: &str, value: &[u8]) -> &mut Self {
        self.bytes.push(0x00);
        hpack_int(&mut self.bytes, 0, 7, name.len());
        self.bytes.extend_from_slice(name.as_bytes());
        hpack_int(&mut self.bytes, 0, 7, value.len());
        self.bytes.extend_from_slice(value);
        self
    }

    /// The encoded block.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// HEADERS (+ CONTINUATION frames of at most 16 KiB, the default
    /// SETTINGS_MAX_FRAME_SIZE) carrying this block on `stream`.
    pub fn frames(&self, stream: u32, end_stream: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes.len() + 64);
        let pieces: Vec<&[u8]> = if self.bytes.is_empty() {
            vec![&[]]
        } else {
            self.bytes.chunks(16 * 1024).collect()
        };
        let last = pieces.len() - 1;
        for (i, piece) in pieces.into_iter().enumerate() {
            let mut flags = if i == last { flag::END_HEADERS } else { 0 };
            let kind = if i == 0 {
                if end_stream {
                    flags |= flag::END_STREAM;
                }
                kind::HEADERS
            } else {
                kind::CONTINUATION
            };
            out.extend_from_slice(&frame(kind, flags, stream, piece));
        }
        out
    }
}

/// HPACK integer with an `prefix_bits`-bit prefix (RFC 7541 section 5.1),
/// `first` holding the bits above the prefix.
fn hpack_int(out: &mut Vec<u8>, first: u8, prefix_bits: u32, mut value: usize) {
    let max = (1usize << prefix_bits) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

/// How a connection ended, as seen by a client that stopped sending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// A GOAWAY arrived (last stream id, error code); the connection may or
    /// may not have closed after it within the wait.
    GoAway {
        /// Last stream id the server processed.
        last_stream: u32,
        /// Error code.
        code: u32,
        /// Whether the transport closed after it within the wait.
        closed: bool,
    },
    /// The transport closed (EOF or reset) without a GOAWAY.
    Closed,
    /// Still open when the wait ended.
    StillOpen,
}

/// Reads frames from a TLS connection.
pub struct FrameReader {
    io: ReadHalf<TlsStream<TcpStream>>,
    buf: Vec<u8>,
}

/// Writes raw bytes to a TLS connection.
pub struct FrameWriter {
    io: WriteHalf<TlsStream<TcpStream>>,
}

/// Connects over TLS with ALPN h2, sends the preface and `client_settings`,
/// reads the server's SETTINGS and acknowledges them.
///
/// Returns the server's SETTINGS parameters and the two halves.
pub async fn handshake(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
    client_settings: &[(u16, u32)],
) -> io::Result<(Vec<(u16, u32)>, FrameReader, FrameWriter)> {
    let tls = crate::h2client::tls_connect(addr, config).await?;
    let (read, write) = tokio::io::split(tls);
    let mut reader = FrameReader {
        io: read,
        buf: Vec::with_capacity(64 * 1024),
    };
    let mut writer = FrameWriter { io: write };
    let mut hello = PREFACE.to_vec();
    hello.extend_from_slice(&settings(client_settings));
    writer.write(&hello).await?;
    let deadline = Instant::now() + crate::h2client::IO_TIMEOUT;
    let server_settings = loop {
        match reader.next_until(deadline).await? {
            Some(f) if f.kind == kind::SETTINGS && f.flags & flag::ACK == 0 => break f.settings(),
            Some(_) => continue,
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "closed before SETTINGS",
                ))
            }
        }
    };
    writer
        .write(&frame(kind::SETTINGS, flag::ACK, 0, &[]))
        .await?;
    Ok((server_settings, reader, writer))
}

impl FrameWriter {
    /// Writes `bytes` (any number of frames) and flushes.
    pub async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.io.write_all(bytes).await?;
        self.io.flush().await
    }
}

impl FrameReader {
    /// The next frame; `None` at a clean close. Times out at `deadline`
    /// with `ErrorKind::TimedOut`.
    pub async fn next_until(&mut self, deadline: Instant) -> io::Result<Option<Frame>> {
        loop {
            if self.buf.len() >= 9 {
                let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
                if self.buf.len() >= 9 + len {
                    let f = Frame {
                        kind: self.buf[3],
                        flags: self.buf[4],
                        stream: u32::from_be_bytes([
                            self.buf[5],
                            self.buf[6],
                            self.buf[7],
                            self.buf[8],
                        ]) & 0x7fff_ffff,
                        payload: self.buf[9..9 + len].to_vec(),
                    };
                    self.buf.drain(..9 + len);
                    return Ok(Some(f));
                }
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = match tokio::time::timeout_at(deadline, self.io.read(&mut chunk)).await {
                Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "no frame in time")),
                Ok(r) => r?,
            };
            if n == 0 {
                return Ok(None);
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The next frame on `stream` that answers it (HEADERS, DATA or
    /// RST_STREAM), or a GOAWAY; other frames are skipped.
    pub async fn next_on_stream(&mut self, stream: u32, within: Duration) -> io::Result<Frame> {
        let deadline = Instant::now() + within;
        loop {
            match self.next_until(deadline).await? {
                Some(f) if f.stream == stream || f.kind == kind::GOAWAY => return Ok(f),
                Some(_) => continue,
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("closed before an answer on stream {stream}"),
                    ))
                }
            }
        }
    }

    /// Reads (and drops) frames until a GOAWAY, then waits for the close,
    /// all within `within`.
    pub async fn ending(&mut self, within: Duration) -> Ending {
        let deadline = Instant::now() + within;
        let mut goaway = None;
        loop {
            match self.next_until(deadline).await {
                Ok(Some(f)) => {
                    if let Some((last_stream, code)) = f.goaway() {
                        goaway = Some((last_stream, code));
                    }
                }
                Ok(None) | Err(_) if Instant::now() < deadline => {
                    return match goaway {
                        Some((last_stream, code)) => Ending::GoAway {
                            last_stream,
                            code,
                            closed: true,
                        },
                        None => Ending::Closed,
                    };
                }
                Ok(None) | Err(_) => {
                    return match goaway {
                        Some((last_stream, code)) => Ending::GoAway {
                            last_stream,
                            code,
                            closed: false,
                        },
                        None => Ending::StillOpen,
                    };
                }
            }
        }
    }
}
