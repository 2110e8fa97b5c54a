//! The config file: a good one serves, `--check` validates, and every bad
//! one ends with exit status 1 and one line `tern: error: <path>:<line>: <problem>`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tern_testsupport::backend::Backend;
use tern_testsupport::certs::{CertFiles, KeyKind, TestCa};
use tern_testsupport::client;
use tern_testsupport::tern::{free_addr, run_to_exit, tern_bin, Finished, TernProcess};

const EXIT_WAIT: Duration = Duration::from_secs(15);

/// Files for config tests: certificates and configs share one directory, so
/// certificate paths in the configs are relative to it.
struct ConfigDir {
    ca: TestCa,
    cert: CertFiles,
}

impl ConfigDir {
    fn new() -> ConfigDir {
        let mut ca = TestCa::new();
        let cert = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
        ConfigDir { ca, cert }
    }

    fn file_name(path: &Path) -> String {
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    fn chain(&self) -> String {
        Self::file_name(&self.cert.chain)
    }

    fn key(&self) -> String {
        Self::file_name(&self.cert.key)
    }

    /// A good config for `listen` and `backend`, with `extra` lines in the listener.
    fn text(&self, listen: SocketAddr, backend: SocketAddr, extra: &str) -> String {
        format!(
            "workers = 1\n\
             log_format = \"text\"\n\
             shutdown_timeout = \"5s\"\n\
             \n\
             [[listener]]\n\
             listen = \"{listen}\"\n\
             mode = \"http\"\n\
             backends = [\"{backend}\"]\n\
             cert = \"{}\"\n\
             key = \"{}\"\n\
             {extra}",
            self.chain(),
            self.key()
        )
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.ca.dir().join(name);
        std::fs::write(&path, text).expect("write config");
        path
    }
}

/// 1-based number of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|line| line.contains(needle))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("{needle:?} not in config"))
}

fn check(path: &Path) -> Finished {
    let path = path.display().to_string();
    run_to_exit(
        tern_bin(),
        ["serve", "--config", path.as_str(), "--check"],
        EXIT_WAIT,
    )
}

/// `tern serve --check` accepted the file (exit 0).
fn assert_check_passed(finished: &Finished) {
    assert_eq!(
        finished.status.and_then(|s| s.code()),
        Some(0),
        "{}",
        finished.stderr
    );
}

/// Asserts exit 1 and exactly one stderr line `tern: error: <path>:<line>: ...`
/// with one of `lines`, mentioning `mentions` when given. Checked both with
/// `--check` and when starting for real.
fn assert_config_error(path: &Path, lines: &[usize], mentions: Option<&str>) {
    let path_text = path.display().to_string();
    let checked = check(path);
    let started = run_to_exit(
        tern_bin(),
        ["serve", "--config", path_text.as_str()],
        EXIT_WAIT,
    );
    for (how, finished) in [("--check", checked), ("start", started)] {
        assert_eq!(
            finished.status.and_then(|s| s.code()),
            Some(1),
            "{how}: exit status {:?}; stderr: {}",
            finished.status,
            finished.stderr
        );
        let stderr_lines: Vec<&str> = finished.stderr.lines().collect();
        assert_eq!(
            stderr_lines.len(),
            1,
            "{how}: want ONE stderr line, got:\n{}",
            finished.stderr
        );
        let line = stderr_lines[0];
        let prefix = format!("tern: error: {path_text}:");
        let rest = line
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("{how}: {line:?} does not start with {prefix:?}"));
        let (number, problem) = rest
            .split_once(": ")
            .unwrap_or_else(|| panic!("{how}: no `<line>: <problem>` in {line:?}"));
        let number: usize = number
            .parse()
            .unwrap_or_else(|_| panic!("{how}: {number:?} is not a line number in {line:?}"));
        assert!(
            lines.contains(&number),
            "{how}: line {number}, want one of {lines:?}: {line}"
        );
        assert!(
            !problem.trim().is_empty(),
            "{how}: empty problem in {line:?}"
        );
        if let Some(mention) = mentions {
            assert!(
                problem.contains(mention),
                "{how}: {line:?} does not name {mention:?}"
            );
        }
    }
}

#[test]
fn good_config_serves_with_paths_relative_to_its_directory() {
    let dir = ConfigDir::new();
    let backend = Backend::start();
    let addr = free_addr();
    let path = dir.write("good.toml", &dir.text(addr, backend.addr(), ""));
    let path_text = path.display().to_string();
    // Start from another directory so relative paths must resolve against the file.
    let tern = TernProcess::start(tern_bin(), addr, ["serve", "--config", path_text.as_str()]);
    let response = client::get(
        addr,
        "localhost",
        client::client_config(dir.ca.ca_pem()),
        "/echo",
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", tern.stderr_text()));
    assert_eq!(response.status, 200);
}

#[test]
fn check_accepts_good_config() {
    let dir = ConfigDir::new();
    let path = dir.write("good.toml", &dir.text(free_addr(), free_addr(), ""));
    let finished = check(&path);
    assert_check_passed(&finished);
    let expected = format!("{}: ok", path.display());
    assert!(
        finished.stdout.contains(&expected) || finished.stderr.contains(&expected),
        "no {expected:?} in stdout {:?} / stderr {:?}",
        finished.stdout,
        finished.stderr
    );
}

/// A value clap accepts for `arg` (it only has to parse: the flag must be
/// refused before it is used).
fn some_value(arg: &clap::Arg) -> &'static str {
    let flag = format!("--{}", arg.get_long().unwrap_or_default());
    ["1", "true"]
        .into_iter()
        .find(|v| {
            clap::Command::new("t")
                .arg(arg.clone())
                .try_get_matches_from(["t", flag.as_str(), v])
                .is_ok()
        })
        .unwrap_or_else(|| panic!("no test value parses for --{:?}", arg.get_long()))
}

#[test]
fn every_listener_flag_with_config_is_refused_by_name() {
    use clap::Args;
    let dir = ConfigDir::new();
    let path = dir.write("good.toml", &dir.text(free_addr(), free_addr(), ""));
    let path = path.display().to_string();
    assert_check_passed(&check(Path::new(&path)));
    let flags = tern_proxy::config::ListenerOptions::augment_args(clap::Command::new("t"));
    let mut refused = 0;
    for arg in flags.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let flag = format!("--{long}");
        let mut args = vec!["serve", "--config", path.as_str(), "--check", flag.as_str()];
        if arg.get_action().takes_values() {
            args.push(some_value(arg));
        }
        let finished = run_to_exit(tern_bin(), &args, EXIT_WAIT);
        assert_eq!(
            finished.status.and_then(|s| s.code()),
            Some(1),
            "{args:?} was not refused: {}{}",
            finished.stdout,
            finished.stderr
        );
        let want = format!("tern: error: {flag} cannot be combined with --config");
        assert!(
            finished.stderr.trim().starts_with(&want),
            "{args:?}: want {want:?}, got {:?}",
            finished.stderr
        );
        refused += 1;
    }
    // The struct has dozens of flags; a generator that found few is broken.
    assert!(refused >= 40, "only {refused} listener flags found");
    // Process-wide flags still override the file.
    let finished = run_to_exit(
        tern_bin(),
        [
            "serve",
            "--config",
            path.as_str(),
            "--check",
            "--workers",
            "2",
        ],
        EXIT_WAIT,
    );
    assert_check_passed(&finished);
}

#[test]
fn check_accepts_certificate_tables_and_all_documented_keys() {
    let dir = ConfigDir::new();
    let text = format!(
        "workers = 2\nlog_format = \"json\"\nshutdown_timeout = \"30s\"\n\n\
         [[listener]]\nlisten = \"{}\"\nmode = \"http\"\nbackends = [\"{}\"]\n\
         tls_versions = [\"TLSv1.3\", \"TLSv1.2\"]\nciphers = []\ngroups = []\n\
         alpn = [\"http/1.1\"]\n\
         forwarded = [\"x-forwarded-for\", \"x-forwarded-proto\", \"forwarded\"]\n\
         session_cache = 20480\ntickets = true\n\
         handshake_timeout = \"10s\"\nheader_timeout = \"10s\"\nidle_timeout = \"60s\"\n\
         backend_connect_timeout = \"5s\"\nbackend_response_timeout = \"60s\"\n\
         max_connections = 10000\nmax_head_bytes = 65536\n\n\
         [[listener.certificate]]\ncert = \"{}\"\nkey = \"{}\"\n",
        free_addr(),
        free_addr(),
        dir.chain(),
        dir.key()
    );
    let path = dir.write("full.toml", &text);
    let finished = check(&path);
    assert_check_passed(&finished);
}

#[test]
fn syntax_error_is_reported_with_its_line() {
    let dir = ConfigDir::new();
    let text = dir.text(free_addr(), free_addr(), "idle_timeout = \"60s\n");
    let path = dir.write("syntax.toml", &text);
    assert_config_error(&path, &[line_of(&text, "idle_timeout")], None);
}

#[test]
fn unknown_key_is_reported_with_its_line() {
    let dir = ConfigDir::new();
    let text = dir.text(free_addr(), free_addr(), "colour = \"blue\"\n");
    let path = dir.write("unknown.toml", &text);
    assert_config_error(&path, &[line_of(&text, "colour")], Some("colour"));
}

#[test]
fn bad_duration_is_reported_with_its_line() {
    let dir = ConfigDir::new();
    let text = dir.text(free_addr(), free_addr(), "idle_timeout = \"soon\"\n");
    let path = dir.write("duration.toml", &text);
    assert_config_error(&path, &[line_of(&text, "idle_timeout")], None);
}

#[test]
fn unreadable_certificate_is_named() {
    let dir = ConfigDir::new();
    let text = dir
        .text(free_addr(), free_addr(), "")
        .replace(&dir.chain(), "missing-chain.pem");
    let path = dir.write("missing.toml", &text);
    assert_config_error(
        &path,
        &[line_of(&text, "missing-chain.pem")],
        Some("missing-chain.pem"),
    );
}

#[test]
fn mismatched_certificate_and_key_are_reported() {
    let mut dir = ConfigDir::new();
    let other = dir.ca.leaf(&["localhost"], KeyKind::EcdsaP256);
    let other_key = ConfigDir::file_name(&other.key);
    let text = dir
        .text(free_addr(), free_addr(), "")
        .replace(&dir.key(), &other_key);
    let path = dir.write("mismatch.toml", &text);
    let lines = [line_of(&text, "cert ="), line_of(&text, "key =")];
    assert_config_error(&path, &lines, None);
}

#[test]
fn expired_certificate_is_named() {
    let mut dir = ConfigDir::new();
    let expired = dir.ca.expired_leaf(&["localhost"], KeyKind::EcdsaP256);
    let expired_chain = ConfigDir::file_name(&expired.chain);
    let text = dir
        .text(free_addr(), free_addr(), "")
        .replace(&dir.chain(), &expired_chain)
        .replace(&dir.key(), &ConfigDir::file_name(&expired.key));
    let path = dir.write("expired.toml", &text);
    assert_config_error(&path, &[line_of(&text, "cert =")], Some(&expired_chain));
}

#[test]
fn dhe_cipher_is_refused() {
    let dir = ConfigDir::new();
    let text = dir.text(
        free_addr(),
        free_addr(),
        "ciphers = [\"TLS_DHE_RSA_WITH_AES_128_GCM_SHA256\"]\n",
    );
    let path = dir.write("dhe.toml", &text);
    assert_config_error(
        &path,
        &[line_of(&text, "ciphers")],
        Some("TLS_DHE_RSA_WITH_AES_128_GCM_SHA256"),
    );
}

#[test]
fn tls11_version_is_refused() {
    let dir = ConfigDir::new();
    let text = dir.text(free_addr(), free_addr(), "tls_versions = [\"TLSv1.1\"]\n");
    let path = dir.write("tls11.toml", &text);
    assert_config_error(&path, &[line_of(&text, "tls_versions")], Some("TLSv1.1"));
}

#[test]
fn dhe_cipher_flag_is_refused_with_one_line() {
    let dir = ConfigDir::new();
    let mut args = crate::serve_args(free_addr(), &[free_addr().to_string().as_str()]);
    args.extend(tern_testsupport::tern::cert_args(&dir.cert));
    args.extend([
        "--ciphers".into(),
        "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256".into(),
    ]);
    let finished = run_to_exit(tern_bin(), args, EXIT_WAIT);
    assert_ne!(
        finished.status.and_then(|s| s.code()),
        Some(0),
        "{}",
        finished.stderr
    );
    assert!(
        finished.status.is_some(),
        "tern kept running with a DHE cipher"
    );
    let line = finished.stderr.trim();
    assert!(line.starts_with("tern: error: "), "{line}");
    assert!(
        line.contains("TLS_DHE_RSA_WITH_AES_128_GCM_SHA256"),
        "{line}"
    );
}

#[test]
fn config_certificate_tables_are_chosen_by_sni() {
    let mut dir = ConfigDir::new();
    let other = dir.ca.leaf(&["other.test"], KeyKind::EcdsaP256);
    let backend = Backend::start();
    let addr = free_addr();
    let text = format!(
        "[[listener]]\nlisten = \"{addr}\"\nbackends = [\"{}\"]\n\n\
         [[listener.certificate]]\ncert = \"{}\"\nkey = \"{}\"\n\n\
         [[listener.certificate]]\ncert = \"{}\"\nkey = \"{}\"\n",
        backend.addr(),
        dir.chain(),
        dir.key(),
        ConfigDir::file_name(&other.chain),
        ConfigDir::file_name(&other.key),
    );
    let path = dir.write("sni.toml", &text);
    let path_text = path.display().to_string();
    let tern = TernProcess::start(tern_bin(), addr, ["serve", "--config", path_text.as_str()]);
    let config = client::client_config(dir.ca.ca_pem());
    let conn = client::HttpConn::connect(addr, "other.test", config.clone())
        .unwrap_or_else(|e| panic!("SNI other.test: {e}\n{}", tern.stderr_text()));
    let presented = conn.tls().peer_certificates().expect("certificates");
    assert_eq!(presented[0].as_ref(), other.leaf_der.as_slice());
    let conn = client::HttpConn::connect(addr, "localhost", config).expect("SNI localhost");
    let presented = conn.tls().peer_certificates().expect("certificates");
    assert_eq!(presented[0].as_ref(), dir.cert.leaf_der.as_slice());
}

#[test]
fn config_with_two_listeners_serves_both() {
    let dir = ConfigDir::new();
    let first_backend = Backend::start();
    let second_backend = Backend::start();
    let first = free_addr();
    let second = free_addr();
    let text = format!(
        "{}\n{}",
        dir.text(first, first_backend.addr(), ""),
        dir.text(second, second_backend.addr(), "").replace(
            "workers = 1\nlog_format = \"text\"\nshutdown_timeout = \"5s\"\n",
            ""
        )
    );
    let path = dir.write("two.toml", &text);
    let path_text = path.display().to_string();
    let mut tern = TernProcess::start(tern_bin(), first, ["serve", "--config", path_text.as_str()]);
    tern.wait_ready(second, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("second listener: {e}\n{}", tern.stderr_text()));
    let config = client::client_config(dir.ca.ca_pem());
    for (addr, backend) in [(first, &first_backend), (second, &second_backend)] {
        let response = client::get(addr, "localhost", config.clone(), "/echo").expect("response");
        assert_eq!(response.json()["backend"], backend.addr().to_string());
    }
}

#[test]
fn expired_certificate_flag_is_refused_with_one_line_naming_it() {
    let mut dir = ConfigDir::new();
    let expired = dir.ca.expired_leaf(&["localhost"], KeyKind::EcdsaP256);
    let mut args = crate::serve_args(free_addr(), &[free_addr().to_string().as_str()]);
    args.extend(tern_testsupport::tern::cert_args(&expired));
    let finished = run_to_exit(tern_bin(), args, EXIT_WAIT);
    assert_eq!(
        finished.status.and_then(|s| s.code()),
        Some(1),
        "{}",
        finished.stderr
    );
    let lines: Vec<&str> = finished.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "want ONE stderr line:\n{}", finished.stderr);
    assert!(lines[0].starts_with("tern: error: "), "{}", lines[0]);
    let name = ConfigDir::file_name(&expired.chain);
    assert!(
        lines[0].contains(&name),
        "{} does not name {name}",
        lines[0]
    );
}

#[test]
fn acme_settings_are_checked_with_their_line() {
    let dir = ConfigDir::new();
    let listener = |extra: &str| {
        format!(
            "workers = 1\n\n[[listener]]\nlisten = \"{}\"\n{extra}",
            free_addr()
        )
    };
    let cases: [(&str, String, &str, &str); 7] = [
        (
            "wildcard",
            listener("acme = [\"*.example.com\"]\n"),
            "acme =",
            "DNS-01",
        ),
        (
            "ip",
            listener("[[listener.certificate]]\nacme = [\"192.0.2.1\"]\n"),
            "acme =",
            "IP address",
        ),
        (
            "both",
            listener(&format!(
                "[[listener.certificate]]\ncert = \"{}\"\nkey = \"{}\"\nacme = [\"a.example.com\"]\n",
                dir.chain(),
                dir.key()
            )),
            "acme =",
            "not both",
        ),
        (
            "key_types",
            listener("[[listener.certificate]]\nacme = [\"a.example.com\"]\nkey_types = [\"dsa\"]\n"),
            "key_types",
            "unknown key type",
        ),
        (
            "directory",
            format!(
                "{}\n[acme]\nstate_dir = \"state\"\ndirectory = \"http://ca.example/dir\"\n",
                listener("acme = [\"a.example.com\"]\n")
            ),
            "directory =",
            "https://",
        ),
        (
            "contact",
            format!(
                "{}\n[acme]\ncontact = [\"ops@example.com\"]\n",
                listener("acme = [\"a.example.com\"]\n")
            ),
            "contact =",
            "mailto:",
        ),
        (
            "eab",
            format!(
                "{}\n[acme]\neab_kid = \"kid-1\"\n",
                listener("acme = [\"a.example.com\"]\n")
            ),
            "[acme]",
            "eab_hmac_key",
        ),
    ];
    for (name, text, line_needle, mention) in cases {
        let path = dir.write(&format!("acme-{name}.toml"), &text);
        let mut lines = vec![line_of(&text, line_needle)];
        // A missing key is reported at its table's header.
        if name == "eab" {
            lines.push(line_of(&text, "eab_kid"));
        }
        assert_config_error(&path, &lines, Some(mention));
    }
}

#[test]
fn check_accepts_acme_settings_without_contacting_the_ca() {
    let dir = ConfigDir::new();
    let text = format!(
        "workers = 1\n\n\
         [acme]\ndirectory = \"letsencrypt-staging\"\ncontact = [\"mailto:ops@example.com\"]\n\
         state_dir = \"acme-state\"\nretry = \"5m\"\n\n\
         [[listener]]\nlisten = \"{}\"\nhttp_listen = \"{}\"\n\n\
         [[listener.certificate]]\nacme = [\"example.com\", \"www.example.com\"]\nkey_types = [\"ecdsa\", \"rsa\"]\n",
        free_addr(),
        free_addr()
    );
    let path = dir.write("acme-good.toml", &text);
    let finished = check(&path);
    assert_check_passed(&finished);
}

#[test]
fn header_rule_on_a_forwarding_field_is_a_config_error() {
    let dir = ConfigDir::new();
    let text = dir.text(
        free_addr(),
        free_addr(),
        "\n[listener.request_headers]\nset = { \"X-Forwarded-For\" = \"1.2.3.4\" }\n",
    );
    let path = dir.write("forwarding_rule.toml", &text);
    assert_config_error(
        &path,
        &[
            line_of(&text, "[listener.request_headers]"),
            line_of(&text, "X-Forwarded-For"),
        ],
        Some("forwarding field"),
    );
}
