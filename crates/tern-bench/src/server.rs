//! The server's side of the cost: CPU time (utime + stime from
//! /proc/PID/stat) of the server processes, read around each round of a
//! target. The PIDs are given, or found as the owners of the TCP socket
//! listening on the target's port when the target is on this machine.
//!
//! Linux only; everything read from /proc is parsed defensively: a field
//! that is missing or malformed makes the figure unknown, never a panic.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::env::Address;
use crate::error::BenchError;

/// /proc reports CPU times in USER_HZ ticks, fixed at 100 per second.
const USER_HZ: f64 = 100.0;

/// Below this many ticks a CPU figure is off by more than 1% from the
/// rounding of the two readings alone: reported, with a warning.
pub const FEW_TICKS: u64 = 100;

/// How the server PIDs of a target were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PidSource {
    /// `--server-pid` on the command line.
    Given,
    /// Owners of the socket listening on the target's port.
    ListeningSocketOwner,
}

impl std::fmt::Display for PidSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PidSource::Given => "given",
            PidSource::ListeningSocketOwner => "listening-socket owner",
        })
    }
}

/// Server CPU of one target over that target's rounds only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerCpu {
    /// The processes whose CPU time was summed.
    pub pids: Vec<u32>,
    /// How they were found; `None` when none were.
    pub found_by: Option<PidSource>,
    /// utime + stime of those processes during the target's rounds, seconds
    /// (10 ms resolution); `None` when unknown.
    pub cpu_s: Option<f64>,
    /// `cpu_s` per completed request, microseconds.
    pub us_per_request: Option<f64>,
    /// `cpu_s` in /proc's 10 ms ticks: the resolution the figure rests on
    /// (each reading rounds down to a tick, so a difference is good to
    /// about one tick). `None` when unknown or in older reports.
    #[serde(default)]
    pub ticks: Option<u64>,
    /// Why the figure is unknown, when it is.
    pub unknown_reason: Option<String>,
}

impl ServerCpu {
    /// An unknown figure, with the reason.
    pub fn unknown(pids: Vec<u32>, found_by: Option<PidSource>, reason: String) -> ServerCpu {
        ServerCpu {
            pids,
            found_by,
            cpu_s: None,
            us_per_request: None,
            ticks: None,
            unknown_reason: Some(reason),
        }
    }

    /// True when the figure rests on fewer than [`FEW_TICKS`] ticks.
    pub fn few_ticks(&self) -> bool {
        self.ticks.is_some_and(|t| t < FEW_TICKS)
    }

    /// The per-request figure with no more digits than its ticks carry:
    /// one tick spread over the requests is its uncertainty.
    fn per_request_text(&self) -> String {
        let Some(us) = self.us_per_request else {
            return "no request completed".to_string();
        };
        let Some(ticks) = self.ticks else {
            return format!("{us:.1} µs per request");
        };
        if ticks == 0 {
            return format!(
                "0 ticks of 10 ms: under one tick over the whole run, no figure per request; fewer than {FEW_TICKS} ticks"
            );
        }
        let tick_us = us / ticks as f64;
        let per_request = format!(
            "{} ± {} µs per request",
            round_to(us, tick_us),
            round_to(tick_us, tick_us)
        );
        if ticks < FEW_TICKS {
            format!(
                "{ticks} ticks of 10 ms; {per_request}; fewer than {FEW_TICKS} ticks, not a figure to compare"
            )
        } else {
            format!("{ticks} ticks of 10 ms; {per_request}")
        }
    }

    /// The per-request figure alone, for a headline: `20.3 µs`, with no more
    /// digits than its ticks carry, `unknown` when there is none.
    pub fn headline_text(&self) -> String {
        match (self.us_per_request, self.ticks) {
            (Some(us), Some(ticks)) if ticks > 0 => {
                let few = if self.few_ticks() {
                    format!(" ({ticks} ticks)")
                } else {
                    String::new()
                };
                format!("{} µs{few}", round_to(us, us / ticks as f64))
            }
            (Some(us), None) => format!("{us:.1} µs"),
            _ => "unknown".to_string(),
        }
    }

    /// The figure as one line of text (no label).
    pub fn describe(&self) -> String {
        let pids = self
            .pids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let by = self.found_by.map(|b| b.to_string()).unwrap_or_default();
        match (self.cpu_s, &self.unknown_reason) {
            (Some(cpu), _) => format!(
                "{cpu:.2} s ({}), pid {pids} ({by})",
                self.per_request_text()
            ),
            (None, reason) => {
                let reason = reason.as_deref().unwrap_or("not measured");
                if pids.is_empty() {
                    format!("unknown ({reason})")
                } else {
                    format!("unknown ({reason}; pid {pids}, {by})")
                }
            }
        }
    }
}

/// `v` written with the digits `uncertainty` leaves meaningful: 20 for
/// (20.3, 5), 20.3 for (20.31, 0.2).
fn round_to(v: f64, uncertainty: f64) -> String {
    if uncertainty <= 0.0 || !uncertainty.is_finite() {
        return format!("{v:.1}");
    }
    let decimals = (-uncertainty.log10().floor()).max(0.0) as usize;
    format!("{v:.decimals$}")
}

/// Ticks in `cpu_s` seconds of CPU.
pub fn ticks(cpu_s: f64) -> u64 {
    (cpu_s * USER_HZ).round().max(0.0) as u64
}

/// A socket line of /proc/net/tcp or /proc/net/tcp6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcTcpSocket {
    /// Local address and port.
    pub local: SocketAddr,
    /// Kernel state (`0x0A` is LISTEN).
    pub state: u8,
    /// Socket inode (what /proc/PID/fd links name as `socket:[INODE]`).
    pub inode: u64,
}

/// TCP_LISTEN in /proc/net/tcp's `st` column.
pub const TCP_LISTEN: u8 = 0x0A;

/// Parses one line of /proc/net/tcp (`ipv6 == false`) or /proc/net/tcp6.
/// The header line and malformed lines give `None`. Addresses are printed
/// by the kernel as native-endian 32-bit words, so this reads them back on
/// the machine that wrote them.
pub fn parse_proc_net_tcp_line(line: &str, ipv6: bool) -> Option<ProcTcpSocket> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    if fields.len() < 10 || !fields[0].ends_with(':') {
        return None;
    }
    let (addr, port) = fields[1].split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = if ipv6 {
        if addr.len() != 32 {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (i, chunk) in bytes.chunks_mut(4).enumerate() {
            let word = u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16).ok()?;
            chunk.copy_from_slice(&word.to_ne_bytes());
        }
        IpAddr::V6(Ipv6Addr::from(bytes))
    } else {
        if addr.len() != 8 {
            return None;
        }
        let word = u32::from_str_radix(addr, 16).ok()?;
        IpAddr::V4(Ipv4Addr::from(word.to_ne_bytes()))
    };
    Some(ProcTcpSocket {
        local: SocketAddr::new(ip, port),
        state: u8::from_str_radix(fields[3], 16).ok()?,
        inode: fields[9].parse().ok()?,
    })
}

/// Whether a listener bound to `local` accepts connections to `target`:
/// same port, and the same address or a wildcard (`::` also accepts IPv4
/// unless the socket is v6-only, which /proc does not say; we count it).
fn listener_matches(local: SocketAddr, target: SocketAddr) -> bool {
    if local.port() != target.port() {
        return false;
    }
    let (l, t) = (local.ip().to_canonical(), target.ip().to_canonical());
    l == t
        || match local.ip() {
            IpAddr::V4(a) => a.is_unspecified() && t.is_ipv4(),
            IpAddr::V6(a) => a.is_unspecified(),
        }
}

/// Inodes of the sockets listening where `target` connects.
fn listening_inodes(target: SocketAddr) -> Result<Vec<u64>, BenchError> {
    let mut inodes = Vec::new();
    for (path, ipv6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            // A kernel without IPv6 has no tcp6.
            Err(e) if ipv6 && e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(BenchError::ServerCpu(format!("{path}: {e}"))),
        };
        inodes.extend(
            text.lines()
                .filter_map(|l| parse_proc_net_tcp_line(l, ipv6))
                .filter(|s| s.state == TCP_LISTEN && s.inode != 0)
                .filter(|s| listener_matches(s.local, target))
                .map(|s| s.inode),
        );
    }
    inodes.sort_unstable();
    inodes.dedup();
    Ok(inodes)
}

/// The processes holding one of `inodes` open, and how many processes'
/// descriptors could not be read (other users' processes).
fn socket_owners(inodes: &[u64]) -> Result<(Vec<u32>, usize), BenchError> {
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let proc_dir =
        std::fs::read_dir("/proc").map_err(|e| BenchError::ServerCpu(format!("/proc: {e}")))?;
    let mut owners = Vec::new();
    let mut unreadable = 0;
    for entry in proc_dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            unreadable += 1;
            continue;
        };
        let owns = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .ok()
                .and_then(|l| l.to_str().map(|l| wanted.iter().any(|w| w == l)))
                .unwrap_or(false)
        });
        if owns {
            owners.push(pid);
        }
    }
    owners.sort_unstable();
    Ok((owners, unreadable))
}

/// Finds the processes owning the socket that listens where the target's
/// addresses connect. `Err` carries the reason none were found, for the
/// report.
pub fn detect_server_pids(addresses: &[Address]) -> Result<Vec<u32>, String> {
    let local: Vec<&Address> = addresses
        .iter()
        .filter(|a| a.loopback || a.same_machine)
        .collect();
    if local.is_empty() {
        return Err("target is not on this machine; give --server-pid".to_string());
    }
    let mut inodes = Vec::new();
    for a in &local {
        inodes.extend(listening_inodes(a.addr).map_err(|e| e.to_string())?);
    }
    inodes.sort_unstable();
    inodes.dedup();
    let port = local[0].addr.port();
    if inodes.is_empty() {
        return Err(format!(
            "no listening socket on port {port} in /proc/net/tcp*"
        ));
    }
    let (owners, unreadable) = socket_owners(&inodes).map_err(|e| e.to_string())?;
    if owners.is_empty() {
        return Err(format!(
            "the socket listening on port {port} belongs to no process whose descriptors are readable \
             ({unreadable} processes not readable: another user's?); give --server-pid"
        ));
    }
    Ok(owners)
}

/// utime + stime of one process, seconds, from /proc/PID/stat.
pub fn pid_cpu_seconds(pid: u32) -> Result<f64, BenchError> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path)
        .map_err(|e| BenchError::ServerCpu(format!("{path}: {e}")))?;
    parse_stat_cpu(&stat)
        .ok_or_else(|| BenchError::ServerCpu(format!("{path}: no utime/stime fields")))
}

/// Fields 14 and 15 of a /proc/PID/stat line, in seconds.
fn parse_stat_cpu(stat: &str) -> Option<f64> {
    // The command name (field 2) may contain spaces and ')'; count after the last ')'.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / USER_HZ)
}

/// Summed utime + stime of `pids`, seconds.
pub fn cpu_seconds(pids: &[u32]) -> Result<f64, BenchError> {
    pids.iter().map(|p| pid_cpu_seconds(*p)).sum()
}

/// Server CPU of one target, summed over that target's rounds only.
pub(crate) struct ServerMeter {
    pids: Vec<u32>,
    found_by: Option<PidSource>,
    cpu_s: f64,
    start: Option<f64>,
    /// Set once a reading failed (or no PIDs were found): the figure is
    /// then unknown for the whole run.
    failed: Option<String>,
}

impl ServerMeter {
    pub(crate) fn new(given: &[u32], addresses: &[Address]) -> ServerMeter {
        let (pids, found_by, failed) = if !given.is_empty() {
            (given.to_vec(), Some(PidSource::Given), None)
        } else {
            match detect_server_pids(addresses) {
                Ok(p) => (p, Some(PidSource::ListeningSocketOwner), None),
                Err(reason) => (Vec::new(), None, Some(reason)),
            }
        };
        ServerMeter {
            pids,
            found_by,
            cpu_s: 0.0,
            start: None,
            failed,
        }
    }

    pub(crate) fn read(&mut self) -> Option<f64> {
        if self.failed.is_some() {
            return None;
        }
        match cpu_seconds(&self.pids) {
            Ok(v) => Some(v),
            Err(e) => {
                self.failed = Some(format!("{e} (did the server exit?)"));
                None
            }
        }
    }

    pub(crate) fn before(&mut self) {
        self.start = self.read();
    }

    /// Adds the CPU time since [`ServerMeter::before`]; returns it.
    pub(crate) fn after(&mut self) -> Option<f64> {
        let (start, end) = (self.start.take()?, self.read()?);
        let spent = (end - start).max(0.0);
        self.cpu_s += spent;
        Some(spent)
    }

    /// The figure of one segment (a search's step at capacity) instead of
    /// the sum over the run.
    pub(crate) fn finish_with(mut self, cpu_s: Option<f64>, completed: u64) -> ServerCpu {
        match cpu_s {
            Some(c) => {
                self.cpu_s = c;
                self.finish(completed)
            }
            None if self.failed.is_none() => ServerCpu::unknown(
                self.pids,
                self.found_by,
                "not measured for the step at capacity".to_string(),
            ),
            None => self.finish(completed),
        }
    }

    pub(crate) fn finish(self, completed: u64) -> ServerCpu {
        if let Some(reason) = self.failed {
            return ServerCpu::unknown(self.pids, self.found_by, reason);
        }
        ServerCpu {
            pids: self.pids,
            found_by: self.found_by,
            cpu_s: Some(self.cpu_s),
            us_per_request: (completed > 0).then(|| self.cpu_s * 1e6 / completed as f64),
            ticks: Some(crate::server::ticks(self.cpu_s)),
            unknown_reason: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_net_tcp_lines() {
        let header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";
        assert_eq!(parse_proc_net_tcp_line(header, false), None);
        let v4 = "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 123456 1 0000000000000000 100 0 0 10 0";
        let s = parse_proc_net_tcp_line(v4, false).unwrap();
        assert_eq!(s.local, "127.0.0.1:8080".parse().unwrap());
        assert_eq!((s.state, s.inode), (TCP_LISTEN, 123456));
        let est = "   3: 0100007F:A2C4 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 999 1 0000000000000000 20 4 30 10 -1";
        let s = parse_proc_net_tcp_line(est, false).unwrap();
        assert_eq!((s.local.port(), s.state), (0xA2C4, 1));
        let v6_loop = "   1: 00000000000000000000000001000000:01BB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0";
        let s = parse_proc_net_tcp_line(v6_loop, true).unwrap();
        assert_eq!(s.local, "[::1]:443".parse().unwrap());
        assert_eq!(s.inode, 4242);
        let v6_any = "   2: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 77 1 0000000000000000 100 0 0 10 0";
        let s = parse_proc_net_tcp_line(v6_any, true).unwrap();
        assert_eq!(s.local, "[::]:8080".parse().unwrap());
        // Malformed lines are skipped, not trusted.
        assert_eq!(parse_proc_net_tcp_line("   0: zz:1F90 x 0A", false), None);
        assert_eq!(parse_proc_net_tcp_line(v4, true), None);
    }

    #[test]
    fn wildcards_match_their_family_and_v6_any_matches_all() {
        let t4: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let t6: SocketAddr = "[::1]:8080".parse().unwrap();
        assert!(listener_matches("0.0.0.0:8080".parse().unwrap(), t4));
        assert!(!listener_matches("0.0.0.0:8080".parse().unwrap(), t6));
        assert!(listener_matches("[::]:8080".parse().unwrap(), t4));
        assert!(listener_matches(
            "[::ffff:127.0.0.1]:8080".parse().unwrap(),
            t4
        ));
        assert!(!listener_matches("127.0.0.2:8080".parse().unwrap(), t4));
        assert!(!listener_matches("127.0.0.1:8081".parse().unwrap(), t4));
    }

    #[test]
    fn stat_cpu_fields_after_the_command_name() {
        let stat = "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 150 25 0 0 20 0 1 0 5 0 0";
        assert_eq!(parse_stat_cpu(stat), Some(1.75));
        assert_eq!(parse_stat_cpu("42 (x) S 1"), None);
    }

    #[test]
    fn finds_the_owner_of_our_own_listener() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let pids = detect_server_pids(&[Address::new(addr)]).unwrap();
        assert_eq!(pids, vec![std::process::id()]);
        assert!(cpu_seconds(&pids).unwrap() >= 0.0);
        drop(l);
        assert!(detect_server_pids(&[Address::new(addr)]).is_err());
    }
}
