//! Server CPU per request: measured from /proc around each round, for the
//! PIDs given with --server-pid or found as the owners of the socket
//! listening on the target's port.

use serde_json::Value;
use tern_testsupport::certs::{KeyKind, TestCa};
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

/// The server CPU seconds of target 0 and the ticks they rest on.
fn cpu_and_ticks(report: &Value) -> (f64, f64) {
    let cpu = server_cpu(report);
    (num(cpu, "cpu_s"), num(cpu, "ticks"))
}

/// A kept-alive round measures its requests alone: its connections are set
/// up before its clock and its server CPU reading start. With one request
/// per connection and RSA-2048 handshakes (each costs the server far more
/// than a 100-byte request), the kept-alive round's server CPU must come
/// out far under the new-connection round's, which holds one handshake per
/// request; rounds that held their set-up made the two about equal.
#[test]
fn a_kept_alive_rounds_server_cpu_leaves_out_its_connections_set_up() {
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["127.0.0.1", "localhost"], KeyKind::Rsa2048);
    let served = Served::builder().cert(ca, cert).start();
    let url = format!("https://{}/bytes/100", served.addr);
    // One request per connection; enough connections that their
    // handshakes cost the server well over 10 ticks even in a release
    // build (0.17 s for 160 in tern's fat-LTO build of 4cbabc8, whose
    // kept-alive round held them: 0.16 s).
    let n = "160";
    let run = |extra: &[&str]| {
        let mut args = vec!["-n", n, "-c", n];
        args.extend_from_slice(extra);
        args.push(&url);
        bench_json(&args)
    };
    let kept = run(&[]);
    let new = run(&["-disable-keepalive"]);

    let (kept_cpu, _) = cpu_and_ticks(&kept);
    let (new_cpu, new_ticks) = cpu_and_ticks(&new);
    assert!(
        new_ticks >= 10.0,
        "{n} RSA-2048 handshakes should cost the server 10 ticks or more: {}",
        server_cpu(&new)
    );
    assert!(
        kept_cpu * 3.0 < new_cpu,
        "kept-alive {kept_cpu} s vs new connections {new_cpu} s of server CPU for the same {n} requests: the kept-alive round still holds its handshakes"
    );

    assert_eq!(kept["plan"]["measured_after_set_up"], true);
    assert_eq!(new["plan"]["measured_after_set_up"], false);
    let s = summary(&kept, 0);
    assert_eq!(num(s, "completed"), 160.0, "{s}");
    // Every connection was set up before the clock, none in the round.
    assert_eq!(num(s, "connections_set_up"), 160.0, "{s}");
    assert_eq!(num(s, "connections"), 160.0, "{s}");
    assert_eq!(num(s, "set_up_failed"), 0.0, "{s}");
    assert_eq!(num(summary(&new, 0), "connections_set_up"), 0.0);

    // The text report says what a round holds.
    let out = bench(&["-n", "8", "-c", "4", "--no-progress", &url]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Rounds hold:  requests only: each round's 4 connections were set up"),
        "{text}"
    );
    assert!(
        text.contains("Set-up:     4 connections set up before the rounds' clocks, 0 failed"),
        "{text}"
    );
}
