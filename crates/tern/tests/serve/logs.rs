//! The access log: one line per request with the documented keys, as text
//! (key=value) or JSON, on stdout or in a file.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tern_testsupport::tempdir::TempDir;
use tern_testsupport::tern::{log_field, Served};

use crate::LOG_WAIT;

/// The keys of a text access-log line, in the documented order (the test
/// client is rustls offering certificate compression, which tern's full
/// TLS 1.3 handshake uses: `cert_compression` comes last).
const KEYS: [&str; 19] = [
    "client",
    "sni",
    "tls",
    "cipher",
    "group",
    "alpn",
    "resumed",
    "handshake_us",
    "method",
    "path",
    "status",
    "bytes_in",
    "bytes_out",
    "backend",
    "backend_us",
    "total_us",
    "error",
    "request_id",
    "cert_compression",
];

const NUMERIC: [&str; 6] = [
    "handshake_us",
    "status",
    "bytes_in",
    "bytes_out",
    "backend_us",
    "total_us",
];

fn parse_text_line(line: &str) -> Vec<(String, String)> {
    line.split_whitespace()
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn text_access_log_line_has_documented_keys_in_order() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    let client = conn.local_addr().expect("local address");
    assert_eq!(
        conn.get("localhost", "/bytes/100").expect("get").status,
        200
    );
    let lines = served
        .tern
        .wait_stdout_lines("path=/bytes/100", 1, LOG_WAIT)
        .unwrap_or_else(|stdout| panic!("no access-log line; stdout:\n{stdout}"));
    assert_eq!(lines.len(), 1, "one request, one line: {lines:?}");
    let pairs = parse_text_line(&lines[0]);
    let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, KEYS, "line: {}", lines[0]);
    let fields: HashMap<_, _> = pairs.into_iter().collect();
    assert_eq!(fields["client"], client.to_string(), "{}", lines[0]);
    assert_eq!(fields["sni"], "localhost");
    assert_eq!(fields["cert_compression"], "brotli", "{}", lines[0]);
    assert!(
        ["TLSv1.3", "TLSv1.2"].contains(&fields["tls"].as_str()),
        "{}",
        lines[0]
    );
    assert!(fields["cipher"].starts_with("TLS_"), "{}", lines[0]);
    assert!(
        !fields["group"].is_empty() && fields["group"] != "-",
        "{}",
        lines[0]
    );
    assert_eq!(fields["alpn"], "http/1.1");
    assert_eq!(fields["resumed"], "no");
    assert_eq!(fields["method"], "GET");
    assert_eq!(fields["status"], "200");
    assert_eq!(fields["backend"], served.backend().addr().to_string());
    for key in NUMERIC {
        assert!(
            fields[key].parse::<u64>().is_ok(),
            "{key} is not a number: {}",
            lines[0]
        );
    }
    let bytes_out: u64 = fields["bytes_out"].parse().unwrap_or(0);
    assert!(
        bytes_out >= 100,
        "bytes_out={bytes_out} for a 100-byte body"
    );
}

#[test]
fn json_access_log_line_has_documented_keys_and_types() {
    let served = Served::start(&["--log-format", "json"]);
    assert_eq!(served.get("/bytes/100").status, 200);
    let lines = served
        .tern
        .wait_stdout_lines("/bytes/100", 1, LOG_WAIT)
        .unwrap_or_else(|stdout| panic!("no access-log line; stdout:\n{stdout}"));
    let entry: serde_json::Value = serde_json::from_str(&lines[0])
        .unwrap_or_else(|e| panic!("not one JSON object per line ({e}): {}", lines[0]));
    for key in KEYS {
        assert!(entry.get(key).is_some(), "missing {key}: {entry}");
    }
    assert_eq!(entry["resumed"], serde_json::Value::Bool(false), "{entry}");
    for key in NUMERIC {
        assert!(entry[key].is_u64(), "{key} is not a number: {entry}");
    }
    assert_eq!(entry["status"], 200);
    assert_eq!(entry["path"], "/bytes/100");
}

#[test]
fn every_request_on_a_keepalive_connection_gets_a_line() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    for _ in 0..3 {
        assert_eq!(
            conn.get("localhost", "/echo?keepalive")
                .expect("get")
                .status,
            200
        );
    }
    let lines = served
        .tern
        .wait_stdout_lines("path=/echo?keepalive", 3, LOG_WAIT)
        .unwrap_or_else(|stdout| panic!("missing lines; stdout:\n{stdout}"));
    assert_eq!(lines.len(), 3);
}

/// tern times requests with the clock of its worker's turn (read once per
/// turn, not per use): the durations it logs still bound the backend's
/// wait from below and the client's own measure from above.
#[test]
fn logged_durations_hold_a_slow_backend_within_what_the_client_saw() {
    let served = Served::start(&[]);
    let mut conn = served.connect();
    // The second request on the connection: its start is a later turn's.
    assert_eq!(conn.get("localhost", "/bytes/10").expect("get").status, 200);
    let asked = Instant::now();
    assert_eq!(conn.get("localhost", "/slow/300").expect("get").status, 200);
    let client_us = asked.elapsed().as_micros() as u64;
    let lines = served
        .tern
        .wait_stdout_lines("path=/slow/300", 1, LOG_WAIT)
        .unwrap_or_else(|stdout| panic!("no access-log line; stdout:\n{stdout}"));
    let field = |key| -> u64 {
        log_field(&lines[0], key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no number {key}: {}", lines[0]))
    };
    let (backend_us, total_us) = (field("backend_us"), field("total_us"));
    assert!(backend_us >= 300_000, "backend waited 300 ms: {}", lines[0]);
    assert!(total_us >= backend_us, "{}", lines[0]);
    assert!(
        total_us <= client_us,
        "logged {total_us} µs, the client saw {client_us}: {}",
        lines[0]
    );
}

#[test]
fn access_log_file_receives_lines() {
    let dir = TempDir::new("accesslog");
    let path = dir.path().join("access.log");
    let path_text = path.display().to_string();
    let served = Served::start(&["--access-log", path_text.as_str()]);
    assert_eq!(served.get("/bytes/100").status, 200);
    let deadline = Instant::now() + LOG_WAIT;
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if text.contains("path=/bytes/100") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no line in {path_text}: {text:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !served.tern.stdout_text().contains("path=/bytes/100"),
        "the line also went to stdout"
    );
}

#[test]
fn access_log_off_writes_nothing() {
    let mut served = Served::start(&["--access-log", "off"]);
    assert_eq!(served.get("/bytes/100").status, 200);
    // tern flushes its access log on the way out: once it has exited,
    // everything it would ever have logged is in stdout.
    served.tern.terminate();
    let status = served.tern.wait_exit(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "exit status {status:?}\n{}",
        served.tern.stderr_text()
    );
    assert!(
        !served.tern.stdout_text().contains("/bytes/100"),
        "{}",
        served.tern.stdout_text()
    );
}

#[test]
fn resumed_handshake_is_logged_as_resumed() {
    use tern_testsupport::client::HttpConn;
    let served = Served::start(&[]);
    // One client config keeps rustls' session cache, so the second connection resumes.
    let mut first =
        HttpConn::connect(served.addr, "localhost", served.client.clone()).expect("first");
    assert_eq!(
        first.get("localhost", "/echo?first").expect("get").status,
        200
    );
    drop(first);
    let mut second =
        HttpConn::connect(served.addr, "localhost", served.client.clone()).expect("second");
    assert_eq!(
        second.get("localhost", "/echo?second").expect("get").status,
        200
    );
    let lines = served
        .tern
        .wait_stdout_lines("path=/echo?second", 1, LOG_WAIT)
        .unwrap_or_else(|stdout| panic!("no line; stdout:\n{stdout}"));
    assert!(lines[0].contains("resumed=yes"), "{}", lines[0]);
}
