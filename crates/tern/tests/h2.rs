//! Integration tests of `tern serve` over HTTP/2: the real binary with ALPN
//! h2, real backends, and real clients over loopback — the `h2` crate, a raw
//! frame writer for the attacks a library will not commit, h2spec for
//! conformance and headless Chromium for a browser's view.
//!
//! Modules by concern:
//! - `relay`: what a well-behaved client sends reaches the backend as
//!   HTTP/1.1 and comes back intact
//! - `limits`: the SETTINGS tern advertises are the configured ones, and
//!   enforced
//! - `attacks`: rapid reset, CONTINUATION flood and slow readers cost the
//!   attacker its connection, not other clients their service
//! - `conformance`: h2spec, every case
//! - `browser`: Chromium loads a 50+ resource page over one h2 connection

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tern_testsupport::backend::Backend;
use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::h2client::{h2_client_config, H2Client};
use tern_testsupport::h2frames::{self, FrameReader, FrameWriter};
use tern_testsupport::rustls::ClientConfig;
use tern_testsupport::tern::TernProcess;

#[path = "h2/attacks.rs"]
mod attacks;
#[path = "h2/browser.rs"]
mod browser;
#[path = "h2/conformance.rs"]
mod conformance;
#[path = "h2/limits.rs"]
mod limits;
#[path = "h2/relay.rs"]
mod relay;

/// The binary under test, built by cargo for this test target.
pub fn tern_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_tern"))
}

/// How long tests wait for an access-log line to appear.
pub const LOG_WAIT: Duration = Duration::from_secs(5);

/// One tern (ALPN h2 preferred, the default) in front of one backend.
pub struct H2Served {
    /// Kept so the certificate files live as long as tern.
    pub ca: TestCa,
    /// The hyper backend, when the test did not bring its own address.
    pub backend: Option<Backend>,
    pub addr: SocketAddr,
    pub tern: TernProcess,
    /// Trusts the test CA and offers ALPN `h2` only.
    pub h2_config: Arc<ClientConfig>,
}

impl H2Served {
    /// tern in front of a fresh [`Backend`], with `extra` flags.
    pub fn start(extra: &[&str]) -> H2Served {
        let backend = Backend::start();
        let addr = backend.addr().to_string();
        let mut served = H2Served::start_to(&addr, extra);
        served.backend = Some(backend);
        served
    }

    /// tern in front of `backend` (an address; nothing need listen there).
    pub fn start_to(backend: &str, extra: &[&str]) -> H2Served {
        let mut ca = TestCa::new();
        let cert = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
        let chain = cert.chain.display().to_string();
        let key = cert.key.display().to_string();
        let (tern, addr) = TernProcess::start_on_free_port(tern_bin(), |addr| {
            let listen = addr.to_string();
            [
                "serve",
                "--listen",
                &listen,
                "--backend",
                backend,
                "--cert",
                &chain,
                "--key",
                &key,
            ]
            .into_iter()
            .chain(extra.iter().copied())
            .map(Into::into)
            .collect()
        });
        let h2_config = h2_client_config(ca.ca_pem());
        H2Served {
            ca,
            backend: None,
            addr,
            tern,
            h2_config,
        }
    }

    /// The hyper backend; panics when the test started tern without one.
    pub fn backend(&self) -> &Backend {
        self.backend
            .as_ref()
            .expect("tern was started with a Backend")
    }

    /// A new h2 connection with default client settings.
    pub async fn client(&self) -> H2Client {
        H2Client::connect(self.addr, self.h2_config.clone())
            .await
            .unwrap_or_else(|e| panic!("h2 connect to tern: {e}\n{}", self.tern.stderr_text()))
    }

    /// A new raw h2 connection after the SETTINGS exchange; returns tern's
    /// SETTINGS parameters with the two halves.
    pub async fn raw(
        &self,
        settings: &[(u16, u32)],
    ) -> (Vec<(u16, u32)>, FrameReader, FrameWriter) {
        h2frames::handshake(self.addr, self.h2_config.clone(), settings)
            .await
            .unwrap_or_else(|e| panic!("raw h2 connect to tern: {e}\n{}", self.tern.stderr_text()))
    }

    /// tern's resident set size in KiB (VmRSS from /proc).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.tern.pid()))
            .expect("read tern's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc status")
    }

    /// Panics with tern's stderr when tern has exited.
    pub fn assert_alive(&mut self) {
        if let Some(status) = self.tern.try_status() {
            panic!("tern exited with {status}\n{}", self.tern.stderr_text());
        }
    }
}

/// True when running in CI, where missing tools are failures, not skips.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Skips (returns true after printing why) or, in CI, fails when `tool` is
/// missing.
pub fn skip_without(tool: &str, found: bool) -> bool {
    if found {
        return false;
    }
    assert!(
        !in_ci(),
        "{tool} is required in CI (CI=true) but was not found"
    );
    eprintln!("SKIPPED: {tool} is not installed (set CI=true to make this a failure)");
    true
}

/// The access-log values of `key` (`key=value` fields of text lines).
pub fn log_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(' ')
        .find_map(|field| field.strip_prefix(key)?.strip_prefix('='))
}

/// Runs futures concurrently on the current task and returns their outputs
/// in order (a small `join_all`, rather than a dependency for one helper).
pub async fn join_all<F: std::future::Future>(
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = (0..pinned.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in pinned.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(out) => *output = Some(out),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}
