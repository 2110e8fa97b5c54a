//! Certificate selection over real handshakes: SNI exact / wildcard /
//! default, and ECDSA vs RSA for the same name by the client's signature
//! schemes.

mod common;

use common::{
    all_schemes, client_with, connect, ecdsa_schemes, only_schemes, rsa_schemes, settings,
    verifying_client, Alg, Pki, TestServer, BOTH, TLS12, TLS13,
};
use tern_tls::{build_server_config, SniResolver, TicketSource, TlsError};

#[test]
fn resolver_without_certificates_is_an_error() {
    let err = SniResolver::new(Vec::new()).unwrap_err();
    assert!(matches!(err, TlsError::NoCertificates), "{err:?}");
}

#[tokio::test]
async fn sni_picks_exact_then_wildcard_then_default() {
    let pki = Pki::new();
    let default = pki.leaf(&["default.test"], Alg::P256);
    let exact = pki.leaf(&["a.example.com"], Alg::P256);
    let wildcard = pki.leaf(&["*.example.com"], Alg::P256);
    let apex = pki.leaf(&["example.com"], Alg::P256);
    let certs = vec![
        default.load("default"),
        wildcard.load("wildcard"),
        exact.load("exact"),
        apex.load("apex"),
    ];
    let config = build_server_config(&settings(certs, TicketSource::Disabled)).unwrap();
    let mut server = TestServer::start(config).await;
    // Any chain is accepted so the default certificate can be observed
    // under names it does not cover; signatures are still verified.
    let client = client_with(all_schemes(), BOTH);

    let cases: [(&str, &[u8]); 7] = [
        ("a.example.com", &exact.leaf_der),
        ("A.EXAMPLE.COM", &exact.leaf_der),
        ("b.example.com", &wildcard.leaf_der),
        ("example.com", &apex.leaf_der),
        // A wildcard covers one label only.
        ("x.b.example.com", &default.leaf_der),
        ("other.test", &default.leaf_der),
        ("default.test", &default.leaf_der),
    ];
    for (name, want) in cases {
        let view = connect(server.addr, client.clone(), name).await.unwrap();
        assert!(view.leaf_der == want, "wrong certificate for {name}");
        let seen = server.next_negotiated().await;
        assert_eq!(
            seen.sni.as_deref(),
            Some(name.to_ascii_lowercase().as_str())
        );
    }
}

#[tokio::test]
async fn client_without_sni_gets_the_default_certificate() {
    let pki = Pki::new();
    let default = pki.leaf(&["127.0.0.1", "localhost"], Alg::P256);
    let other = pki.leaf(&["other.test"], Alg::P256);
    let certs = vec![default.load("default"), other.load("other")];
    let config = build_server_config(&settings(certs, TicketSource::Disabled)).unwrap();
    let mut server = TestServer::start(config).await;
    // rustls sends no SNI for an IP address; the chain must verify for it.
    let client = verifying_client(&pki.root_der, BOTH);
    let view = connect(server.addr, client, "127.0.0.1").await.unwrap();
    assert_eq!(view.leaf_der, default.leaf_der);
    assert_eq!(server.next_negotiated().await.sni, None);
}

#[tokio::test]
async fn ecdsa_client_gets_ecdsa_and_rsa_only_client_gets_rsa_for_the_same_name() {
    let pki = Pki::new();
    let rsa = pki.leaf(&["www.example.com"], Alg::Rsa2048);
    let ecdsa = pki.leaf(&["www.example.com"], Alg::P256);
    // RSA listed first on purpose: preference must come from the key type,
    // not the configuration order.
    let certs = vec![rsa.load("rsa"), ecdsa.load("ecdsa")];
    let config = build_server_config(&settings(certs, TicketSource::Disabled)).unwrap();
    let mut server = TestServer::start(config).await;

    for versions in [TLS13, TLS12] {
        let both = client_with(all_schemes(), versions);
        let view = connect(server.addr, both, "www.example.com").await.unwrap();
        assert_eq!(view.leaf_der, ecdsa.leaf_der, "{versions:?}: full client");
        server.next_negotiated().await;

        let ecdsa_only = client_with(only_schemes(ecdsa_schemes()), versions);
        let view = connect(server.addr, ecdsa_only, "www.example.com")
            .await
            .unwrap();
        assert_eq!(
            view.leaf_der, ecdsa.leaf_der,
            "{versions:?}: ECDSA-only client"
        );
        let seen = server.next_negotiated().await;
        if versions == TLS12 {
            assert_eq!(seen.cipher, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256");
        }

        let rsa_only = client_with(only_schemes(rsa_schemes()), versions);
        let view = connect(server.addr, rsa_only, "www.example.com")
            .await
            .unwrap();
        assert_eq!(view.leaf_der, rsa.leaf_der, "{versions:?}: RSA-only client");
        let seen = server.next_negotiated().await;
        if versions == TLS12 {
            assert_eq!(seen.cipher, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256");
        }
    }
}

#[tokio::test]
async fn wildcard_names_also_choose_by_key_type() {
    let pki = Pki::new();
    let default = pki.leaf(&["default.test"], Alg::P256);
    let rsa = pki.leaf(&["*.example.org"], Alg::Rsa2048);
    let ecdsa = pki.leaf(&["*.example.org"], Alg::P384);
    let certs = vec![default.load("d"), rsa.load("rsa"), ecdsa.load("ecdsa")];
    let config = build_server_config(&settings(certs, TicketSource::Disabled)).unwrap();
    let server = TestServer::start(config).await;

    let ecdsa_only = client_with(only_schemes(ecdsa_schemes()), TLS13);
    let view = connect(server.addr, ecdsa_only, "api.example.org")
        .await
        .unwrap();
    assert_eq!(view.leaf_der, ecdsa.leaf_der);
    let rsa_only = client_with(only_schemes(rsa_schemes()), TLS13);
    let view = connect(server.addr, rsa_only, "api.example.org")
        .await
        .unwrap();
    assert_eq!(view.leaf_der, rsa.leaf_der);
}
