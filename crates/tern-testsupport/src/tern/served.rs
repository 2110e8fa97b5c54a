//! [`Served`]: one tern process in front of a backend, with a CA its clients
//! trust, started by a [`ServedBuilder`] and stopped on drop.
//!
//! The builder covers what the integration tests vary: the listening
//! address, the certificate(s), the backend (a fresh HTTP/1.1 or h2c
//! [`Backend`], one the test brought, a bare address, or none), command-line
//! flags or a config file, and the admin listener. stdout (the access log)
//! and stderr are always captured by [`TernProcess`].

use std::cell::Cell;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ClientConfig;

use super::{cert_args, free_addr, tern_bin, TernProcess};
use crate::backend::Backend;
use crate::certs::{CertFiles, KeyKind, TestCa};
use crate::client::{self, HttpConn, Response};
use crate::h2client::{h2_client_config, H2Client};
use crate::h2frames::{self, FrameReader, FrameWriter};
use crate::prometheus::{self, Scrape};
use crate::reload::{hangup, stderr_lines, wait_stderr_lines};
use crate::tempdir::TempDir;

/// How long [`Served::start`] waits for the admin listener after tern
/// announced its own.
const ADMIN_READY: Duration = Duration::from_secs(10);

/// How long [`Served::reload`] waits for the `reloaded` line.
const RELOAD_WAIT: Duration = Duration::from_secs(10);

/// One tern in front of (usually) one backend, killed on drop.
///
/// Fields are dropped in order: tern first, then the backend, then the
/// certificate files.
pub struct Served {
    pub tern: TernProcess,
    /// Where tern's (first) listener accepts.
    pub addr: SocketAddr,
    backend: Option<Backend>,
    admin: Option<SocketAddr>,
    /// Trusts the test CA; ALPN as rustls defaults (none).
    pub client: Arc<ClientConfig>,
    /// Trusts the test CA and offers ALPN `h2` only.
    pub h2_config: Arc<ClientConfig>,
    /// The default certificate (the first `--cert`).
    pub cert: CertFiles,
    /// The CA every certificate chains to, unless the test kept it.
    ca: Option<TestCa>,
    /// Holds the config file, in config-file mode.
    dir: Option<TempDir>,
}

/// What a config file is written from: the addresses and files the
/// builder chose.
pub struct ConfigContext<'a> {
    /// The address tern must listen on.
    pub listen: SocketAddr,
    /// The admin address, when the builder asked for one.
    pub admin: Option<SocketAddr>,
    /// The backend's address, when there is one.
    pub backend: Option<String>,
    /// The default certificate.
    pub cert: &'a CertFiles,
}

impl ConfigContext<'_> {
    /// The certificate chain's path, for a TOML string.
    pub fn chain(&self) -> String {
        self.cert.chain.display().to_string()
    }

    /// The private key's path, for a TOML string.
    pub fn key(&self) -> String {
        self.cert.key.display().to_string()
    }

    /// The admin address; panics when the builder did not ask for one.
    pub fn admin(&self) -> SocketAddr {
        self.admin.expect("ServedBuilder::admin was not called")
    }
}

type ConfigText<'a> = Box<dyn Fn(&ConfigContext<'_>) -> String + 'a>;

/// Who holds the CA: the harness, or the test (several instances of a
/// fleet trust one CA).
enum Certified {
    Owned(Box<TestCa>),
    Shared(String),
}

enum BackendChoice {
    Http1,
    H2c,
    Given(Backend),
    Addr(String),
    None,
}

/// Builds a [`Served`]; [`Served::start`] is the common case.
pub struct ServedBuilder<'a> {
    args: Vec<String>,
    names: Vec<String>,
    cert: Option<(Certified, CertFiles)>,
    more_certs: Vec<CertFiles>,
    backend: BackendChoice,
    config: Option<ConfigText<'a>>,
    admin: bool,
    listen: Option<SocketAddr>,
}

impl Served {
    /// tern on a free port of 127.0.0.1 with an ECDSA P-256 certificate for
    /// `localhost` and `127.0.0.1`, in front of a fresh HTTP/1.1
    /// [`Backend`], with `extra` flags.
    pub fn start(extra: &[&str]) -> Served {
        Served::builder().args(extra).start()
    }

    /// A builder with the defaults of [`Served::start`] and no extra flags.
    pub fn builder<'a>() -> ServedBuilder<'a> {
        ServedBuilder {
            args: Vec::new(),
            names: vec!["localhost".into(), "127.0.0.1".into()],
            cert: None,
            more_certs: Vec::new(),
            backend: BackendChoice::Http1,
            config: None,
            admin: false,
            listen: None,
        }
    }

    /// The backend tern was started in front of; panics when the harness
    /// started none (a bare address, or a config-file group).
    pub fn backend(&self) -> &Backend {
        self.backend
            .as_ref()
            .expect("tern was started without a Backend of the harness")
    }

    /// The CA tern's certificates chain to; panics when the test kept it
    /// ([`ServedBuilder::shared_cert`]).
    pub fn ca(&self) -> &TestCa {
        self.ca
            .as_ref()
            .expect("the test holds the CA (ServedBuilder::shared_cert)")
    }

    /// curl's arguments to reach tern as `https://localhost:PORT/`
    /// trusting its CA: `--cacert CA --resolve localhost:PORT:127.0.0.1`.
    pub fn curl_trust(&self) -> [String; 4] {
        [
            "--cacert".into(),
            self.ca().ca_file().display().to_string(),
            "--resolve".into(),
            format!("localhost:{}:127.0.0.1", self.addr.port()),
        ]
    }

    /// The admin listener's address; panics when it is off.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin.expect("tern was started without --admin")
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

    /// Sends `request` on a new TLS connection and returns every byte tern
    /// wrote back until it closed, with the connection (for its TLS state).
    pub fn exchange(&self, request: &str) -> (Vec<u8>, HttpConn) {
        let mut conn = self.connect();
        conn.send(request.as_bytes()).expect("send request");
        let bytes = conn.read_to_close().expect("read response");
        (bytes, conn)
    }

    /// A new h2 connection with default client settings.
    pub async fn h2_client(&self) -> H2Client {
        H2Client::connect(self.addr, self.h2_config.clone())
            .await
            .unwrap_or_else(|e| panic!("h2 connect to tern: {e}\n{}", self.tern.stderr_text()))
    }

    /// A new raw h2 connection after the SETTINGS exchange; returns tern's
    /// SETTINGS parameters with the two halves.
    pub async fn h2_raw(
        &self,
        settings: &[(u16, u32)],
    ) -> (Vec<(u16, u32)>, FrameReader, FrameWriter) {
        h2frames::handshake(self.addr, self.h2_config.clone(), settings)
            .await
            .unwrap_or_else(|e| panic!("raw h2 connect to tern: {e}\n{}", self.tern.stderr_text()))
    }

    /// Waits until stderr has a line containing every one of `needles`.
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

    /// Rewrites the config file with `edit` applied to its text (config
    /// file mode; panics otherwise), in one rename, so that a reload reads
    /// the old file or the new one, never half of it.
    pub fn edit_config(&self, edit: impl FnOnce(&str) -> String) {
        let dir = self
            .dir
            .as_ref()
            .expect("tern was started from a config file");
        let path = dir.path().join("tern.toml");
        let text = std::fs::read_to_string(&path).expect("read tern.toml");
        let new = dir.path().join("tern.toml.new");
        std::fs::write(&new, edit(&text)).expect("write tern.toml.new");
        std::fs::rename(&new, &path).expect("rename tern.toml.new");
    }

    /// Sends SIGHUP and waits until tern logs one more `reloaded` line than
    /// before; panics with stderr when it does not.
    pub fn reload(&mut self) {
        let next = stderr_lines(&self.tern, "reloaded").len() + 1;
        hangup(&mut self.tern);
        if let Err(stderr) = wait_stderr_lines(&self.tern, "reloaded", next, RELOAD_WAIT) {
            panic!("reload {next} not applied:\n{stderr}");
        }
    }

    /// tern's resident set size in KiB; panics when /proc cannot tell.
    pub fn rss_kib(&self) -> u64 {
        super::rss_kib(self.tern.pid()).expect("VmRSS of tern in /proc")
    }

    /// Panics with tern's stderr when tern has exited.
    pub fn assert_alive(&mut self) {
        if let Some(status) = self.tern.try_status() {
            panic!("tern exited with {status}\n{}", self.tern.stderr_text());
        }
    }

    /// One request to the admin listener over plain TCP, read until close.
    pub fn admin_raw(&self, request: &[u8]) -> PlainResponse {
        let mut tcp = TcpStream::connect(self.admin_addr()).expect("connect to admin");
        tcp.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        tcp.write_all(request).expect("write admin request");
        let mut raw = Vec::new();
        tcp.read_to_end(&mut raw).expect("read admin response");
        PlainResponse::parse(&raw)
    }

    /// GET `path` from the admin listener.
    pub fn admin_get(&self, path: &str) -> PlainResponse {
        self.admin_raw(format!("GET {path} HTTP/1.1\r\nHost: admin\r\n\r\n").as_bytes())
    }

    /// /metrics, checked by `promtool` when installed and parsed strictly.
    pub fn scrape(&self) -> Scrape {
        let response = self.admin_get("/metrics");
        assert_eq!(response.status, 200, "{}", response.body);
        prometheus::promtool_check(&response.body);
        prometheus::parse(&response.body).unwrap_or_else(|e| {
            panic!(
                "/metrics is not valid Prometheus text: {e}\n{}",
                response.body
            )
        })
    }

    /// Scrapes until `tern_connections_open` is 0 (connections end a
    /// little after the client sees the close) and the readiness probe
    /// (`TernProcess::start` connects once and hangs up) has been counted,
    /// so the next scrape moves only by what the test does. Returns the
    /// last scrape after 5 s either way: the test's assertions say what
    /// was wrong.
    pub fn scrape_when_idle(&self) -> Scrape {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let scrape = self.scrape();
            let idle = scrape.get("tern_connections_open", &[]) == Some(0.0)
                && scrape.get("tern_connections_total", &[]) >= Some(1.0);
            if idle || Instant::now() > deadline {
                return scrape;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl<'a> ServedBuilder<'a> {
    /// Appends command-line flags (after the ones the builder makes).
    pub fn args(mut self, extra: &[&str]) -> Self {
        self.args.extend(extra.iter().map(|s| s.to_string()));
        self
    }

    /// The names of the default certificate (ECDSA P-256, from a fresh CA);
    /// `localhost` and `127.0.0.1` unless set.
    pub fn cert_names(mut self, names: &[&str]) -> Self {
        self.names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    /// A CA and default certificate made by the test.
    pub fn cert(mut self, ca: TestCa, cert: CertFiles) -> Self {
        self.cert = Some((Certified::Owned(Box::new(ca)), cert));
        self
    }

    /// A default certificate issued by `ca`, which the test keeps (to start
    /// several instances that its clients all trust).
    pub fn shared_cert(mut self, ca: &TestCa, cert: &CertFiles) -> Self {
        self.cert = Some((Certified::Shared(ca.ca_pem().to_string()), cert.clone()));
        self
    }

    /// More certificates after the default one (`--cert`/`--key` pairs).
    pub fn more_certs(mut self, more: &[&CertFiles]) -> Self {
        self.more_certs.extend(more.iter().map(|c| (*c).clone()));
        self
    }

    /// In front of `backend`, which the harness keeps alive.
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = BackendChoice::Given(backend);
        self
    }

    /// In front of a fresh h2c (HTTP/2 prior knowledge) [`Backend`].
    pub fn backend_h2c(mut self) -> Self {
        self.backend = BackendChoice::H2c;
        self
    }

    /// In front of `addr`, which the test owns (nothing need listen there).
    pub fn backend_addr(mut self, addr: impl ToString) -> Self {
        self.backend = BackendChoice::Addr(addr.to_string());
        self
    }

    /// No backend of the harness: a config file names the servers, or tern
    /// serves its demo origin.
    pub fn no_backend(mut self) -> Self {
        self.backend = BackendChoice::None;
        self
    }

    /// Turns the admin listener on, on a free port: `--admin ADDR` on the
    /// command line, or [`ConfigContext::admin`] for a config file.
    pub fn admin(mut self) -> Self {
        self.admin = true;
        self
    }

    /// Listens on `addr` instead of a free port of 127.0.0.1.
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = Some(addr);
        self
    }

    /// Starts tern with `serve --config FILE` (then the extra flags), the
    /// file written from `text` into a temporary directory as `tern.toml`.
    /// The builder then passes no `--listen`, `--backend`, `--cert` or
    /// `--admin`: the file says everything.
    pub fn config(mut self, text: impl Fn(&ConfigContext<'_>) -> String + 'a) -> Self {
        self.config = Some(Box::new(text));
        self
    }

    /// Starts tern and waits until it listens (and its admin listener
    /// accepts, when on). On a free port, a port taken between the probe
    /// and tern's bind is retried on another.
    pub fn start(self) -> Served {
        let ServedBuilder {
            args: extra,
            names,
            cert,
            more_certs,
            backend,
            config,
            admin,
            listen,
        } = self;
        let (ca, cert) = cert.unwrap_or_else(|| {
            let mut ca = TestCa::new();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let cert = ca.leaf(&names, KeyKind::EcdsaP256);
            (Certified::Owned(Box::new(ca)), cert)
        });
        let ca_pem = match &ca {
            Certified::Owned(ca) => ca.ca_pem().to_string(),
            Certified::Shared(pem) => pem.clone(),
        };
        let ca = match ca {
            Certified::Owned(ca) => Some(*ca),
            Certified::Shared(_) => None,
        };
        let (backend, backend_addr) = match backend {
            BackendChoice::Http1 => {
                let b = Backend::start();
                let addr = b.addr().to_string();
                (Some(b), Some(addr))
            }
            BackendChoice::H2c => {
                let b = Backend::start_h2c();
                let addr = b.addr().to_string();
                (Some(b), Some(addr))
            }
            BackendChoice::Given(b) => {
                let addr = b.addr().to_string();
                (Some(b), Some(addr))
            }
            BackendChoice::Addr(addr) => (None, Some(addr)),
            BackendChoice::None => (None, None),
        };
        let dir = config.is_some().then(|| TempDir::new("served"));
        let config_path = dir.as_ref().map(|d| d.path().join("tern.toml"));
        let admin_used: Cell<Option<SocketAddr>> = Cell::new(None);
        let args_for = |listen: SocketAddr| -> Vec<OsString> {
            let admin_addr = admin.then(free_addr);
            admin_used.set(admin_addr);
            let mut args: Vec<String> = vec!["serve".into()];
            match &config {
                Some(text) => {
                    let context = ConfigContext {
                        listen,
                        admin: admin_addr,
                        backend: backend_addr.clone(),
                        cert: &cert,
                    };
                    let path = config_path.as_ref().expect("a directory for the config");
                    std::fs::write(path, text(&context)).expect("write tern.toml");
                    args.extend(["--config".into(), path.display().to_string()]);
                }
                None => {
                    args.extend(["--listen".into(), listen.to_string()]);
                    if let Some(b) = &backend_addr {
                        args.extend(["--backend".into(), b.clone()]);
                    }
                    for c in std::iter::once(&cert).chain(&more_certs) {
                        args.extend(cert_args(c));
                    }
                    if let Some(a) = admin_addr {
                        args.extend(["--admin".into(), a.to_string()]);
                    }
                }
            }
            args.extend(extra.iter().cloned());
            args.into_iter().map(Into::into).collect()
        };
        let (tern, addr) = match listen {
            Some(addr) => (TernProcess::start(tern_bin(), addr, args_for(addr)), addr),
            None => TernProcess::start_on_free_port(tern_bin(), args_for),
        };
        let admin = admin_used.get();
        if let Some(admin) = admin {
            let deadline = Instant::now() + ADMIN_READY;
            while TcpStream::connect_timeout(&admin, Duration::from_millis(200)).is_err() {
                assert!(
                    Instant::now() < deadline,
                    "admin listener not up on {admin}\n{}",
                    tern.stderr_text()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let client = client::client_config(&ca_pem);
        let h2_config = h2_client_config(&ca_pem);
        Served {
            tern,
            addr,
            backend,
            admin,
            client,
            h2_config,
            cert,
            ca,
            dir,
        }
    }
}

/// A response read from a plain socket until close.
pub struct PlainResponse {
    pub status: u16,
    /// The head, lower-cased.
    pub head: String,
    pub body: String,
}

impl PlainResponse {
    /// Parses a whole HTTP/1.1 response; panics when it has no complete head.
    pub fn parse(raw: &[u8]) -> PlainResponse {
        let text = String::from_utf8_lossy(raw).into_owned();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("no complete head in {text:?}"));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {head:?}"));
        PlainResponse {
            status,
            head: head.to_ascii_lowercase(),
            body: body.to_string(),
        }
    }

    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (n, v) = line.split_once(':')?;
            (n == name).then_some(v.trim())
        })
    }
}
