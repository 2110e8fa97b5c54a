//! Running the real `tern` binary: start it, wait until it listens, read what
//! it printed, signal it, and kill it when the test is over.
//!
//! [`tern_bin`] finds the binary cargo built for the running test;
//! [`Served`] is the harness most tests want: tern in front of a backend,
//! with a CA its clients trust, built by [`ServedBuilder`]. The waits here
//! ([`wait_until`], [`listening`]) are how a test says "until this is true,
//! within a deadline" instead of sleeping.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::certs::CertFiles;

mod served;

pub use served::{ConfigContext, PlainResponse, Served, ServedBuilder};

/// The `tern` binary under test: `CARGO_BIN_EXE_tern` when cargo set it for
/// the running test, else `tern` next to the test executable's `deps`
/// folder (where cargo puts both when the test binary is run by hand).
///
/// Panics when neither exists: only the `tern` package's integration tests
/// make cargo build the binary.
pub fn tern_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let from_cargo = std::env::var_os("CARGO_BIN_EXE_tern").map(PathBuf::from);
        let beside_deps = std::env::current_exe().ok().and_then(|exe| {
            let profile_dir = exe.parent()?.parent()?;
            Some(profile_dir.join(format!("tern{}", std::env::consts::EXE_SUFFIX)))
        });
        from_cargo
            .into_iter()
            .chain(beside_deps)
            .find(|path| path.is_file())
            .unwrap_or_else(|| {
                panic!(
                    "no tern binary: run the tern package's tests with cargo (cargo test -p tern)"
                )
            })
    })
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

/// The value of field `key` in a text access-log line (`key=value` fields
/// separated by spaces).
pub fn log_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|field| field.strip_prefix(key)?.strip_prefix('='))
}

/// Polls `done` every 10 ms until it is true; panics naming `what` when
/// `timeout` passes first. The way to wait for something to happen (a
/// log line, a counter, a socket state) instead of sleeping and hoping.
pub fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Like [`wait_until`], returning whether `done` became true in time
/// instead of panicking.
pub fn eventually(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A TCP socket of this network namespace, as `/proc/net/tcp` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSocket {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// The kernel's state number: 0x01 ESTABLISHED, 0x08 CLOSE_WAIT,
    /// 0x0A LISTEN (see `include/net/tcp_states.h`).
    pub state: u8,
}

impl TcpSocket {
    pub const ESTABLISHED: u8 = 0x01;
    pub const CLOSE_WAIT: u8 = 0x08;
    pub const LISTEN: u8 = 0x0A;
}

/// Every TCP socket of this network namespace (IPv4 and IPv6), read from
/// `/proc/net/tcp` and `/proc/net/tcp6` without touching any of them.
pub fn tcp_sockets() -> Vec<TcpSocket> {
    let mut sockets = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(remote), Some(state)) = (
                fields.get(1).and_then(|f| proc_net_addr(f)),
                fields.get(2).and_then(|f| proc_net_addr(f)),
                fields.get(3).and_then(|f| u8::from_str_radix(f, 16).ok()),
            ) else {
                continue;
            };
            sockets.push(TcpSocket {
                local,
                remote,
                state,
            });
        }
    }
    sockets
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the address
/// as the kernel prints it, 32-bit words in host byte order.
fn proc_net_addr(field: &str) -> Option<SocketAddr> {
    let (addr, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let mut octets = Vec::with_capacity(16);
    for i in (0..addr.len()).step_by(8) {
        let word = u32::from_str_radix(addr.get(i..i + 8)?, 16).ok()?;
        octets.extend_from_slice(&word.to_ne_bytes());
    }
    let ip: std::net::IpAddr = match octets.len() {
        4 => <[u8; 4]>::try_from(octets.as_slice()).ok()?.into(),
        16 => <[u8; 16]>::try_from(octets.as_slice()).ok()?.into(),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Whether a socket of this network namespace is in the LISTEN state on
/// `addr`. Read from /proc ([`tcp_sockets`]), so the check itself never
/// becomes a connection the server must handle.
pub fn listening(addr: SocketAddr) -> bool {
    tcp_sockets()
        .iter()
        .any(|s| s.state == TcpSocket::LISTEN && s.local == addr)
}

/// Waits until `addr` accepts a TCP connection; panics after `timeout`.
pub fn wait_accepting(addr: SocketAddr, timeout: Duration) {
    wait_until(&format!("a listener on {addr}"), timeout, || {
        TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
    });
}

/// Resident set size of process `pid` in KiB (`VmRSS` of
/// `/proc/<pid>/status`), `None` when it cannot be read.
pub fn rss_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

pub use crate::ports::{free_addr, free_addr_v6};

/// How long `start` waits for tern to listen. Debug builds on a loaded
/// 2-core machine can be slow to start (RSA key generation is not involved).
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// The environment variable whose value, when set, is the `RUST_LOG` of
/// every tern a test starts (`TERN_TEST_RUST_LOG=debug cargo test ...`);
/// otherwise tern runs without `RUST_LOG`, whatever the caller's
/// environment says.
pub const LOG_FILTER_VAR: &str = "TERN_TEST_RUST_LOG";

/// A running tern process, killed on drop.
pub struct TernProcess {
    child: Child,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
    status: Option<ExitStatus>,
}

impl TernProcess {
    /// Spawns `tern <args>` with stdout and stderr captured; does not wait.
    pub fn spawn<I, S>(bin: &Path, args: I) -> TernProcess
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let mut command = Command::new(bin);
        command
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Deterministic logs: the test decides the format with flags.
            .env_remove("RUST_LOG");
        // To chase a failure (a flaky one above all): tern's log at the
        // level asked for, in the stderr a failing test prints.
        if let Some(filter) = std::env::var_os(LOG_FILTER_VAR) {
            command.env("RUST_LOG", filter);
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(collect(out, stdout.clone()));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(collect(err, stderr.clone()));
        }
        TernProcess {
            child,
            stdout,
            stderr,
            readers,
            status: None,
        }
    }

    /// Spawns `tern <args>` and waits until it listens on `addr`
    /// (stderr says `listening on <addr>` and a TCP connect succeeds).
    ///
    /// Panics with tern's stderr when it exits or does not get ready in time.
    pub fn start<I, S>(bin: &Path, addr: SocketAddr, args: I) -> TernProcess
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut tern = TernProcess::spawn(bin, args);
        if let Err(problem) = tern.wait_ready(addr, READY_TIMEOUT) {
            panic!(
                "tern did not get ready on {addr}: {problem}\n--- stderr ---\n{}",
                tern.stderr_text()
            );
        }
        tern
    }

    /// Like [`TernProcess::start`] on a free port of 127.0.0.1 given to
    /// `args_for`. A free port can be taken by another test between the probe
    /// and tern's bind; when tern then exits saying the address is in use, it
    /// is started again on another port (three tries).
    pub fn start_on_free_port<F>(bin: &Path, args_for: F) -> (TernProcess, SocketAddr)
    where
        F: Fn(SocketAddr) -> Vec<OsString>,
    {
        let mut last_stderr = String::new();
        for _ in 0..3 {
            let addr = free_addr();
            let mut tern = TernProcess::spawn(bin, args_for(addr));
            match tern.wait_ready(addr, READY_TIMEOUT) {
                Ok(()) => return (tern, addr),
                Err(problem) => {
                    last_stderr = format!("{problem}\n{}", tern.stderr_text());
                    if !last_stderr.to_ascii_lowercase().contains("in use") {
                        break;
                    }
                }
            }
        }
        panic!("tern did not get ready:\n--- stderr ---\n{last_stderr}");
    }

    /// Waits until stderr announces `listening on <addr>` and `addr` accepts.
    pub fn wait_ready(&mut self, addr: SocketAddr, timeout: Duration) -> Result<(), String> {
        let needle = format!("listening on {addr}");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_status() {
                return Err(format!("tern exited early with {status}"));
            }
            if self.stderr_text().contains(&needle)
                && TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("no `{needle}` within {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything tern wrote to stdout so far (the access log by default).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&lock(&self.stdout)).into_owned()
    }

    /// Everything tern wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&lock(&self.stderr)).into_owned()
    }

    /// Waits until stdout has at least `count` lines containing `needle`,
    /// and returns those lines; `Err` carries all of stdout on timeout.
    pub fn wait_stdout_lines(
        &self,
        needle: &str,
        count: usize,
        timeout: Duration,
    ) -> Result<Vec<String>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.stdout_text();
            let lines: Vec<String> = text
                .lines()
                .filter(|line| line.contains(needle))
                .map(str::to_string)
                .collect();
            if lines.len() >= count {
                return Ok(lines);
            }
            if Instant::now() >= deadline {
                return Err(text);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM (graceful shutdown).
    pub fn terminate(&self) {
        self.signal(libc::SIGTERM);
    }

    /// Sends SIGINT (graceful shutdown, as Ctrl-C does).
    pub fn interrupt(&self) {
        self.signal(libc::SIGINT);
    }

    fn signal(&self, signal: libc::c_int) {
        let Ok(pid) = libc::pid_t::try_from(self.child.id()) else {
            panic!("pid {} does not fit pid_t", self.child.id());
        };
        if self.status.is_some() {
            return;
        }
        // SAFETY: kill(2) takes plain integers and touches no memory of ours.
        // `pid` is our own child, which has not been reaped (status is None),
        // so the id cannot have been reused by another process.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill({pid}, {signal}) failed");
    }

    /// The exit status if tern has exited, without waiting.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Waits up to `timeout` for tern to exit; `None` if it is still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_status() {
                self.join_readers();
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn join_readers(&mut self) {
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
    }
}

impl Drop for TernProcess {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.join_readers();
    }
}

/// The result of running tern to completion.
#[derive(Debug)]
pub struct Finished {
    /// Exit status, `None` if tern had to be killed at the timeout.
    pub status: Option<ExitStatus>,
    /// Captured stdout.
    pub stdout: String,
    /// Captured stderr.
    pub stderr: String,
}

/// Runs `tern <args>` until it exits or `timeout` passes (then kills it).
pub fn run_to_exit<I, S>(bin: &Path, args: I, timeout: Duration) -> Finished
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let mut tern = TernProcess::spawn(bin, args);
    let status = tern.wait_exit(timeout);
    if status.is_none() {
        let _ = tern.child.kill();
        let _ = tern.child.wait();
        tern.join_readers();
    }
    Finished {
        status,
        stdout: tern.stdout_text(),
        stderr: tern.stderr_text(),
    }
}

fn collect(source: impl Read + Send + 'static, sink: Arc<Mutex<Vec<u8>>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(source);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => lock(&sink).extend_from_slice(&line),
            }
        }
    })
}

fn lock(buffer: &Mutex<Vec<u8>>) -> std::sync::MutexGuard<'_, Vec<u8>> {
    // A reader thread cannot panic while holding the lock, but be tolerant.
    buffer
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
