//! Running `tern bench` / `tern report` and reading their output.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use tern_testsupport::tern::tern_bin;

/// The tern binary under test.
pub fn tern() -> Command {
    let mut cmd = Command::new(tern_bin());
    cmd.env_remove("RUST_LOG");
    cmd
}

/// Runs `tern bench <args>` and returns its output; panics if it cannot run.
pub fn bench(args: &[&str]) -> Output {
    tern()
        .arg("bench")
        .args(args)
        .output()
        .expect("run tern bench")
}

/// Runs `tern bench <args> -o json`, asserts success and parses the report.
pub fn bench_json(args: &[&str]) -> Value {
    bench_json_exiting(args, 0)
}

/// Runs `tern bench <args> -o json` where every request fails: asserts
/// the exit status of a failed run (1) and parses the report it still
/// prints.
pub fn bench_json_failed(args: &[&str]) -> Value {
    bench_json_exiting(args, 1)
}

/// Runs `tern bench <args> -o json`, asserts its exit status is `code` and
/// parses the report.
pub fn bench_json_exiting(args: &[&str], code: i32) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let out = bench(&all);
    assert_eq!(
        out.status.code(),
        Some(code),
        "tern bench {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The summary of target `i`.
pub fn summary(report: &Value, i: usize) -> &Value {
    &report["targets"][i]["summary"]
}

/// The most frequent negotiated parameter set of target 0.
pub fn negotiated(report: &Value) -> &Value {
    &summary(report, 0)["negotiated"][0]
}

/// A file name in a fresh per-test directory under cargo's tmp dir; the
/// directory is kept as a test artifact.
pub fn artifact(test: &str, name: &str) -> PathBuf {
    let dir = std::env::var_os("TERN_TEST_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-artifacts"))
        .join(test);
    std::fs::create_dir_all(&dir).expect("artifact dir");
    dir.join(name)
}

/// `u64` field of a JSON value, with a readable panic.
pub fn num(v: &Value, field: &str) -> f64 {
    v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("no number {field} in {v}"))
}

/// `tern report merge FILES -o json`, which must succeed; the merged report.
pub fn merge_json(files: &[&Path]) -> Value {
    let mut args = vec!["report".to_string(), "merge".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(["-o".to_string(), "json".to_string()]);
    let out = tern().args(&args).output().expect("run tern report merge");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("merged JSON")
}
