//! Operating `tern serve` in production: hot reload and binary upgrade
//! under load, TCP mode in
//! front of real PROXY-protocol consumers, PROXY protocol from an L4
//! balancer, and OCSP stapling. Real peers only: the tern binary, HAProxy
//! from Debian, `openssl`, hyper and hand-written PROXY peers, all on
//! loopback. Every test starts its own tern on its own ports.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tern_testsupport::certs::{CertFiles, KeyKind, TestCa};

#[path = "operations/activation.rs"]
mod activation;
#[path = "operations/fleet.rs"]
mod fleet;
#[path = "operations/ocsp.rs"]
mod ocsp;
#[path = "operations/privileges.rs"]
mod privileges;
#[path = "operations/proxy_in.rs"]
mod proxy_in;
#[path = "operations/reload.rs"]
mod reload;
#[path = "operations/tcp_mode.rs"]
mod tcp_mode;
#[path = "operations/upgrade.rs"]
mod upgrade;

/// How long tests wait for tern to log a reload or an access-log line.
pub const LOG_WAIT: Duration = Duration::from_secs(10);

// No test waits between start and SIGHUP: tern installs its signal
// handlers before it announces `listening on`, which `TernProcess::start`
// waits for, and `reload::sighup_right_after_listening_reloads` holds it
// to that.

/// A test CA with one ECDSA leaf for `localhost` and `127.0.0.1`.
pub fn ca_and_leaf() -> (TestCa, CertFiles) {
    let mut ca = TestCa::new();
    let leaf = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    (ca, leaf)
}

/// One `[[listener]]` table of a tern.toml.
pub fn listener_toml(listen: SocketAddr, backends: &[SocketAddr], cert: &CertFiles) -> String {
    let backends: Vec<String> = backends.iter().map(|b| format!("\"{b}\"")).collect();
    format!(
        "[[listener]]\nlisten = \"{listen}\"\nbackends = [{}]\ncert = \"{}\"\nkey = \"{}\"\n",
        backends.join(", "),
        cert.chain.display(),
        cert.key.display()
    )
}

/// A whole tern.toml: two workers (so reloads reach more than one event
/// loop), a short shutdown, then `listeners`.
pub fn config_toml(listeners: &[String]) -> String {
    format!(
        "workers = 2\nshutdown_timeout = \"2s\"\n\n{}",
        listeners.join("\n")
    )
}

/// Writes `text` to `path` in one rename, so tern never reads half a file.
pub fn write_atomically(path: &Path, text: &str) {
    let tmp: PathBuf = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write config");
    std::fs::rename(&tmp, path).expect("rename config into place");
}
