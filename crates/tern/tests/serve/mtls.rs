//! Client certificates (mTLS): tern asks for them as configured, refuses a
//! bad or missing one with the alert that says why (and a log line and a
//! metric naming the reason), and tells the backend who the client is in
//! RFC 9440 `Client-Cert` fields it sets itself: a client's own never
//! reach the backend. Real clients: openssl s_client, curl, Python
//! requests and Go's net/http, each presenting its certificate.

use std::path::Path;
use std::process::Command;

use tern_testsupport::backend::{echoed_header, sha256_hex};
use tern_testsupport::certs::{sf_binary, CertFiles, KeyKind, TestCa};
use tern_testsupport::tern::Served;
use tern_testsupport::tools::{curl, run_command, s_client, ToolOutput};

use crate::clients::{ca, debian_python_with, program, tool, url, CLIENT_TIMEOUT};
use crate::LOG_WAIT;

const REQUEST: &[u8] =
    b"GET /echo HTTP/1.1\r\nHost: localhost\r\nClient-Cert: :Zm9yZ2Vk:\r\nConnection: close\r\n\r\n";

/// A CA for client certificates, with a good client, an expired one and a
/// revoked one (and its CRL).
struct Clients {
    ca: TestCa,
    good: CertFiles,
    expired: CertFiles,
    revoked: CertFiles,
    crl: std::path::PathBuf,
}

impl Clients {
    fn new() -> Clients {
        let mut ca = TestCa::new();
        let (good, _) = ca.client("alice", KeyKind::EcdsaP256, false);
        let (expired, _) = ca.client("old", KeyKind::EcdsaP256, true);
        let (revoked, serial) = ca.client("mallory", KeyKind::Rsa2048, false);
        let crl = ca.crl(&[serial]);
        Clients {
            ca,
            good,
            expired,
            revoked,
            crl,
        }
    }

    fn ca(&self) -> String {
        self.ca.ca_file().display().to_string()
    }

    fn crl(&self) -> String {
        self.crl.display().to_string()
    }
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// tern asking for client certificates as `mode` says, trusting `clients`'
/// CA and CRL.
fn serve(clients: &Clients, mode: &str) -> Served {
    Served::start(&[
        "--client-auth",
        mode,
        "--client-ca",
        &clients.ca(),
        "--client-crl",
        &clients.crl(),
    ])
}

/// openssl s_client with `cert` (if any) at TLS `version`, sending
/// [`REQUEST`]; its output (alerts are on stderr).
fn s_client_with(served: &Served, cert: Option<&CertFiles>, version: &str) -> ToolOutput {
    let mut args = vec![version, "-servername", "localhost", "-ign_eof"];
    let (chain, key);
    if let Some(c) = cert {
        chain = path(&c.chain);
        key = path(&c.key);
        args.extend(["-cert", chain.as_str(), "-key", key.as_str()]);
    }
    s_client(served.addr, &args, REQUEST)
}

/// curl GET /echo presenting `cert` (if any) with a forged Client-Cert.
fn curl_with(served: &Served, cert: Option<&CertFiles>) -> ToolOutput {
    let url = format!("https://localhost:{}/echo", served.addr.port());
    let resolve = format!("localhost:{}:127.0.0.1", served.addr.port());
    let ca = ca(served);
    let mut args = vec![
        "-sS",
        "--cacert",
        ca.as_str(),
        "--resolve",
        resolve.as_str(),
        "-H",
        "Client-Cert: :Zm9yZ2Vk:",
        url.as_str(),
    ];
    let (chain, key);
    if let Some(c) = cert {
        chain = path(&c.chain);
        key = path(&c.key);
        args.extend(["--cert", chain.as_str(), "--key", key.as_str()]);
    }
    curl(&args)
}

/// The certificate the backend was told of, as DER.
fn told_backend(echo: &serde_json::Value) -> Option<Vec<u8>> {
    let fields = echoed_header(echo, "client-cert");
    assert!(fields.len() <= 1, "one Client-Cert at most: {echo}");
    assert!(
        !fields.iter().any(|f| f.contains("Zm9yZ2Vk")),
        "the client's forged Client-Cert reached the backend: {echo}"
    );
    fields
        .first()
        .map(|f| sf_binary(f).expect("an sf-binary Client-Cert"))
}

/// The first JSON line a client printed.
fn echo_of(out: &ToolOutput) -> serde_json::Value {
    assert!(out.success(), "{}", out.all());
    let first = out.stdout.lines().next().unwrap_or_default();
    serde_json::from_str(first).unwrap_or_else(|e| panic!("{e}: {}", out.all()))
}

#[test]
fn required_client_certificate_reaches_the_backend_and_the_access_log() {
    let clients = Clients::new();
    let served = serve(&clients, "required");
    let echo = echo_of(&curl_with(&served, Some(&clients.good)));
    assert_eq!(
        told_backend(&echo).as_deref(),
        Some(&clients.good.leaf_der[..])
    );
    // curl sends the whole chain file: the CA comes as Client-Cert-Chain.
    let chain = echoed_header(&echo, "client-cert-chain");
    assert_eq!(chain.len(), 1, "{echo}");
    assert!(sf_binary(&chain[0]).is_some(), "{echo}");
    let fingerprint = format!("client_cert_sha256={}", sha256_hex(&clients.good.leaf_der));
    let lines = served
        .tern
        .wait_stdout_lines("path=/echo", 1, LOG_WAIT)
        .unwrap_or_else(|out| panic!("no access-log line: {out}"));
    assert!(
        lines[0].ends_with(&format!(
            " client_cert_subject=\"CN=alice, O=tern tests\" {fingerprint}"
        )),
        "{}",
        lines[0]
    );
}

#[test]
fn required_refuses_a_client_without_certificate_with_certificate_required() {
    let clients = Clients::new();
    let served = Served::builder()
        .admin()
        .args(&["--client-auth", "required", "--client-ca", &clients.ca()])
        .start();
    for version in ["-tls1_3", "-tls1_2"] {
        let out = s_client_with(&served, None, version);
        assert!(
            !out.stdout.contains("HTTP/1.1 200"),
            "{version}: {}",
            out.all()
        );
        if version == "-tls1_3" {
            assert!(
                out.all().contains("alert certificate required"),
                "{}",
                out.all()
            );
        } else {
            assert!(out.all().contains("SSL alert number"), "{}", out.all());
        }
    }
    assert!(!curl_with(&served, None).success());
    served.wait_log(
        &["client certificate refused", "reason=\"none_sent\""],
        LOG_WAIT,
    );
    // A refusal is logged before it is counted, and curl may be gone
    // before tern counts the third: wait for the count, then check it is
    // no more than three.
    let refused = || {
        served.scrape().get(
            "tern_tls_handshake_failures_total",
            &[("reason", "client_cert_none_sent")],
        )
    };
    tern_testsupport::tern::wait_until("three refusals counted", LOG_WAIT, || {
        refused().is_some_and(|n| n >= 3.0)
    });
    assert_eq!(refused(), Some(3.0));
}

#[test]
fn unknown_ca_expired_and_revoked_certificates_get_their_alerts() {
    let clients = Clients::new();
    let mut stranger_ca = TestCa::named("stranger CA");
    let (stranger, _) = stranger_ca.client("stranger", KeyKind::EcdsaP256, false);
    let served = serve(&clients, "optional");
    for version in ["-tls1_3", "-tls1_2"] {
        for (cert, alert, reason) in [
            (&stranger, "alert unknown ca", "unknown_ca"),
            (&clients.expired, "alert certificate expired", "expired"),
            (&clients.revoked, "alert certificate revoked", "revoked"),
        ] {
            let out = s_client_with(&served, Some(cert), version);
            assert!(
                !out.stdout.contains("HTTP/1.1 200"),
                "{version} {reason}: {}",
                out.all()
            );
            assert!(
                out.all().contains(alert),
                "{version} {reason}: {}",
                out.all()
            );
            served.wait_log(
                &[
                    "client certificate refused",
                    &format!("reason=\"{reason}\""),
                ],
                LOG_WAIT,
            );
        }
    }
    // The good one still gets through, over both versions.
    for version in ["-tls1_3", "-tls1_2"] {
        let out = s_client_with(&served, Some(&clients.good), version);
        assert!(
            out.stdout.contains("HTTP/1.1 200"),
            "{version}: {}",
            out.all()
        );
    }
}

#[test]
fn optional_serves_a_client_without_certificate_and_drops_its_forged_field() {
    let clients = Clients::new();
    let served = serve(&clients, "optional");
    let echo = echo_of(&curl_with(&served, None));
    assert_eq!(told_backend(&echo), None, "{echo}");
    let echo = echo_of(&curl_with(&served, Some(&clients.good)));
    assert_eq!(
        told_backend(&echo).as_deref(),
        Some(&clients.good.leaf_der[..])
    );
}

#[test]
fn forged_client_cert_never_reaches_the_backend_without_mtls() {
    let served = Served::start(&[]);
    let (response, _conn) = served.raw(REQUEST);
    assert_eq!(response.status, 200, "{}", response.text());
    let echo = response.json();
    assert_eq!(told_backend(&echo), None, "{echo}");
    assert!(
        echoed_header(&echo, "client-cert-chain").is_empty(),
        "{echo}"
    );
}

/// tern with two names on one listener: `open.test` (the default
/// certificate) asks for no client certificate, `secure.test` requires
/// one from `clients`' CA; over HTTP/3 too with `http3`.
fn open_and_secure(clients: &Clients, server_ca: &mut TestCa, http3: bool) -> Served {
    let open = server_ca.leaf(&["open.test"], KeyKind::EcdsaP256);
    let secure = server_ca.leaf(&["secure.test"], KeyKind::EcdsaP256);
    let client_ca = clients.ca();
    let mut builder = Served::builder().shared_cert(server_ca, &open);
    if http3 {
        builder = builder.admin();
    }
    builder
        .config(|c| {
            format!(
                "{}[[listener]]\nlisten = \"{}\"\nbackends = [\"{}\"]\ncert = \"{}\"\nkey = \"{}\"\nhttp3 = {http3}\n\n\
                 [[listener.certificate]]\ncert = \"{}\"\nkey = \"{}\"\nclient_auth = \"required\"\nclient_ca = \"{}\"\n",
                match c.admin {
                    Some(admin) => format!("admin = \"{admin}\"\n"),
                    None => String::new(),
                },
                c.listen,
                c.backend.as_deref().unwrap_or_default(),
                c.chain(),
                c.key(),
                path(&secure.chain),
                path(&secure.key),
                client_ca,
            )
        })
        .start()
}

/// One listener, two names: `secure.test` requires a client certificate,
/// `open.test` asks for none. A request for `secure.test` on a connection
/// made for `open.test` gets 421 rather than slipping past the check.
#[test]
fn per_name_policy_on_one_listener() {
    let clients = Clients::new();
    let mut server_ca = TestCa::new();
    let served = open_and_secure(&clients, &mut server_ca, false);
    let ca = path(server_ca.ca_file());
    let get = |name: &str, host: &str, cert: Option<&CertFiles>| {
        let url = format!("https://{name}:{}/echo", served.addr.port());
        let resolve = format!("{name}:{}:127.0.0.1", served.addr.port());
        let host = format!("Host: {host}");
        let mut args = vec![
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--cacert",
            ca.as_str(),
            "--resolve",
            resolve.as_str(),
            "-H",
            host.as_str(),
        ];
        let (chain, key);
        if let Some(c) = cert {
            chain = path(&c.chain);
            key = path(&c.key);
            args.extend(["--cert", chain.as_str(), "--key", key.as_str()]);
        }
        args.push(url.as_str());
        curl(&args)
    };
    let open_plain = get("open.test", "open.test", None);
    assert_eq!(open_plain.stdout, "200", "{}", open_plain.all());
    let secure_plain = get("secure.test", "secure.test", None);
    assert!(!secure_plain.success(), "{}", secure_plain.all());
    let secure_cert = get("secure.test", "secure.test", Some(&clients.good));
    assert_eq!(secure_cert.stdout, "200", "{}", secure_cert.all());
    let smuggled = get("open.test", "secure.test", None);
    assert_eq!(smuggled.stdout, "421", "{}", smuggled.all());
}

/// The same two names over HTTP/3 (QUIC: one TLS configuration for the
/// endpoint, asking by SNI): aioquic gets `open.test` without a
/// certificate, is refused `secure.test` without one (certificate_required
/// as QUIC CRYPTO_ERROR 0x174) and served with one, its subject logged;
/// `:authority` secure.test on an open.test connection gets 421.
#[test]
fn per_name_policy_over_http3() {
    let Some(python) = crate::h3::python_with_aioquic() else {
        return;
    };
    let clients = Clients::new();
    let mut server_ca = TestCa::new();
    let served = open_and_secure(&clients, &mut server_ca, true);
    let ca = path(server_ca.ca_file());
    let aioquic = |name: &str, cert: Option<&CertFiles>, authority: Option<&str>| {
        let run = crate::h3::H3Run::default();
        let args = crate::h3::h3_client_args_named(&served, &ca, name, &run);
        aioquic_run(&python, &args, cert, authority)
    };
    let status = |out: &ToolOutput| {
        let line = out.stdout.lines().next().unwrap_or_default();
        serde_json::from_str::<serde_json::Value>(line)
            .map_or(0, |v| v["status"].as_u64().unwrap_or(0))
    };
    let open_plain = aioquic("open.test", None, None);
    assert_eq!(status(&open_plain), 200, "{}", open_plain.all());
    let secure_plain = aioquic("secure.test", None, None);
    assert!(
        !secure_plain.success() && secure_plain.all().contains("error 0x174"),
        "{}",
        secure_plain.all()
    );
    let secure_cert = aioquic("secure.test", Some(&clients.good), None);
    assert_eq!(status(&secure_cert), 200, "{}", secure_cert.all());
    let lines = served
        .tern
        .wait_stdout_lines("alpn=h3", 2, LOG_WAIT)
        .unwrap_or_else(|out| panic!("no access-log lines: {out}"));
    assert!(
        !lines[0].contains("client_cert_subject=\"CN=alice"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains(" client_cert_subject=\"CN=alice, O=tern tests\""),
        "{}",
        lines[1]
    );
    let port = served.addr.port();
    let smuggled = aioquic("open.test", None, Some(&format!("secure.test:{port}")));
    assert_eq!(status(&smuggled), 421, "{}", smuggled.all());
    one_refusal_counted(&served);
}

/// The CRL is read again on reload: a certificate revoked after start is
/// refused once tern reloads.
#[test]
fn a_crl_replaced_and_reloaded_refuses_the_newly_revoked() {
    let mut ca = TestCa::named("reload CA");
    let (client, serial) = ca.client("bob", KeyKind::EcdsaP256, false);
    let crl = ca.dir().join("live.crl.pem");
    std::fs::copy(ca.crl(&[]), &crl).expect("copy the empty CRL");
    let (ca_file, crl_file) = (path(ca.ca_file()), path(&crl));
    let mut served = Served::builder()
        .config(|c| {
            format!(
                "[[listener]]\nlisten = \"{}\"\nbackends = [\"{}\"]\ncert = \"{}\"\nkey = \"{}\"\n\
                 client_auth = \"required\"\nclient_ca = \"{ca_file}\"\nclient_crl = [\"{crl_file}\"]\n",
                c.listen,
                c.backend.as_deref().unwrap_or_default(),
                c.chain(),
                c.key(),
            )
        })
        .start();
    let out = s_client_with(&served, Some(&client), "-tls1_3");
    assert!(out.stdout.contains("HTTP/1.1 200"), "{}", out.all());
    std::fs::copy(ca.crl(&[serial]), &crl).expect("write the new CRL");
    served.reload();
    let out = s_client_with(&served, Some(&client), "-tls1_3");
    assert!(!out.stdout.contains("HTTP/1.1 200"), "{}", out.all());
    assert!(
        out.all().contains("alert certificate revoked"),
        "{}",
        out.all()
    );
}

/// Runs `program` with the arguments `args` makes of tern's URL, CA and
/// a good client's chain and key, against tern requiring client
/// certificates: the first JSON line it prints must say 200 and the
/// backend must have been told of that client's certificate.
fn presents_a_client_certificate(program: &str, args: impl Fn([String; 4]) -> Vec<String>) {
    let clients = Clients::new();
    let served = serve(&clients, "required");
    let mut command = Command::new(program);
    command.args(args([
        url(&served, "mtls"),
        ca(&served),
        path(&clients.good.chain),
        path(&clients.good.key),
    ]));
    let out = run_command(command, b"", CLIENT_TIMEOUT);
    let line = echo_of(&out);
    assert_eq!(line["status"], 200, "{line}");
    assert_eq!(
        told_backend(&line["body"]).as_deref(),
        Some(&clients.good.leaf_der[..])
    );
}

#[test]
fn python_requests_presents_a_client_certificate() {
    if let Some(python) = debian_python_with("requests") {
        let script = path(&program("mtls_requests.py"));
        presents_a_client_certificate(&python, |given| {
            [script.clone()].into_iter().chain(given).collect()
        });
    }
}

#[test]
fn go_net_http_presents_a_client_certificate() {
    if let Some(go) = tool(&["go"], "go") {
        let script = path(&program("go_client.go"));
        presents_a_client_certificate(&go, |[url, ca, chain, key]| {
            vec![
                "run".into(),
                script.clone(),
                url,
                ca,
                "h2".into(),
                chain,
                key,
            ]
        });
    }
}

/// Waits until tern's metrics count one handshake refused for want of a
/// client certificate.
fn one_refusal_counted(served: &Served) {
    tern_testsupport::tern::wait_until("the refusal counted", LOG_WAIT, || {
        served.scrape().get(
            "tern_tls_handshake_failures_total",
            &[("reason", "client_cert_none_sent")],
        ) == Some(1.0)
    });
}

/// The aioquic client with `args`, presenting `cert` (if any) and sending
/// `authority` (if any) as `:authority`.
fn aioquic_run(
    python: &str,
    args: &[String],
    cert: Option<&CertFiles>,
    authority: Option<&str>,
) -> ToolOutput {
    let mut command = Command::new(python);
    command.args(args);
    if let Some(cert) = cert {
        command
            .env("H3_CLIENT_CERT", path(&cert.chain))
            .env("H3_CLIENT_KEY", path(&cert.key));
    }
    if let Some(authority) = authority {
        command.env("H3_AUTHORITY", authority);
    }
    run_command(command, b"", CLIENT_TIMEOUT)
}

/// mTLS over QUIC (HTTP/3): aioquic presenting a client certificate is
/// served and its identity logged; without one its handshake is refused
/// with certificate_required as a QUIC CRYPTO_ERROR (0x100 + 116), which
/// the client reads at once, counted under the same reason as over TCP.
#[test]
fn quic_client_certificate_is_verified_and_a_missing_one_refused() {
    let Some(python) = crate::h3::python_with_aioquic() else {
        return;
    };
    let clients = Clients::new();
    let served = Served::builder()
        .admin()
        .args(&[
            "--http3",
            "--client-auth",
            "required",
            "--client-ca",
            &clients.ca(),
        ])
        .start();
    let args = crate::h3::h3_client_args(&served, &crate::h3::H3Run::default());
    let aioquic = |cert: Option<&CertFiles>| aioquic_run(&python, &args, cert, None);
    let with_cert = aioquic(Some(&clients.good));
    assert!(
        with_cert.success() && with_cert.stdout.contains("\"status\": 200"),
        "{}",
        with_cert.all()
    );
    let lines = served
        .tern
        .wait_stdout_lines("alpn=h3", 1, LOG_WAIT)
        .unwrap_or_else(|out| panic!("no access-log line: {out}"));
    assert!(
        lines[0].contains(" client_cert_subject=\"CN=alice, O=tern tests\""),
        "{}",
        lines[0]
    );

    let without = aioquic(None);
    assert!(
        !without.stdout.contains("\"status\": 200") && without.all().contains("error 0x174"),
        "{}",
        without.all()
    );
    one_refusal_counted(&served);
}
