//! tlsfuzzer (github.com/tlsfuzzer/tlsfuzzer), the TLS test suite Red Hat
//! runs against OpenSSL, NSS and GnuTLS: each script opens connections,
//! sends hand-made (often malformed) TLS messages with tlslite-ng and
//! checks the server's exact answer, alerts included.
//!
//! `.ci/run` checks it out at a pinned commit into `~/tlsfuzzer` and
//! installs the tlslite-ng it names; `TERN_TLSFUZZER` points elsewhere.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::tools::{run_tool, ToolOutput};

/// The tlsfuzzer checkout, if there is one with its scripts and Python can
/// import tlslite.
pub fn find() -> Option<PathBuf> {
    let dir = match std::env::var_os("TERN_TLSFUZZER") {
        Some(dir) => PathBuf::from(dir),
        // The scripts the tests run are kept in the repository
        // (vendor/tlsfuzzer/README.md says why).
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../vendor/tlsfuzzer"),
    };
    let has_scripts = dir.join("scripts").join("test-tls13-keyupdate.py").exists();
    let has_tlslite = run_tool(
        "python3",
        ["-c", "import tlslite, ecdsa"],
        b"",
        Duration::from_secs(30),
    )
    .success();
    (has_scripts && has_tlslite).then_some(dir)
}

/// Runs `scripts/NAME.py` against `addr` with `args` (the script's options,
/// then the conversations to run; all of them when none is named) and
/// returns its output; its summary ends with `FAIL: N`.
pub fn run(dir: &std::path::Path, name: &str, addr: SocketAddr, args: &[&str]) -> ToolOutput {
    let script = dir.join("scripts").join(format!("{name}.py"));
    let (host, port) = (addr.ip().to_string(), addr.port().to_string());
    let mut all = vec![
        script.display().to_string(),
        "-h".into(),
        host,
        "-p".into(),
        port,
    ];
    all.extend(args.iter().map(|c| c.to_string()));
    run_tool("python3", all, b"", Duration::from_secs(300))
}

/// The conversations a run reported as failed, from its summary.
pub fn failed(out: &ToolOutput) -> Vec<String> {
    let Some((_, list)) = out.stdout.rsplit_once("FAILED:\n") else {
        return Vec::new();
    };
    list.lines()
        .take_while(|l| l.starts_with('\t'))
        .map(|l| l.trim().trim_matches('\'').to_string())
        .collect()
}

/// The `NAME: N` count of a run's summary (`PASS`, `FAIL`, `TOTAL`).
pub fn count(out: &ToolOutput, what: &str) -> Option<usize> {
    out.stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(&format!("{what}: ")))
        .and_then(|n| n.trim().parse().ok())
}
