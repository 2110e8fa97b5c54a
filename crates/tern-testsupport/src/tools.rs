//! Running real TLS peers (`openssl s_client`, `curl`) with a time limit,
//! and keeping long-running ones (`openssl s_server`) from outliving a test.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What a tool printed and how it ended.
#[derive(Debug)]
pub struct ToolOutput {
    /// Exit status; `None` if the tool was killed at the timeout.
    pub status: Option<ExitStatus>,
    /// Standard output (lossy UTF-8).
    pub stdout: String,
    /// Standard error (lossy UTF-8).
    pub stderr: String,
}

impl ToolOutput {
    /// True when the tool exited with status 0.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// stdout and stderr together, for assertions and failure messages.
    pub fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// Runs `program args`, feeding `stdin`, killing it after `timeout`.
pub fn run_tool<I, S>(program: &str, args: I, stdin: &[u8], timeout: Duration) -> ToolOutput
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new(program);
    command.args(args);
    run_command(command, stdin, timeout)
}

/// Runs a prepared `command` (arguments, environment, directory already
/// set), feeding `stdin`, killing it after `timeout`.
pub fn run_command(mut command: Command, stdin: &[u8], timeout: Duration) -> ToolOutput {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {program}: {e} (is it installed?)"));
    let input = stdin.to_vec();
    let mut child_stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(pipe) = child_stdin.as_mut() {
            let _ = pipe.write_all(&input);
        }
        // Dropping the pipe sends EOF.
    });
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let out_reader = std::thread::spawn(move || read_all(out.as_mut()));
    let err_reader = std::thread::spawn(move || read_all(err.as_mut()));

    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let _ = writer.join();
    ToolOutput {
        status,
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

fn read_all(pipe: Option<&mut impl Read>) -> String {
    let mut bytes = Vec::new();
    if let Some(pipe) = pipe {
        let _ = pipe.read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Runs `openssl s_client -connect <addr> <args>` with `stdin` as the data to send.
///
/// Pass `-ign_eof` with a `Connection: close` request when the output must
/// include what arrives after the handshake (TLS 1.3 session tickets, the response).
pub fn s_client(addr: std::net::SocketAddr, args: &[&str], stdin: &[u8]) -> ToolOutput {
    let connect = addr.to_string();
    let mut all = vec!["s_client", "-connect", connect.as_str()];
    all.extend_from_slice(args);
    run_tool("openssl", all, stdin, Duration::from_secs(20))
}

/// Runs `curl <args>` (add `-sS` yourself if you want quiet output with errors).
pub fn curl(args: &[&str]) -> ToolOutput {
    run_tool("curl", args, b"", Duration::from_secs(30))
}

/// A child process (a peer server such as `openssl s_server`) killed and
/// reaped when the test drops it.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
