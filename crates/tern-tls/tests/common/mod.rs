//! Helpers shared by tern-tls's integration tests: a small PKI made with
//! rcgen (CA, intermediates, leaves with any key type and key encoding), a
//! real tokio-rustls server on 127.0.0.1 that reports what each handshake
//! negotiated, and a client whose offered signature schemes can be narrowed.
//!
//! (tern-testsupport's `TestCa` makes P-256/RSA-2048 leaves signed directly by
//! a CA; these tests also need intermediates, RSA-4096, PKCS#1/SEC1 key files
//! and mismatched keys, so the PKI lives here, next to its only users.)

#![allow(dead_code)] // each test file uses a different subset

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, RsaKeySize,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{
    ClientConfig, HandshakeKind, ServerConfig, SignatureScheme, SupportedProtocolVersion,
};
use tern_tls::verify::SignatureOnlyVerifier;
use tern_tls::{LoadedCert, Negotiated};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Bound on every network wait in these tests.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

pub fn provider() -> CryptoProvider {
    rustls::crypto::aws_lc_rs::default_provider()
}

/// Key types the PKI can issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alg {
    P256,
    P384,
    Ed25519,
    Rsa2048,
    Rsa4096,
}

pub fn key_pair(alg: Alg) -> KeyPair {
    match alg {
        Alg::P256 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256),
        Alg::P384 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384),
        Alg::Ed25519 => KeyPair::generate_for(&rcgen::PKCS_ED25519),
        Alg::Rsa2048 => KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_2048),
        Alg::Rsa4096 => KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_4096),
    }
    .expect("generate key")
}

/// A leaf certificate as PEM, with its key.
pub struct Leaf {
    /// Leaf first, then intermediates (not the root).
    pub chain_pem: String,
    pub leaf_der: Vec<u8>,
    pub key: KeyPair,
}

impl Leaf {
    /// The key as PKCS#8 PEM ("PRIVATE KEY").
    pub fn pkcs8_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// Loads chain + PKCS#8 key through `tern_tls::certs::from_pem`.
    pub fn load(&self, label: &str) -> LoadedCert {
        tern_tls::certs::from_pem(
            self.chain_pem.as_bytes(),
            self.pkcs8_pem().as_bytes(),
            label,
            &provider(),
        )
        .expect("test certificate loads")
    }
}

/// Options for a leaf.
pub struct LeafSpec<'a> {
    pub names: &'a [&'a str],
    pub alg: Alg,
    /// Intermediates between the root and the leaf.
    pub intermediates: usize,
    /// Validity window in rcgen (y, m, d) dates.
    pub not_before: (i32, u8, u8),
    pub not_after: (i32, u8, u8),
}

impl<'a> LeafSpec<'a> {
    pub fn new(names: &'a [&'a str], alg: Alg) -> Self {
        LeafSpec {
            names,
            alg,
            intermediates: 0,
            not_before: (2020, 1, 1),
            not_after: (2099, 1, 1),
        }
    }
}

/// A root CA (ECDSA P-256) that issues leaves.
pub struct Pki {
    root: Issuer<'static, KeyPair>,
    pub root_pem: String,
    pub root_der: Vec<u8>,
}

impl Pki {
    pub fn new() -> Pki {
        let key = key_pair(Alg::P256);
        let params = ca_params("tern-tls test root");
        let cert = params.self_signed(&key).expect("self-sign root");
        Pki {
            root_pem: cert.pem(),
            root_der: cert.der().to_vec(),
            root: Issuer::new(params, key),
        }
    }

    pub fn leaf(&self, names: &[&str], alg: Alg) -> Leaf {
        self.issue(&LeafSpec::new(names, alg))
    }

    pub fn issue(&self, spec: &LeafSpec<'_>) -> Leaf {
        // Intermediates share one key of the leaf's algorithm: generating
        // RSA-4096 keys is slow, and only the certificates' bytes matter here.
        let mut upper_pems: Vec<String> = Vec::new();
        let mut owned_issuer: Option<Issuer<'static, KeyPair>> = None;
        if spec.intermediates > 0 {
            let shared = key_pair(spec.alg);
            let shared_der = shared.serialize_der();
            for i in 0..spec.intermediates {
                let params = ca_params(&format!("tern-tls test intermediate {i}"));
                let issuer = owned_issuer.as_ref().unwrap_or(&self.root);
                let cert = params
                    .signed_by(&shared, issuer)
                    .expect("sign intermediate");
                upper_pems.push(cert.pem());
                let key = KeyPair::try_from(shared_der.as_slice()).expect("reload shared key");
                owned_issuer = Some(Issuer::new(params, key));
            }
        }
        let key = key_pair(spec.alg);
        let names: Vec<String> = spec.names.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(first) = spec.names.first() {
            params.distinguished_name.push(DnType::CommonName, *first);
        }
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let (y, m, d) = spec.not_before;
        params.not_before = rcgen::date_time_ymd(y, m, d);
        let (y, m, d) = spec.not_after;
        params.not_after = rcgen::date_time_ymd(y, m, d);
        let issuer = owned_issuer.as_ref().unwrap_or(&self.root);
        let cert = params.signed_by(&key, issuer).expect("sign leaf");
        // Closest to the leaf first, as servers send them.
        upper_pems.reverse();
        Leaf {
            chain_pem: format!("{}{}", cert.pem(), upper_pems.concat()),
            leaf_der: cert.der().to_vec(),
            key,
        }
    }
}

fn ca_params(cn: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.use_authority_key_identifier_extension = true;
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2099, 1, 1);
    params
}

/// PEM-encodes DER under `label`.
pub fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// An RSA key as PKCS#1 PEM ("RSA PRIVATE KEY"): the RSAPrivateKey inside
/// the PKCS#8 PrivateKeyInfo's privateKey OCTET STRING.
pub fn rsa_pkcs1_pem(key: &KeyPair) -> String {
    let pkcs8 = key.serialize_der();
    let (_, info) = der_tlv(&pkcs8, 0x30);
    let (rest, _version) = der_tlv(info, 0x02);
    let (rest, _algorithm) = der_tlv(rest, 0x30);
    let (_, rsa_private_key) = der_tlv(rest, 0x04);
    pem("RSA PRIVATE KEY", rsa_private_key)
}

/// A P-256 key as SEC1 PEM ("EC PRIVATE KEY", RFC 5915, with curve parameters).
pub fn ec_sec1_pem(key: &KeyPair) -> String {
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &key.serialize_der())
        .expect("P-256 PKCS#8");
    let sec1 = pair.private_key().as_der().expect("SEC1 encoding");
    pem("EC PRIVATE KEY", sec1.as_ref())
}

/// Splits one DER TLV with the expected tag off `input`: (rest, contents).
fn der_tlv(input: &[u8], tag: u8) -> (&[u8], &[u8]) {
    assert_eq!(input[0], tag, "unexpected DER tag");
    let (len, header) = match input[1] {
        short if short < 0x80 => (usize::from(short), 2),
        long => {
            let n = usize::from(long & 0x7f);
            let len = input[2..2 + n]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            (len, 2 + n)
        }
    };
    (&input[header + len..], &input[header..header + len])
}

/// A private directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("tern-tls-test-{}-{n}-{label}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write test file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A TLS server on 127.0.0.1 serving `config`: after each handshake it
/// reports [`Negotiated`], writes "ok" and closes (so TLS 1.3 tickets reach
/// the client before it sees EOF).
pub struct TestServer {
    pub addr: std::net::SocketAddr,
    negotiated: mpsc::UnboundedReceiver<Negotiated>,
    task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    pub async fn start(config: Arc<ServerConfig>) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    // A refused handshake just ends this connection.
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let _ = tx.send(tern_tls::negotiated(tls.get_ref().1));
                    let _ = tls.write_all(b"ok").await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        TestServer {
            addr,
            negotiated: rx,
            task,
        }
    }

    /// What the server saw for the next completed handshake.
    pub async fn next_negotiated(&mut self) -> Negotiated {
        tokio::time::timeout(IO_TIMEOUT, self.negotiated.recv())
            .await
            .expect("server handshake within the timeout")
            .expect("server task alive")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the client saw of one connection.
#[derive(Debug)]
pub struct ClientView {
    pub kind: Option<HandshakeKind>,
    pub version: Option<rustls::ProtocolVersion>,
    pub leaf_der: Vec<u8>,
    pub body: Vec<u8>,
}

/// Connects, completes the handshake, reads to EOF.
pub async fn connect(
    addr: std::net::SocketAddr,
    config: Arc<ClientConfig>,
    server_name: &str,
) -> std::io::Result<ClientView> {
    let name = ServerName::try_from(server_name.to_string()).expect("valid server name");
    let work = async {
        let tcp = TcpStream::connect(addr).await?;
        let mut tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await?;
        let mut body = Vec::new();
        tls.read_to_end(&mut body).await?;
        let conn = tls.get_ref().1;
        Ok(ClientView {
            kind: conn.handshake_kind(),
            version: conn.protocol_version(),
            leaf_der: conn
                .peer_certificates()
                .and_then(|c| c.first())
                .map(|c| c.to_vec())
                .unwrap_or_default(),
            body,
        })
    };
    tokio::time::timeout(IO_TIMEOUT, work)
        .await
        .map_err(|_| std::io::Error::other("client timed out"))?
}

/// tern-tls's verifier offering every scheme, recording what the server
/// presented.
pub fn all_schemes() -> Arc<SignatureOnlyVerifier> {
    Arc::new(SignatureOnlyVerifier::new(&provider()).recording())
}

/// tern-tls's verifier offering only `schemes`: lets a test pose as an
/// ECDSA-only or RSA-only client and reach the default certificate under a
/// name it does not cover.
pub fn only_schemes(schemes: Vec<SignatureScheme>) -> Arc<SignatureOnlyVerifier> {
    Arc::new(
        SignatureOnlyVerifier::new(&provider())
            .with_schemes(schemes)
            .recording(),
    )
}

/// A client config using `verifier`, the given versions and the default
/// (in-memory, 256 entries) resumption store.
pub fn client_with(
    verifier: Arc<SignatureOnlyVerifier>,
    versions: &[&'static SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    Arc::new(
        ClientConfig::builder_with_provider(Arc::new(provider()))
            .with_protocol_versions(versions)
            .expect("versions")
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth(),
    )
}

/// A client that validates the chain against `root_der` with webpki.
pub fn verifying_client(
    root_der: &[u8],
    versions: &[&'static SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(root_der.to_vec()))
        .expect("root accepted");
    Arc::new(
        ClientConfig::builder_with_provider(Arc::new(provider()))
            .with_protocol_versions(versions)
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

pub const TLS13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];
pub const TLS12: &[&SupportedProtocolVersion] = &[&rustls::version::TLS12];
pub const BOTH: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];

/// ECDSA and Ed25519 schemes only (a client without RSA).
pub fn ecdsa_schemes() -> Vec<SignatureScheme> {
    vec![
        SignatureScheme::ECDSA_NISTP256_SHA256,
        SignatureScheme::ECDSA_NISTP384_SHA384,
        SignatureScheme::ED25519,
    ]
}

/// RSA schemes only (an old client).
pub fn rsa_schemes() -> Vec<SignatureScheme> {
    vec![
        SignatureScheme::RSA_PSS_SHA256,
        SignatureScheme::RSA_PSS_SHA384,
        SignatureScheme::RSA_PKCS1_SHA256,
        SignatureScheme::RSA_PKCS1_SHA384,
    ]
}

/// Default server settings around `certs` with the given ticket source.
pub fn settings(
    certs: Vec<LoadedCert>,
    tickets: tern_tls::TicketSource,
) -> tern_tls::ServerTlsSettings {
    tern_tls::ServerTlsSettings {
        certs,
        policy: tern_tls::TlsPolicy::default_fast(),
        alpn: vec![b"http/1.1".to_vec()],
        session_cache_entries: 1024,
        tickets,
        tls13_tickets: 2,
        managed: Vec::new(),
        managed_first: false,
        acme_tls_alpn: None,
        client_auth: Default::default(),
        name_client_auth: Vec::new(),
        cert_compression: true,
    }
}
