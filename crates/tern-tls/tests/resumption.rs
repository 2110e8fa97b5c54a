//! Session resumption over real handshakes: rotating tickets, a keys file
//! shared by two servers, the stateful cache with tickets off, rotation
//! expiring old tickets, and what `negotiated()` reports.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{all_schemes, client_with, connect, settings, Alg, Pki, TempDir, TestServer};
use rustls::{ClientConfig, HandshakeKind, ServerConfig, SupportedProtocolVersion};
use tern_testsupport::tickets::TicketCountingStore;
use tern_tls::{
    build_server_config, build_server_config_reusing, LoadedCert, TicketKeys, TicketSource,
    TlsPolicy,
};

const VERSIONS: [(&str, &[&SupportedProtocolVersion]); 2] =
    [("TLSv1.3", common::TLS13), ("TLSv1.2", common::TLS12)];

fn localhost_cert() -> LoadedCert {
    Pki::new().leaf(&["localhost"], Alg::P256).load("localhost")
}

fn client(versions: &[&'static SupportedProtocolVersion]) -> Arc<ClientConfig> {
    client_with(all_schemes(), versions)
}

/// Full handshake then a second connection with the same client config:
/// returns the server's view of both.
async fn twice(
    server: &mut TestServer,
    client: &Arc<ClientConfig>,
) -> (tern_tls::Negotiated, tern_tls::Negotiated) {
    let first = connect(server.addr, client.clone(), "localhost")
        .await
        .unwrap();
    assert_eq!(first.kind, Some(HandshakeKind::Full));
    let first = server.next_negotiated().await;
    let second = connect(server.addr, client.clone(), "localhost")
        .await
        .unwrap();
    assert_eq!(second.body, b"ok");
    let second_seen = server.next_negotiated().await;
    assert_eq!(
        second.kind == Some(HandshakeKind::Resumed),
        second_seen.resumed,
        "client and server agree on resumption"
    );
    (first, second_seen)
}

#[tokio::test]
async fn rotating_tickets_resume_tls13_and_tls12() {
    let config = build_server_config(&settings(
        vec![localhost_cert()],
        TicketSource::Rotating(Duration::from_secs(3600)),
    ))
    .unwrap();
    assert!(config.ticketer.enabled());
    let mut server = TestServer::start(config).await;
    for (version, versions) in VERSIONS {
        let (first, second) = twice(&mut server, &client(versions)).await;
        assert_eq!(first.version, version);
        assert!(!first.resumed, "{version}: first is full");
        assert!(second.resumed, "{version}: second resumes");
    }
}

#[tokio::test]
async fn keys_file_shared_by_two_servers_resumes_across_them() {
    let dir = TempDir::new("fleet");
    let keys = dir.write(
        "tickets.keys",
        format!(
            "# tern fleet ticket keys, newest first\n{}\n\n{}\n",
            TicketKeys::generate_key_line(),
            TicketKeys::generate_key_line()
        ),
    );
    let cert = localhost_cert();
    let a = build_server_config(&settings(
        vec![cert.clone()],
        TicketSource::File(keys.clone()),
    ));
    let b = build_server_config(&settings(vec![cert.clone()], TicketSource::File(keys)));
    let mut a = TestServer::start(a.unwrap()).await;
    let mut b = TestServer::start(b.unwrap()).await;

    for (version, versions) in VERSIONS {
        let client = client(versions);
        let view = connect(a.addr, client.clone(), "localhost").await.unwrap();
        assert_eq!(view.kind, Some(HandshakeKind::Full), "{version}");
        assert!(!a.next_negotiated().await.resumed);
        let view = connect(b.addr, client.clone(), "localhost").await.unwrap();
        assert_eq!(
            view.kind,
            Some(HandshakeKind::Resumed),
            "{version}: A's ticket on B"
        );
        assert!(b.next_negotiated().await.resumed);
    }
}

#[tokio::test]
async fn separate_rotating_servers_do_not_share_tickets() {
    // The control for the fleet test: without a shared file, B cannot read A's tickets.
    let cert = localhost_cert();
    let rotating = || {
        settings(
            vec![cert.clone()],
            TicketSource::Rotating(Duration::from_secs(3600)),
        )
    };
    let mut a = TestServer::start(build_server_config(&rotating()).unwrap()).await;
    let mut b = TestServer::start(build_server_config(&rotating()).unwrap()).await;
    let client = client(common::TLS13);
    connect(a.addr, client.clone(), "localhost").await.unwrap();
    a.next_negotiated().await;
    let view = connect(b.addr, client, "localhost").await.unwrap();
    assert_eq!(view.kind, Some(HandshakeKind::Full));
    assert!(!b.next_negotiated().await.resumed);
}

#[tokio::test]
async fn tickets_disabled_still_resume_from_the_session_cache() {
    let mut disabled = settings(vec![localhost_cert()], TicketSource::Disabled);
    disabled.session_cache_entries = 64;
    let config = build_server_config(&disabled).unwrap();
    assert!(!config.ticketer.enabled());
    let mut server = TestServer::start(config).await;
    for (version, versions) in VERSIONS {
        let (_, second) = twice(&mut server, &client(versions)).await;
        assert!(second.resumed, "{version}: stateful resumption");
    }
}

#[tokio::test]
async fn tickets_and_cache_both_off_means_no_resumption() {
    let mut off = settings(vec![localhost_cert()], TicketSource::Disabled);
    off.session_cache_entries = 0;
    let mut server = TestServer::start(build_server_config(&off).unwrap()).await;
    for (version, versions) in VERSIONS {
        let (_, second) = twice(&mut server, &client(versions)).await;
        assert!(!second.resumed, "{version}: nothing to resume from");
    }
}

/// A server config whose ticket keys the test can rotate by hand.
fn with_ticket_keys(config: Arc<ServerConfig>, keys: Arc<TicketKeys>) -> Arc<ServerConfig> {
    let mut config = (*config).clone();
    config.ticketer = keys;
    Arc::new(config)
}

#[tokio::test]
async fn ticket_survives_one_rotation_but_not_two() {
    for (version, versions) in VERSIONS {
        let keys = TicketKeys::rotating(Duration::from_secs(3600)).unwrap();
        let mut no_cache = settings(vec![localhost_cert()], TicketSource::Disabled);
        // Only tickets may resume here, so the test sees ticket behaviour alone.
        no_cache.session_cache_entries = 0;
        let base = build_server_config(&no_cache).unwrap();
        let mut server = TestServer::start(with_ticket_keys(base, keys.clone())).await;

        let client_once = client(versions);
        connect(server.addr, client_once.clone(), "localhost")
            .await
            .unwrap();
        server.next_negotiated().await;
        let client_twice = client(versions);
        connect(server.addr, client_twice.clone(), "localhost")
            .await
            .unwrap();
        server.next_negotiated().await;

        keys.rotate_now().unwrap();
        let view = connect(server.addr, client_once, "localhost")
            .await
            .unwrap();
        assert_eq!(
            view.kind,
            Some(HandshakeKind::Resumed),
            "{version}: previous key still decrypts"
        );
        server.next_negotiated().await;

        keys.rotate_now().unwrap();
        let view = connect(server.addr, client_twice, "localhost")
            .await
            .unwrap();
        assert_eq!(
            view.kind,
            Some(HandshakeKind::Full),
            "{version}: key rotated out twice"
        );
        assert!(!server.next_negotiated().await.resumed);
    }
}

#[tokio::test]
async fn reload_keeps_rotating_ticket_keys() {
    let cert = localhost_cert();
    let rotating = settings(
        vec![cert],
        TicketSource::Rotating(Duration::from_secs(3600)),
    );
    let old = build_server_config(&rotating).unwrap();
    let mut old_server = TestServer::start(old.clone()).await;
    let reloaded = build_server_config_reusing(&rotating, &old).unwrap();
    let mut new_server = TestServer::start(reloaded).await;

    let client = client(common::TLS13);
    connect(old_server.addr, client.clone(), "localhost")
        .await
        .unwrap();
    old_server.next_negotiated().await;
    let view = connect(new_server.addr, client, "localhost").await.unwrap();
    assert_eq!(view.kind, Some(HandshakeKind::Resumed));
    assert!(new_server.next_negotiated().await.resumed);
}

#[tokio::test]
async fn negotiated_reports_version_cipher_group_alpn_and_sni() {
    let cert = localhost_cert();
    let policy = |groups: &[&str]| {
        let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        TlsPolicy::from_names(&[], &[], &groups).unwrap()
    };
    let with_alpn = |versions| {
        let mut c = (*client(versions)).clone();
        c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Arc::new(c)
    };

    // rustls clients offer X25519 first; a server narrowed to P-384 makes
    // the client retry with a P-384 key share.
    let mut s = settings(vec![cert.clone()], TicketSource::Disabled);
    s.policy = policy(&["secp384r1"]);
    s.alpn = vec![b"http/1.1".to_vec()];
    let mut server = TestServer::start(build_server_config(&s).unwrap()).await;
    connect(server.addr, with_alpn(common::TLS13), "localhost")
        .await
        .unwrap();
    let seen = server.next_negotiated().await;
    assert_eq!(seen.version, "TLSv1.3");
    assert_eq!(seen.cipher, "TLS_AES_128_GCM_SHA256");
    assert_eq!(seen.group, "secp384r1");
    assert!(seen.hello_retry_request);
    assert_eq!(seen.alpn.as_deref(), Some("http/1.1"));
    assert_eq!(seen.sni.as_deref(), Some("localhost"));
    assert!(!seen.resumed);

    let mut s = settings(vec![cert.clone()], TicketSource::Disabled);
    s.alpn = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let mut server = TestServer::start(build_server_config(&s).unwrap()).await;
    connect(server.addr, with_alpn(common::TLS12), "localhost")
        .await
        .unwrap();
    let seen = server.next_negotiated().await;
    assert_eq!(seen.version, "TLSv1.2");
    assert_eq!(seen.cipher, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256");
    assert_eq!(seen.group, "X25519");
    assert!(!seen.hello_retry_request);
    assert_eq!(seen.alpn.as_deref(), Some("h2"));

    // A client that prefers the hybrid post-quantum group gets it.
    let mut pq_provider = common::provider();
    pq_provider.kx_groups = vec![
        rustls::crypto::aws_lc_rs::kx_group::X25519MLKEM768,
        rustls::crypto::aws_lc_rs::kx_group::X25519,
    ];
    let pq_client = Arc::new(
        ClientConfig::builder_with_provider(Arc::new(pq_provider))
            .with_protocol_versions(common::TLS13)
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(all_schemes())
            .with_no_client_auth(),
    );
    connect(server.addr, pq_client, "localhost").await.unwrap();
    assert_eq!(server.next_negotiated().await.group, "X25519MLKEM768");
}

/// RFC 9149: a client asking for fewer tickets than tern sends gets what
/// it asked for (none, for a client that will not resume); one asking for
/// more gets tern's usual two.
#[tokio::test]
async fn a_client_ticket_request_is_honoured_up_to_the_configured_count() {
    let config = build_server_config(&settings(
        vec![localhost_cert()],
        TicketSource::Rotating(Duration::from_secs(3600)),
    ))
    .unwrap();
    let server = TestServer::start(config).await;
    for (request, expected) in [(None, 2), (Some(0), 0), (Some(1), 1), (Some(5), 2)] {
        let store = Arc::new(TicketCountingStore::new(8));
        let mut client = (*client(common::TLS13)).clone();
        client.resumption = rustls::client::Resumption::store(store.clone());
        client.send_ticket_request = request.map(|n| rustls::client::TicketRequest {
            new_session_count: n,
            resumption_count: n,
        });
        let view = connect(server.addr, Arc::new(client), "localhost")
            .await
            .unwrap();
        assert_eq!(view.body, b"ok");
        assert_eq!(store.tickets(), expected, "ticket_request {request:?}");
    }
}
