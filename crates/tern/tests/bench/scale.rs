//! `tern bench` at scale, against real servers on loopback: a weighted
//! request mix counted by the origin (bench/scale_origin.py), the capacity
//! search against tern serve in front of an origin with a known knee, and
//! one run split over four processes, merged.

use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tern_testsupport::python_origin::PythonOrigin;
use tern_testsupport::tern::{log_field, Served};

use crate::support::{artifact, bench, bench_json, num, summary, tern};

/// The mix of the tests: weights 4, 3, 2, 1; the last two fail their
/// checks (a body without the text asked, a 503).
const MIX: &str = r#"
[[request]]
path = "/a"
weight = 4
expect_status = 200

[[request]]
path = "/b"
weight = 3
expect_body = "ok /b"

[[request]]
path = "/c"
weight = 2
expect_body = "not in the body"

[[request]]
method = "POST"
path = "/status/503"
weight = 1
body_file = "post.json"
expect_status = [200, 204]
"#;

fn mix_file(test: &str) -> String {
    std::fs::write(artifact(test, "post.json"), b"{\"x\": 1}").expect("body file");
    let path = artifact(test, "mix.toml");
    std::fs::write(&path, MIX).expect("targets file");
    path.display().to_string()
}

fn errors(report: &Value) -> BTreeMap<String, u64> {
    report["targets"][0]["stats"]["errors"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

/// Each path's share of what the origin served matches its weight within
/// 1% of the requests sent (the tolerance: tickets cycle through the
/// weights exactly, so only requests sent again after a GOAWAY shift it),
/// over HTTP/1.1 straight to the origin and over HTTP/2 through tern serve.
#[test]
fn a_weighted_mix_reaches_the_origin_in_proportion_and_failed_checks_count() {
    let origin = PythonOrigin::counting(0.0);
    let served = Served::builder()
        .backend_addr(origin.addr())
        .args(&["--access-log", "off"])
        .start();
    let mix = mix_file("weighted_mix");
    let direct = format!("http://{}/", origin.addr());
    let fronted = format!("https://{}/", served.addr);
    let runs: [&[&str]; 2] = [
        &["-n", "1000", "-c", "10", "--targets", &mix, &direct],
        &[
            "-n",
            "1000",
            "-c",
            "5",
            "-h2",
            "-m",
            "4",
            "--targets",
            &mix,
            &fronted,
        ],
    ];
    let mut served_so_far: BTreeMap<String, u64> = BTreeMap::new();
    for args in runs {
        let report = bench_json(args);
        let counts = origin.counts();
        for (path, weight) in [("/a", 4.0), ("/b", 3.0), ("/c", 2.0), ("/status/503", 1.0)] {
            let got = counts.get(path).copied().unwrap_or(0)
                - served_so_far.get(path).copied().unwrap_or(0);
            let want = 1000.0 * weight / 10.0;
            assert!(
                (got as f64 - want).abs() <= 10.0,
                "{args:?}: {path} served {got} times, weight says {want}: {counts:?}"
            );
        }
        let errors = errors(&report);
        let by_body = errors["check: body without \"not in the body\""];
        let by_status = errors["check: status 503, expected 200 or 204"];
        assert_eq!(
            by_status,
            counts["/status/503"] - served_so_far.get("/status/503").copied().unwrap_or(0),
            "every 503 failed its check: {errors:?}"
        );
        assert_eq!(
            by_body,
            counts["/c"] - served_so_far.get("/c").copied().unwrap_or(0),
            "every /c failed its body check: {errors:?}"
        );
        let s = summary(&report, 0);
        assert_eq!(num(s, "failed") as u64, by_body + by_status);
        assert_eq!(num(s, "completed") as u64 + by_body + by_status, 1000);
        let described = report["plan"]["request_mix"].as_str().unwrap_or_default();
        assert!(described.contains("POST /status/503 10.0%"), "{described}");
        served_so_far = counts;
    }
}

#[test]
fn a_bad_targets_file_is_refused_naming_its_line() {
    let path = artifact("bad_targets", "mix.toml");
    std::fs::write(
        &path,
        "[[request]]\npath = \"/\"\n\n[[request]]\npath = \"x\"\n",
    )
    .unwrap();
    let out = bench(&[
        "--targets",
        &path.display().to_string(),
        "http://127.0.0.1:9/",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:4: path \"x\" must start with '/'",
            path.display()
        )),
        "{err}"
    );
}

/// tern serve in front of an origin that serves at most 50 requests per
/// second and refuses with 503 what would queue longer than 1 s (a rate
/// limiter): the search, asked for no 503 (the targets file's check) in
/// more than 2% of requests, finds a rate within 10% of 50, says which
/// rate broke it and why, and gives tern's CPU per request at each step.
///
/// Why errors and not latency: on a shared machine at load 20 the p95 of
/// a debug build moved past 150 ms at half the knee. Above the knee the
/// overload shows as 503s once the origin's queue reaches its bound (100
/// connections let it, instead of queueing in the client), and before
/// that as a step that completes only the knee's rate: both break the
/// SLO whatever the latency noise.
#[test]
fn the_capacity_search_finds_the_knee_of_a_rate_limited_origin_within_10_percent() {
    let knee = 50.0;
    let origin = PythonOrigin::rate_limited(knee, 1.0);
    let served = Served::builder()
        .backend_addr(origin.addr())
        .args(&["--access-log", "off"])
        .start();
    let url = format!("https://{}/", served.addr);
    let json = artifact("capacity", "capacity.json");
    let targets = artifact("capacity", "targets.toml");
    std::fs::write(&targets, "[[request]]\npath = \"/\"\nexpect_status = 200\n").unwrap();
    let out = bench(&[
        "--find-max-rate",
        "--slo",
        "errors<2%",
        "--targets",
        &targets.display().to_string(),
        "--start-rate",
        "15",
        "--step",
        "3s",
        "--precision",
        "4%",
        "-c",
        "100",
        "--no-progress",
        "--json",
        &json.display().to_string(),
        &url,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let c = &report["targets"][0]["capacity"];
    let max = c["max_rate"]
        .as_f64()
        .unwrap_or_else(|| panic!("no rate met the SLO:\n{text}"));
    assert!(
        (max - knee).abs() <= 0.1 * knee,
        "found {max} req/s, the knee is {knee}:\n{text}"
    );
    assert!(
        text.contains(&format!("Max rate at SLO: {max:.0} req/s")),
        "{text}"
    );
    let failing = c["first_failing"].as_f64().unwrap();
    assert!(failing > max, "{text}");
    // Just above the knee the queue may stay under its bound for a whole
    // step: the step then breaks the SLO by completing the knee's rate,
    // not the rate asked.
    let why = c["failing_reason"].as_str().unwrap();
    assert!(
        why.contains("errors<2% at") || why.contains("(below 90%)"),
        "{text}"
    );
    let steps = c["steps"].as_array().unwrap();
    assert!(steps.len() >= 4, "{text}");
    assert!(
        steps
            .iter()
            .all(|s| s["server_cpu_us_per_request"].as_f64().is_some()),
        "tern's CPU per request at every step:\n{text}"
    );
}

/// When the four shards start: two seconds from now, as Unix seconds.
fn soon(after: Duration) -> String {
    let at = SystemTime::now() + after;
    format!(
        "{:.3}",
        at.duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
    )
}

fn spawn_shard(args: &[String]) -> Child {
    tern()
        .arg("bench")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tern bench")
}

fn wait_shard(child: Child) {
    let out = child.wait_with_output().expect("shard finishes");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `q` quantile of the latencies in hey-style CSVs, ms.
fn csv_quantile(latencies: &mut [f64], q: f64) -> f64 {
    latencies.sort_by(f64::total_cmp);
    let rank = ((q * latencies.len() as f64).ceil() as usize).max(1);
    latencies[rank - 1] * 1000.0
}

/// Four `--shard i/4` processes from four loopback addresses, started
/// together: tern serve's access log shows the four clients, the merged
/// counts add up to -n, and the merged percentiles are those of every
/// request in the four CSVs.
#[test]
fn four_shards_started_together_merge_exactly() {
    let served = Served::start(&[]);
    let url = format!("https://{}/bytes/100", served.addr);
    let at = soon(Duration::from_secs(2));
    let files: Vec<(String, String)> = (0..4)
        .map(|i| {
            let json = artifact("shards", &format!("shard{i}.json"));
            let csv = artifact("shards", &format!("shard{i}.csv"));
            (json.display().to_string(), csv.display().to_string())
        })
        .collect();
    let children: Vec<Child> = (0..4)
        .map(|i| {
            let args: Vec<String> = ["-n", "2002", "-c", "8", "--no-progress", "-o", "json"]
                .iter()
                .map(|s| s.to_string())
                .chain([
                    "--shard".into(),
                    format!("{i}/4"),
                    "--start-at".into(),
                    at.clone(),
                    "--laddr".into(),
                    format!("127.0.0.{}", i + 2),
                    "--json".into(),
                    files[i].0.clone(),
                    "--csv".into(),
                    files[i].1.clone(),
                    url.clone(),
                ])
                .collect();
            spawn_shard(&args)
        })
        .collect();
    for c in children {
        wait_shard(c);
    }
    let log = served
        .tern
        .wait_stdout_lines("status=", 2002, Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut clients: BTreeMap<String, usize> = BTreeMap::new();
    for line in &log {
        let client = log_field(line, "client").unwrap_or_default();
        let ip = client.rsplit_once(':').map_or(client, |(ip, _)| ip);
        *clients.entry(ip.to_string()).or_default() += 1;
    }
    // 2002 over four: 501, 501, 500, 500.
    let want: BTreeMap<String, usize> = (0..4)
        .map(|i| (format!("127.0.0.{}", i + 2), if i < 2 { 501 } else { 500 }))
        .collect();
    assert_eq!(clients, want, "requests per shard, by client address");

    let merged_file = artifact("shards", "merged.json");
    let mut merge = tern();
    merge.args(["report", "merge", "-o", "json", "--json"]);
    merge.arg(&merged_file);
    merge.args(files.iter().map(|f| &f.0));
    let out = merge.output().expect("tern report merge");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = summary(&merged, 0);
    assert_eq!(num(s, "completed"), 2002.0);
    let warnings = merged["warnings"].as_array().unwrap();
    assert!(
        !warnings
            .iter()
            .any(|w| w.as_str().unwrap_or("").contains("overlap")),
        "shards started together: {warnings:?}"
    );
    let mut latencies: Vec<f64> = files
        .iter()
        .flat_map(|(_, csv)| {
            std::fs::read_to_string(csv)
                .unwrap()
                .lines()
                .skip(1)
                .filter_map(|l| l.split(',').next().and_then(|v| v.parse::<f64>().ok()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(latencies.len(), 2002);
    for (p, q) in [("50", 0.5), ("99", 0.99)] {
        let merged_ms = s["percentiles_ms"][p].as_f64().unwrap();
        let csv_ms = csv_quantile(&mut latencies, q);
        // The CSV has 0.1 ms resolution; the histogram 0.1%.
        assert!(
            (merged_ms - csv_ms).abs() <= 0.05 + 0.002 * csv_ms,
            "p{p}: merged {merged_ms} ms, CSVs {csv_ms} ms"
        );
    }
    // The per-second series lines up: completions per second add up too.
    let series: u64 = merged["targets"][0]["stats"]["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["completed"].as_u64().unwrap())
        .sum();
    assert_eq!(series, 2002);
    let seconds = merged["targets"][0]["stats"]["second_latency"]
        .as_array()
        .unwrap();
    assert!(!seconds.is_empty());
}

/// A shard that starts five seconds after the others is named in the
/// merge's warnings: its load did not add to theirs.
#[test]
fn a_shard_started_five_seconds_late_is_flagged_by_the_merge() {
    let served = Served::builder().args(&["--access-log", "off"]).start();
    let url = format!("https://{}/bytes/100", served.addr);
    let start = SystemTime::now() + Duration::from_secs(2);
    let at = |late: u64| {
        format!(
            "{:.3}",
            (start + Duration::from_secs(late))
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
        )
    };
    let files: Vec<String> = (0..4)
        .map(|i| {
            artifact("late_shard", &format!("shard{i}.json"))
                .display()
                .to_string()
        })
        .collect();
    let children: Vec<Child> = (0..4)
        .map(|i| {
            let late = if i == 3 { 5 } else { 0 };
            let args: Vec<String> = vec![
                "-z".into(),
                "1s".into(),
                "-c".into(),
                "4".into(),
                "--no-progress".into(),
                "--shard".into(),
                format!("{i}/4"),
                "--start-at".into(),
                at(late),
                "--json".into(),
                files[i].clone(),
                url.clone(),
            ];
            spawn_shard(&args)
        })
        .collect();
    for c in children {
        wait_shard(c);
    }
    let out = tern()
        .args(["report", "merge"])
        .args(&files)
        .output()
        .expect("tern report merge");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("shard 3/4 (report 4,") && text.contains("did not overlap any other run"),
        "{text}"
    );
    assert!(!text.contains("shard 0/4 (report 1,"), "{text}");
}

/// deploy/k8s/bench-job.yaml: valid against Kubernetes' own schema
/// (kubernetes-validate --strict, offline; installed by .ci/run), an
/// Indexed Job running every shard at once, whose container arguments
/// `tern bench` accepts as they stand once Kubernetes has put in the
/// index (and the test its own target, start and length).
#[test]
fn the_kubernetes_bench_job_is_an_indexed_job_whose_args_tern_accepts() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/k8s/bench-job.yaml"
    );
    let out = std::process::Command::new("kubernetes-validate")
        .args(["--strict", "-k", "1.32", path])
        .output()
        .expect("kubernetes-validate (pip install kubernetes-validate, see .ci/run)");
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.contains("passed"), "{said}");
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, json, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
            path,
        ])
        .output()
        .expect("python3 with PyYAML");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job: Value = serde_json::from_slice(&out.stdout).unwrap();
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    let n = spec["completions"].as_u64().unwrap();
    assert_eq!(spec["parallelism"].as_u64(), Some(n), "every shard at once");
    let container = &spec["template"]["spec"]["containers"][0];
    assert_eq!(
        container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    );
    let mut args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let shard = args.iter().position(|a| a == "--shard").unwrap();
    assert_eq!(args[shard + 1], format!("$(SHARD_INDEX)/{n}"));
    assert_eq!(args.remove(0), "bench");
    // As Kubernetes runs it for index 0, against a local tern, shorter.
    let served = Served::builder().args(&["--access-log", "off"]).start();
    let replace = |args: &mut Vec<String>, flag: &str, value: String| {
        let i = args.iter().position(|a| a == flag).unwrap();
        args[i + 1] = value;
    };
    args = args
        .into_iter()
        .map(|a| a.replace("$(SHARD_INDEX)", "0"))
        .collect();
    replace(&mut args, "--start-at", "now+100ms".into());
    replace(&mut args, "-z", "1s".into());
    replace(&mut args, "-c", "8".into());
    replace(&mut args, "--rate", "200".into());
    let last = args.len() - 1;
    args[last] = format!("https://{}/bytes/10", served.addr);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = bench(&refs);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value =
        serde_json::from_slice(&out.stdout).expect("JSON on stdout, for kubectl logs");
    assert_eq!(report["shard"]["index"], 0);
    assert_eq!(report["shard"]["count"].as_u64(), Some(n));
    assert_eq!(
        report["plan"]["connections"], 2,
        "8 connections over 4 shards"
    );
}

/// Each stage holds its rate for its time and is reported on its own; a
/// stage at 0 sends nothing.
#[test]
fn stages_hold_each_rate_and_are_reported_one_by_one() {
    let origin = PythonOrigin::counting(0.0);
    let url = format!("http://{}/staged", origin.addr());
    let report = bench_json(&[
        "--rate",
        "1",
        "--stages",
        "1s:20,1s:0,1s:40",
        "-c",
        "4",
        &url,
    ]);
    let stages = report["targets"][0]["stages"].as_array().unwrap();
    let completed: Vec<u64> = stages
        .iter()
        .map(|s| s["completed"].as_u64().unwrap())
        .collect();
    assert_eq!(stages.len(), 3);
    assert_eq!(stages[2]["unit"], "req/s");
    // An open loop sends rate x duration requests; a send the machine
    // delays past the deadline is not made (a stall of a shared machine
    // may cost a few, never add any).
    assert!((14..=21).contains(&completed[0]), "{completed:?}");
    assert_eq!(completed[1], 0);
    assert!((28..=41).contains(&completed[2]), "{completed:?}");
    assert!(completed[2] > completed[0], "{completed:?}");
    assert_eq!(
        origin.counts()["/staged"],
        completed.iter().sum::<u64>(),
        "the origin saw every stage's requests"
    );
    assert_eq!(
        num(summary(&report, 0), "completed") as u64,
        completed.iter().sum::<u64>()
    );
}

/// With --compare each target has its own search, their steps
/// interleaved on the run's clock, and each target's capacity printed.
#[test]
fn a_compared_capacity_search_interleaves_the_targets_and_reports_each() {
    let origin = PythonOrigin::counting(0.0);
    let served = Served::builder()
        .backend_addr(origin.addr())
        .args(&["--access-log", "off"])
        .start();
    let direct = format!("http://{}/", origin.addr());
    let fronted = format!("https://{}/", served.addr);
    let json = artifact("capacity_compare", "run.json");
    let out = bench(&[
        "--find-max-rate",
        "--slo",
        "errors<1%",
        "--start-rate",
        "20",
        "--max-rate",
        "40",
        "--step",
        "1s",
        "-c",
        "4",
        "--no-progress",
        "--json",
        &json.display().to_string(),
        "--compare",
        &direct,
        &fronted,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(
        text.matches("Max rate at SLO: 40 req/s").count(),
        2,
        "{text}"
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let starts = |i: usize| -> Vec<f64> {
        report["targets"][i]["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["start_s"].as_f64().unwrap())
            .collect()
    };
    let (a, b) = (starts(0), starts(1));
    assert_eq!((a.len(), b.len()), (2, 2), "20 then 40 req/s each");
    assert!(
        a[0] < b[0] && b[0] < a[1] && a[1] < b[1],
        "interleaved: {a:?} {b:?}"
    );
    for i in 0..2 {
        let c = &report["targets"][i]["capacity"];
        assert_eq!(c["max_rate"], 40.0);
        assert!(c["note"].as_str().unwrap().contains("--max-rate"), "{c}");
    }
}
