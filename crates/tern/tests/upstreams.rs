//! Integration tests of `tern serve` backend groups: balancing (weights,
//! least connections), failover (retry on connect failure, passive
//! ejection, 503 when every server is down), active health checks,
//! routing by Host to several groups, and HTTP/2 groups (h2c, and h2 over
//! TLS). Real tern processes configured by a TOML file, real hyper
//! backends (HTTP/1.1, h2c, HTTP/2 over TLS) and plain TCP listeners on
//! loopback.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::client::{self, HttpConn, Response};
use tern_testsupport::rustls::ClientConfig;
use tern_testsupport::tempdir::TempDir;
use tern_testsupport::tern::{free_addr, TernProcess};

#[path = "upstreams/balance.rs"]
mod balance;
#[path = "upstreams/failover.rs"]
mod failover;
#[path = "upstreams/h2_tls.rs"]
mod h2_tls;
#[path = "upstreams/h2c.rs"]
mod h2c;
#[path = "upstreams/health.rs"]
mod health;
#[path = "upstreams/routing.rs"]
mod routing;

/// The binary under test, built by cargo for this test target.
pub fn tern_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_tern"))
}

/// tern started from a config file, with a CA its clients trust.
pub struct Front {
    pub addr: SocketAddr,
    pub tern: TernProcess,
    pub client: Arc<ClientConfig>,
    _ca: TestCa,
    _dir: TempDir,
}

impl Front {
    /// Starts tern with `workers` workers, the `[[upstream]]` tables in
    /// `upstreams`, and one listener forwarding to the group `default`,
    /// followed by `listener_extra` (keys, then `[[listener.route]]` tables).
    /// The certificate covers `localhost`, `api.test` and `*.example.test`.
    pub fn start(workers: usize, upstreams: &str, default: &str, listener_extra: &str) -> Front {
        let mut ca = TestCa::new();
        let cert = ca.leaf(
            &["localhost", "api.test", "*.example.test"],
            KeyKind::EcdsaP256,
        );
        let dir = TempDir::new("upstreams");
        let addr = free_addr();
        let config = format!(
            "workers = {workers}\naccess_log = \"off\"\n\n{upstreams}\n\
             [[listener]]\nlisten = \"{addr}\"\nupstream = \"{default}\"\n\
             cert = {chain:?}\nkey = {key:?}\n{listener_extra}\n",
            chain = cert.chain.display().to_string(),
            key = cert.key.display().to_string(),
        );
        let path = dir.path().join("tern.toml");
        std::fs::write(&path, &config).expect("write tern.toml");
        let tern = TernProcess::start(
            tern_bin(),
            addr,
            [
                "serve".to_string(),
                "--config".into(),
                path.display().to_string(),
            ],
        );
        let client = client::client_config(ca.ca_pem());
        Front {
            addr,
            tern,
            client,
            _ca: ca,
            _dir: dir,
        }
    }

    /// The test CA (PEM) tern's certificate chains to.
    pub fn ca_pem(&self) -> &str {
        self._ca.ca_pem()
    }

    /// The test CA as a file, for curl's `--cacert`.
    pub fn ca_file(&self) -> &Path {
        self._ca.ca_file()
    }

    /// A new TLS connection with SNI `localhost`.
    pub fn connect(&self) -> HttpConn {
        self.connect_as("localhost")
    }

    /// A new TLS connection with SNI `name`.
    pub fn connect_as(&self, name: &str) -> HttpConn {
        HttpConn::connect(self.addr, name, self.client.clone())
            .unwrap_or_else(|e| panic!("TLS connect to tern: {e}\n{}", self.tern.stderr_text()))
    }

    /// GET `path` with `Host: localhost` on a new connection.
    pub fn get(&self, path: &str) -> Response {
        self.connect()
            .get("localhost", path)
            .unwrap_or_else(|e| panic!("GET {path}: {e}\n{}", self.tern.stderr_text()))
    }

    /// Waits until stderr contains a line with every one of `needles`.
    pub fn wait_log(&self, needles: &[&str], timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.tern.stderr_text();
            if text.lines().any(|l| needles.iter().all(|n| l.contains(n))) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no log line with {needles:?} within {timeout:?}:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `servers = [...]` entries with weight 1 for `addrs`.
pub fn servers(addrs: &[SocketAddr]) -> String {
    let list: Vec<String> = addrs.iter().map(|a| format!("\"{a}\"")).collect();
    format!("servers = [{}]", list.join(", "))
}

/// Which backend (by the echo backend's `backend` field) answered each of
/// `n` GET /echo requests, sent `per_conn` per keepalive connection.
pub fn echo_answers(front: &Front, n: usize, per_conn: usize) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    let mut sent = 0;
    while sent < n {
        let mut conn = front.connect();
        for _ in 0..per_conn.min(n - sent) {
            let response = conn
                .get("localhost", "/echo")
                .unwrap_or_else(|e| panic!("GET /echo: {e}\n{}", front.tern.stderr_text()));
            assert_eq!(response.status, 200, "{}", response.text());
            let backend = response.json()["backend"]
                .as_str()
                .unwrap_or("")
                .to_string();
            *counts.entry(backend).or_insert(0) += 1;
            sent += 1;
        }
    }
    counts
}
