//! A real Python origin in the style of `http.server`: HTTP/1.1 keepalive,
//! Nagle left on, and every response written as its head and then its
//! body (`end_headers()` flushes the head in one write). This is the
//! backend of the split-write trap on the backend leg: its body waits for
//! the ACK of its head, which a proxy's kernel delays up to 40 ms.
//!
//! Paths: `/split` (100-byte body after the head), `/dribble` (a chunked
//! body of five 20-byte chunks, each its own write).
//!
//! [`PythonOrigin::faults`] is another origin, one that fails on purpose
//! (bench/fault_origin.py: killed, reset, cut or stalled mid-response).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use crate::tools::KillOnDrop;

/// The origin, shared with `bench/split-backend.sh`.
const SCRIPT: &str = include_str!("../../../bench/split_origin.py");

/// The failing origin, shared with `bench/backend-faults.sh`.
const FAULTS: &str = include_str!("../../../bench/fault_origin.py");

/// The counting, optionally rate-limited origin, shared with
/// `bench/capacity.sh`.
const SCALE: &str = include_str!("../../../bench/scale_origin.py");

/// The running origin; killed when dropped.
pub struct PythonOrigin {
    addr: SocketAddr,
    _child: KillOnDrop,
}

impl PythonOrigin {
    /// Starts `python3` with the origin on a free loopback port.
    pub fn start() -> PythonOrigin {
        PythonOrigin::run(&["-c", SCRIPT])
    }

    /// Starts the failing origin on a free loopback port; `/stall` holds
    /// its connection `stall_seconds`.
    pub fn faults(stall_seconds: u32) -> PythonOrigin {
        PythonOrigin::run(&["-c", FAULTS, "0", &stall_seconds.to_string()])
    }

    /// Starts the counting origin (bench/scale_origin.py): `GET /counts`
    /// says how many requests each path got; with `rate > 0` it serves at
    /// most `rate` requests per second, queueing the rest.
    pub fn counting(rate: f64) -> PythonOrigin {
        PythonOrigin::run(&["-c", SCALE, &rate.to_string()])
    }

    /// The counting origin limited to `rate` requests per second that
    /// refuses with 503 a request that would queue longer than
    /// `max_queue_s`.
    pub fn rate_limited(rate: f64, max_queue_s: f64) -> PythonOrigin {
        PythonOrigin::run(&[
            "-c",
            SCALE,
            &rate.to_string(),
            "0",
            &max_queue_s.to_string(),
        ])
    }

    /// Requests served per path (bench/scale_origin.py's `/counts`).
    pub fn counts(&self) -> std::collections::BTreeMap<String, u64> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(self.addr).expect("connect to the origin");
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .expect("timeout");
        s.write_all(b"GET /counts HTTP/1.1\r\nHost: o\r\nConnection: close\r\n\r\n")
            .expect("ask for counts");
        let mut raw = String::new();
        s.read_to_string(&mut raw).expect("read counts");
        let body = raw.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        serde_json::from_str(body).unwrap_or_else(|e| panic!("counts {body:?}: {e}"))
    }

    fn run(args: &[&str]) -> PythonOrigin {
        let mut child = Command::new("python3")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 (the split-write origin) starts");
        let stdout = child.stdout.take().expect("stdout");
        let child = KillOnDrop(child);
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the origin prints its port");
        let port: u16 = line.trim().parse().expect("a port number");
        PythonOrigin {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            _child: child,
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// Runs `python SCRIPT 0 ARGS...` (a test's own origin script, e.g. a
/// WebSocket server), which binds a port of 127.0.0.1 itself and prints
/// `listening PORT` once it accepts there; waits for that line (60 s at
/// most). The script binds rather than being handed a port picked here:
/// a port picked and released here could be taken by another test while
/// the script is still importing its server (a second or more on a busy
/// machine), and the wait would then see that test's listener. The
/// process is killed when the first value is dropped. Its stderr is
/// dropped, or passed on when [`crate::tern::LOG_FILTER_VAR`] is set.
pub fn start_script(
    python: &str,
    script: &std::path::Path,
    args: &[&std::ffi::OsStr],
) -> (KillOnDrop, SocketAddr) {
    let mut child = Command::new(python)
        .arg(script)
        .arg("0")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // Its log beside tern's when a failure is being chased.
        .stderr(match std::env::var_os(crate::tern::LOG_FILTER_VAR) {
            Some(_) => Stdio::inherit(),
            None => Stdio::null(),
        })
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", script.display()));
    let stdout = child.stdout.take().expect("stdout");
    let mut origin = KillOnDrop(child);
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    // Reads the port line, then drains the rest (the scripts print as they
    // serve) until the process ends.
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref() {
            let Ok(line) = line else { return };
            if let Some(port) = line.strip_prefix("listening ") {
                let _ = port_tx.send(port.trim().parse::<u16>().ok());
                break;
            }
        }
        for _ in lines {}
    });
    // Importing Hypercorn alone took over 20 s at load 35-45 on 2 cores.
    let wait = std::time::Duration::from_secs(60);
    let port = match port_rx.recv_timeout(wait) {
        Ok(Some(port)) => port,
        Ok(None) => panic!("{}: a `listening` line without a port", script.display()),
        // The script closed its stdout: it ended (an import failed...).
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!(
            "{} ended without a `listening PORT` line: {:?}",
            script.display(),
            origin.0.wait()
        ),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!(
            "{} printed no `listening PORT` line within {wait:?}",
            script.display()
        ),
    };
    (origin, SocketAddr::from(([127, 0, 0, 1], port)))
}
