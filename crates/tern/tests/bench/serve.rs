//! Against the real `tern serve` in front of a plain backend: what bench
//! discloses matches what tern serve logged for every request.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use tern_testsupport::backend::Backend;
use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::tern::TernProcess;

use crate::support::{bench_json, negotiated, num, summary};

/// tern serve on a free port in front of a backend; kept alive together.
struct Fronted {
    _ca: TestCa,
    _backend: Backend,
    tern: TernProcess,
    url: String,
}

fn start(extra: &[&str]) -> Fronted {
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let backend = Backend::start();
    let backend_addr = backend.addr().to_string();
    let (tern, addr) =
        TernProcess::start_on_free_port(Path::new(env!("CARGO_BIN_EXE_tern")), |addr| {
            let mut args: Vec<String> = vec![
                "serve".into(),
                "--listen".into(),
                addr.to_string(),
                "--backend".into(),
                backend_addr.clone(),
                "--cert".into(),
                cert.chain.display().to_string(),
                "--key".into(),
                cert.key.display().to_string(),
            ];
            args.extend(extra.iter().map(|s| s.to_string()));
            args.into_iter().map(Into::into).collect()
        });
    Fronted {
        _ca: ca,
        _backend: backend,
        tern,
        url: format!("https://{addr}/bytes/100"),
    }
}

/// The value of `key=` in an access-log line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
}

fn access_log(f: &Fronted, n: usize) -> Vec<String> {
    f.tern
        .wait_stdout_lines("status=", n, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}\n{}", f.tern.stderr_text()))
}

#[test]
fn against_tern_serve_keepalive_off_opens_n_connections_with_the_forced_cipher() {
    let f = start(&["--ciphers", "TLS_CHACHA20_POLY1305_SHA256"]);
    let report = bench_json(&["-n", "30", "-c", "3", "-disable-keepalive", &f.url]);
    assert_eq!(num(summary(&report, 0), "completed"), 30.0);
    let log = access_log(&f, 30);
    assert_eq!(log.len(), 30);
    let clients: HashSet<&str> = log.iter().map(|l| field(l, "client")).collect();
    assert_eq!(
        clients.len(),
        30,
        "one connection (client port) per request"
    );
    assert!(log.iter().all(|l| field(l, "resumed") == "no"));
    let n = negotiated(&report);
    assert_eq!(n["cipher"], "TLS13_CHACHA20_POLY1305_SHA256");
    for l in &log {
        assert_eq!(field(l, "cipher"), "TLS_CHACHA20_POLY1305_SHA256");
        assert_eq!(field(l, "group"), n["group"].as_str().unwrap());
        assert_eq!(field(l, "alpn"), n["alpn"].as_str().unwrap());
    }
}

#[test]
fn against_tern_serve_resumed_count_matches_the_access_log() {
    let f = start(&[]);
    let report = bench_json(&["-n", "30", "-c", "1", "--plan", "resumed", &f.url]);
    let s = summary(&report, 0);
    let log = access_log(&f, 30);
    let resumed = log.iter().filter(|l| field(l, "resumed") == "yes").count();
    assert_eq!(num(s, "resumed") as usize, resumed);
    assert!(num(s, "resumed_fraction") >= 0.9, "{s}");
}
