//! Server CPU per request: measured from /proc around each round, for the
//! PIDs given with --server-pid or found as the owners of the socket
//! listening on the target's port.

use serde_json::Value;
use tern_testsupport::tern::Served;

use crate::support::{artifact, bench, bench_json, merge_json, num, summary};

/// Enough new-connection requests that the server spends well over one
/// 10 ms tick of CPU on them.
const LOAD: [&str; 5] = ["-n", "400", "-c", "4", "-disable-keepalive"];

fn server_cpu(report: &Value) -> &Value {
    &report["targets"][0]["server_cpu"]
}

fn pids(cpu: &Value) -> Vec<u64> {
    cpu["pids"]
        .as_array()
        .unwrap_or_else(|| panic!("no pids in {cpu}"))
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect()
}

#[test]
fn server_cpu_of_the_listening_socket_owner_is_found_and_reported() {
    let served = Served::start(&[]);
    let url = format!("https://{}/bytes/100", served.addr);
    let mut args = LOAD.to_vec();
    args.push(&url);
    let report = bench_json(&args);
    let cpu = server_cpu(&report);
    assert_eq!(cpu["found_by"], "listening-socket-owner", "{cpu}");
    assert_eq!(pids(cpu), vec![u64::from(served.tern.pid())], "{cpu}");
    assert!(num(cpu, "cpu_s") > 0.0, "{cpu}");
    let per_request = num(cpu, "us_per_request");
    let expected = num(cpu, "cpu_s") * 1e6 / num(summary(&report, 0), "completed");
    assert!(
        per_request > 0.0 && (per_request - expected).abs() < 1e-6,
        "{cpu}"
    );

    // The text report says it next to the client CPU line.
    let out = bench(&[&args[..], &["--no-progress"]].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("Server CPU:"))
        .unwrap_or_else(|| panic!("no Server CPU line in\n{text}"));
    assert!(
        line.contains("µs per request") && line.contains(&served.tern.pid().to_string()),
        "{line}"
    );
    assert!(line.contains("(listening-socket owner)"), "{line}");
}

#[test]
fn server_cpu_of_given_pids_and_reports_without_it_still_load() {
    let served = Served::start(&[]);
    let url = format!("https://{}/bytes/100", served.addr);
    let pid = served.tern.pid().to_string();
    let json = artifact("server-cpu", "given.json");
    let mut args = LOAD.to_vec();
    args.extend(["--server-pid", &pid, "--json", json.to_str().unwrap(), &url]);
    let report = bench_json(&args);
    let cpu = server_cpu(&report);
    assert_eq!(cpu["found_by"], "given", "{cpu}");
    assert_eq!(pids(cpu), vec![u64::from(served.tern.pid())]);
    assert!(num(cpu, "us_per_request") > 0.0, "{cpu}");

    // A report from before the field existed still loads and merges.
    let mut old: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    old["targets"][0]
        .as_object_mut()
        .unwrap()
        .remove("server_cpu");
    let old_file = artifact("server-cpu", "old.json");
    std::fs::write(&old_file, old.to_string()).unwrap();
    let merged = merge_json(&[&json, &old_file]);
    let cpu = server_cpu(&merged);
    assert!(cpu["cpu_s"].is_null(), "merged runs do not add up: {cpu}");
    assert!(
        cpu["unknown_reason"].as_str().unwrap().contains("merged"),
        "{cpu}"
    );
}

#[test]
fn server_cpu_is_unknown_with_a_reason_when_the_given_pid_does_not_exist() {
    // A given PID that does not exist: unknown, never a guess.
    let served = Served::start(&[]);
    let url = format!("https://{}/bytes/100", served.addr);
    let report = bench_json(&["-n", "20", "-c", "2", "--server-pid", "4000000000", &url]);
    let cpu = server_cpu(&report);
    assert!(cpu["cpu_s"].is_null(), "{cpu}");
    assert!(
        cpu["unknown_reason"]
            .as_str()
            .unwrap()
            .contains("/proc/4000000000/stat"),
        "{cpu}"
    );
}
