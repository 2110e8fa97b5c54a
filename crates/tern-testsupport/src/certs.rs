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
        TestCa::named("tern test CA")
    }

    /// Like [`TestCa::new`], with commonName `cn`: two CAs of the same
    /// name are one issuer to a verifier (a chain to the other fails its
    /// signature check, not the issuer lookup).
    pub fn named(cn: &str) -> TestCa {
        let dir = TempDir::new("certs");
        let key =
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("generate the CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
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

    /// Issues a client certificate (extended key usage clientAuth) with
    /// commonName `cn` and the serial number returned with it (for a
    /// CRL); `expired` makes one that expired in 2001.
    pub fn client(&mut self, cn: &str, kind: KeyKind, expired: bool) -> (CertFiles, u64) {
        let serial = 0x1000 + self.issued as u64;
        let files = self.issue_with(&[cn], kind, expired, |params| {
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            params.subject_alt_names.clear();
            params
                .distinguished_name
                .push(DnType::OrganizationName, "tern tests");
            params.serial_number = Some(rcgen::SerialNumber::from(serial));
        });
        (files, serial)
    }

    /// Writes a CRL (PEM) signed by this CA that revokes `serials`, valid
    /// from 2020 to 2099, and returns its path.
    pub fn crl(&self, serials: &[u64]) -> PathBuf {
        let params = rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2020, 1, 1),
            next_update: rcgen::date_time_ymd(2099, 1, 1),
            crl_number: rcgen::SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: serials
                .iter()
                .map(|s| rcgen::RevokedCertParams {
                    serial_number: rcgen::SerialNumber::from(*s),
                    revocation_time: rcgen::date_time_ymd(2021, 1, 1),
                    reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        let crl = params.signed_by(&self.issuer).expect("sign the CRL");
        let path = self.dir.path().join(format!("crl-{}.pem", serials.len()));
        std::fs::write(&path, crl.pem().expect("CRL PEM")).expect("write the CRL");
        path
    }

    fn issue(&mut self, names: &[&str], kind: KeyKind, expired: bool) -> CertFiles {
        self.issue_with(names, kind, expired, |_| {})
    }

    fn issue_with(
        &mut self,
        names: &[&str],
        kind: KeyKind,
        expired: bool,
        adjust: impl FnOnce(&mut CertificateParams),
    ) -> CertFiles {
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
        adjust(&mut params);
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

/// The bytes of a structured-field byte sequence (`:base64:`, RFC 8941),
/// as RFC 9440's `Client-Cert` carries a certificate; `None` when `value`
/// is not one.
pub fn sf_binary(value: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let inner = value.trim().strip_prefix(':')?.strip_suffix(':')?;
    base64::engine::general_purpose::STANDARD.decode(inner).ok()
}
