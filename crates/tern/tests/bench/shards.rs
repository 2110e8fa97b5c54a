//! One run split over several `tern bench` processes (`--shard`,
//! `--start-at`, `--laddr`) against tern serve on loopback, merged with
//! `tern report merge`; and the Kubernetes Job that runs the shards.

use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tern_testsupport::tern::{log_field, Served};

use crate::support::{artifact, bench, num, summary, tern};

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

/// Runs `count` shards of a one-second run of `-c conns` against `url`,
/// shard i starting at `at(i)`; returns their JSON reports' paths.
fn one_second_shards(
    dir: &str,
    count: usize,
    conns: &str,
    at: impl Fn(usize) -> String,
    url: &str,
) -> Vec<String> {
    let files: Vec<String> = (0..count)
        .map(|i| {
            artifact(dir, &format!("shard{i}.json"))
                .display()
                .to_string()
        })
        .collect();
    let children: Vec<Child> = (0..count)
        .map(|i| {
            let args: Vec<String> = vec![
                "-z".into(),
                "1s".into(),
                "-c".into(),
                conns.into(),
                "--no-progress".into(),
                "--shard".into(),
                format!("{i}/{count}"),
                "--start-at".into(),
                at(i),
                "--json".into(),
                files[i].clone(),
                url.into(),
            ];
            spawn_shard(&args)
        })
        .collect();
    for c in children {
        wait_shard(c);
    }
    files
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
    // Far enough ahead that four debug-build processes are up and waiting
    // on a loaded machine: one that starts late is flagged apart.
    let at = soon(Duration::from_secs(4));
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
    // The GETs of the run; each shard's clock reading after it (HEAD
    // requests, see clock.rs) is logged too.
    let log = served
        .tern
        .wait_stdout_lines("method=GET", 2002, Duration::from_secs(20))
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
    let files = one_second_shards(
        "late_shard",
        4,
        "4",
        |i| at(if i == 3 { 5 } else { 0 }),
        &url,
    );
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

/// Shards' own timestamps cannot show a clock that is off (each started
/// "on time" by its own clock), so each reads the target's clock (its
/// Date header) after its run. Two shards on one machine read the same
/// offset; one whose reading says its clock is 3 s ahead of the other's
/// (its report edited as such a machine would have written it) is named
/// by the merge.
#[test]
fn shards_whose_clocks_disagree_are_flagged_by_the_merge() {
    let served = Served::builder().args(&["--access-log", "off"]).start();
    let url = format!("https://{}/bytes/100", served.addr);
    let at = soon(Duration::from_secs(2));
    let files = one_second_shards("clock_shard", 2, "2", |_| at.clone(), &url);
    let merge = |files: &[String]| {
        let out = tern()
            .args(["report", "merge"])
            .args(files)
            .output()
            .expect("tern report merge");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}");
        text
    };
    for f in &files {
        let report: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let o = &report["clock_offset"];
        let (low, high) = (num(o, "low_ms"), num(o, "high_ms"));
        // One machine, one clock: the reading brackets 0 up to the
        // server's Date being a little behind its clock.
        assert!(num(o, "samples") >= 2.0, "{o}");
        assert!(low <= high && high - low < 1000.0, "{o}");
        assert!(low < 100.0 && high > -1100.0, "{o}");
    }
    let text = merge(&files);
    assert!(!text.contains("clock is at least"), "{text}");

    let mut ahead: Value =
        serde_json::from_str(&std::fs::read_to_string(&files[1]).unwrap()).unwrap();
    for bound in ["low_ms", "high_ms"] {
        let v = ahead["clock_offset"][bound].as_i64().unwrap();
        ahead["clock_offset"][bound] = (v - 3000).into();
    }
    let edited = artifact("clock_shard", "shard1_ahead.json")
        .display()
        .to_string();
    std::fs::write(&edited, ahead.to_string()).unwrap();
    let text = merge(&[files[0].clone(), edited]);
    assert!(
        text.contains("shard 1/2 (report 2,")
            && text.contains("s ahead of shard 0/2 (report 1,")
            && text.contains("synchronise their clocks"),
        "{text}"
    );
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
