//! One access-log line per request, with what a reader of a TLS benchmark
//! needs: the negotiated TLS parameters next to the HTTP outcome.
//!
//! Lines are formatted into a per-worker buffer and written in batches (when
//! the buffer fills, and every [`FLUSH_INTERVAL`]), so logging costs a
//! fraction of a system call per request. Each batch is one `write` of whole
//! lines, so lines from different workers never interleave mid-line.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tern_tls::Negotiated;

use crate::config::{AccessLogTarget, LogFormat};

/// How long a line may wait in a worker's buffer.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// Buffer size that triggers an immediate flush.
const FLUSH_BYTES: usize = 16 * 1024;

/// What happened to one request.
#[derive(Debug)]
pub struct Record<'a> {
    /// Client address.
    pub client: SocketAddr,
    /// Negotiated TLS parameters of the connection.
    pub tls: &'a Negotiated,
    /// Handshake duration in microseconds.
    pub handshake_us: u64,
    /// The request came in TLS early data (HTTP/3 0-RTT): logged as
    /// `early=yes` after the other fields, only then.
    pub early: bool,
    /// Request method ("-" when the request could not be read).
    pub method: &'a str,
    /// Request target.
    pub path: &'a str,
    /// Status sent to the client.
    pub status: u16,
    /// Bytes received from the client for this request (head and body).
    pub bytes_in: u64,
    /// Bytes sent to the client for this request (head and body).
    pub bytes_out: u64,
    /// Backend that served it, if any.
    pub backend: Option<crate::config::BackendAddr>,
    /// Time from sending the request head to the backend until its response head, µs.
    pub backend_us: u64,
    /// Time from the first byte of the request to the last byte of the response, µs.
    pub total_us: u64,
    /// Why the request failed, as `side:kind` (`backend:timeout`,
    /// `client:gone`, ...); `None` when it did not.
    pub error: Option<&'static str>,
    /// The request's ID (`request_id_header`), logged as `request_id=`
    /// after the other fields when request IDs are on.
    pub request_id: Option<&'a str>,
    /// The `grpc-status` a gRPC call ended with: logged as
    /// `grpc_status=N` after the other fields, only for gRPC calls.
    pub grpc_status: Option<u16>,
    /// The request's retries on other servers (`connect`, a status,
    /// `budget`: see docs/backends.md), logged as `retry=` after the other
    /// fields, only for requests that had one.
    pub retry: Option<&'a str>,
}

/// The shared destination of all workers' batches.
#[derive(Clone)]
pub struct Sink {
    format: LogFormat,
    out: Option<Arc<Mutex<Box<dyn std::io::Write + Send>>>>,
}

impl Sink {
    /// Opens the destination.
    pub fn open(target: &AccessLogTarget, format: LogFormat) -> std::io::Result<Self> {
        let out: Option<Box<dyn std::io::Write + Send>> = match target {
            AccessLogTarget::Off => None,
            AccessLogTarget::Stdout => Some(Box::new(std::io::stdout())),
            AccessLogTarget::File(path) => Some(Box::new(
                File::options().create(true).append(true).open(path)?,
            )),
        };
        Ok(Sink {
            format,
            out: out.map(|o| Arc::new(Mutex::new(o))),
        })
    }

    fn write_batch(&self, batch: &str) {
        if let Some(out) = &self.out {
            if let Ok(mut w) = out.lock() {
                // A full disk or closed stdout must not take requests down
                // with it; the log is best effort.
                let _ = w.write_all(batch.as_bytes());
                let _ = w.flush();
            }
        }
    }
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("format", &self.format)
            .field("enabled", &self.out.is_some())
            .finish()
    }
}

/// A worker's access log: formats into a local buffer, flushes in batches.
#[derive(Debug)]
pub struct WorkerLog {
    sink: Sink,
    buf: RefCell<String>,
}

impl WorkerLog {
    /// A log writing to `sink`.
    pub fn new(sink: Sink) -> Self {
        WorkerLog {
            sink,
            buf: RefCell::new(String::with_capacity(FLUSH_BYTES * 2)),
        }
    }

    /// Whether records are written (the log is not off).
    pub fn is_on(&self) -> bool {
        self.sink.out.is_some()
    }

    /// Appends one record.
    pub fn log(&self, r: &Record<'_>) {
        if self.sink.out.is_none() {
            return;
        }
        let full = {
            let mut buf = self.buf.borrow_mut();
            match self.sink.format {
                LogFormat::Text => format_text(&mut buf, r),
                LogFormat::Json => format_json(&mut buf, r),
            }
            buf.len() >= FLUSH_BYTES
        };
        if full {
            self.flush();
        }
    }

    /// Writes out what is buffered.
    pub fn flush(&self) {
        let batch = std::mem::take(&mut *self.buf.borrow_mut());
        if !batch.is_empty() {
            self.sink.write_batch(&batch);
            let mut buf = self.buf.borrow_mut();
            if buf.capacity() < batch.capacity() {
                *buf = batch;
                buf.clear();
            }
        }
    }
}

fn format_text(buf: &mut String, r: &Record<'_>) {
    let t = r.tls;
    let _ = writeln!(
        buf,
        "client={} sni={} tls={} cipher={} group={} alpn={} resumed={} handshake_us={} method={} path={} status={} bytes_in={} bytes_out={} backend={} backend_us={} total_us={} error={}",
        r.client,
        t.sni.as_deref().unwrap_or("-"),
        or_dash(t.version),
        or_dash(&t.cipher),
        or_dash(&t.group),
        t.alpn.as_deref().unwrap_or("-"),
        if t.resumed { "yes" } else { "no" },
        r.handshake_us,
        r.method,
        r.path,
        r.status,
        r.bytes_in,
        r.bytes_out,
        r.backend.map(|b| b.to_string()).unwrap_or_else(|| "-".into()),
        r.backend_us,
        r.total_us,
        r.error.unwrap_or("-"),
    );
    if let Some(id) = r.request_id {
        // IDs are checked to be visible ASCII without spaces.
        buf.pop();
        let _ = writeln!(buf, " request_id={id}");
    }
    if r.early {
        // Only early requests carry the field: every other line keeps the
        // field list log parsers already know.
        buf.pop();
        buf.push_str(" early=yes\n");
    }
    if let Some(alg) = t.cert_compression {
        // Only full TLS 1.3 handshakes that sent the chain compressed.
        buf.pop();
        let _ = writeln!(buf, " cert_compression={alg}");
    }
    if let Some(c) = &t.client_cert {
        // Likewise only connections with a verified client certificate.
        // The subject has spaces and is the CA's to choose: quoted, with
        // quotes, backslashes and control characters escaped.
        buf.pop();
        buf.push_str(" client_cert_subject=\"");
        for ch in c.subject.chars() {
            match ch {
                '"' | '\\' => {
                    buf.push('\\');
                    buf.push(ch);
                }
                c if c.is_control() => {
                    let _ = write!(buf, "\\x{:02x}", u32::from(c));
                }
                c => buf.push(c),
            }
        }
        let _ = writeln!(buf, "\" client_cert_sha256={}", c.sha256);
    }
    if let Some(code) = r.grpc_status {
        buf.pop();
        let _ = writeln!(buf, " grpc_status={code}");
    }
    if let Some(retry) = r.retry {
        buf.pop();
        let _ = writeln!(buf, " retry={retry}");
    }
}

fn format_json(buf: &mut String, r: &Record<'_>) {
    let t = r.tls;
    let v = serde_json::json!({
        "client": r.client.to_string(),
        "sni": t.sni,
        "tls": t.version,
        "cipher": t.cipher,
        "group": t.group,
        "alpn": t.alpn,
        "resumed": t.resumed,
        "handshake_us": r.handshake_us,
        "method": r.method,
        "path": r.path,
        "status": r.status,
        "bytes_in": r.bytes_in,
        "bytes_out": r.bytes_out,
        "backend": r.backend.map(|b| b.to_string()),
        "backend_us": r.backend_us,
        "total_us": r.total_us,
        "error": r.error,
    });
    let mut v = v;
    if r.early {
        v["early"] = serde_json::Value::Bool(true);
    }
    if let Some(alg) = t.cert_compression {
        v["cert_compression"] = serde_json::Value::from(alg);
    }
    if let Some(c) = &t.client_cert {
        v["client_cert_subject"] = serde_json::Value::from(c.subject.as_str());
        v["client_cert_sha256"] = serde_json::Value::from(c.sha256.as_str());
    }
    if let Some(code) = r.grpc_status {
        v["grpc_status"] = code.into();
    }
    if let Some(id) = r.request_id {
        v["request_id"] = serde_json::Value::from(id);
    }
    if let Some(retry) = r.retry {
        v["retry"] = serde_json::Value::from(retry);
    }
    let _ = writeln!(buf, "{v}");
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() {
        "-"
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(tls: &Negotiated) -> Record<'_> {
        Record {
            client: "127.0.0.1:5000".parse().unwrap(),
            tls,
            handshake_us: 800,
            early: false,
            method: "GET",
            path: "/a\"b",
            status: 200,
            bytes_in: 78,
            bytes_out: 123,
            backend: Some(crate::config::BackendAddr::Tcp(
                "127.0.0.1:8080".parse().unwrap(),
            )),
            backend_us: 300,
            total_us: 500,
            error: None,
            request_id: None,
            grpc_status: None,
            retry: None,
        }
    }

    #[test]
    fn text_and_json_lines_carry_the_same_keys() {
        let tls = Negotiated {
            version: "TLSv1.3",
            cipher: "TLS_AES_128_GCM_SHA256".into(),
            group: "X25519".into(),
            alpn: Some("http/1.1".into()),
            sni: Some("localhost".into()),
            resumed: true,
            ..Negotiated::default()
        };
        let mut text = String::new();
        format_text(&mut text, &record(&tls));
        assert_eq!(
            text,
            "client=127.0.0.1:5000 sni=localhost tls=TLSv1.3 cipher=TLS_AES_128_GCM_SHA256 group=X25519 alpn=http/1.1 resumed=yes handshake_us=800 method=GET path=/a\"b status=200 bytes_in=78 bytes_out=123 backend=127.0.0.1:8080 backend_us=300 total_us=500 error=-\n"
        );
        let mut json = String::new();
        format_json(&mut json, &record(&tls));
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        for pair in text.trim().split(' ') {
            let key = pair.split('=').next().unwrap();
            assert!(v.get(key).is_some(), "json lacks {key}");
        }
        assert_eq!(v["resumed"], true);
        assert_eq!(v["path"], "/a\"b");
        assert!(v.get("early").is_none(), "only early requests say so");
    }

    #[test]
    fn early_requests_say_so_last() {
        let tls = Negotiated::default();
        let early = Record {
            early: true,
            ..record(&tls)
        };
        let mut text = String::new();
        format_text(&mut text, &early);
        assert!(text.ends_with(" error=- early=yes\n"), "{text}");
        let grpc = Record {
            grpc_status: Some(14),
            ..record(&tls)
        };
        let mut text = String::new();
        format_text(&mut text, &grpc);
        assert!(text.ends_with(" error=- grpc_status=14\n"), "{text}");
        let retried = Record {
            retry: Some("connect,503"),
            ..record(&tls)
        };
        let mut text = String::new();
        format_text(&mut text, &retried);
        assert!(text.ends_with(" error=- retry=connect,503\n"), "{text}");
        let mut json = String::new();
        format_json(&mut json, &early);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["early"], true);
    }

    #[test]
    fn client_certificates_are_logged_by_subject_and_fingerprint_escaped() {
        let tls = Negotiated {
            client_cert: Some(std::sync::Arc::new(tern_tls::ClientCert {
                subject: "CN=a \"b\"\n, O=x".into(),
                common_name: Some("a".into()),
                sha256: "ab".repeat(32),
                chain: Vec::new(),
            })),
            ..Negotiated::default()
        };
        let mut text = String::new();
        format_text(&mut text, &record(&tls));
        let want = format!(
            " error=- client_cert_subject=\"CN=a \\\"b\\\"\\x0a, O=x\" client_cert_sha256={}\n",
            "ab".repeat(32)
        );
        assert!(text.ends_with(&want), "{text}");
        assert_eq!(text.lines().count(), 1);
        let mut json = String::new();
        format_json(&mut json, &record(&tls));
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["client_cert_subject"], "CN=a \"b\"\n, O=x");
        assert_eq!(v["client_cert_sha256"], "ab".repeat(32));
    }
}
