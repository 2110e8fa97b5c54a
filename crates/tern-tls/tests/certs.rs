//! Loading certificates and keys from files: formats, refusals, staples,
//! and the initial-congestion-window warning.

mod common;

use common::{ec_sec1_pem, provider, rsa_pkcs1_pem, Alg, LeafSpec, Pki, TempDir};
use tern_testsupport::openssl_pki::{OcspStatus, OpensslCa};
use tern_tls::certs::{self, CertFiles, KeyKind};
use tern_tls::{initcwnd_warning, TlsError};

fn files(dir: &TempDir, chain: &str, key: &str) -> CertFiles {
    CertFiles {
        cert: dir.write("chain.pem", chain),
        key: dir.write("key.pem", key),
        ocsp: None,
    }
}

#[test]
fn pkcs8_sec1_and_pkcs1_keys_all_load() {
    let pki = Pki::new();
    let dir = TempDir::new("key-formats");

    let ec = pki.leaf(&["ec.example.com"], Alg::P256);
    let rsa = pki.leaf(&["rsa.example.com"], Alg::Rsa2048);
    let cases = [
        ("PKCS#8 EC", &ec, ec.pkcs8_pem(), "BEGIN PRIVATE KEY"),
        ("SEC1", &ec, ec_sec1_pem(&ec.key), "BEGIN EC PRIVATE KEY"),
        ("PKCS#8 RSA", &rsa, rsa.pkcs8_pem(), "BEGIN PRIVATE KEY"),
        (
            "PKCS#1",
            &rsa,
            rsa_pkcs1_pem(&rsa.key),
            "BEGIN RSA PRIVATE KEY",
        ),
    ];
    for (what, leaf, key_pem, marker) in cases {
        assert!(
            key_pem.contains(marker),
            "{what}: test key is really {marker}"
        );
        let loaded = certs::load(&files(&dir, &leaf.chain_pem, &key_pem), &provider())
            .unwrap_or_else(|e| panic!("{what} key refused: {e}"));
        assert!(loaded.certified.keys_match().is_ok(), "{what}");
    }
}

#[test]
fn load_reports_names_key_kind_and_sizes() {
    let pki = Pki::new();
    let dir = TempDir::new("names");
    let leaf = pki.issue(&LeafSpec {
        intermediates: 1,
        ..LeafSpec::new(
            &["WWW.Example.com", "*.example.com", "127.0.0.1", "::1"],
            Alg::P384,
        )
    });
    let f = files(&dir, &leaf.chain_pem, &leaf.pkcs8_pem());
    let loaded = certs::load(&f, &provider()).unwrap();
    assert_eq!(
        loaded.names,
        ["www.example.com", "*.example.com", "127.0.0.1", "::1"]
    );
    assert_eq!(loaded.key_kind, KeyKind::EcdsaP384);
    assert_eq!(loaded.certified.cert.len(), 2, "leaf + intermediate");
    let der_total: usize = loaded.certified.cert.iter().map(|c| c.len()).sum();
    assert_eq!(loaded.chain_der_len, der_total);
    assert_eq!(loaded.ocsp_len, 0);
    assert_eq!(loaded.source, f.cert.display().to_string());

    for (alg, kind) in [
        (Alg::P256, KeyKind::EcdsaP256),
        (Alg::Ed25519, KeyKind::Ed25519),
        (Alg::Rsa2048, KeyKind::Rsa(2048)),
    ] {
        assert_eq!(pki.leaf(&["k.example.com"], alg).load("mem").key_kind, kind);
    }
}

#[test]
fn mismatched_key_is_refused_naming_both_files() {
    let pki = Pki::new();
    let dir = TempDir::new("mismatch");
    let a = pki.leaf(&["a.example.com"], Alg::P256);
    let b = pki.leaf(&["b.example.com"], Alg::P256);
    let f = files(&dir, &a.chain_pem, &b.pkcs8_pem());
    let err = certs::load(&f, &provider()).unwrap_err();
    assert!(matches!(err, TlsError::KeyMismatch { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "key {} does not match the certificate in {}",
            f.key.display(),
            f.cert.display()
        )
    );
}

#[test]
fn expired_and_not_yet_valid_leaves_are_refused_with_the_date() {
    let pki = Pki::new();
    let dir = TempDir::new("validity");
    let expired = pki.issue(&LeafSpec {
        not_before: (2020, 1, 1),
        not_after: (2024, 1, 1),
        ..LeafSpec::new(&["old.example.com"], Alg::P256)
    });
    let f = files(&dir, &expired.chain_pem, &expired.pkcs8_pem());
    let err = certs::load(&f, &provider()).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "cert {}: certificate expired on 2024-01-01 00:00:00 UTC",
            f.cert.display()
        )
    );

    let future = pki.issue(&LeafSpec {
        not_before: (2090, 6, 1),
        not_after: (2095, 1, 1),
        ..LeafSpec::new(&["new.example.com"], Alg::P256)
    });
    let f = files(&dir, &future.chain_pem, &future.pkcs8_pem());
    let err = certs::load(&f, &provider()).unwrap_err().to_string();
    assert!(
        err.ends_with("certificate is not valid before 2090-06-01 00:00:00 UTC"),
        "{err}"
    );
}

#[test]
fn missing_files_and_empty_pem_are_refused_with_the_file_named() {
    let dir = TempDir::new("missing");
    let pki = Pki::new();
    let leaf = pki.leaf(&["a.example.com"], Alg::P256);

    let absent = CertFiles {
        cert: dir.path().join("nope.pem"),
        key: dir.write("key.pem", leaf.pkcs8_pem()),
        ocsp: None,
    };
    let err = certs::load(&absent, &provider()).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("cert {}: cannot read: ", absent.cert.display())),
        "{err}"
    );

    let err = certs::load(
        &files(&dir, "no pem here\n", &leaf.pkcs8_pem()),
        &provider(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.ends_with("chain.pem: no PEM CERTIFICATE block found"),
        "{err}"
    );

    // A certificate where the key should be.
    let err = certs::load(&files(&dir, &leaf.chain_pem, &leaf.chain_pem), &provider())
        .unwrap_err()
        .to_string();
    assert!(err.contains("key.pem: no private key found"), "{err}");
}

#[test]
fn ocsp_staple_is_attached_and_served() {
    // A real response (openssl ocsp) for this leaf: tern-tls checks what it
    // staples (tests/ocsp.rs has the refusals).
    let dir = TempDir::new("ocsp");
    let mut ca = OpensslCa::new();
    let leaf = ca.leaf(&["localhost"]);
    let staple_path = ca.ocsp_response(&leaf, OcspStatus::Good, Some(7 * 24 * 60), "ocsp.der");
    let staple = std::fs::read(&staple_path).unwrap();
    let f = CertFiles {
        cert: leaf.chain.clone(),
        key: leaf.key.clone(),
        ocsp: Some(staple_path),
    };
    let loaded = certs::load(&f, &provider()).unwrap();
    assert_eq!(loaded.ocsp_len, staple.len());
    assert_eq!(loaded.ocsp_warning, None);
    let empty = CertFiles {
        ocsp: Some(dir.write("empty.der", b"")),
        ..f.clone()
    };
    let err = certs::load(&empty, &provider()).unwrap_err().to_string();
    assert!(
        err.ends_with("empty.der: file is empty (expected a DER OCSP response)"),
        "{err}"
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let settings = common::settings(vec![loaded], tern_tls::TicketSource::Disabled);
        let config = tern_tls::build_server_config(&settings).unwrap();
        let server = common::TestServer::start(config).await;
        let verifier = common::all_schemes();
        let client = common::client_with(verifier.clone(), common::TLS13);
        let view = common::connect(server.addr, client, "localhost")
            .await
            .unwrap();
        assert_eq!(view.body, b"ok");
        let seen = verifier.presented().expect("a full handshake");
        assert_eq!(seen.ocsp, staple);
    });
}

#[test]
fn initcwnd_warning_fires_for_a_big_rsa_chain_and_not_for_p256() {
    let pki = Pki::new();
    let small = pki
        .leaf(&["small.example.com"], Alg::P256)
        .load("small.pem");
    assert_eq!(initcwnd_warning(&small, true), None);

    // RSA-4096 certificates are ~1.3 KB each: a leaf and eleven intermediates
    // overflow 14600 bytes, as a long cross-signed chain plus staple can.
    let big = pki
        .issue(&LeafSpec {
            intermediates: 11,
            ..LeafSpec::new(&["big.example.com"], Alg::Rsa4096)
        })
        .load("big.pem");
    assert_eq!(big.key_kind, KeyKind::Rsa(4096));
    assert!(
        big.chain_der_len > 14_600,
        "chain is {} B",
        big.chain_der_len
    );
    let warning = initcwnd_warning(&big, false).expect("warning for a big chain");
    assert_eq!(
        warning,
        format!(
            "cert big.pem: chain {} B + OCSP 0 B exceeds the initial congestion window (~14600 B); \
             full handshakes will take an extra round trip. Use an ECDSA certificate or a shorter chain.",
            big.chain_der_len
        )
    );
}

#[test]
fn self_signed_localhost_loads() {
    let (cert, key) = tern_tls::selfsigned::localhost().unwrap();
    let loaded = certs::from_pem(
        cert.as_bytes(),
        key.as_bytes(),
        "built-in self-signed",
        &provider(),
    )
    .unwrap();
    assert_eq!(loaded.key_kind, KeyKind::EcdsaP256);
    assert!(loaded.names.contains(&"127.0.0.1".to_string()));
    assert_eq!(initcwnd_warning(&loaded, true), None);
}

/// A leaf with many names (a shared-hosting or service-mesh certificate)
/// overflows the initial window whole but compresses far below it: the
/// warning says clients offering compression avoid the extra round trip.
#[test]
fn initcwnd_warning_says_when_compression_makes_the_chain_fit() {
    let pki = Pki::new();
    let names: Vec<String> = (0..600)
        .map(|i| format!("service-{i:04}.cluster.example.internal"))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let many = pki.leaf(&names, Alg::P256).load("many.pem");
    assert!(
        many.chain_der_len > 14_600,
        "chain is {} B",
        many.chain_der_len
    );
    let warning = initcwnd_warning(&many, true).expect("warning for a big chain");
    assert!(
        warning.contains("clients offering certificate compression get it in")
            && warning.contains("no extra round trip"),
        "{warning}"
    );
    let sizes = tern_tls::compression::compressed_sizes(&many.certified.cert, None);
    let brotli = sizes.brotli.expect("brotli compresses");
    assert!(brotli < sizes.whole / 4, "{sizes:?}");
    assert!(
        warning.contains(&format!("get it in {brotli} B")),
        "{warning}"
    );
    // Without compression the warning stays as it was.
    assert!(initcwnd_warning(&many, false)
        .expect("warning")
        .ends_with("full handshakes will take an extra round trip. Use an ECDSA certificate or a shorter chain."));
}
