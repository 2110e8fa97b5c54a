//! Gates a CI can use: `--threshold` (exit 99 when one fails) and
//! `tern report diff` (non-zero on a regression).

use tern_testsupport::bench_target::{BenchTarget, BenchTargetOptions};

use crate::support::{artifact, bench, bench_json, bench_json_exiting, tern};

#[test]
fn a_failing_threshold_exits_99_and_says_which() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let report = bench_json_exiting(
        &[
            "-n",
            "40",
            "-c",
            "2",
            "--threshold",
            "p99<0.001ms",
            "--threshold",
            "errors<1%",
            &server.url("/"),
        ],
        99,
    );
    let results = report["thresholds"].as_array().expect("thresholds");
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["threshold"], "p99<0.001ms");
    assert_eq!(results[0]["pass"], false, "{results:?}");
    assert_eq!(results[1]["pass"], true, "{results:?}");
    assert_eq!(results[1]["value"], 0.0, "{results:?}");

    let out = bench(&[
        "-n",
        "40",
        "-c",
        "2",
        "--no-progress",
        "--threshold",
        "p99<0.001ms",
        &server.url("/"),
    ]);
    assert_eq!(out.status.code(), Some(99));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Thresholds:\n  FAIL  p99<0.001ms: "),
        "{text}"
    );
}

#[test]
fn thresholds_that_hold_exit_0() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let report = bench_json(&[
        "-n",
        "40",
        "-c",
        "2",
        "--threshold",
        "errors<0.1%",
        "--threshold",
        "rps>1",
        "--threshold",
        "p99<60s",
        &server.url("/"),
    ]);
    let results = report["thresholds"].as_array().expect("thresholds");
    assert!(results.iter().all(|r| r["pass"] == true), "{results:?}");
}

#[test]
fn a_bad_threshold_is_a_usage_error_before_any_load() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let out = bench(&[
        "-n",
        "4",
        "-c",
        "1",
        "--threshold",
        "p99<fast",
        &server.url("/"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("\"fast\" is not a duration"), "{stderr}");
    assert_eq!(server.requests(), 0);
}

/// `tern report diff`: a run against itself is "same" throughout (exit 0);
/// against a run of a slowed server (every response held 20 ms) it is
/// "worse" and exits 99.
#[test]
fn report_diff_is_same_against_itself_and_worse_against_a_slowed_server() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let run = |name: &str, path: &str| {
        let file = artifact("diff", name);
        bench_json(&[
            "-n",
            "60",
            "-c",
            "2",
            "--json",
            file.to_str().unwrap(),
            &server.url(path),
        ]);
        file
    };
    let base = run("base.json", "/");
    let slow = run("slow.json", "/slow/20");
    let diff = |a: &std::path::Path, b: &std::path::Path| {
        tern()
            .args(["report", "diff"])
            .arg(a)
            .arg(b)
            .output()
            .expect("run tern report diff")
    };
    let same = diff(&base, &base);
    let text = String::from_utf8_lossy(&same.stdout);
    assert_eq!(same.status.code(), Some(0), "{text}");
    for line in text.lines().filter(|l| l.starts_with("    ")) {
        assert!(
            line.contains("  same") || line.contains("  unknown"),
            "{line}\n{text}"
        );
    }
    assert!(text.contains("p99_ms") && text.contains("rps"), "{text}");

    let worse = diff(&base, &slow);
    let text = String::from_utf8_lossy(&worse.stdout);
    assert_eq!(worse.status.code(), Some(99), "{text}");
    let p50 = text
        .lines()
        .find(|l| l.trim_start().starts_with("p50_ms"))
        .unwrap_or_else(|| panic!("no p50 line in {text}"));
    assert!(p50.contains("WORSE"), "{p50}");
}

/// `--rounds N` on one target keeps each round's figures, so `tern report
/// diff` judges latency with an interval instead of the tolerance alone.
#[test]
fn rounds_on_one_target_give_report_diff_latency_intervals() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let run = |name: &str, rounds: &str| {
        let file = artifact("rounds", name);
        let report = bench_json(&[
            "-n",
            "90",
            "-c",
            "2",
            "--rounds",
            rounds,
            "--json",
            file.to_str().unwrap(),
            &server.url("/"),
        ]);
        (file, report)
    };
    let (three, report) = run("three.json", "3");
    let rounds = report["targets"][0]["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 3, "{rounds:?}");
    assert_eq!(report["targets"][0]["summary"]["completed"], 90);
    let (one, _) = run("one.json", "1");
    let p50_line = |file: &std::path::Path| {
        let out = tern()
            .args(["report", "diff"])
            .arg(file)
            .arg(file)
            .output()
            .expect("run tern report diff");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(0), "{text}");
        text.lines()
            .find(|l| l.trim_start().starts_with("p50_ms"))
            .unwrap_or_else(|| panic!("no p50 line in {text}"))
            .to_string()
    };
    let with_rounds = p50_line(&three);
    assert!(
        with_rounds.contains("x-") && with_rounds.contains("same"),
        "{with_rounds}"
    );
    let without = p50_line(&one);
    assert!(
        !without.contains("x-"),
        "one round has no interval: {without}"
    );
}
