//! grpc-go's own interop test client and server
//! (`google.golang.org/grpc/interop/client` and `.../interop/server`), a
//! gRPC test suite no one here wrote, run through tern.
//!
//! `.ci/run` installs both with `go install` into [`INTEROP_DIR`] under
//! the home directory (they are named `client` and `server`, so they get a
//! folder of their own rather than a place on PATH); `TERN_GRPC_INTEROP_DIR`
//! points elsewhere.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::tern::wait_accepting;
use crate::tools::{run_command, KillOnDrop, ToolOutput};

/// Where `.ci/run` installs the interop binaries, under `$HOME`.
pub const INTEROP_DIR: &str = "go/grpc-interop/bin";

/// The standard test cases every gRPC implementation's interop client
/// runs (grpc/grpc doc/interop-test-descriptions.md), less those that
/// need a feature of the test server's environment (compression,
/// authentication against Google).
pub const STANDARD_CASES: [&str; 14] = [
    "empty_unary",
    "large_unary",
    "client_streaming",
    "server_streaming",
    "ping_pong",
    "empty_stream",
    "timeout_on_sleeping_server",
    "cancel_after_begin",
    "cancel_after_first_response",
    "custom_metadata",
    "status_code_and_message",
    "special_status_message",
    "unimplemented_method",
    "unimplemented_service",
];

/// The folder holding both interop binaries, if they are installed. In
/// CI (`CI=true`) their absence is a failure: CI installs them.
pub fn interop_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("TERN_GRPC_INTEROP_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME")?).join(INTEROP_DIR),
    };
    let found = dir.join("client").is_file() && dir.join("server").is_file();
    if !found && std::env::var("CI").as_deref() == Ok("true") {
        panic!(
            "grpc-go interop client/server missing from {} (.ci/run installs them)",
            dir.display()
        );
    }
    found.then_some(dir)
}

/// grpc-go's interop server on `addr`: cleartext (h2c), or TLS with
/// `cert` (chain and key files).
pub fn start_server(dir: &Path, addr: SocketAddr, tls: Option<(&Path, &Path)>) -> KillOnDrop {
    let mut command = Command::new(dir.join("server"));
    command.arg(format!("-port={}", addr.port()));
    if let Some((chain, key)) = tls {
        command.args([
            "-use_tls=true".to_string(),
            format!("-tls_cert_file={}", chain.display()),
            format!("-tls_key_file={}", key.display()),
        ]);
    }
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start the grpc-go interop server: {e}"));
    let server = KillOnDrop(child);
    wait_accepting(addr, Duration::from_secs(20));
    server
}

/// Runs one interop test case with grpc-go's client against `target` over
/// TLS (ALPN h2), trusting `ca_file` for `server_name`.
pub fn run_case(
    dir: &Path,
    target: SocketAddr,
    ca_file: &Path,
    server_name: &str,
    case: &str,
) -> ToolOutput {
    let mut command = Command::new(dir.join("client"));
    command.args([
        format!("-server_host={}", target.ip()),
        format!("-server_port={}", target.port()),
        "-use_tls=true".to_string(),
        "-use_test_ca=true".to_string(),
        format!("-ca_file={}", ca_file.display()),
        format!("-server_host_override={server_name}"),
        format!("-test_case={case}"),
    ]);
    run_command(command, b"", Duration::from_secs(60))
}
