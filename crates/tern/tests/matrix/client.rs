//! One client interface over both front ends: a request is written once
//! and sent as HTTP/1.1 (the rustls client of tern-testsupport, bytes
//! written by hand) or as HTTP/2 (the `h2` crate client), and the response
//! comes back in one shape.

use std::net::SocketAddr;
use std::sync::Arc;

use tern_testsupport::client::{HttpConn, IO_TIMEOUT};
use tern_testsupport::h2client::bytes::Bytes;
use tern_testsupport::h2client::http::Request;
use tern_testsupport::h2client::{self, H2Client};
use tern_testsupport::rustls::ClientConfig;

/// The protocol between the client and tern (chosen by ALPN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    Http1,
    Http2,
}

/// A request body and how it is framed.
#[derive(Debug, Clone)]
pub enum ReqBody {
    None,
    /// Content-Length (HTTP/2: a `content-length` field), sent in one piece.
    Length(Vec<u8>),
    /// No length: HTTP/1.1 chunked coding with these chunks; HTTP/2 DATA
    /// frames with these pieces and no `content-length`.
    Chunked(Vec<Vec<u8>>),
}

/// A request to send on either front end.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: &'static str,
    /// HTTP/1.1 `Host`, HTTP/2 `:authority`: selects the backend group.
    pub host: &'static str,
    pub path: String,
    pub fields: Vec<(&'static str, &'static str)>,
    pub body: ReqBody,
}

impl Req {
    /// `method path` for `host` without fields or body.
    pub fn new(method: &'static str, host: &'static str, path: &str) -> Req {
        Req {
            method,
            host,
            path: path.to_string(),
            fields: Vec::new(),
            body: ReqBody::None,
        }
    }

    /// The same request with field `name: value` added.
    pub fn field(mut self, name: &'static str, value: &'static str) -> Req {
        self.fields.push((name, value));
        self
    }

    /// The same request with `body`.
    pub fn body(mut self, body: ReqBody) -> Req {
        self.body = body;
        self
    }
}

/// A response from either front end.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    /// Field names in lower case.
    pub fields: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    /// The first value of field `name` (lower case).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; panics with the response when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("response is not JSON ({e}): {self:?}"))
    }
}

/// One client connection to tern.
pub enum Conn {
    Http1(Box<HttpConn>),
    Http2 {
        /// Drives the client (its connection task runs inside `block_on`).
        runtime: tokio::runtime::Runtime,
        client: Box<H2Client>,
    },
}

impl Conn {
    /// Connects to `addr` with SNI `localhost`, trusting `config`'s roots;
    /// `config` must offer the ALPN protocol of `front`.
    pub fn open(front: Front, addr: SocketAddr, config: Arc<ClientConfig>) -> Result<Conn, String> {
        match front {
            Front::Http1 => HttpConn::connect(addr, "localhost", config)
                .map(|c| Conn::Http1(Box::new(c)))
                .map_err(|e| format!("TLS connect: {e}")),
            Front::Http2 => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("client runtime");
                let client = runtime
                    .block_on(H2Client::connect(addr, config))
                    .map_err(|e| format!("h2 connect: {e}"))?;
                Ok(Conn::Http2 {
                    runtime,
                    client: Box::new(client),
                })
            }
        }
    }

    /// Sends `req` and reads the whole response.
    pub fn send(&mut self, req: &Req) -> Result<Resp, String> {
        match self {
            Conn::Http1(conn) => send_http1(conn, req),
            Conn::Http2 { runtime, client } => runtime.block_on(async {
                match tokio::time::timeout(IO_TIMEOUT, send_http2(client, req)).await {
                    Ok(result) => result,
                    Err(_) => Err(format!("no HTTP/2 response within {IO_TIMEOUT:?}")),
                }
            }),
        }
    }
}

fn send_http1(conn: &mut HttpConn, req: &Req) -> Result<Resp, String> {
    let mut bytes = format!(
        "{} {} HTTP/1.1\r\nHost: {}\r\n",
        req.method, req.path, req.host
    );
    for (name, value) in &req.fields {
        bytes.push_str(&format!("{name}: {value}\r\n"));
    }
    let mut bytes = bytes.into_bytes();
    match &req.body {
        ReqBody::None => bytes.extend_from_slice(b"\r\n"),
        ReqBody::Length(body) => {
            bytes.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            bytes.extend_from_slice(body);
        }
        ReqBody::Chunked(chunks) => {
            bytes.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            for chunk in chunks {
                bytes.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                bytes.extend_from_slice(chunk);
                bytes.extend_from_slice(b"\r\n");
            }
            bytes.extend_from_slice(b"0\r\n\r\n");
        }
    }
    // One write: head and body leave the client together, so whatever
    // tern sends the backend in pieces is tern's doing.
    conn.send(&bytes).map_err(|e| format!("send: {e}"))?;
    let response = conn
        .read_response(req.method == "HEAD")
        .map_err(|e| format!("read response: {e}"))?;
    Ok(Resp {
        status: response.status,
        fields: response
            .headers
            .into_iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v))
            .collect(),
        body: response.body,
    })
}

async fn send_http2(client: &H2Client, req: &Req) -> Result<Resp, String> {
    let mut builder = Request::builder()
        .method(req.method)
        .uri(format!("https://{}{}", req.host, req.path));
    for (name, value) in &req.fields {
        builder = builder.header(*name, *value);
    }
    let body = match &req.body {
        ReqBody::None => h2client::Body::Empty,
        ReqBody::Length(body) => {
            builder = builder.header("content-length", body.len());
            h2client::Body::Chunks(vec![Bytes::copy_from_slice(body)])
        }
        ReqBody::Chunked(chunks) => {
            h2client::Body::Chunks(chunks.iter().map(|c| Bytes::copy_from_slice(c)).collect())
        }
    };
    let request = builder.body(()).map_err(|e| format!("request: {e}"))?;
    let response = client
        .send(request, body)
        .await
        .map_err(|e| format!("HTTP/2 exchange: {e}"))?;
    Ok(Resp {
        status: response.status.as_u16(),
        fields: response
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: response.body,
    })
}
