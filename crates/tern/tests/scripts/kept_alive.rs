//! The kept-alive comparisons of `bench/` (terminators.sh's keepalive
//! rounds, h2.sh) in a short form, tern alone: their figures are taken over
//! a window inside the load's run, once its connections are up, with the
//! backend's request count over that window (bench/counters.sh, "A load
//! tool's run"). Each must find the connections up, close its window
//! before the load ends, and count requests in it.

use super::{installed, run_script};

/// Whether every one of `tools` is installed (the first missing one is
/// said, or fails the test in CI).
fn all_installed(tools: &[&str]) -> bool {
    tools.iter().all(|tool| installed(tool))
}

/// The cells of the per-round row of `workload` for tern in round 1.
fn round_row<'a>(stdout: &'a str, workload: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .find(|l| l.starts_with(&format!("| {workload} | tern | 1 |")))
        .map(|l| l.split('|').map(str::trim).collect())
        .unwrap_or_else(|| panic!("no round row for {workload}:\n{stdout}"))
}

/// Requests per second (cell 4) and server CPU µs per request (cell 5) of
/// a round row: both must be figures above zero.
fn assert_counted(cells: &[&str], all: &str) {
    let rate: f64 = cells[4].parse().unwrap_or(0.0);
    let cpu: f64 = cells[5].parse().unwrap_or(0.0);
    assert!(rate > 0.0 && cpu > 0.0, "{cells:?}\n{all}");
}

#[test]
fn terminators_script_keepalive_window_short_form() {
    if !all_installed(&["nginx", "wrk", "taskset", "ss"]) {
        return;
    }
    let out = run_script(
        "terminators.sh",
        &[
            ("SERVERS", "tern"),
            ("WORKLOADS", "keepalive"),
            ("DURATION", "1"),
            ("RUNS", "1"),
            ("CONNS", "10"),
        ],
    );
    assert!(out.success(), "{}", out.all());
    assert!(
        out.stdout.contains(
            "measured over a 1-s window inside it opened 0.5 s after its 10 connections were up"
        ),
        "{}",
        out.all()
    );
    // WORKLOADS=keepalive: no handshake round.
    assert!(
        !out.stdout.contains("| handshake | tern |"),
        "{}",
        out.all()
    );
    assert_counted(&round_row(&out.stdout, "keepalive"), &out.all());
}

#[test]
fn h2_script_window_short_form() {
    if !all_installed(&["nginx", "h2load", "taskset", "ss"]) {
        return;
    }
    let out = run_script(
        "h2.sh",
        &[("SERVERS", "tern"), ("DURATION", "1"), ("RUNS", "1")],
    );
    assert!(out.success(), "{}", out.all());
    assert!(
        out.stdout
            .contains("Each round's figures span a 1-s window inside a 4-s h2load run"),
        "{}",
        out.all()
    );
    assert_counted(&round_row(&out.stdout, "h2"), &out.all());
}
