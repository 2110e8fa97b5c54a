//! Issue 24's seven untrue figures, each reproduced against a real server
//! (tern-testsupport's in-process TLS server, `tern serve`, or the Python
//! origin for plain HTTP) and checked true.

use serde_json::Value;
use tern_testsupport::bench_target::{BenchTarget, BenchTargetOptions};
use tern_testsupport::python_origin::PythonOrigin;
use tern_testsupport::tern::{free_addr, Served};

use crate::support::{artifact, bench, bench_json, merge_json, num, summary};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `Plan:` line of a text report.
fn plan_line(text: &str) -> &str {
    text.lines()
        .find(|l| l.trim_start().starts_with("Plan:"))
        .unwrap_or_else(|| panic!("no Plan line in\n{text}"))
}

/// Issue 24 (1): aws-lc's one-time entropy set-up ran inside the first
/// handshake (21 ms against 1-3 ms for the others, every run); it is now
/// paid before any clock starts. Other builds share this machine and can
/// slow any one handshake, so the bar is met by one run of three. A fresh
/// debug binary still pays some cold start on its first handshake: 1-2 ms
/// on an idle machine (within the 2x the median), about 9 ms with
/// other builds running. So the bar is 2x the median or the median plus
/// 15 ms: the 21 ms start-up of an idle machine this guards against fails
/// it, the leftover does not.
#[test]
fn first_handshake_is_not_charged_the_clients_crypto_start_up() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let mut seen = Vec::new();
    for run in 0..3 {
        let (first, median) = first_and_median_handshake(&server, run);
        if first <= (2.0 * median).max(median + 0.015) {
            return;
        }
        seen.push(format!(
            "first {:.1} ms, median {:.1} ms",
            first * 1e3,
            median * 1e3
        ));
    }
    panic!("the first handshake was the slow one in every run: {seen:?}");
}

/// A `-c 1` run of 50 new connections: its first TLS handshake and the
/// median of the others, seconds.
fn first_and_median_handshake(server: &BenchTarget, run: usize) -> (f64, f64) {
    let csv = artifact("first-handshake", &format!("requests-{run}.csv"));
    let out = bench(&[
        "-n",
        "50",
        "-c",
        "1",
        "-disable-keepalive",
        "--no-progress",
        "--csv",
        csv.to_str().unwrap(),
        &server.url("/"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    // Rows are in send order; column 9 is the TLS handshake in seconds.
    let tls: Vec<f64> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(8).unwrap().parse().unwrap())
        .collect();
    assert_eq!(tls.len(), 50, "{text}");
    let mut rest = tls[1..].to_vec();
    rest.sort_by(f64::total_cmp);
    (tls[0], rest[rest.len() / 2])
}

/// Issue 24 (1): `--warmup` makes requests the statistics leave out.
#[test]
fn warmup_requests_reach_the_server_but_not_the_figures() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let report = bench_json(&[
        "-n",
        "10",
        "-c",
        "1",
        "-disable-keepalive",
        "--warmup",
        "200ms",
        &server.url("/"),
    ]);
    let s = summary(&report, 0);
    assert_eq!(num(s, "completed"), 10.0, "{s}");
    assert_eq!(num(s, "connections"), 10.0, "{s}");
    assert!(server.requests() > 10, "{} requests", server.requests());
    assert_eq!(report["plan"]["warmup"], "0.2s", "{}", report["plan"]);
}

/// Issue 24 (2): the protocol is what a protocol comparison varies: no
/// warning about its ALPN, and a Plan line that names each target's.
#[test]
fn compare_protocols_neither_warns_about_alpn_nor_claims_one_protocol() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let out = bench(&[
        "--compare-protocols",
        "h1,h2",
        "--rounds",
        "1",
        "-n",
        "20",
        "-c",
        "2",
        "--no-progress",
        &server.url("/"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert!(!text.contains("WARNING"), "{text}");
    let plan = plan_line(&text);
    assert!(
        plan.contains("HTTP/1.1 [1], HTTP/2 [2]") && !plan.contains("; HTTP/1.1;"),
        "{plan}"
    );
}

/// Issue 24 (3): a plain-HTTP run discloses no TLS it did not do, and
/// `-m 10` without HTTP/2 says one stream per connection.
#[test]
fn plain_http_disclosure_states_only_what_happened() {
    let origin = PythonOrigin::start();
    let url = format!("http://{}/split", origin.addr());
    let out = bench(&[
        "-n",
        "4",
        "-c",
        "1",
        "--plan",
        "resumed",
        "--no-progress",
        &url,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert!(!text.contains("TLS offer"), "{text}");
    assert!(!text.contains("chain"), "{text}");
    assert!(!text.contains("resumption asked: tickets"), "{text}");
    assert!(plan_line(&text).contains("no TLS (plain HTTP)"), "{text}");

    let out = bench(&["-n", "20", "-c", "2", "-m", "10", "--no-progress", &url]);
    let text = stdout(&out);
    let plan = plan_line(&text);
    assert!(plan.contains("2 connections x 1 stream"), "{plan}");
}

/// Issue 24 (4): a run in which every request failed is a failed run:
/// exit status 1, said first, on stderr and at the top of the report.
#[test]
fn a_run_where_every_request_failed_exits_non_zero_and_says_so_first() {
    let addr = free_addr();
    let html = artifact("all-failed", "report.html");
    let out = bench(&[
        "-z",
        "500ms",
        "--rate",
        "40",
        "-c",
        "2",
        "--no-progress",
        "--html",
        html.to_str().unwrap(),
        &format!("https://{addr}/"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("every request failed"), "{stderr}");
    let text = stdout(&out);
    assert!(
        text.starts_with("!!! FAILED: every request failed"),
        "{text}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("id=\"failed\""),
        "no failure banner in the HTML"
    );
}

/// Issue 24 (5): compare rounds keep their place in wall-clock time, so
/// the time charts neither join them end to end nor shorten the axis.
#[test]
fn compare_rounds_keep_their_wall_clock_place() {
    let a = BenchTarget::start(BenchTargetOptions::default());
    let b = BenchTarget::start(BenchTargetOptions::default());
    let html = artifact("timeline", "compare.html");
    let report = bench_json(&[
        "--compare",
        "--rounds",
        "2",
        "-n",
        "40",
        "-c",
        "2",
        "--html",
        html.to_str().unwrap(),
        &a.url("/"),
        &b.url("/"),
    ]);
    let segments = |i: usize| -> Vec<(f64, f64)> {
        report["targets"][i]["timeline"]
            .as_array()
            .unwrap_or_else(|| panic!("no timeline: {}", report["targets"][i]))
            .iter()
            .map(|s| (num(s, "start_s"), num(s, "start_s") + num(s, "elapsed_s")))
            .collect()
    };
    let (ta, tb) = (segments(0), segments(1));
    assert_eq!((ta.len(), tb.len()), (2, 2), "{ta:?} {tb:?}");
    // Interleaved: a1 < b1 < a2 < b2, none overlapping.
    let order = [ta[0], tb[0], ta[1], tb[1]];
    for w in order.windows(2) {
        assert!(w[0].1 <= w[1].0 + 1e-6, "rounds overlap: {order:?}");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("seconds since the run started"),
        "no wall-clock axis"
    );
    assert!(
        page.contains("id=\"errors-over-time\""),
        "errors are not drawn apart"
    );
}

/// Issue 24 (6): merging two runs made one after the other must not add
/// their throughputs as if they had overlapped.
#[test]
fn merging_runs_made_one_after_the_other_does_not_add_their_throughput() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let files = one_after_the_other("merge-sequential", &["-n", "100"], &server.url("/"));
    let rps: Vec<f64> = files
        .iter()
        .map(|f| {
            let r: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            assert!(r["started_unix_ms"].is_u64(), "no wall-clock start");
            num(summary(&r, 0), "rps")
        })
        .collect();
    let merged = merge_json(&[&files[0], &files[1]]);
    let s = summary(&merged, 0);
    assert_eq!(num(s, "completed"), 200.0);
    assert!(
        num(s, "rps") <= rps[0].max(rps[1]) * 1.001,
        "merged {} req/s from runs of {rps:?}",
        num(s, "rps")
    );
    let warnings = merged["warnings"].to_string();
    assert!(warnings.contains("did not overlap"), "{warnings}");
}

/// Two runs of `tern bench -c 2 <stop> url`, one after the other, each
/// writing its JSON report; the report files.
fn one_after_the_other(test: &str, stop: &[&str], url: &str) -> Vec<std::path::PathBuf> {
    ["first.json", "second.json"]
        .iter()
        .map(|name| {
            let path = artifact(test, name);
            let mut args = stop.to_vec();
            args.extend(["-c", "2", "--json", path.to_str().unwrap(), url]);
            bench_json(&args);
            path
        })
        .collect()
}

/// The per-second series of a merged report sits on the wall clock like
/// its timeline: two runs made one after the other fill consecutive
/// seconds instead of being added second by second from their starts.
#[test]
fn merged_series_of_runs_one_after_the_other_follow_the_wall_clock() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let files = one_after_the_other("merge-series", &["-z", "1500ms"], &server.url("/slow/5"));
    let merged = merge_json(&[&files[0], &files[1]]);
    let series = merged["targets"][0]["stats"]["series"]
        .as_array()
        .expect("series");
    let completed: f64 = series.iter().map(|b| num(b, "completed")).sum();
    assert_eq!(completed, num(summary(&merged, 0), "completed"));
    // Both runs span at least 3 s of wall clock; start-aligned they
    // filled the same 2 seconds.
    let span_s = (num(&merged, "ended_unix_ms") - num(&merged, "started_unix_ms")) / 1000.0;
    assert!(span_s >= 3.0, "{span_s}");
    assert!(
        series.len() as f64 >= span_s.floor(),
        "{} seconds of series for {span_s} s of runs: {series:?}",
        series.len()
    );
}

/// Issue 24 (7): server CPU is counted in 10 ms ticks; a figure resting on
/// a few ticks says so instead of printing false digits.
#[test]
fn server_cpu_from_few_ticks_says_how_few() {
    let served = Served::start(&[]);
    let url = format!("https://{}/bytes/100", served.addr);
    let out = bench(&["-n", "20", "-c", "1", "--no-progress", &url]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("Server CPU:"))
        .unwrap_or_else(|| panic!("no Server CPU line in\n{text}"));
    assert!(line.contains(" ticks of 10 ms"), "{line}");
    assert!(line.contains("fewer than 100 ticks"), "{line}");
    assert!(!line.contains(".0 µs"), "false precision: {line}");
}
