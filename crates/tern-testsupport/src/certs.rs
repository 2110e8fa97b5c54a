//! Test certificates: a throw-away CA and leaf certificates written as PEM
//! files, so that tern reads them exactly as it reads an operator's files.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, RsaKeySize,
};

use crate::tempdir::TempDir;

/// Which key a leaf certificate carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// ECDSA on P-256, signed with SHA-256: the fast, common choice.
    EcdsaP256,
    /// RSA with a 2048-bit modulus: the slow, compatible choice.
    Rsa2048,
}

/// A certificate and key written to disk, ready for `--cert` / `--key`.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// PEM file with the leaf followed by the CA certificate.
    pub chain: PathBuf,
    /// PEM file with the leaf's PKCS#8 private key.
    pub key: PathBuf,
    /// DER of the leaf alone, to compare with what a server presented.
    pub leaf_der: Vec<u8>,
    /// The names the leaf is valid for.
    pub names: Vec<String>,
    /// The key type of the leaf.
    pub kind: KeyKind,
}

/// A test certificate authority with its own temporary directory.
///
/// Every leaf it issues lives in that directory, which is removed on drop.
pub struct TestCa {
    dir: TempDir,
    issuer: Issuer<'static, KeyPair>,
    ca_pem: String,
    ca_file: PathBuf,
    issued: usize,
}

impl TestCa {
    /// Makes a new ECDSA P-256 CA and writes its certificate to `ca.pem`.
    pub fn new() -> TestCa {
        let dir = TempDir::new("certs");
        let key =
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("generate the CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "tern test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("self-sign the CA");
        let ca_pem = cert.pem();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, &ca_pem).expect("write ca.pem");
        TestCa {
            issuer: Issuer::new(params, key),
            ca_pem,
            ca_file,
            dir,
            issued: 0,
        }
    }

    /// The CA certificate in PEM, for clients to trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate file, for `curl --cacert` / `openssl -CAfile`.
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// Writes the CA's private key (PKCS#8 PEM) and returns its path, for
    /// tools that sign as the CA (e.g. `openssl ocsp` making a staple).
    pub fn ca_key_file(&self) -> PathBuf {
        let path = self.dir.path().join("ca.key.pem");
        std::fs::write(&path, self.issuer.key().serialize_pem()).expect("write ca.key.pem");
        path
    }

    /// The directory holding every file of this CA (config files may go here too).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Issues a currently valid leaf for `names` (DNS names or IP addresses).
    pub fn leaf(&mut self, names: &[&str], kind: KeyKind) -> CertFiles {
        self.issue(names, kind, false)
    }

    /// Issues a leaf for `names` that expired in 2001.
    pub fn expired_leaf(&mut self, names: &[&str], kind: KeyKind) -> CertFiles {
        self.issue(names, kind, true)
    }

    fn issue(&mut self, names: &[&str], kind: KeyKind, expired: bool) -> CertFiles {
        let key = match kind {
            KeyKind::EcdsaP256 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256),
            KeyKind::Rsa2048 => {
                KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_2048)
            }
        }
        .expect("generate the leaf key");
        let owned: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(owned.clone()).expect("leaf params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(first) = names.first() {
            params.distinguished_name.push(DnType::CommonName, *first);
        }
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        if kind == KeyKind::Rsa2048 {
            params.key_usages.push(KeyUsagePurpose::KeyEncipherment);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        if expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        } else {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2099, 1, 1);
        }
        let cert = params.signed_by(&key, &self.issuer).expect("sign the leaf");

        self.issued += 1;
        let stem = format!(
            "leaf{}-{}-{}",
            self.issued,
            match kind {
                KeyKind::EcdsaP256 => "ecdsa",
                KeyKind::Rsa2048 => "rsa",
            },
            names
                .first()
                .copied()
                .unwrap_or("noname")
                .replace(['/', ':'], "_")
        );
        let chain = self.dir.path().join(format!("{stem}.chain.pem"));
        let key_path = self.dir.path().join(format!("{stem}.key.pem"));
        std::fs::write(&chain, format!("{}{}", cert.pem(), self.ca_pem)).expect("write chain");
        std::fs::write(&key_path, key.serialize_pem()).expect("write key");
        CertFiles {
            chain,
            key: key_path,
            leaf_der: cert.der().to_vec(),
            names: owned,
            kind,
        }
    }
}

impl Default for TestCa {
    fn default() -> Self {
        TestCa::new()
    }
}
