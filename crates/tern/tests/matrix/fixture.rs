//! One tern and one set of backends per path, started by the first test
//! of that path and shared by the others (tests of a path may run at the
//! same time: every case that counts what a backend saw has a backend of
//! its own). tern is killed when the test binary exits ([`UntilExit`]).
//!
//! Each fixture's tern has one worker (so "the pooled connection" is one
//! connection) and two listeners. The main one routes by Host:
//!
//! | Host | group | servers |
//! |---|---|---|
//! | `localhost` (default) | `echo` | the hyper echo backend of tern-testsupport |
//! | `stale-idle.test` | `stale-idle` | [`Script::CloseWhenIdle`] |
//! | `stale-race.test` | `stale-race` | [`Script::CloseAsNextRequestArrives`] |
//! | `refused.test` | `refused` | a closed port, never ejected (`max_fails = 1000`) |
//! | `down.test` | `down` | a closed port, health-checked every 100 ms (`fall = 1`) |
//! | `split.test` | `split` | HTTP/1.1: [`SplitBackend`]; HTTP/2: [`Script::Serve`] (both count segments) |
//!
//! The second has `backend_response_timeout = "1s"` and sends everything
//! to a [`Script::Silent`] backend. Every group speaks the path's backend
//! protocol (`http1`, `h2c`, or `h2` with `tls_ca`).

use std::net::SocketAddr;
use std::path::Path as FsPath;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tern_testsupport::backend::Backend;
use tern_testsupport::certs::{CertFiles, KeyKind, TestCa};
use tern_testsupport::client::client_config;
use tern_testsupport::h2client::h2_client_config;
use tern_testsupport::matrix_backends::{
    Script, ScriptCounts, ScriptedH1Backend, ScriptedH2Backend,
};
use tern_testsupport::rustls::ClientConfig;
use tern_testsupport::split_backend::SplitBackend;
use tern_testsupport::tempdir::TempDir;
use tern_testsupport::tern::{free_addr, TernProcess, READY_TIMEOUT};
use tern_testsupport::until_exit::UntilExit;

use crate::client::{Conn, Front};

/// The protocol between tern and the backends (`[[upstream]] protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Http1,
    H2c,
    /// HTTP/2 over TLS.
    H2,
}

impl Proto {
    fn config_name(self) -> &'static str {
        match self {
            Proto::Http1 => "http1",
            Proto::H2c => "h2c",
            Proto::H2 => "h2",
        }
    }
}

/// One path through tern: client protocol × backend protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Path {
    pub front: Front,
    pub backend: Proto,
}

impl Path {
    fn index(self) -> usize {
        let front = match self.front {
            Front::Http1 => 0,
            Front::Http2 => 3,
        };
        front
            + match self.backend {
                Proto::Http1 => 0,
                Proto::H2c => 1,
                Proto::H2 => 2,
            }
    }
}

/// A scripted backend of either protocol.
pub enum Scripted {
    Http1(ScriptedH1Backend),
    Http2(ScriptedH2Backend),
}

impl Scripted {
    fn start(proto: Proto, script: Script, tls: Option<&CertFiles>) -> Self {
        match (proto, tls) {
            (Proto::Http1, _) => Scripted::Http1(ScriptedH1Backend::start(script)),
            (Proto::H2, Some(cert)) => Scripted::Http2(ScriptedH2Backend::start_tls(script, cert)),
            _ => Scripted::Http2(ScriptedH2Backend::start_h2c(script)),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        match self {
            Scripted::Http1(b) => b.addr(),
            Scripted::Http2(b) => b.addr(),
        }
    }

    pub fn counts(&self) -> ScriptCounts {
        match self {
            Scripted::Http1(b) => b.counts(),
            Scripted::Http2(b) => b.counts(),
        }
    }
}

/// The backend of `split.test`.
pub enum Split {
    Http1(SplitBackend),
    Http2(ScriptedH2Backend),
}

impl Split {
    fn addr(&self) -> SocketAddr {
        match self {
            Split::Http1(b) => b.addr(),
            Split::Http2(b) => b.addr(),
        }
    }
}

/// A path's tern and backends.
pub struct Fixture {
    pub path: Path,
    /// The main listener.
    pub addr: SocketAddr,
    /// The listener with a 1 s backend response timeout, in front of the
    /// silent backend.
    pub short_addr: SocketAddr,
    client: Arc<ClientConfig>,
    tern: UntilExit<TernProcess>,
    /// Kept running for the `echo` group.
    _echo: Backend,
    pub stale_idle: Scripted,
    pub stale_race: Scripted,
    pub split: Split,
    pub silent: Scripted,
    pub refused: SocketAddr,
    pub down: SocketAddr,
}

/// The backend response timeout of the second listener.
pub const SHORT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);

/// The fixture of `path`, started on first use.
pub fn fixture(path: Path) -> &'static Fixture {
    static FIXTURES: [OnceLock<Fixture>; 6] = [const { OnceLock::new() }; 6];
    FIXTURES[path.index()].get_or_init(|| Fixture::start(path))
}

impl Fixture {
    fn start(path: Path) -> Fixture {
        let proto = path.backend;
        let mut ca = TestCa::new();
        let cert = ca.leaf(&["localhost"], KeyKind::EcdsaP256);
        // h2 backends present certificates of their own CA, for 127.0.0.1.
        let mut backend_ca = TestCa::new();
        let backend_cert = backend_ca.leaf(&["127.0.0.1"], KeyKind::EcdsaP256);
        let tls = (proto == Proto::H2).then_some(&backend_cert);

        let echo = match proto {
            Proto::Http1 => Backend::start(),
            Proto::H2c => Backend::start_h2c(),
            Proto::H2 => Backend::start_tls(&backend_cert, &["h2"]),
        };
        let stale_idle = Scripted::start(proto, Script::CloseWhenIdle, tls);
        let stale_race = Scripted::start(proto, Script::CloseAsNextRequestArrives, tls);
        let silent = Scripted::start(proto, Script::Silent, tls);
        let split = match (proto, tls) {
            (Proto::Http1, _) => Split::Http1(SplitBackend::start()),
            (_, Some(cert)) => Split::Http2(ScriptedH2Backend::start_tls(Script::Serve, cert)),
            _ => Split::Http2(ScriptedH2Backend::start_h2c(Script::Serve)),
        };
        // Nothing listens on these.
        let refused = free_addr();
        let down = free_addr();

        let tls_ca = match proto {
            Proto::H2 => format!(
                "tls_ca = {:?}\n",
                backend_ca.ca_file().display().to_string()
            ),
            _ => String::new(),
        };
        let group = |name: &str, addr: SocketAddr, extra: &str| {
            format!(
                "[[upstream]]\nname = \"{name}\"\nprotocol = \"{}\"\n{tls_ca}servers = [\"{addr}\"]\n{extra}\n",
                proto.config_name()
            )
        };
        let mut upstreams = String::new();
        upstreams += &group("echo", echo.addr(), "");
        upstreams += &group("stale-idle", stale_idle.addr(), "");
        upstreams += &group("stale-race", stale_race.addr(), "");
        upstreams += &group("refused", refused, "max_fails = 1000\n");
        upstreams += &group(
            "down",
            down,
            "health_check_path = \"/health\"\nhealth_check_interval = \"100ms\"\n\
             health_check_timeout = \"500ms\"\nfall = 1\n",
        );
        upstreams += &group("split", split.addr(), "");
        upstreams += &group("silent", silent.addr(), "");
        let cert_lines = format!(
            "cert = {:?}\nkey = {:?}\n",
            cert.chain.display().to_string(),
            cert.key.display().to_string()
        );
        let routes: String = ["stale-idle", "stale-race", "refused", "down", "split"]
            .iter()
            .map(|g| format!("[[listener.route]]\nhost = \"{g}.test\"\nupstream = \"{g}\"\n"))
            .collect();

        let dir = TempDir::new("matrix");
        let config_path = dir.path().join("tern.toml");
        let (tern, addr, short_addr) = start_tern(&config_path, |addr, short| {
            format!(
                "workers = 1\naccess_log = \"off\"\nshutdown_timeout = \"1s\"\n\n{upstreams}\n\
                 [[listener]]\nlisten = \"{addr}\"\nupstream = \"echo\"\n{cert_lines}{routes}\n\
                 [[listener]]\nlisten = \"{short}\"\nupstream = \"silent\"\n\
                 backend_response_timeout = \"{}s\"\n{cert_lines}",
                SHORT_RESPONSE_TIMEOUT.as_secs()
            )
        });
        let client = match path.front {
            Front::Http1 => client_config(ca.ca_pem()),
            Front::Http2 => h2_client_config(ca.ca_pem()),
        };
        // tern and the backends have read their certificates: the files
        // (removed with `ca`, `backend_ca` and `dir`) are no longer needed.
        Fixture {
            path,
            addr,
            short_addr,
            client,
            tern: UntilExit::new(tern),
            _echo: echo,
            stale_idle,
            stale_race,
            split,
            silent,
            refused,
            down,
        }
    }

    /// A new client connection to the main listener.
    pub fn connect(&self) -> Conn {
        self.connect_to(self.addr)
    }

    /// A new client connection to the listener with the short timeout.
    pub fn connect_short(&self) -> Conn {
        self.connect_to(self.short_addr)
    }

    fn connect_to(&self, addr: SocketAddr) -> Conn {
        Conn::open(self.path.front, addr, self.client.clone())
            .unwrap_or_else(|e| panic!("{:?}: {e}\n{}", self.path, self.stderr()))
    }

    /// What tern wrote to stderr so far (its log), for failure messages.
    pub fn stderr(&self) -> String {
        self.tern.with(|t| t.stderr_text()).unwrap_or_default()
    }

    /// Waits until tern's log has a line containing all of `needles`.
    pub fn wait_log(&self, needles: &[&str], timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.stderr();
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

/// Writes the config `config_for(main, short)` for two free ports and
/// starts tern on it, waiting until both listeners accept; a port taken
/// between the probe and tern's bind means another try (three in all).
fn start_tern(
    config_path: &FsPath,
    config_for: impl Fn(SocketAddr, SocketAddr) -> String,
) -> (TernProcess, SocketAddr, SocketAddr) {
    let mut last = String::new();
    for _ in 0..3 {
        let (addr, short) = (free_addr(), free_addr());
        std::fs::write(config_path, config_for(addr, short)).expect("write tern.toml");
        let mut tern = TernProcess::spawn(
            crate::tern_bin(),
            [
                "serve".to_string(),
                "--config".into(),
                config_path.display().to_string(),
            ],
        );
        let ready = tern
            .wait_ready(addr, READY_TIMEOUT)
            .and_then(|()| tern.wait_ready(short, READY_TIMEOUT));
        match ready {
            Ok(()) => return (tern, addr, short),
            Err(problem) => {
                last = format!("{problem}\n{}", tern.stderr_text());
                if !last.to_ascii_lowercase().contains("in use") {
                    break;
                }
            }
        }
    }
    panic!("tern did not get ready:\n{last}");
}
