//! The policy as peers see it: server suite order wins, narrowed policies
//! refuse what they dropped, OpenSSL cannot talk tern into DHE or old TLS,
//! and configurations that could never serve a certificate are refused.

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{all_schemes, connect, settings, Alg, LeafSpec, Pki, TestServer};
use rustls::crypto::aws_lc_rs::cipher_suite as cs;
use rustls::{ClientConfig, SupportedCipherSuite, SupportedProtocolVersion};
use tern_tls::{
    build_server_config, expiry_warning, policy_warning, TicketSource, TlsError, TlsPolicy,
};

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn client_with_suites(
    suites: Vec<SupportedCipherSuite>,
    versions: &[&'static SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    let mut provider = common::provider();
    provider.cipher_suites = suites;
    Arc::new(
        ClientConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(versions)
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(all_schemes())
            .with_no_client_auth(),
    )
}

#[tokio::test]
async fn server_suite_order_beats_the_clients() {
    let cert = Pki::new().leaf(&["localhost"], Alg::P256).load("p256");
    let config = build_server_config(&settings(vec![cert], TicketSource::Disabled)).unwrap();
    assert!(config.ignore_client_order);
    assert_eq!(config.max_early_data_size, 0, "no replayable 0-RTT");
    let mut server = TestServer::start(config).await;

    let chacha_first_13 = vec![
        cs::TLS13_CHACHA20_POLY1305_SHA256,
        cs::TLS13_AES_256_GCM_SHA384,
        cs::TLS13_AES_128_GCM_SHA256,
    ];
    connect(
        server.addr,
        client_with_suites(chacha_first_13, common::TLS13),
        "localhost",
    )
    .await
    .unwrap();
    assert_eq!(
        server.next_negotiated().await.cipher,
        "TLS_AES_128_GCM_SHA256"
    );

    let chacha_first_12 = vec![
        cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ];
    connect(
        server.addr,
        client_with_suites(chacha_first_12, common::TLS12),
        "localhost",
    )
    .await
    .unwrap();
    assert_eq!(
        server.next_negotiated().await.cipher,
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
    );

    // A client without AES still gets in, with ChaCha20.
    connect(
        server.addr,
        client_with_suites(vec![cs::TLS13_CHACHA20_POLY1305_SHA256], common::TLS13),
        "localhost",
    )
    .await
    .unwrap();
    assert_eq!(
        server.next_negotiated().await.cipher,
        "TLS_CHACHA20_POLY1305_SHA256"
    );
}

#[tokio::test]
async fn narrowed_policy_refuses_what_it_dropped() {
    let cert = Pki::new().leaf(&["localhost"], Alg::P256).load("p256");
    let mut s = settings(vec![cert], TicketSource::Disabled);
    s.policy = TlsPolicy::from_names(
        &names(&["TLSv1.3"]),
        &names(&["TLS_AES_256_GCM_SHA384"]),
        &names(&["X25519"]),
    )
    .unwrap();
    let mut server = TestServer::start(build_server_config(&s).unwrap()).await;

    let tls12_client = client_with_suites(common::provider().cipher_suites, common::TLS12);
    assert!(
        connect(server.addr, tls12_client, "localhost")
            .await
            .is_err(),
        "TLS 1.2 was dropped"
    );
    let aes128_only = client_with_suites(vec![cs::TLS13_AES_128_GCM_SHA256], common::TLS13);
    assert!(
        connect(server.addr, aes128_only, "localhost")
            .await
            .is_err(),
        "AES-128 was dropped"
    );

    let any = client_with_suites(common::provider().cipher_suites, common::TLS13);
    connect(server.addr, any, "localhost").await.unwrap();
    let seen = server.next_negotiated().await;
    assert_eq!(
        (&*seen.cipher, &*seen.group),
        ("TLS_AES_256_GCM_SHA384", "X25519")
    );
}

/// Runs `openssl s_client` against `port` with extra arguments; true when
/// the handshake completed (a "Cipher is" line with a real cipher).
fn openssl_handshake(port: u16, extra: &[&str]) -> bool {
    let out = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-servername",
            "localhost",
        ])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("run openssl s_client");
    let text = String::from_utf8_lossy(&out.stdout);
    text.contains("Cipher is ") && !text.contains("Cipher is (NONE)")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openssl_cannot_negotiate_dhe_rsa_kx_cbc_or_old_versions() {
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("openssl not installed; skipping");
        return;
    }
    let pki = Pki::new();
    let certs = vec![
        pki.leaf(&["localhost"], Alg::P256).load("p256"),
        pki.leaf(&["localhost"], Alg::Rsa2048).load("rsa"),
    ];
    let server =
        TestServer::start(build_server_config(&settings(certs, TicketSource::Disabled)).unwrap())
            .await;
    let port = server.addr.port();
    let run = |args: &'static [&'static str]| {
        tokio::task::spawn_blocking(move || openssl_handshake(port, args))
    };

    // The control: the same client with defaults gets in, on both versions.
    assert!(run(&[]).await.unwrap(), "default OpenSSL client");
    assert!(run(&["-tls1_2"]).await.unwrap(), "OpenSSL TLS 1.2");
    for refused in [
        &[
            "-tls1_2",
            "-cipher",
            "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384",
        ][..],
        &["-tls1_2", "-cipher", "AES128-GCM-SHA256:AES256-SHA"],
        &[
            "-tls1_2",
            "-cipher",
            "ECDHE-RSA-AES128-SHA:ECDHE-ECDSA-AES128-SHA256",
        ],
        &["-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"],
        &["-tls1", "-cipher", "DEFAULT@SECLEVEL=0"],
    ] {
        assert!(
            !run(refused).await.unwrap(),
            "should be refused: {refused:?}"
        );
    }
}

#[test]
fn rsa_certificate_with_only_ecdsa_tls12_suites_is_refused_or_warned() {
    let rsa = Pki::new()
        .leaf(&["localhost"], Alg::Rsa2048)
        .load("rsa.pem");
    let ecdsa_suites = names(&["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"]);

    let mut s = settings(vec![rsa.clone()], TicketSource::Disabled);
    s.policy = TlsPolicy::from_names(&names(&["TLSv1.2"]), &ecdsa_suites, &[]).unwrap();
    let err = build_server_config(&s).unwrap_err();
    assert!(matches!(err, TlsError::PolicyConflict(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("cert rsa.pem: no enabled cipher suite can use its RSA-2048 key"),
        "{err}"
    );

    let both = TlsPolicy::from_names(
        &[],
        &names(&[
            "TLS_AES_128_GCM_SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        ]),
        &[],
    )
    .unwrap();
    assert_eq!(
        policy_warning(&both, &rsa).as_deref(),
        Some("cert rsa.pem: TLSv1.2 clients cannot use its RSA-2048 key: no matching cipher suite is enabled")
    );
    assert_eq!(policy_warning(&TlsPolicy::default_fast(), &rsa), None);
}

#[test]
fn expiry_warning_fires_close_to_not_after() {
    let pki = Pki::new();
    let soon = time::OffsetDateTime::now_utc() + time::Duration::days(5);
    let expiring = pki
        .issue(&LeafSpec {
            not_after: (soon.year(), u8::from(soon.month()), soon.day()),
            ..LeafSpec::new(&["soon.example.com"], Alg::P256)
        })
        .load("soon.pem");
    let two_weeks = Duration::from_secs(14 * 24 * 3600);
    let warning = expiry_warning(&expiring, two_weeks).expect("expires within two weeks");
    assert!(
        warning.starts_with("cert soon.pem: expires on "),
        "{warning}"
    );
    let far = pki.leaf(&["far.example.com"], Alg::P256).load("far.pem");
    assert_eq!(expiry_warning(&far, two_weeks), None);
}
