//! The interop matrix, part one: HTTP client libraries no one here wrote,
//! as users run them: Python requests and aiohttp, Node's fetch, Go's
//! net/http and Java's HttpClient, over HTTP/1.1 and HTTP/2 where the
//! client speaks it. Each makes three POSTs of 1000 bytes, meant for one
//! kept-alive connection, with a forged X-Forwarded-For; each must get 200s,
//! its whole body through, and tern's own forwarding fields at the backend.
//! The programs are in serve/clients/; command-line clients, load tools and
//! the browser are in clients_cli.rs.
//!
//! In CI (`CI=true`) a missing client fails the test (.ci/run installs
//! them); elsewhere it is skipped with a message.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use tern_testsupport::backend::echoed_header;
use tern_testsupport::tern::Served;
use tern_testsupport::tools::{run_command, run_tool};

use crate::LOG_WAIT;

/// How long one client run may take (Java and `go run` compile first).
pub(crate) const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);

/// The body every client POSTs: this many bytes.
pub(crate) const BODY_LEN: u64 = 1000;

pub(crate) fn program(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/serve/clients")
        .join(name)
}

/// True when a missing client must fail the test rather than skip it.
fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// The first of `candidates` that exists (a bare name is looked up in PATH
/// and in Go's bin directory), or a skip (a failure in CI).
pub(crate) fn tool(candidates: &[&str], what: &str) -> Option<String> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    // `go install` puts hey here; CI's PATH has it, a developer's may not.
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join("go/bin"));
    }
    dirs.push(PathBuf::from("/usr/local/go/bin"));
    let found = candidates.iter().find_map(|c| {
        if c.contains('/') {
            Path::new(c).is_file().then(|| c.to_string())
        } else {
            dirs.iter()
                .map(|dir| dir.join(c))
                .find(|p| p.is_file())
                .map(|p| p.display().to_string())
        }
    });
    if found.is_none() {
        assert!(!in_ci(), "{what} is not installed: .ci/run installs it");
        eprintln!("skipped: {what} is not installed");
    }
    found
}

/// Debian's Python, where `apt-get install python3-requests python3-aiohttp`
/// puts the modules (a `python3` earlier in PATH may be another one).
pub(crate) fn debian_python_with(module: &str) -> Option<String> {
    let python = tool(&["/usr/bin/python3"], "/usr/bin/python3")?;
    let check = run_tool(
        &python,
        ["-c", &format!("import {module}")],
        b"",
        Duration::from_secs(30),
    );
    if !check.success() {
        assert!(
            !in_ci(),
            "python3-{module} is not installed: .ci/run installs it"
        );
        eprintln!("skipped: python3-{module} is not installed");
        return None;
    }
    Some(python)
}

/// What tern must have handed the backend for one client request: a POST
/// with the whole body, tern's X-Forwarded-For (the forged one dropped) and
/// X-Forwarded-Proto.
pub(crate) fn check_echo(name: &str, echo: &Value) {
    assert_eq!(echo["method"], "POST", "{name}: {echo}");
    assert_eq!(echo["body_len"], BODY_LEN, "{name}: the whole body: {echo}");
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

/// Checks `lines` (one JSON object per response: `status`, `proto` and the
/// backend's echo as `body`), expecting three 200s over `proto`.
pub(crate) fn check_answers(name: &str, lines: &[Value], proto: &str) {
    assert_eq!(lines.len(), 3, "{name}: {lines:?}");
    for line in lines {
        assert_eq!(line["status"], 200, "{name}: {line}");
        assert_eq!(line["proto"], proto, "{name}: {line}");
        check_echo(name, &line["body"]);
    }
}

/// Waits for `requests` access-log lines of `/echo?client=name` and returns
/// how many client connections (client ports) carried them.
pub(crate) fn client_connections(served: &Served, name: &str, requests: usize) -> usize {
    let lines = served
        .tern
        .wait_stdout_lines(&format!("path=/echo?client={name}"), requests, LOG_WAIT)
        .unwrap_or_else(|stdout| panic!("{name}: no access-log lines; stdout:\n{stdout}"));
    let mut ports: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.split(' ').find_map(|kv| kv.strip_prefix("client=")))
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports.len()
}

/// Kept alive: fewer client connections than the three requests. (Node's
/// fetch may open a second connection while the first is being returned to
/// its pool; it reuses one for the third request.)
pub(crate) fn check_kept_alive(served: &Served, name: &str) {
    let connections = client_connections(served, name, 3);
    assert!(
        connections < 3,
        "{name} never reused a connection ({connections} connections)"
    );
}

/// Runs a client program that prints one JSON line per response and checks
/// what it saw, what the backend saw, and that it kept its connection.
fn check_client(served: &Served, name: &str, command: Command, proto: &str) {
    let out = run_command(command, b"", CLIENT_TIMEOUT);
    assert!(out.success(), "{name} failed:\n{}", out.all());
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
        .collect();
    check_answers(name, &lines, proto);
    check_kept_alive(served, name);
}

pub(crate) fn url(served: &Served, name: &str) -> String {
    format!(
        "https://localhost:{}/echo?client={name}",
        served.addr.port()
    )
}

pub(crate) fn ca(served: &Served) -> String {
    served.ca().ca_file().display().to_string()
}

fn command(program: &str, args: &[String]) -> Command {
    let mut command = Command::new(program);
    command.args(args);
    command
}

#[test]
fn python_requests_posts_on_a_kept_alive_connection() {
    let Some(python) = debian_python_with("requests") else {
        return;
    };
    let served = Served::start(&[]);
    let script = program("requests_client.py").display().to_string();
    let args = [script, url(&served, "requests"), ca(&served)];
    check_client(&served, "requests", command(&python, &args), "HTTP/1.1");
}

#[test]
fn python_aiohttp_posts_on_a_kept_alive_connection() {
    let Some(python) = debian_python_with("aiohttp") else {
        return;
    };
    let served = Served::start(&[]);
    let script = program("aiohttp_client.py").display().to_string();
    let args = [script, url(&served, "aiohttp"), ca(&served)];
    check_client(&served, "aiohttp", command(&python, &args), "HTTP/1.1");
}

#[test]
fn node_fetch_posts_on_a_kept_alive_connection() {
    let Some(node) = tool(&["node", "nodejs"], "node") else {
        return;
    };
    let served = Served::start(&[]);
    let script = program("fetch_client.mjs").display().to_string();
    let mut cmd = command(&node, &[script, url(&served, "fetch")]);
    cmd.env("NODE_EXTRA_CA_CERTS", ca(&served));
    check_client(&served, "fetch", cmd, "HTTP/1.1");
}

fn go_net_http(version: &str, proto: &str) {
    let Some(go) = tool(&["go"], "go") else {
        return;
    };
    let served = Served::start(&[]);
    let name = format!("go-{version}");
    let script = program("go_client.go").display().to_string();
    let args = [
        "run".to_string(),
        script,
        url(&served, &name),
        ca(&served),
        version.to_string(),
    ];
    check_client(&served, &name, command(&go, &args), proto);
}

#[test]
fn go_net_http_posts_over_h2_on_one_connection() {
    go_net_http("h2", "HTTP/2.0");
}

#[test]
fn go_net_http_posts_over_http11_on_a_kept_alive_connection() {
    go_net_http("h1", "HTTP/1.1");
}

fn java_http_client(version: &str, proto: &str) {
    let Some(java) = tool(&["java"], "java (a JDK 11 or later)") else {
        return;
    };
    let served = Served::start(&[]);
    let name = format!("java-{version}");
    let script = program("JavaClient.java").display().to_string();
    let args = [
        script,
        url(&served, &name),
        ca(&served),
        version.to_string(),
    ];
    check_client(&served, &name, command(&java, &args), proto);
}

#[test]
fn java_http_client_posts_over_h2_on_one_connection() {
    java_http_client("h2", "HTTP/2.0");
}

#[test]
fn java_http_client_posts_over_http11_on_a_kept_alive_connection() {
    java_http_client("h1", "HTTP/1.1");
}
