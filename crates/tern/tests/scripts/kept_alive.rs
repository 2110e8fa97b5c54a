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

/// Runs `script` with `env` (tern alone, one round): it must end well,
/// say how its window was taken (`window`), and record a round of
/// `workload` whose requests per second (cell 4) and server CPU µs per
/// request (cell 5) are figures above zero. Returns its stdout.
fn run_windowed(script: &str, env: &[(&str, &str)], window: &str, workload: &str) -> String {
    let out = run_script(script, env);
    let all = out.all();
    assert!(out.success(), "{all}");
    assert!(out.stdout.contains(window), "{all}");
    let cells: Vec<&str> = out
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("| {workload} | tern | 1 |")))
        .map(|l| l.split('|').map(str::trim).collect())
        .unwrap_or_else(|| panic!("no round row for {workload}:\n{all}"));
    let rate: f64 = cells[4].parse().unwrap_or(0.0);
    let cpu: f64 = cells[5].parse().unwrap_or(0.0);
    assert!(rate > 0.0 && cpu > 0.0, "{cells:?}\n{all}");
    out.stdout
}

#[test]
fn terminators_script_keepalive_window_short_form() {
    if !all_installed(&["nginx", "wrk", "taskset", "ss"]) {
        return;
    }
    let stdout = run_windowed(
        "terminators.sh",
        &[
            ("SERVERS", "tern"),
            ("WORKLOADS", "keepalive"),
            ("DURATION", "1"),
            ("RUNS", "1"),
            ("CONNS", "10"),
        ],
        "measured over a 1-s window inside it opened 0.5 s after its 10 connections were up",
        "keepalive",
    );
    // WORKLOADS=keepalive: no handshake round.
    assert!(!stdout.contains("| handshake | tern |"), "{stdout}");
}

/// h2.sh in its short form (tern alone, one round of a 1-s window, 10
/// connections) with `extra` settings; returns its stdout.
fn run_h2_short(extra: &[(&str, &str)], window: &str) -> String {
    let mut env = vec![
        ("SERVERS", "tern"),
        ("DURATION", "1"),
        ("RUNS", "1"),
        ("CONNS", "10"),
    ];
    env.extend_from_slice(extra);
    run_windowed("h2.sh", &env, window, "h2")
}

#[test]
fn h2_script_window_short_form() {
    if !all_installed(&["nginx", "h2load", "taskset", "ss"]) {
        return;
    }
    // CONNS and STREAMS reach h2load, the wait for its connections and
    // the table's label.
    let stdout = run_h2_short(
        &[("STREAMS", "4")],
        "Each round's figures span a 1-s window inside a 4-s h2load run, opened 0.5 s after its 10 connections were up",
    );
    assert!(
        stdout.contains("| HTTP/2, 100 B (h2load -c10 -m4) |"),
        "{stdout}"
    );
    assert!(stdout.contains("h2load -c 10 -m 4 -D 4"), "{stdout}");
    // The round counted at its level: parked or not, never both or none.
    let level = stdout
        .lines()
        .find(|l| l.starts_with("- h2: tern: "))
        .unwrap_or_else(|| panic!("no level line:\n{stdout}"));
    assert_eq!(
        level.matches("no round").count(),
        1,
        "one round, at one level: {level}"
    );
}

/// Whether perf can count here: a measurement tool, not installed by
/// .ci/run, so this test runs where perf does (a developer's machine)
/// and is skipped elsewhere.
fn perf_counts() -> bool {
    let ok = std::process::Command::new("perf")
        .args(["stat", "-e", "task-clock", "--", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: perf cannot count here");
    }
    ok
}

#[test]
fn h2_script_pmu_counts_reach_the_round_table() {
    if !all_installed(&["nginx", "h2load", "taskset", "ss"]) || !perf_counts() {
        return;
    }
    // Software events stand in for the hardware ones a VM may not have:
    // the counts must reach each round's row, one column per event.
    let stdout = run_h2_short(
        &[("PMU", "1"), ("PMU_EVENTS", "context-switches,page-faults")],
        "Each round's figures span a 1-s window",
    );
    let header: Vec<&str> = stdout
        .lines()
        .find(|l| l.starts_with("| workload | server | round |"))
        .map(|l| l.split('|').map(str::trim).collect())
        .unwrap_or_else(|| panic!("no round table:\n{stdout}"));
    let row: Vec<&str> = stdout
        .lines()
        .find(|l| l.starts_with("| h2 | tern | 1 |"))
        .map(|l| l.split('|').map(str::trim).collect())
        .unwrap_or_else(|| panic!("no round row:\n{stdout}"));
    for event in ["context-switches", "page-faults"] {
        let at = header
            .iter()
            .position(|c| *c == event)
            .unwrap_or_else(|| panic!("no {event} column:\n{stdout}"));
        assert!(
            row[at].parse::<f64>().is_ok(),
            "{event}: {:?}\n{stdout}",
            row[at]
        );
    }
}
