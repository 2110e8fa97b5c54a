//! h2spec (github.com/summerwind/h2spec): every conformance case of RFC 9113
//! and RFC 7541 against tern's h2 listener, with requests relayed to a real
//! backend (`-P /bytes/100`).

use std::path::PathBuf;
use std::time::Duration;

use tern_testsupport::tempdir::TempDir;
use tern_testsupport::tern::Served;
use tern_testsupport::tools::run_tool;

use crate::skip_without;

/// h2spec on PATH, in $GOPATH/bin, or in ~/go/bin.
fn find_h2spec() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(gopath) = std::env::var_os("GOPATH") {
        dirs.extend(std::env::split_paths(&gopath).map(|d| d.join("bin")));
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join("go/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("h2spec"))
        .find(|p| p.is_file())
}

/// Sums an attribute over every `<testsuite ...>` element of a JUnit report.
fn suite_total(xml: &str, attribute: &str) -> usize {
    let needle = format!(" {attribute}=\"");
    xml.split("<testsuite ")
        .skip(1)
        .filter_map(|suite| {
            let open = suite.split('>').next()?;
            let rest = &open[open.find(&needle)? + needle.len()..];
            rest[..rest.find('"')?].parse::<usize>().ok()
        })
        .sum()
}

#[test]
fn h2spec_passes_every_case() {
    let found = find_h2spec();
    if skip_without("h2spec", found.is_some()) {
        return;
    }
    let Some(h2spec) = found else { return };
    let served = Served::start(&[]);
    let dir = TempDir::new("h2spec");
    let report = dir.path().join("report.xml");
    let port = served.addr.port().to_string();
    let report_arg = report.display().to_string();
    let out = run_tool(
        &h2spec.display().to_string(),
        [
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "-k",
            "-P",
            "/bytes/100",
            "-o",
            "5",
            "-j",
            &report_arg,
        ],
        b"",
        Duration::from_secs(300),
    );
    let summary = out
        .stdout
        .lines()
        .rev()
        .find(|l| l.contains(" tests, "))
        .unwrap_or_default()
        .to_string();
    eprintln!("h2spec: {summary}");
    let xml = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("no h2spec report ({e}):\n{}", out.all()));
    let tests = suite_total(&xml, "tests");
    let failures = suite_total(&xml, "failures") + suite_total(&xml, "errors");
    let skipped = suite_total(&xml, "skipped");
    let failing: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.contains('×'))
        .map(str::trim)
        .collect();
    assert!(
        tests >= 140,
        "h2spec ran only {tests} cases:\n{}",
        out.all()
    );
    assert_eq!(
        failures,
        0,
        "h2spec: {summary}\nfailing cases:\n{}\n--- tern stderr ---\n{}",
        failing.join("\n"),
        served.tern.stderr_text()
    );
    assert_eq!(skipped, 0, "h2spec skipped cases: {summary}");
    assert!(
        out.success(),
        "h2spec exited with {:?}: {summary}",
        out.status
    );
    assert!(summary.contains(&format!("{tests} passed")), "{summary}");
}
