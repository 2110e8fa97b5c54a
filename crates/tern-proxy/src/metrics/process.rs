//! The process's own CPU time, memory and file descriptors, read from
//! /proc when scraped, under the names Prometheus client libraries use
//! (`process_cpu_seconds_total`, ...), so stock dashboards work.
//!
//! CPU time matters most here: `rate(process_cpu_seconds_total[1m])`
//! divided by the request or handshake rate is the server CPU per
//! operation, the figure tern's benchmarks are judged by.
//!
//! Nothing here runs on the request path. On a system without /proc the
//! samples are left out.

use std::fs;

/// Clock ticks per second in /proc/PID/stat: the kernel's USER_HZ, which
/// Linux fixes at 100 for user space on every architecture tern targets.
const USER_HZ: u64 = 100;

/// What a scrape reads about the process; `None` where /proc did not say.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ProcessStats {
    /// User + system CPU time of all threads, µs.
    pub cpu_us: Option<u64>,
    /// Resident set size, bytes.
    pub resident_bytes: Option<u64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// The soft limit on open file descriptors.
    pub max_fds: Option<u64>,
}

impl ProcessStats {
    /// Reads the calling process's figures.
    pub fn read() -> Self {
        ProcessStats {
            cpu_us: fs::read_to_string("/proc/self/stat")
                .ok()
                .and_then(|s| cpu_us_from_stat(&s)),
            resident_bytes: fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|s| resident_bytes_from_status(&s)),
            open_fds: fs::read_dir("/proc/self/fd")
                .ok()
                .map(|dir| dir.count() as u64),
            max_fds: fs::read_to_string("/proc/self/limits")
                .ok()
                .and_then(|s| max_fds_from_limits(&s)),
        }
    }
}

/// utime + stime (fields 14 and 15) of /proc/PID/stat, in µs. The command
/// name (field 2) is in parentheses and may hold spaces or parentheses, so
/// fields are counted from the last ')'.
fn cpu_us_from_stat(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_ascii_whitespace().skip(11); // from field 3
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) * (1_000_000 / USER_HZ))
}

/// `VmRSS:  1234 kB` of /proc/PID/status, in bytes.
fn resident_bytes_from_status(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The soft limit of `Max open files` in /proc/PID/limits.
fn max_fds_from_limits(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_formats() {
        let stat = "4242 (tern (worker) 1) S 1 4242 4242 0 -1 4194560 2471 0 0 0 \
                    150 25 0 0 20 0 3 0 1234 5678 90 18446744073709551615";
        assert_eq!(cpu_us_from_stat(stat), Some(1_750_000));
        let status = "Name:\ttern\nVmPeak:\t  9000 kB\nVmRSS:\t    2048 kB\n";
        assert_eq!(resident_bytes_from_status(status), Some(2 * 1024 * 1024));
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(max_fds_from_limits(limits), Some(1024));
        assert_eq!(cpu_us_from_stat("garbage"), None);
    }

    #[test]
    fn reads_this_process() {
        let stats = ProcessStats::read();
        assert!(stats.resident_bytes.is_some_and(|b| b > 0), "{stats:?}");
        let open = stats.open_fds.unwrap_or(0);
        assert!(open >= 3, "{stats:?}");
        assert!(stats.max_fds.is_some_and(|max| max >= open), "{stats:?}");
        assert!(stats.cpu_us.is_some(), "{stats:?}");
    }
}
