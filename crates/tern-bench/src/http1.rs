//! HTTP/1.1 client side: the request is encoded once and written in one
//! write per request; responses are parsed with httparse from a reused
//! buffer and their bodies counted, not kept.

use std::io;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::BenchConfig;
use crate::conn::Stream;
use crate::error::RequestError;
use crate::mix::BodyFinder;
use crate::target::Target;

/// Read buffer per connection. Response heads must fit in it.
const READ_BUFFER: usize = 64 * 1024;
/// Most response headers parsed.
const MAX_HEADERS: usize = 100;
/// Longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4096;

/// The request bytes for one target, built once.
#[derive(Debug, Clone)]
pub struct RequestBytes {
    /// Head and body, ready to write.
    pub bytes: Vec<u8>,
    /// HEAD requests get no body back.
    pub head_only: bool,
}

/// The headers every request carries, in order, after defaults are merged
/// with the user's `-H` (the user's value wins). Shared by h1 and h2.
pub fn request_headers(config: &BenchConfig, target: &Target) -> Vec<(String, String)> {
    let user_has = |name: &str| {
        config
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    let mut out = Vec::new();
    if !user_has("host") {
        let host = config
            .host_header
            .clone()
            .unwrap_or_else(|| target.authority());
        out.push(("Host".to_string(), host));
    }
    if !user_has("user-agent") {
        out.push((
            "User-Agent".to_string(),
            format!("tern-bench/{}", env!("CARGO_PKG_VERSION")),
        ));
    }
    if config.accept_compression && !user_has("accept-encoding") {
        out.push(("Accept-Encoding".to_string(), "gzip".to_string()));
    }
    out.extend(config.headers.iter().cloned());
    out
}

/// The `Authorization: Basic` header for `user:password` (hey `-a`).
pub fn basic_auth(user_password: &str) -> (String, String) {
    use base64::Engine;
    let token = base64::engine::general_purpose::STANDARD.encode(user_password);
    ("Authorization".to_string(), format!("Basic {token}"))
}

impl RequestBytes {
    /// Encodes the request for `target`. With a connection per request, the
    /// request says `Connection: close` (as Go's client, hence hey, does).
    pub fn new(config: &BenchConfig, target: &Target) -> RequestBytes {
        let mut head = format!("{} {} HTTP/1.1\r\n", config.method, target.path);
        for (name, value) in request_headers(config, target) {
            head.push_str(&name);
            head.push_str(": ");
            head.push_str(&value);
            head.push_str("\r\n");
        }
        let has = |name: &str| {
            config
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        if !config.body.is_empty() && !has("content-length") {
            head.push_str(&format!("Content-Length: {}\r\n", config.body.len()));
        }
        if config.plan.connection_per_request() && !has("connection") {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&config.body);
        RequestBytes {
            bytes,
            head_only: config.method.eq_ignore_ascii_case("HEAD"),
        }
    }
}

/// What one exchange gave.
#[derive(Debug, Clone, Copy)]
pub struct Exchange {
    /// Status code.
    pub status: u16,
    /// Body bytes (after de-chunking).
    pub body_bytes: u64,
    /// Request written to first response byte.
    pub ttfb: Duration,
    /// First response byte to end of body.
    pub body: Duration,
    /// The connection can carry another request.
    pub reusable: bool,
    /// When the response was complete.
    pub done: Instant,
    /// The body contained the checked bytes (true when none are checked).
    pub body_found: bool,
}

/// An HTTP/1.1 connection with its read buffer.
pub struct H1Conn {
    stream: Stream,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// The body check of the request in flight.
    finder: Option<BodyFinder>,
}

enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
}

impl H1Conn {
    /// Wraps an established stream, reusing `buffer` from an earlier
    /// connection when given (a connection per request would otherwise
    /// allocate and zero 64 KiB per request).
    pub fn new(stream: Stream, buffer: Option<Box<[u8]>>) -> H1Conn {
        H1Conn {
            stream,
            buf: buffer.unwrap_or_else(|| vec![0u8; READ_BUFFER].into_boxed_slice()),
            start: 0,
            end: 0,
            finder: None,
        }
    }

    /// Gives the read buffer back for the next connection.
    pub fn into_buffer(self) -> Box<[u8]> {
        self.buf
    }

    /// Sends the request in one write and reads the whole response;
    /// `expect_body` is looked for in the body as it passes.
    pub async fn exchange(
        &mut self,
        req: &RequestBytes,
        expect_body: Option<&[u8]>,
    ) -> Result<Exchange, RequestError> {
        self.start = 0;
        self.end = 0;
        self.finder = expect_body.map(BodyFinder::new);
        self.stream.write_all(&req.bytes).await.map_err(io_error)?;
        self.stream.flush().await.map_err(io_error)?;
        let written = Instant::now();
        if self.read_more().await? == 0 {
            return Err(RequestError::Closed);
        }
        let first_byte = Instant::now();
        let (status, framing, keep_alive) = loop {
            let head = self.parse_head(req.head_only)?;
            match head {
                Some((status, _, _)) if (100..200).contains(&status) && status != 101 => continue,
                Some(h) => break h,
                None => {
                    if self.read_more().await? == 0 {
                        return Err(RequestError::Closed);
                    }
                }
            }
        };
        let (body_bytes, reusable) = match framing {
            Framing::Length(n) => {
                self.consume(n).await?;
                (n, keep_alive)
            }
            Framing::Chunked => (self.read_chunked().await?, keep_alive),
            Framing::UntilClose => (self.read_to_close().await?, false),
        };
        let done = Instant::now();
        Ok(Exchange {
            status,
            body_bytes,
            ttfb: first_byte - written,
            body: done - first_byte,
            reusable,
            done,
            body_found: self.finder.take().is_none_or(|f| f.found()),
        })
    }

    /// Parses a head from the buffer; `None` when more bytes are needed.
    fn parse_head(
        &mut self,
        head_only: bool,
    ) -> Result<Option<(u16, Framing, bool)>, RequestError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let len = match resp.parse(&self.buf[self.start..self.end]) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(not_http(&self.buf[self.start..self.end], e)),
        };
        let status = resp.code.unwrap_or(0);
        let mut keep_alive = resp.version == Some(1);
        let mut length = None;
        let mut chunked = false;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let n = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .ok_or_else(|| RequestError::Http("bad Content-Length".into()))?;
                if length.is_some_and(|l| l != n) {
                    return Err(RequestError::Http("conflicting Content-Length".into()));
                }
                length = Some(n);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = h
                    .value
                    .rsplit(|&b| b == b',')
                    .next()
                    .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|&b| b == b',') {
                    let token = token.trim_ascii();
                    if token.eq_ignore_ascii_case(b"close") {
                        keep_alive = false;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        keep_alive = true;
                    }
                }
            }
        }
        self.start += len;
        let no_body = head_only || status == 204 || status == 304 || (100..200).contains(&status);
        let framing = if no_body {
            Framing::Length(0)
        } else if chunked {
            Framing::Chunked
        } else if let Some(n) = length {
            Framing::Length(n)
        } else {
            Framing::UntilClose
        };
        Ok(Some((status, framing, keep_alive)))
    }

    /// Reads more bytes after `end`; returns how many (0 at EOF).
    async fn read_more(&mut self) -> Result<usize, RequestError> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            return Err(RequestError::Http(
                "response head larger than the read buffer".into(),
            ));
        }
        let n = self
            .stream
            .read(&mut self.buf[self.end..])
            .await
            .map_err(io_error)?;
        self.end += n;
        Ok(n)
    }

    /// Skips `n` body bytes.
    async fn consume(&mut self, mut n: u64) -> Result<(), RequestError> {
        loop {
            let take = ((self.end - self.start) as u64).min(n);
            if let Some(f) = &mut self.finder {
                f.feed(&self.buf[self.start..self.start + take as usize]);
            }
            self.start += take as usize;
            n -= take;
            if n == 0 {
                return Ok(());
            }
            if self.read_more().await? == 0 {
                return Err(RequestError::Closed);
            }
        }
    }

    /// Reads one CRLF-terminated line; returns (start, end) of its content.
    async fn line(&mut self) -> Result<(usize, usize), RequestError> {
        loop {
            if let Some(i) = self.buf[self.start..self.end]
                .windows(2)
                .position(|w| w == b"\r\n")
            {
                let line = (self.start, self.start + i);
                self.start += i + 2;
                return Ok(line);
            }
            if self.end - self.start > MAX_LINE {
                return Err(RequestError::Http("chunk line too long".into()));
            }
            if self.read_more().await? == 0 {
                return Err(RequestError::Closed);
            }
        }
    }

    async fn read_chunked(&mut self) -> Result<u64, RequestError> {
        let mut total = 0u64;
        loop {
            let (a, b) = self.line().await?;
            let size_field = self.buf[a..b]
                .split(|&c| c == b';')
                .next()
                .unwrap_or_default();
            let size = std::str::from_utf8(size_field)
                .ok()
                .and_then(|s| u64::from_str_radix(s.trim(), 16).ok())
                .ok_or_else(|| RequestError::Http("bad chunk size".into()))?;
            if size == 0 {
                // Trailers, up to the blank line.
                loop {
                    let (a, b) = self.line().await?;
                    if a == b {
                        return Ok(total);
                    }
                }
            }
            self.consume(size).await?;
            let (a, b) = self.line().await?;
            if a != b {
                return Err(RequestError::Http("chunk data longer than its size".into()));
            }
            total += size;
        }
    }

    async fn read_to_close(&mut self) -> Result<u64, RequestError> {
        let mut total = (self.end - self.start) as u64;
        if let Some(f) = &mut self.finder {
            f.feed(&self.buf[self.start..self.end]);
        }
        self.start = self.end;
        loop {
            match self.read_more().await {
                Ok(0) => return Ok(total),
                Ok(n) => {
                    total += n as u64;
                    if let Some(f) = &mut self.finder {
                        f.feed(&self.buf[self.start..self.end]);
                    }
                    self.start = self.end;
                }
                // A server that closes without close_notify ends the body too.
                Err(RequestError::Closed | RequestError::Io(_)) => return Ok(total),
                Err(e) => return Err(e),
            }
        }
    }
}

fn io_error(e: io::Error) -> RequestError {
    match e.kind() {
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe => RequestError::Closed,
        _ => RequestError::Io(e.kind().to_string()),
    }
}

/// The error for bytes that are not an HTTP/1.1 response head: a TLS
/// record means the URL said `http://` to a port that speaks TLS.
fn not_http(bytes: &[u8], e: httparse::Error) -> RequestError {
    crate::mismatch::tls_answer(bytes)
        .unwrap_or_else(|| RequestError::Http(format!("bad response head: {e}")))
}
