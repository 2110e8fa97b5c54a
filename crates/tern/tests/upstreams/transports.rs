//! Backends reached over TLS (HTTP/1.1 groups, `tls = true`) and over
//! Unix sockets, and servers written as URLs, with nginx as the backend:
//! HTTPS over TLS 1.2 and 1.3, one requiring a client certificate, one
//! whose certificate tern must refuse, and nginx on a Unix socket
//! (HTTP/1.1 and h2c). nginx's own log says what it saw: the TLS
//! version, whether the session was resumed, tern's client certificate.

use std::time::Duration;

use tern_testsupport::backend::Backend;
use tern_testsupport::certs::{CertFiles, KeyKind, TestCa};
use tern_testsupport::nginx::{self, Nginx, NginxListen, NginxTls};
use tern_testsupport::tern::{log_field, run_to_exit, tern_bin, wait_until, Served};

const WAIT: Duration = Duration::from_secs(10);

/// tern with access log on stdout, forwarding to the group written by
/// `upstream` (a `[[upstream]]` table named "app").
fn front(upstream: &str) -> Served {
    Served::builder()
        .no_backend()
        .config(|c| {
            format!(
                "workers = 1\n\n{upstream}\n\
                 [[listener]]\nlisten = \"{}\"\nupstream = \"app\"\ncert = {:?}\nkey = {:?}\n",
                c.listen,
                c.chain(),
                c.key(),
            )
        })
        .start()
}

/// The access-log lines of tern so far that name `path`.
fn tern_log_lines(front: &Served, path: &str, count: usize) -> Vec<String> {
    front
        .tern
        .wait_stdout_lines(path, count, WAIT)
        .unwrap_or_else(|all| panic!("fewer than {count} lines for {path}:\n{all}"))
}

/// A GET through tern that must be answered 200 by nginx; its body.
fn get_ok(front: &Served, path: &str) -> String {
    let response = front.get(path);
    assert_eq!(
        response.status,
        200,
        "{}\n{}",
        response.text(),
        front.tern.stderr_text()
    );
    response.text()
}

/// nginx over HTTPS at `version` with a certificate for 127.0.0.1 and
/// localhost from `ca`, closing each connection after one response
/// unless `keepalive`.
fn https_nginx(
    ca: &mut TestCa,
    version: &str,
    client_ca: Option<&std::path::Path>,
    keepalive: bool,
) -> (Nginx, CertFiles) {
    let cert = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let nginx = Nginx::start(
        NginxListen::Tls(NginxTls {
            cert: &cert,
            protocols: version,
            client_ca,
        }),
        keepalive,
    );
    (nginx, cert)
}

fn skip_without_nginx() -> bool {
    if let Some(why) = nginx::unavailable() {
        eprintln!("skipped: {why}");
        return true;
    }
    false
}

#[test]
fn https_backend_over_tls_1_3_and_1_2_is_verified_and_its_sessions_resumed() {
    if skip_without_nginx() {
        return;
    }
    for version in ["TLSv1.3", "TLSv1.2"] {
        let mut ca = TestCa::new();
        let (nginx, _cert) = https_nginx(&mut ca, version, None, false);
        // Written as a URL: https:// is TLS, the host (an IP address here)
        // is the name checked.
        let front = front(&format!(
            "[[upstream]]\nname = \"app\"\nservers = [\"https://{}\"]\ntls_ca = {:?}\n",
            nginx.addr(),
            ca.ca_file().display().to_string()
        ));
        for i in 0..3 {
            let body = get_ok(&front, &format!("/r{i}"));
            assert!(body.starts_with(&format!("nginx {version} ")), "{body}");
        }
        // nginx closes after each response: three connections, three
        // handshakes, the later two resumed from the first's session.
        let log = nginx
            .access_log_when(|log| log.lines().filter_map(|l| log_field(l, "reused")).count() >= 3);
        let reused: Vec<&str> = log.lines().filter_map(|l| log_field(l, "reused")).collect();
        assert_eq!(reused.len(), 3, "{version}: {log}");
        assert_eq!(
            reused[0], ".",
            "{version}: the first is a full handshake: {log}"
        );
        assert!(
            reused[1..].iter().all(|r| *r == "r"),
            "{version}: later handshakes were not resumed: {log}"
        );
        for line in tern_log_lines(&front, "/r", 3) {
            assert_eq!(log_field(&line, "status"), Some("200"), "{line}");
            assert_eq!(
                log_field(&line, "backend"),
                Some(nginx.addr().to_string().as_str()),
                "{line}"
            );
        }
    }
}

#[test]
fn tls_backend_connections_are_pooled_and_reused() {
    if skip_without_nginx() {
        return;
    }
    let mut ca = TestCa::new();
    let (nginx, _cert) = https_nginx(&mut ca, "TLSv1.3", None, true);
    let front = front(&format!(
        "[[upstream]]\nname = \"app\"\nservers = [\"https://{}\"]\ntls_ca = {:?}\n",
        nginx.addr(),
        ca.ca_file().display().to_string()
    ));
    for i in 0..3 {
        get_ok(&front, &format!("/k{i}"));
    }
    // One TLS connection carried all three: the pool's liveness probe
    // does not mistake an idle TLS connection for a closed one.
    let log = nginx.access_log_when(|log| {
        log.lines()
            .filter_map(|l| log_field(l, "conn_requests"))
            .count()
            >= 3
    });
    let counts: Vec<&str> = log
        .lines()
        .filter_map(|l| log_field(l, "conn_requests"))
        .collect();
    assert_eq!(counts, ["1", "2", "3"], "{log}");
}

#[test]
fn backend_requiring_a_client_certificate_is_shown_terns() {
    if skip_without_nginx() {
        return;
    }
    let mut ca = TestCa::new();
    let mut client_ca = TestCa::named("backend clients CA");
    let (tern_client, _) = client_ca.client("tern-proxy", KeyKind::EcdsaP256, false);
    let (nginx, _cert) = https_nginx(&mut ca, "TLSv1.3 TLSv1.2", Some(client_ca.ca_file()), false);
    let group = |client: &str| {
        format!(
            "[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:{}\"]\ntls = true\n\
             tls_ca = {:?}\ntls_server_name = \"localhost\"\n{client}",
            nginx.addr().port(),
            ca.ca_file().display().to_string()
        )
    };
    let with_cert = front(&group(&format!(
        "tls_client_cert = {:?}\ntls_client_key = {:?}\n",
        tern_client.chain.display().to_string(),
        tern_client.key.display().to_string()
    )));
    let body = get_ok(&with_cert, "/mtls");
    assert!(body.contains("CN=tern-proxy"), "{body}");
    assert!(body.contains("host=localhost"), "{body}");
    let log = nginx.access_log_when(|log| log.contains("verify=SUCCESS"));
    assert!(log.contains("verify=SUCCESS"), "{log}");
    // Without one, nginx refuses the request (its 400 "No required SSL
    // certificate was sent"), which tern relays.
    let without = front(&group(""));
    let response = without.get("/no-cert");
    assert_eq!(response.status, 400, "{}", response.text());
    let log = nginx.access_log_when(|log| log.contains("verify=NONE"));
    assert!(log.contains("verify=NONE"), "{log}");
}

#[test]
fn backend_certificate_that_fails_verification_is_a_502_backend_tls_and_checked_down() {
    if skip_without_nginx() {
        return;
    }
    let mut nginx_ca = TestCa::new();
    let (nginx, _cert) = https_nginx(&mut nginx_ca, "TLSv1.3", None, false);
    let trusted = TestCa::new();
    let front = front(&format!(
        "[[upstream]]\nname = \"app\"\nservers = [\"https://{}\"]\ntls_ca = {:?}\n\
         health_check_path = \"/\"\nhealth_check_interval = \"100ms\"\nfall = 2\n",
        nginx.addr(),
        trusted.ca_file().display().to_string()
    ));
    // The first request may come before the checks decided: a 502 from
    // the failed handshake, or a 503 once the server is down.
    let response = front.get("/unverified");
    assert!([502, 503].contains(&response.status), "{}", response.text());
    front.wait_log(
        &["backend down", &nginx.addr().to_string(), "TLS handshake"],
        WAIT,
    );
    let response = front.get("/after-down");
    assert_eq!(response.status, 503, "{}", response.text());
    assert!(
        !nginx.access_log().contains('/'),
        "a request reached the unverified backend: {}",
        nginx.access_log()
    );
}

#[test]
fn unverified_backend_request_is_logged_as_backend_tls() {
    if skip_without_nginx() {
        return;
    }
    let mut nginx_ca = TestCa::new();
    let (nginx, _cert) = https_nginx(&mut nginx_ca, "TLSv1.2", None, false);
    // From the command line, https:// is checked against the system's
    // CAs, which do not include the test CA.
    let front = Served::builder()
        .backend_addr(format!("https://{}", nginx.addr()))
        .start();
    let response = front.get("/system-roots");
    assert_eq!(response.status, 502, "{}", response.text());
    let line = tern_log_lines(&front, "/system-roots", 1).remove(0);
    assert_eq!(log_field(&line, "error"), Some("backend:tls"), "{line}");
    assert!(
        front.tern.stderr_text().contains("UnknownIssuer"),
        "{}",
        front.tern.stderr_text()
    );
}

#[test]
fn unix_socket_backends_serve_http1_and_h2c_and_are_health_checked() {
    if skip_without_nginx() {
        return;
    }
    for (listen, protocol, wire) in [
        (NginxListen::Unix, "", "HTTP/1.1"),
        (NginxListen::UnixH2c, "protocol = \"h2c\"\n", "HTTP/2.0"),
    ] {
        let mut nginx = Nginx::start(listen, true);
        let server = format!("unix:{}", nginx.socket().display());
        let front = front(&format!(
            "[[upstream]]\nname = \"app\"\nservers = [{server:?}]\n{protocol}\
             health_check_path = \"/\"\nhealth_check_interval = \"100ms\"\nfall = 1\nrise = 1\n\
             health_check_timeout = \"5s\"\n"
        ));
        for i in 0..2 {
            let body = get_ok(&front, &format!("/uds{i}"));
            assert!(body.contains("host=localhost"), "{body}");
        }
        let log =
            nginx.access_log_when(|log| log.lines().filter(|l| l.contains(" /uds")).count() >= 2);
        assert!(
            log.lines()
                .filter(|l| l.contains(" /uds"))
                .all(|l| l.contains(wire)),
            "{wire}: {log}"
        );
        for line in tern_log_lines(&front, "/uds", 2) {
            assert_eq!(log_field(&line, "backend"), Some(server.as_str()), "{line}");
        }
        // Health checks reach it too (their GET / is in nginx's log), and
        // mark it down once it is gone.
        wait_until("a health check in nginx's log", WAIT, || {
            nginx.access_log().lines().any(|l| l.ends_with(" /"))
        });
        nginx.stop();
        front.wait_log(&["backend down", &server], WAIT);
        assert_eq!(front.get("/gone").status, 503);
    }
}

#[test]
fn backend_urls_on_the_command_line_work_and_bad_forms_are_refused_by_name() {
    // http:// is what users paste; it used to fail a DNS lookup.
    let origin = Backend::start();
    let front = Served::builder()
        .backend_addr(format!("http://{}/", origin.addr()))
        .start();
    let response = front.get("/echo");
    assert_eq!(response.status, 200, "{}", response.text());
    for (server, reason) in [
        ("http://127.0.0.1:8080/api", "not a path"),
        ("ftp://127.0.0.1", "unknown scheme"),
        ("127.0.0.1", "no port"),
        ("unix:", "no socket path"),
    ] {
        let done = run_to_exit(tern_bin(), ["serve", "--backend", server, "--check"], WAIT);
        assert_eq!(
            done.status.and_then(|s| s.code()),
            Some(1),
            "{server}: {}",
            done.stderr
        );
        assert!(
            done.stderr.contains("--backend: ") && done.stderr.contains(reason),
            "{server}: {}",
            done.stderr
        );
    }
}

/// The command line reaches an HTTPS backend with its own CA and a
/// client certificate, as `tls_ca`, `tls_client_cert` and
/// `tls_client_key` do in an `[[upstream]]` table; misuses are refused
/// naming the flag.
#[test]
fn backend_tls_flags_give_the_ca_and_client_certificate_from_the_command_line() {
    if skip_without_nginx() {
        return;
    }
    let mut ca = TestCa::new();
    let mut client_ca = TestCa::named("backend clients CA");
    let (tern_client, _) = client_ca.client("tern-cli", KeyKind::EcdsaP256, false);
    let (nginx, _cert) = https_nginx(&mut ca, "TLSv1.3", Some(client_ca.ca_file()), false);
    let (ca_file, chain, key) = (
        ca.ca_file().display().to_string(),
        tern_client.chain.display().to_string(),
        tern_client.key.display().to_string(),
    );
    let front = Served::builder()
        .backend_addr(format!("https://{}", nginx.addr()))
        .args(&[
            "--backend-tls-ca",
            &ca_file,
            "--backend-tls-client-cert",
            &chain,
            "--backend-tls-client-key",
            &key,
        ])
        .start();
    let body = get_ok(&front, "/cli");
    assert!(body.contains("CN=tern-cli"), "{body}");
    let log = nginx.access_log_when(|log| log.contains("verify=SUCCESS"));
    assert!(log.contains("verify=SUCCESS"), "{log}");

    let https = format!("https://{}", nginx.addr());
    for (args, flag, reason) in [
        (
            vec!["--backend", "127.0.0.1:9", "--backend-tls-ca", &ca_file],
            "--backend-tls-ca",
            "only applies with TLS",
        ),
        (
            vec!["--backend", &https, "--backend-tls-client-cert", &chain],
            "--backend-tls-client-cert",
            "needs tls_client_key",
        ),
        (
            vec!["--backend-tls-ca", &ca_file],
            "--backend-tls-ca",
            "give --backend",
        ),
    ] {
        let done = run_to_exit(
            tern_bin(),
            ["serve"].into_iter().chain(args).chain(["--check"]),
            WAIT,
        );
        assert_eq!(
            done.status.and_then(|s| s.code()),
            Some(1),
            "{flag}: {}",
            done.stderr
        );
        assert!(
            done.stderr.contains(&format!("{flag}: ")) && done.stderr.contains(reason),
            "{flag}: {}",
            done.stderr
        );
    }
}
