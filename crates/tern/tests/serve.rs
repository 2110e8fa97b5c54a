//! Integration tests of `tern serve` (HTTP/1.1): the real binary, real
//! certificates, a real hyper backend and real clients (rustls, curl,
//! openssl s_client) over loopback sockets. Every test starts its own backend
//! and its own tern on its own free port, so tests run in parallel.
//!
//! The contract these tests hold tern to is the `tern serve` command line,
//! config file, access log, error statuses and forwarding rules agreed for
//! HTTP/1.1; each module covers one concern.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tern_testsupport::backend::Backend;
use tern_testsupport::certs::{CertFiles, KeyKind, TestCa};
use tern_testsupport::client::{self, HttpConn, Response};
use tern_testsupport::rustls::ClientConfig;
use tern_testsupport::tern::TernProcess;

#[path = "serve/backends.rs"]
mod backends;
#[path = "serve/bodies.rs"]
mod bodies;
#[path = "serve/config.rs"]
mod config;
#[path = "serve/forwarded.rs"]
mod forwarded;
#[path = "serve/framing.rs"]
mod framing;
#[path = "serve/headers.rs"]
mod headers;
#[path = "serve/interop.rs"]
mod interop;
#[path = "serve/lifecycle.rs"]
mod lifecycle;
#[path = "serve/logs.rs"]
mod logs;
#[path = "serve/passthrough.rs"]
mod passthrough;
#[path = "serve/policy.rs"]
mod policy;
#[path = "serve/responses.rs"]
mod responses;

/// The binary under test, built by cargo for this test target.
pub fn tern_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_tern"))
}

/// How long tests wait for an access-log line to appear.
pub const LOG_WAIT: Duration = Duration::from_secs(5);

/// One tern in front of one backend, with a CA the clients trust.
pub struct Served {
    pub ca: TestCa,
    /// The default certificate: ECDSA P-256 for `localhost` and `127.0.0.1`.
    pub cert: CertFiles,
    pub backend: Backend,
    pub addr: SocketAddr,
    pub tern: TernProcess,
    pub client: Arc<ClientConfig>,
}

impl Served {
    /// tern with the default ECDSA certificate, one backend and `extra` flags.
    pub fn start(extra: &[&str]) -> Served {
        let mut ca = TestCa::new();
        let cert = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
        let backend = Backend::start();
        Served::start_with(ca, cert, &[], backend, extra)
    }

    /// tern with `cert` first (the default), then `more` certificates, in front
    /// of `backend`, with `extra` flags.
    pub fn start_with(
        ca: TestCa,
        cert: CertFiles,
        more: &[&CertFiles],
        backend: Backend,
        extra: &[&str],
    ) -> Served {
        let backend_addr = backend.addr().to_string();
        let certs: Vec<String> = std::iter::once(&cert)
            .chain(more.iter().copied())
            .flat_map(cert_args)
            .collect();
        let (tern, addr) = TernProcess::start_on_free_port(tern_bin(), |addr| {
            serve_args(addr, &[backend_addr.as_str()])
                .into_iter()
                .chain(certs.iter().cloned())
                .chain(extra.iter().map(|s| s.to_string()))
                .map(Into::into)
                .collect()
        });
        let client = client::client_config(ca.ca_pem());
        Served {
            ca,
            cert,
            backend,
            addr,
            tern,
            client,
        }
    }

    /// A new TLS connection to tern for `localhost`.
    pub fn connect(&self) -> HttpConn {
        HttpConn::connect(self.addr, "localhost", self.client.clone())
            .unwrap_or_else(|e| panic!("TLS connect to tern: {e}\n{}", self.tern.stderr_text()))
    }

    /// GET `path` on a new connection.
    pub fn get(&self, path: &str) -> Response {
        self.connect()
            .get("localhost", path)
            .unwrap_or_else(|e| panic!("GET {path}: {e}\n{}", self.tern.stderr_text()))
    }

    /// Sends raw `request` bytes on a new connection and reads one response.
    pub fn raw(&self, request: &[u8]) -> (Response, HttpConn) {
        let mut conn = self.connect();
        conn.send(request).expect("send request");
        let response = conn.read_response(false).unwrap_or_else(|e| {
            panic!(
                "no response to {:?}: {e}\n{}",
                String::from_utf8_lossy(request),
                self.tern.stderr_text()
            )
        });
        (response, conn)
    }
}

/// `serve --listen ADDR --backend B...` (without certificates).
pub fn serve_args(listen: SocketAddr, backends: &[&str]) -> Vec<String> {
    let mut args = vec!["serve".to_string(), "--listen".into(), listen.to_string()];
    for backend in backends {
        args.push("--backend".into());
        args.push(backend.to_string());
    }
    args
}

/// `--cert CHAIN --key KEY` for `files`.
pub fn cert_args(files: &CertFiles) -> Vec<String> {
    vec![
        "--cert".into(),
        files.chain.display().to_string(),
        "--key".into(),
        files.key.display().to_string(),
    ]
}

/// The values of header `name` the echo backend received, in order.
pub fn echoed_header(echo: &serde_json::Value, name: &str) -> Vec<String> {
    echo["headers"]
        .as_array()
        .map(|headers| {
            headers
                .iter()
                .filter(|pair| {
                    pair[0]
                        .as_str()
                        .is_some_and(|n| n.eq_ignore_ascii_case(name))
                })
                .map(|pair| pair[1].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}
