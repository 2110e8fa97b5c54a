//! Each finding of `tern probe`, proven against a real server set up to
//! show it: `openssl s_server` on loopback, and the project's trap servers
//! behind a 25 ms-each-way delay link between two network namespaces.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tern_probe::{probe, ProbeOptions, Report};
use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::netlink_delay::{DelayLink, SERVER_ADDR};
use tern_testsupport::tempdir::TempDir;
use tern_testsupport::tern::{free_addr, wait_accepting};
use tern_testsupport::tools::KillOnDrop;
use tern_testsupport::trap_servers::{FlightOptions, FlightServer};

const ONE_WAY: Duration = Duration::from_millis(25);
const RTT_MS: f64 = 50.0;

fn ids(r: &Report) -> Vec<&'static str> {
    r.findings.iter().map(|f| f.id).collect()
}

fn options(target: String) -> ProbeOptions {
    let mut o = ProbeOptions::new(target);
    o.sni = Some("probe.test".into());
    o.timeout = Duration::from_secs(3);
    o.samples = 3;
    o.idle_wait = Duration::ZERO;
    o
}

/// Names that make a leaf certificate about `bytes` long.
fn padded_names(bytes: usize) -> Vec<String> {
    let mut names = vec!["probe.test".to_string()];
    names.extend((0..bytes / 40).map(|i| format!("padding-name-{i:05}.probe.test")));
    names
}

/// A trap server in the server namespace of a fresh delay link, and the
/// link (drop order: server first, then the link).
fn behind_delay_link(
    cert_bytes: usize,
    opts: FlightOptions,
) -> Option<(FlightServer, DelayLink, TestCa)> {
    if let Some(why) = DelayLink::unavailable() {
        eprintln!("skipped: {why}");
        return None;
    }
    let mut ca = TestCa::new();
    let names = padded_names(cert_bytes);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let cert = ca.leaf(&names, KeyKind::EcdsaP256);
    let link = DelayLink::new(ONE_WAY).expect("delay link");
    let listener = link
        .spawn_in_server(|| TcpListener::bind((SERVER_ADDR, 8443)))
        .join()
        .expect("join")
        .expect("enter namespace")
        .expect("bind in namespace");
    let server = FlightServer::start(listener, &cert, opts);
    Some((server, link, ca))
}

fn probe_in_client(link: &DelayLink, addr: SocketAddr) -> Report {
    let report = link
        .in_client(move || probe(&options(addr.to_string())))
        .expect("enter namespace")
        .expect("probe");
    // Shown with --nocapture: the numbers behind each assertion.
    eprintln!("{}", report.to_text());
    report
}

#[test]
fn split_flight_larger_than_initial_window_costs_extra_round_trip() {
    let opts = FlightOptions::in_pieces(1024);
    let Some((server, link, _ca)) = behind_delay_link(20_000, opts) else {
        return;
    };
    let report = probe_in_client(&link, server.addr());
    let rt = report.round_trips.as_ref().expect("round trips measured");
    assert!(
        rt.rtt_ms > RTT_MS * 0.9 && rt.rtt_ms < RTT_MS * 2.0,
        "rtt {}",
        rt.rtt_ms
    );
    assert!(
        rt.flight_bytes > rt.initial_window_bytes,
        "flight {} bytes",
        rt.flight_bytes
    );
    assert!(rt.chain_bytes > 14_000, "chain {} bytes", rt.chain_bytes);
    assert!(rt.extra_round_trips >= 1, "{}", report.to_text());
    assert!(
        ids(&report).contains(&"extra_round_trip"),
        "{}",
        report.to_text()
    );
    assert!(ids(&report).contains(&"flight_exceeds_initial_window"));
}

#[test]
fn small_flight_in_pieces_without_nodelay_waits_for_an_ack() {
    let opts = FlightOptions::in_pieces(512);
    let Some((server, link, _ca)) = behind_delay_link(5_000, opts) else {
        return;
    };
    let report = probe_in_client(&link, server.addr());
    let rt = report.round_trips.as_ref().expect("round trips measured");
    assert!(
        rt.flight_bytes < rt.initial_window_bytes,
        "flight {} bytes",
        rt.flight_bytes
    );
    assert!(rt.extra_round_trips >= 1, "{}", report.to_text());
    let f = report
        .findings
        .iter()
        .find(|f| f.id == "extra_round_trip")
        .expect("finding");
    assert!(f.detail.contains("TCP_NODELAY"), "{}", f.detail);
}

#[test]
fn flight_in_one_write_with_nodelay_takes_one_round_trip() {
    let opts = FlightOptions::one_write();
    let Some((server, link, _ca)) = behind_delay_link(5_000, opts) else {
        return;
    };
    let report = probe_in_client(&link, server.addr());
    let rt = report.round_trips.as_ref().expect("round trips measured");
    assert_eq!(rt.extra_round_trips, 0, "{}", report.to_text());
    assert!(
        rt.handshake_rtts > 0.8 && rt.handshake_rtts < 1.6,
        "{}",
        report.to_text()
    );
    assert!(!ids(&report).contains(&"extra_round_trip"));
    assert!(!ids(&report).contains(&"flight_exceeds_initial_window"));
}

#[test]
fn split_write_penalty_is_measured_and_flagged() {
    let opts = FlightOptions::one_write();
    let Some((server, link, _ca)) = behind_delay_link(1_000, opts) else {
        return;
    };
    let report = probe_in_client(&link, server.addr());
    let sw = report
        .http
        .split_write
        .as_ref()
        .expect("split write measured");
    assert!(
        sw.one_write_ms > RTT_MS * 0.9 && sw.one_write_ms < RTT_MS * 1.8,
        "{sw:?}"
    );
    assert!(sw.penalty_ms > 10.0, "{sw:?}");
    assert!(
        ids(&report).contains(&"split_write_penalty"),
        "{}",
        report.to_text()
    );
    assert_eq!(report.http.keepalive, Some(true));
    assert_eq!(report.exit_code(), 1);
}

/// `openssl s_server -www` with an RSA-2048 certificate for probe.test and
/// `extra` flags, on a free loopback port.
fn openssl_server(extra: &[&str]) -> (KillOnDrop, SocketAddr, TestCa) {
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["probe.test"], KeyKind::Rsa2048);
    let addr = free_addr();
    let child = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(addr.to_string())
        .arg("-cert")
        .arg(&cert.chain)
        .arg("-key")
        .arg(&cert.key)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_server (package openssl)");
    let server = KillOnDrop(child);
    wait_accepting(addr, Duration::from_secs(10));
    (server, addr, ca)
}

#[test]
fn openssl_server_preferring_dhe_is_flagged() {
    let (_server, addr, _ca) = openssl_server(&[
        "-serverpref",
        "-cipher",
        "DHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256",
    ]);
    let mut opts = options(addr.to_string());
    opts.timeout = Duration::from_secs(1);
    let report = probe(&opts).expect("probe");
    let legacy = report
        .negotiation
        .legacy
        .as_ref()
        .expect("legacy offer accepted");
    assert_eq!(legacy.suite, "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384");
    assert_eq!(report.negotiation.preference, "server");
    assert_eq!(
        report.findings[0].id,
        "dhe_selected",
        "{}",
        report.to_text()
    );
    assert_eq!(report.exit_code(), 1);
    let cert = report.certificate.as_ref().expect("certificate");
    assert_eq!(cert.key, "RSA-2048");
    assert!(cert.chain_in_order);
    assert!(report.to_json().contains("\"dhe_selected\""));
}

#[test]
fn closed_port_cannot_be_probed() {
    let addr = free_addr();
    let err = probe(&options(addr.to_string())).expect_err("nothing listens");
    assert!(matches!(err, tern_probe::ProbeError::Connect(_)), "{err}");
}

#[test]
fn short_idle_timeout_is_observed_and_flagged() {
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["probe.test"], KeyKind::EcdsaP256);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let opts = FlightOptions {
        idle_timeout: Duration::from_millis(700),
        ..FlightOptions::one_write()
    };
    let server = FlightServer::start(listener, &cert, opts);
    let mut o = options(server.addr().to_string());
    o.idle_wait = Duration::from_secs(3);
    let report = probe(&o).expect("probe");
    let idle = report.http.idle.as_ref().expect("idle watched");
    let closed = idle
        .closed_after_s
        .expect("server closed the idle connection");
    assert!((0.6..1.5).contains(&closed), "closed after {closed} s");
    assert!(
        ids(&report).contains(&"short_idle_timeout"),
        "{}",
        report.to_text()
    );
    assert_eq!(report.resumption.tls13_psk, Some(true));
    assert!(!ids(&report).contains(&"no_resumption"));
}

#[test]
fn openssl_server_with_rsa_key_exchange_cbc_and_tls10_is_flagged() {
    let (_server, addr, _ca) = openssl_server(&[
        "-serverpref",
        "-cipher",
        "AES128-SHA:@SECLEVEL=0",
        "-min_protocol",
        "TLSv1",
    ]);
    let mut opts = options(addr.to_string());
    opts.timeout = Duration::from_secs(1);
    let report = probe(&opts).expect("probe");
    let found = ids(&report);
    for id in ["rsa_key_exchange", "cbc_selected", "old_tls_version"] {
        assert!(found.contains(&id), "{id} missing:\n{}", report.to_text());
    }
    assert!(!found.contains(&"dhe_selected"));
    let legacy = report
        .negotiation
        .legacy
        .as_ref()
        .expect("legacy offer accepted");
    assert_eq!(legacy.suite, "TLS_RSA_WITH_AES_128_CBC_SHA");
    let accepted: Vec<_> = report
        .negotiation
        .versions
        .iter()
        .filter(|(_, a)| *a == Some(true))
        .collect();
    assert_eq!(accepted.len(), 4, "{:?}", report.negotiation.versions);
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn stapled_ocsp_response_is_read_and_judged_fresh() {
    // A CA whose key we hold, a leaf with a known serial, and a real OCSP
    // response from `openssl ocsp` saying "good" for a day.
    let tmp = TempDir::new("probe-ocsp");
    let dir = tmp.path();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    openssl(
        dir,
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "30",
                "-subj",
                "/CN=ocsp-test-ca",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=keyCertSign,cRLSign,digitalSignature",
            ],
        ]
        .concat(),
    );
    openssl(
        dir,
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "leaf.key",
                "-out",
                "leaf.csr",
                "-subj",
                "/CN=probe.test",
            ],
        ]
        .concat(),
    );
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=DNS:probe.test\n").expect("ext");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            "4660",
            "-out",
            "leaf.pem",
            "-days",
            "30",
            "-extfile",
            "ext.cnf",
        ],
    );
    std::fs::write(
        dir.join("index.txt"),
        "V\t351231235959Z\t\t1234\tunknown\t/CN=probe.test\n",
    )
    .expect("index");
    openssl(
        dir,
        &[
            "ocsp",
            "-index",
            "index.txt",
            "-rsigner",
            "ca.pem",
            "-rkey",
            "ca.key",
            "-CA",
            "ca.pem",
            "-issuer",
            "ca.pem",
            "-cert",
            "leaf.pem",
            "-respout",
            "resp.der",
            "-ndays",
            "1",
        ],
    );
    let staple_len = std::fs::metadata(dir.join("resp.der"))
        .expect("resp.der")
        .len() as usize;

    let addr = free_addr();
    let child = Command::new("openssl")
        .current_dir(dir)
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(addr.to_string())
        .args([
            "-cert",
            "leaf.pem",
            "-key",
            "leaf.key",
            "-status_file",
            "resp.der",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_server");
    let _server = KillOnDrop(child);
    wait_accepting(addr, Duration::from_secs(10));
    let mut opts = options(addr.to_string());
    opts.timeout = Duration::from_secs(1);
    let report = probe(&opts).expect("probe");
    let cert = report.certificate.as_ref().expect("certificate");
    assert_eq!(cert.ocsp_bytes, staple_len);
    let staple = cert.ocsp.as_ref().expect("staple parsed");
    assert_eq!(staple.status, "good");
    assert_eq!(cert.ocsp_fresh, Some(true));
    let rt = report.round_trips.as_ref().expect("round trips");
    assert_eq!(rt.ocsp_bytes, staple_len);
    assert!(rt.flight_bytes > rt.chain_bytes + staple_len, "{rt:?}");
    assert!(
        !ids(&report).iter().any(|id| id.starts_with("ocsp")),
        "{}",
        report.to_text()
    );
}

/// The congestion window alone: even one write with TCP_NODELAY cannot put
/// more than ~10 segments on a fresh connection.
#[test]
fn flight_above_initial_window_costs_a_round_trip_even_in_one_write() {
    let Some((server, link, _ca)) = behind_delay_link(20_000, FlightOptions::one_write()) else {
        return;
    };
    let report = probe_in_client(&link, server.addr());
    let rt = report.round_trips.as_ref().expect("round trips measured");
    assert!(rt.flight_bytes > rt.initial_window_bytes);
    assert!(rt.extra_round_trips >= 1, "{}", report.to_text());
    let f = report
        .findings
        .iter()
        .find(|f| f.id == "extra_round_trip")
        .expect("finding");
    assert!(
        f.detail.contains("initial congestion window"),
        "{}",
        f.detail
    );
}

/// rustls cannot talk to a DHE-only server; the hand-built offers still
/// find out why, and the probe reports instead of giving up.
#[test]
fn dhe_only_server_is_diagnosed_although_modern_offer_fails() {
    let (_server, addr, _ca) =
        openssl_server(&["-no_tls1_3", "-cipher", "DHE-RSA-AES128-GCM-SHA256"]);
    let mut opts = options(addr.to_string());
    opts.timeout = Duration::from_secs(1);
    let report = probe(&opts).expect("probe still reports");
    let found = ids(&report);
    // Both HIGH; that modern clients cannot connect at all comes first.
    assert_eq!(
        found[..2],
        ["modern_offer_refused", "dhe_selected"],
        "{}",
        report.to_text()
    );
    assert!(found.contains(&"no_tls13"));
    assert!(report.negotiation.browser.is_none());
    assert!(report
        .notes
        .iter()
        .any(|n| n.contains("browser-like offer")));
}

#[test]
fn server_wanting_another_key_share_is_flagged() {
    let (_server, addr, _ca) = openssl_server(&["-groups", "P-256"]);
    let mut opts = options(addr.to_string());
    opts.timeout = Duration::from_secs(1);
    let report = probe(&opts).expect("probe");
    let rt = report.round_trips.as_ref().expect("round trips");
    assert!(rt.hello_retry, "{}", report.to_text());
    assert!(ids(&report).contains(&"hello_retry_request"));
    let groups: Vec<_> = report
        .negotiation
        .groups
        .iter()
        .filter(|(_, accepted)| *accepted == Some(true))
        .map(|(g, _)| g.as_str())
        .collect();
    assert_eq!(groups, ["secp256r1"]);
}

#[test]
fn ipv6_loopback_target_is_probed_without_sni() {
    let Ok(listener) = TcpListener::bind("[::1]:0") else {
        eprintln!("skipped: no IPv6 loopback");
        return;
    };
    let mut ca = TestCa::new();
    let cert = ca.leaf(&["::1"], KeyKind::EcdsaP256);
    let server = FlightServer::start(listener, &cert, FlightOptions::one_write());
    let mut opts = options(format!("[::1]:{}", server.addr().port()));
    opts.sni = None;
    let report = probe(&opts).expect("probe over IPv6");
    assert_eq!(report.address, server.addr().to_string());
    assert!(
        report.server_name.contains("none"),
        "{}",
        report.server_name
    );
    assert_eq!(report.http.keepalive, Some(true));
}

/// The server-side fix the finding recommends, proven: the same server
/// re-arming TCP_QUICKACK after each read loses the delayed-ACK part of the
/// penalty; one round trip (the client's Nagle wait) remains, and is not
/// flagged against the server.
#[test]
fn quickack_server_keeps_only_the_clients_round_trip() {
    let opts = FlightOptions {
        quickack: true,
        ..FlightOptions::one_write()
    };
    let Some((server, link, _ca)) = behind_delay_link(1_000, opts) else {
        return;
    };
    let report = probe_in_client(&link, server.addr());
    let sw = report
        .http
        .split_write
        .as_ref()
        .expect("split write measured");
    assert!(
        sw.penalty_ms > RTT_MS * 0.8 && sw.penalty_ms < RTT_MS * 1.4,
        "{sw:?}"
    );
    assert!(
        !ids(&report).contains(&"split_write_penalty"),
        "{}",
        report.to_text()
    );
}
