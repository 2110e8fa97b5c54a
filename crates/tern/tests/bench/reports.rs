//! Compare mode, CSV, JSON merge and the HTML page.

use std::process::Command;

use tern_testsupport::bench_target::{BenchTarget, BenchTargetOptions};
use tern_testsupport::chromium::HEADLESS_FLAGS;
use tern_testsupport::tern::tern_bin;

use crate::support::{artifact, bench, merge_json, num, summary, tern};

#[test]
fn compare_warns_when_targets_negotiate_different_ciphers() {
    let aes = BenchTarget::start(BenchTargetOptions {
        ciphers: vec!["TLS13_AES_128_GCM_SHA256"],
        ..BenchTargetOptions::default()
    });
    let chacha = BenchTarget::start(BenchTargetOptions {
        ciphers: vec!["TLS13_CHACHA20_POLY1305_SHA256"],
        ..BenchTargetOptions::default()
    });
    let out = bench(&[
        "--compare",
        "--rounds",
        "2",
        "-n",
        "40",
        "-c",
        "2",
        &aes.url("/"),
        &chacha.url("/"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("!!! WARNING"), "{text}");
    assert!(text.contains("different cipher"), "{text}");
    assert!(text.contains("Comparison"), "{text}");
    // Both ran, interleaved, 20 requests per round each.
    assert_eq!(aes.requests(), 40);
    assert_eq!(chacha.requests(), 40);

    let same = BenchTarget::start(BenchTargetOptions::default());
    let out = bench(&[
        "--compare",
        "--rounds",
        "2",
        "-n",
        "20",
        "-c",
        "2",
        &aes.url("/"),
        &same.url("/"),
        "--ciphers",
        "TLS_AES_128_GCM_SHA256",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("WARNING"), "{text}");
}

#[test]
fn csv_has_one_line_per_request() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let out = bench(&["-n", "25", "-c", "5", "-o", "csv", &server.url("/")]);
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("response-time,DNS+dialup,DNS"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 25);
    assert!(rows.iter().all(|r| r.split(',').nth(6) == Some("200")));
}

#[test]
fn json_round_trips_through_report_merge() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    let a = artifact("merge", "a.json");
    let b = artifact("merge", "b.json");
    for (file, n) in [(&a, "30"), (&b, "50")] {
        let out = bench(&[
            "-n",
            n,
            "-c",
            "2",
            "--json",
            file.to_str().unwrap(),
            &server.url("/"),
        ]);
        assert!(out.status.success());
    }
    let merged = merge_json(&[&a, &b]);
    let s = summary(&merged, 0);
    assert_eq!(num(s, "completed"), 80.0);
    assert_eq!(merged["machines"].as_array().unwrap().len(), 2);
    assert_eq!(merged["command_lines"].as_array().unwrap().len(), 2);
    // The percentiles come from the merged histograms, not from averages:
    // the merged median lies within the two runs' medians.
    let med = |v: &serde_json::Value| v["percentiles_ms"]["50"].as_f64().unwrap();
    let ra: serde_json::Value = serde_json::from_slice(&std::fs::read(&a).unwrap()).unwrap();
    let rb: serde_json::Value = serde_json::from_slice(&std::fs::read(&b).unwrap()).unwrap();
    let (ma, mb) = (med(summary(&ra, 0)), med(summary(&rb, 0)));
    let m = med(s);
    assert!(
        m >= ma.min(mb) * 0.99 && m <= ma.max(mb) * 1.01,
        "{m} not within {ma}..{mb}"
    );
    // And the merged report renders.
    let html = artifact("merge", "merged.html");
    let out = tern()
        .args([
            "report",
            "html",
            a.to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(std::fs::read_to_string(&html).unwrap().contains("<svg"));
}

#[test]
fn html_report_headline_in_headless_chromium_matches_the_json() {
    let Some(chromium) = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
    else {
        eprintln!("SKIPPED html_report_headline_in_headless_chromium_matches_the_json: no chromium (apt-get install -y chromium)");
        return;
    };
    let server = BenchTarget::start(BenchTargetOptions::default());
    let html = artifact("html", "report.html");
    let json = artifact("html", "report.json");
    let out = bench(&[
        "-n",
        "200",
        "-c",
        "4",
        "--threshold",
        "p99<10s",
        "--html",
        html.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        &server.url("/"),
    ]);
    assert!(out.status.success());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        !page.contains("http://") || !page.contains("src=\"http"),
        "no network resources"
    );
    assert!(!page.contains("<script"), "no scripts");
    let png = artifact("html", "report.png");
    let profile = artifact("html", "chromium-profile");
    let _ = std::fs::remove_file(&png);
    let url = format!("file://{}", html.display());
    let run = |extra: &[String]| {
        Command::new(chromium)
            .args(HEADLESS_FLAGS)
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(&url)
            .output()
            .expect("run chromium")
    };
    let shot = run(&[
        format!("--screenshot={}", png.display()),
        "--window-size=1200,2400".into(),
    ]);
    assert!(
        shot.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 10_000,
        "screenshot {} is {size} bytes",
        png.display()
    );
    // The DOM chromium built holds the charts and the disclosure.
    let dom = run(&["--dump-dom".to_string()]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.matches("<svg").count() >= 3,
        "charts missing from the rendered DOM"
    );
    assert!(dom.contains("Disclosure:") && dom.contains("TLSv1.3"));
    // The headline block, as Chromium built it, says what the JSON says.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    headline_matches_the_json(&dom, &report);
    assert!(!dom.contains("max-width"), "the page takes the full width");
}

/// The text Chromium shows for the headline figure `id`.
fn shown<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = format!("id=\"{id}\">");
    dom.split(&start)
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap_or_else(|| panic!("no #{id} in the DOM"))
}

/// Each headline figure of target 1 against the JSON, to the precision
/// shown.
fn headline_matches_the_json(dom: &str, report: &serde_json::Value) {
    let s = summary(report, 0);
    let leading = |id: &str| -> f64 {
        let text = shown(dom, id);
        text.split(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("#{id} shows {text:?}"))
    };
    let close = |id: &str, json: f64, precision: f64| {
        let value = leading(id);
        assert!(
            (value - json).abs() <= precision,
            "#{id} shows {value}, the JSON says {json}"
        );
    };
    close("t1-rps", num(s, "rps"), 0.05);
    close("t1-p50", num(&s["percentiles_ms"], "50"), 0.0005);
    close("t1-p99", num(&s["percentiles_ms"], "99"), 0.0005);
    close("t1-errors", num(s, "failed"), 0.0);
    let cpu = &report["targets"][0]["server_cpu"];
    match (cpu["us_per_request"].as_f64(), cpu["ticks"].as_f64()) {
        // Shown with the digits one tick per request leaves.
        (Some(us), Some(ticks)) if ticks > 0.0 => close("t1-cpu", us, us / ticks),
        _ => assert!(shown(dom, "t1-cpu").starts_with("unknown"), "{cpu}"),
    }
    let check = &report["thresholds"][0];
    assert_eq!(check["pass"], true, "{check}");
    let verdicts = shown(dom, "t1-thresholds\"><li class=\"pass");
    assert!(verdicts.contains("PASS p99&lt;10s"), "{verdicts}");
}

#[test]
fn live_view_shows_last_second_latency_and_time_left() {
    let server = BenchTarget::start(BenchTargetOptions::default());
    // Not a terminal: a plain line a second, no bar, no colour codes.
    let piped = bench(&["-z", "2500ms", "-c", "2", &server.url("/slow/5")]);
    let stderr = String::from_utf8_lossy(&piped.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("tern bench: ") && l.contains(" requests, "))
        .collect();
    assert!(lines.len() >= 2, "{stderr}");
    let mut medians = 0;
    for line in &lines {
        assert!(!line.contains('\r') && !line.contains('\x1b'), "{line:?}");
        assert!(
            line.contains(", p99 ") && line.ends_with("s left"),
            "{line}"
        );
        // A second in which no request ended (the connections' set-up on a
        // loaded host) has no median: it says so, "p50 -".
        if line.contains("last second p50 -, p99 -") {
            continue;
        }
        // /slow/5 answers after 5 ms: the last second's median shows it.
        let p50: f64 = line
            .split("last second p50 ")
            .nth(1)
            .and_then(|r| r.split(" ms").next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no p50 in {line:?}"));
        assert!((5.0..1000.0).contains(&p50), "{line}");
        medians += 1;
    }
    assert!(medians >= 1, "no second with a median: {stderr}");
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED terminal half: no script(1) (apt-get install -y bsdutils)");
        return;
    }
    // script(1) gives tern a pseudo-terminal; the bar goes to it.
    let line = format!(
        "{} bench -n 400 -c 2 {} > /dev/null",
        tern_bin().display(),
        server.url("/slow/5")
    );
    let tty = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .output()
        .unwrap();
    let seen = String::from_utf8_lossy(&tty.stdout);
    assert!(
        seen.contains("requests,") && seen.contains('%') && seen.contains("s left"),
        "no live view in {seen:?}"
    );
}
