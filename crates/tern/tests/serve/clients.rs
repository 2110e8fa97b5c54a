//! Clients no one here wrote, as users run them: Python requests and
//! aiohttp, Node's fetch, Go's net/http (HTTP/2). Each makes three POSTs
//! meant for kept-alive connections with a forged X-Forwarded-For; each must get
//! 200s, its whole body through, and tern's own forwarding fields at the
//! backend. The programs are in serve/clients/. In CI (`CI=true`) a
//! missing client fails the test (.ci/run installs them); elsewhere it is
//! skipped with a message.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tern_testsupport::backend::echoed_header;
use tern_testsupport::tern::Served;
use tern_testsupport::tools::run_tool;

use crate::LOG_WAIT;

fn program(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/serve/clients")
        .join(name)
}

/// The first of `candidates` that exists, or a skip (a failure in CI).
fn tool(candidates: &[&str], what: &str) -> Option<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = candidates.iter().find_map(|c| {
        if c.contains('/') {
            Path::new(c).is_file().then(|| c.to_string())
        } else {
            std::env::split_paths(&path)
                .map(|dir| dir.join(c))
                .find(|p| p.is_file())
                .map(|p| p.display().to_string())
        }
    });
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{what} is not installed: .ci/run installs it"
        );
        eprintln!("skipped: {what} is not installed");
    }
    found
}

/// Debian's Python, where `apt-get install python3-requests python3-aiohttp`
/// puts the modules (a `python3` earlier in PATH may be another one).
fn debian_python_with(module: &str) -> Option<String> {
    let python = tool(&["/usr/bin/python3"], "/usr/bin/python3")?;
    let check = run_tool(
        &python,
        ["-c", &format!("import {module}")],
        b"",
        Duration::from_secs(30),
    );
    if !check.success() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "python3-{module} is not installed: .ci/run installs it"
        );
        eprintln!("skipped: python3-{module} is not installed");
        return None;
    }
    Some(python)
}

/// Runs a client against `served` and checks what it saw and what the
/// backend saw; `proto` is the HTTP version the client must report.
fn check_client(
    served: &Served,
    name: &str,
    command: &[String],
    envs: &[(&str, String)],
    proto: &str,
) {
    let (program, args) = command.split_first().expect("a command");
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run the client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name} failed:\n{stdout}\n{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 3, "{name}: {stdout}");
    for line in &lines {
        assert_eq!(line["status"], 200, "{name}: {line}");
        assert_eq!(line["proto"], proto, "{name}: {line}");
        let echo = &line["body"];
        assert_eq!(echo["method"], "POST", "{name}: {echo}");
        assert_eq!(echo["body_len"], 1000, "{name}: the whole body: {echo}");
        assert_eq!(
            echoed_header(echo, "x-forwarded-for"),
            ["127.0.0.1"],
            "{name}: {echo}"
        );
        assert_eq!(
            echoed_header(echo, "x-forwarded-proto"),
            ["https"],
            "{name}: {echo}"
        );
    }
    // Kept alive: fewer client connections (client ports) than requests.
    // (Node's fetch may open a second connection while the first is being
    // returned to its pool; it reuses one for the third request.)
    let lines = served
        .tern
        .wait_stdout_lines(&format!("path=/echo?client={name}"), 3, LOG_WAIT)
        .unwrap_or_else(|stdout| panic!("{name}: no access-log lines; stdout:\n{stdout}"));
    let mut ports: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.split(' ').find_map(|kv| kv.strip_prefix("client=")))
        .collect();
    ports.sort_unstable();
    ports.dedup();
    assert!(
        ports.len() < 3,
        "{name} never reused a connection: {lines:?}"
    );
}

fn url(served: &Served, name: &str) -> String {
    format!(
        "https://localhost:{}/echo?client={name}",
        served.addr.port()
    )
}

fn ca(served: &Served) -> String {
    served.ca().ca_file().display().to_string()
}

#[test]
fn python_requests_posts_on_a_kept_alive_connection() {
    let Some(python) = debian_python_with("requests") else {
        return;
    };
    let served = Served::start(&[]);
    let script = program("requests_client.py").display().to_string();
    let cmd = [python, script, url(&served, "requests"), ca(&served)];
    check_client(&served, "requests", &cmd, &[], "HTTP/1.1");
}

#[test]
fn python_aiohttp_posts_on_a_kept_alive_connection() {
    let Some(python) = debian_python_with("aiohttp") else {
        return;
    };
    let served = Served::start(&[]);
    let script = program("aiohttp_client.py").display().to_string();
    let cmd = [python, script, url(&served, "aiohttp"), ca(&served)];
    check_client(&served, "aiohttp", &cmd, &[], "HTTP/1.1");
}

#[test]
fn node_fetch_posts_on_a_kept_alive_connection() {
    let Some(node) = tool(&["node", "nodejs"], "node") else {
        return;
    };
    let served = Served::start(&[]);
    let script = program("fetch_client.mjs").display().to_string();
    let cmd = [node, script, url(&served, "fetch")];
    check_client(
        &served,
        "fetch",
        &cmd,
        &[("NODE_EXTRA_CA_CERTS", ca(&served))],
        "HTTP/1.1",
    );
}

#[test]
fn go_net_http_posts_over_h2_on_one_connection() {
    let Some(go) = tool(&["go", "/usr/local/go/bin/go"], "go") else {
        return;
    };
    let served = Served::start(&[]);
    let script = program("go_client.go").display().to_string();
    let cmd = [
        go,
        "run".to_string(),
        script,
        url(&served, "go"),
        ca(&served),
    ];
    check_client(&served, "go", &cmd, &[], "HTTP/2.0");
}
