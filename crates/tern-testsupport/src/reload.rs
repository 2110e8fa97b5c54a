//! Driving tern's hot reload: SIGHUP, and waiting for what tern says about
//! it on stderr (`reloaded`, `reload refused`).

use std::time::{Duration, Instant};

use crate::tern::TernProcess;

/// Sends SIGHUP to `tern` (reload). Panics if tern has already exited.
pub fn hangup(tern: &mut TernProcess) {
    if let Some(status) = tern.try_status() {
        panic!(
            "tern exited ({status}) before SIGHUP\n{}",
            tern.stderr_text()
        );
    }
    let Ok(pid) = libc::pid_t::try_from(tern.pid()) else {
        panic!("pid {} does not fit pid_t", tern.pid());
    };
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    // `pid` is our own child and try_status() just saw it unreaped, so the
    // id cannot belong to another process.
    let rc = unsafe { libc::kill(pid, libc::SIGHUP) };
    assert_eq!(rc, 0, "kill({pid}, SIGHUP) failed");
}

/// Lines of tern's stderr containing `needle`.
pub fn stderr_lines(tern: &TernProcess, needle: &str) -> Vec<String> {
    tern.stderr_text()
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

/// Waits until stderr has at least `count` lines containing `needle`;
/// `Err` carries all of stderr on timeout.
pub fn wait_stderr_lines(
    tern: &TernProcess,
    needle: &str,
    count: usize,
    timeout: Duration,
) -> Result<Vec<String>, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let lines = stderr_lines(tern, needle);
        if lines.len() >= count {
            return Ok(lines);
        }
        if Instant::now() >= deadline {
            return Err(tern.stderr_text());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
