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
