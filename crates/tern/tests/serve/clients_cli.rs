//! The interop matrix, part two: command-line clients (curl, openssl
//! s_client), load tools (hey, h2load, wrk) and a browser (headless
//! Chromium), over HTTP/1.1 and HTTP/2 where each speaks it. Every request
//! is a POST of 1000 bytes with a forged X-Forwarded-For, on kept-alive
//! connections. Where a tool shows responses (curl, s_client, Chromium)
//! they are checked; where it only counts them (the load tools), what the
//! backend received is, request by request.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tern_testsupport::chromium::dump_dom;
use tern_testsupport::client::find;
use tern_testsupport::tempdir::TempDir;
use tern_testsupport::tern::Served;
use tern_testsupport::tools::{run_tool, s_client, ToolOutput};

use crate::clients::{
    ca, check_answers, check_echo, check_kept_alive, client_connections, program, tool, url,
    BODY_LEN, CLIENT_TIMEOUT,
};

/// A file holding the body the load tools POST.
fn body_file(dir: &TempDir) -> String {
    let path = dir.path().join("body");
    std::fs::write(&path, vec![b'x'; BODY_LEN as usize]).expect("write the body file");
    path.display().to_string()
}

/// The backend's record of the requests `name` made, each checked; returns
/// how many there were.
fn check_backend_saw(served: &Served, name: &str) -> usize {
    let path = format!("/echo?client={name}");
    let echoes: Vec<Value> = served
        .backend()
        .echoes()
        .into_iter()
        .filter(|e| e["path"] == path.as_str())
        .collect();
    for echo in &echoes {
        check_echo(name, echo);
    }
    echoes.len()
}

fn curl_posts(version_flag: &str, proto: &str) {
    let served = Served::start(&[]);
    let name = format!("curl{version_flag}");
    let resolve = format!("localhost:{}:127.0.0.1", served.addr.port());
    let target = url(&served, &name);
    let ca = ca(&served);
    let body = "x".repeat(BODY_LEN as usize);
    // One curl, three URLs: curl keeps the connection for the next one.
    // Each answer is one line: the echo, a tab, the status and version.
    let out = run_tool(
        "curl",
        [
            "-sS",
            version_flag,
            "--cacert",
            &ca,
            "--resolve",
            &resolve,
            "-H",
            "X-Forwarded-For: 6.6.6.6",
            "--data-binary",
            &body,
            "-w",
            "\t%{http_code}\t%{http_version}\n",
            &target,
            &target,
            &target,
        ],
        b"",
        CLIENT_TIMEOUT,
    );
    assert!(out.success(), "{}", out.all());
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|line| {
            let mut fields = line.split('\t');
            let echo = fields.next().unwrap_or("");
            let status = fields.next().unwrap_or("");
            let version = fields.next().unwrap_or("");
            serde_json::json!({
                "status": status.parse::<u16>().unwrap_or(0),
                "proto": format!("HTTP/{version}"),
                "body": serde_json::from_str::<Value>(echo)
                    .unwrap_or_else(|e| panic!("{name}: {e}: {line}")),
            })
        })
        .collect();
    check_answers(&name, &lines, proto);
    check_kept_alive(&served, &name);
}

#[test]
fn curl_posts_over_http11_on_one_connection() {
    curl_posts("--http1.1", "HTTP/1.1");
}

#[test]
fn curl_posts_over_h2_on_one_connection() {
    curl_posts("--http2", "HTTP/2");
}

/// The HTTP/1.1 responses in `bytes`, each as the JSON shape the other
/// clients print (Content-Length framed, as the echo is).
fn http11_answers(bytes: &[u8]) -> Vec<Value> {
    let mut answers = Vec::new();
    let mut rest = bytes;
    while let Some(start) = find(rest, b"HTTP/1.1 ") {
        rest = &rest[start..];
        let Some(end) = find(rest, b"\r\n\r\n") else {
            break;
        };
        let head = String::from_utf8_lossy(&rest[..end]).to_ascii_lowercase();
        let status: u16 = head[9..12].parse().unwrap_or(0);
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let body = &rest[end + 4..(end + 4 + len).min(rest.len())];
        answers.push(serde_json::json!({
            "status": status,
            "proto": "HTTP/1.1",
            "body": serde_json::from_slice::<Value>(body).unwrap_or(Value::Null),
        }));
        rest = &rest[end + 4 + body.len()..];
    }
    answers
}

#[test]
fn openssl_s_client_pipelines_posts_on_one_connection() {
    let served = Served::start(&[]);
    let ca = ca(&served);
    let body = "x".repeat(BODY_LEN as usize);
    let post = |close: &str| {
        format!(
            "POST /echo?client=s_client HTTP/1.1\r\nHost: localhost\r\n\
             X-Forwarded-For: 6.6.6.6\r\nContent-Length: {BODY_LEN}\r\n{close}\r\n{body}"
        )
    };
    // Three requests in one write; the last asks tern to close, so
    // s_client's output ends with every response.
    let requests = format!("{}{}{}", post(""), post(""), post("Connection: close\r\n"));
    let out = s_client(
        served.addr,
        &[
            "-servername",
            "localhost",
            "-CAfile",
            &ca,
            "-verify_return_error",
            "-alpn",
            "http/1.1",
            "-ign_eof",
        ],
        requests.as_bytes(),
    );
    assert!(
        out.stdout.contains("ALPN protocol: http/1.1"),
        "{}",
        out.all()
    );
    check_answers(
        "s_client",
        &http11_answers(out.stdout.as_bytes()),
        "HTTP/1.1",
    );
    assert_eq!(client_connections(&served, "s_client", 3), 1);
}

/// Runs load tool `program` with `flags`, then `-H <forged XFF>`, the
/// body-file flag and the URL of `name`, checks it succeeded, and returns
/// its output with the tern serving it.
fn run_load_tool(
    program: &str,
    name: &str,
    body_flag: &str,
    flags: &[&str],
) -> (ToolOutput, Served) {
    let served = Served::start(&[]);
    let dir = TempDir::new("load-tool-body");
    let target = url(&served, name);
    let body = body_file(&dir);
    let mut args = flags.to_vec();
    args.extend(["-H", "X-Forwarded-For: 6.6.6.6", body_flag, &body, &target]);
    let out = run_tool(program, args, b"", CLIENT_TIMEOUT);
    assert!(out.success(), "{name}: {}", out.all());
    (out, served)
}

fn hey_posts(h2: bool) {
    let Some(hey) = tool(&["hey"], "hey") else {
        return;
    };
    let name = if h2 { "hey-h2" } else { "hey-h1" };
    let mut flags = vec!["-n", "30", "-c", "3", "-m", "POST"];
    if h2 {
        flags.push("-h2");
    }
    let (out, served) = run_load_tool(&hey, name, "-D", &flags);
    assert!(out.stdout.contains("[200]\t30 responses"), "{}", out.all());
    assert!(!out.stdout.contains("Error distribution"), "{}", out.all());
    assert_eq!(check_backend_saw(&served, name), 30);
    let connections = client_connections(&served, name, 30);
    // Go's transport dials a new connection while it waits for an idle one
    // and keeps whichever comes first: a fourth connection for 3 workers is
    // Go, not tern. Kept alive is what matters: far fewer than 30.
    assert!(connections <= 6, "{name}: {connections} connections");
}

#[test]
fn hey_posts_over_http11_on_kept_alive_connections() {
    hey_posts(false);
}

#[test]
fn hey_posts_over_h2() {
    hey_posts(true);
}

fn h2load_posts(h1: bool) {
    let Some(h2load) = tool(&["h2load"], "h2load (nghttp2-client)") else {
        return;
    };
    let name = if h1 { "h2load-h1" } else { "h2load-h2" };
    let mut flags = vec!["-n", "30", "-c", "3"];
    if h1 {
        flags.push("--h1");
    }
    let (out, served) = run_load_tool(&h2load, name, "-d", &flags);
    let alpn = if h1 { "http/1.1" } else { "h2" };
    assert!(
        out.stdout
            .contains(&format!("Application protocol: {alpn}")),
        "{}",
        out.all()
    );
    assert!(
        out.stdout.contains("30 succeeded, 0 failed, 0 errored"),
        "{}",
        out.all()
    );
    assert!(out.stdout.contains("status codes: 30 2xx"), "{}", out.all());
    assert_eq!(check_backend_saw(&served, name), 30);
    assert_eq!(client_connections(&served, name, 30), 3);
}

#[test]
fn h2load_posts_over_h2() {
    h2load_posts(false);
}

#[test]
fn h2load_posts_over_http11_on_kept_alive_connections() {
    h2load_posts(true);
}

#[test]
fn wrk_posts_on_kept_alive_connections() {
    let Some(wrk) = tool(&["wrk"], "wrk") else {
        return;
    };
    let served = Served::start(&[]);
    let target = url(&served, "wrk");
    let script = program("post.lua").display().to_string();
    let out = run_tool(
        &wrk,
        ["-t", "1", "-c", "2", "-d", "1s", "-s", &script, &target],
        b"",
        CLIENT_TIMEOUT,
    );
    assert!(out.success(), "{}", out.all());
    // wrk prints these only when some request went wrong.
    assert!(!out.stdout.contains("Non-2xx"), "{}", out.all());
    assert!(!out.stdout.contains("Socket errors"), "{}", out.all());
    let requests = check_backend_saw(&served, "wrk");
    assert!(
        requests >= 10,
        "wrk made {requests} requests:\n{}",
        out.all()
    );
    let connections = client_connections(&served, "wrk", requests);
    assert!(connections <= 2, "wrk: {connections} connections");
}

/// The answers `/post-page` put in the DOM Chromium dumped, each as the
/// JSON shape the other clients print. (`--dump-dom` escapes `<`, `>` and
/// `&` in text.)
pub(crate) fn page_answers(out: &ToolOutput) -> Vec<Value> {
    out.stdout
        .split("<pre class=\"answer\">")
        .skip(1)
        .map(|chunk| {
            let text = chunk
                .split("</pre>")
                .next()
                .unwrap_or("")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&");
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}\n{}", out.all()))
        })
        .collect()
}

fn chromium_posts(h2: bool) {
    let Some(chromium) = tool(
        &["chromium", "chromium-browser", "google-chrome"],
        "chromium",
    ) else {
        return;
    };
    let served = Served::start(&[]);
    let page = format!(
        "https://localhost:{}/post-page?n=3&len={BODY_LEN}",
        served.addr.port()
    );
    let mut flags = Vec::new();
    if !h2 {
        flags.push("--disable-http2");
    }
    let out = dump_dom(Path::new(&chromium), &page, &flags, Duration::from_secs(60));
    let answers = page_answers(&out);
    let (name, proto) = if h2 {
        ("chromium", "h2")
    } else {
        ("chromium", "http/1.1")
    };
    check_answers(name, &answers, proto);
    check_kept_alive(&served, name);
    let alpn = served
        .tern
        .wait_stdout_lines("path=/echo?client=chromium", 3, crate::LOG_WAIT)
        .unwrap_or_default()
        .iter()
        .all(|l| l.contains(&format!(" alpn={proto} ")));
    assert!(alpn, "every POST over {proto}");
}

#[test]
fn chromium_posts_over_h2_on_one_connection() {
    chromium_posts(true);
}

#[test]
fn chromium_posts_over_http11_on_a_kept_alive_connection() {
    chromium_posts(false);
}
