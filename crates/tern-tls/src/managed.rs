//! Certificates that change while tern serves: ones an ACME client obtains
//! and renews, and the one-off certificates that answer ACME's TLS-ALPN-01
//! challenge (RFC 8737).
//!
//! A [`CertSlot`] is read on every handshake that picks it and replaced by
//! the ACME task; connections already established keep the certificate
//! they were served, new handshakes see the new one at once. No reload, no
//! dropped connection.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use rcgen::{CertificateParams, CustomExtension, KeyPair, PKCS_ECDSA_P256_SHA256};
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::certs::{KeyKind, LoadedCert};
use crate::sni::SniResolver;
use crate::TlsError;

/// The ALPN protocol of ACME's TLS-ALPN-01 validation (RFC 8737).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// A certificate that can be replaced while it is served.
#[derive(Debug)]
pub struct CertSlot {
    current: RwLock<Arc<CertifiedKey>>,
}

impl CertSlot {
    /// A slot serving `initial`.
    pub fn new(initial: Arc<CertifiedKey>) -> Self {
        CertSlot {
            current: RwLock::new(initial),
        }
    }

    /// The certificate new handshakes get.
    pub fn get(&self) -> Arc<CertifiedKey> {
        match self.current.read() {
            Ok(c) => c.clone(),
            // A writer panicked mid-assignment of an Arc: the value is
            // still a whole Arc, serve it.
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Serves `next` from the next handshake on.
    pub fn set(&self, next: Arc<CertifiedKey>) {
        match self.current.write() {
            Ok(mut c) => *c = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
    }
}

/// A certificate for fixed names whose slot an ACME task keeps filled.
#[derive(Clone, Debug)]
pub struct ManagedCert {
    /// DNS names (lowercase), the first one is the certificate's label.
    pub names: Vec<String>,
    /// The key type the certificate is ordered with.
    pub key_kind: KeyKind,
    /// What is served now.
    pub slot: Arc<CertSlot>,
}

/// Certificates answering TLS-ALPN-01 challenges, by DNS name; each lives
/// from the moment the challenge is set ready until it is decided.
///
/// In a fleet sharing a state directory, the CA's validator may reach an
/// instance other than the one that ordered: a name this process has no
/// answer for is looked up in the shared directories
/// (`DIR/tls-alpn-01/NAME`, the key authorization's SHA-256 in hex).
#[derive(Debug, Default)]
pub struct AlpnChallenges {
    by_name: Mutex<HashMap<String, Arc<CertifiedKey>>>,
    shared: Mutex<Vec<PathBuf>>,
}

impl AlpnChallenges {
    /// Answers challenges for `name` with a certificate carrying the
    /// SHA-256 digest of the key authorization (RFC 8737 section 3).
    pub fn insert(
        &self,
        name: &str,
        key_authorization_digest: &[u8],
        provider: &CryptoProvider,
    ) -> Result<(), TlsError> {
        let certified = challenge_certificate(name, key_authorization_digest, provider)?;
        if let Ok(mut map) = self.by_name.lock() {
            map.insert(name.to_ascii_lowercase(), Arc::new(certified));
        }
        Ok(())
    }

    /// Stops answering for `name`.
    pub fn remove(&self, name: &str) {
        if let Ok(mut map) = self.by_name.lock() {
            map.remove(&name.to_ascii_lowercase());
        }
    }

    /// Also answers from challenge files other instances write in `dir`.
    pub fn share(&self, dir: PathBuf) {
        if let Ok(mut shared) = self.shared.lock() {
            if !shared.contains(&dir) {
                shared.push(dir);
            }
        }
    }

    fn get(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if let Some(found) = self.by_name.lock().ok()?.get(&name) {
            return Some(found.clone());
        }
        // Only DNS names reach the file system (no "/", no "..").
        let safe = !name.is_empty()
            && !name.starts_with('.')
            && !name.contains("..")
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        if !safe {
            return None;
        }
        let dirs = self.shared.lock().ok()?.clone();
        for dir in dirs {
            // A small file read on the handshake path, for acme-tls/1
            // handshakes only (validators, a few per order).
            let Ok(hex) = std::fs::read_to_string(dir.join("tls-alpn-01").join(&name)) else {
                continue;
            };
            let Some(digest) = from_hex(hex.trim()) else {
                continue;
            };
            let provider = rustls::crypto::aws_lc_rs::default_provider();
            if let Ok(certified) = challenge_certificate(&name, &digest, &provider) {
                return Some(Arc::new(certified));
            }
        }
        None
    }
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn challenge_certificate(
    name: &str,
    digest: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let err = |e: rcgen::Error| TlsError::SelfSigned(e.to_string());
    let mut params = CertificateParams::new(vec![name.to_string()]).map_err(err)?;
    params.custom_extensions = vec![CustomExtension::new_acme_identifier(digest)];
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(err)?;
    let cert = params.self_signed(&key).map_err(err)?;
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let signing_key = provider
        .key_provider
        .load_private_key(key_der)
        .map_err(|e| TlsError::UnusableKey {
            source_label: format!("TLS-ALPN-01 challenge for {name}"),
            reason: e.to_string(),
        })?;
    Ok(CertifiedKey::new(
        vec![CertificateDer::from(cert.der().to_vec())],
        signing_key,
    ))
}

/// A throw-away self-signed certificate for `names`, served by a managed
/// certificate until the CA has issued one (clients will not trust it, but
/// the listener starts and answers challenges). Valid for one day.
pub fn placeholder(
    names: &[String],
    key_kind: KeyKind,
    provider: &CryptoProvider,
) -> Result<LoadedCert, TlsError> {
    let err = |e: rcgen::Error| TlsError::SelfSigned(e.to_string());
    let mut params = CertificateParams::new(names.to_vec()).map_err(err)?;
    let mut dn = rcgen::DistinguishedName::new();
    dn.push(
        rcgen::DnType::CommonName,
        "tern placeholder: ACME certificate not issued yet",
    );
    params.distinguished_name = dn;
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(1);
    let key = if key_kind.is_rsa() {
        KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048)
    } else {
        KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)
    }
    .map_err(err)?;
    let cert = params.self_signed(&key).map_err(err)?;
    crate::certs::from_pem(
        cert.pem().as_bytes(),
        key.serialize_pem().as_bytes(),
        "ACME placeholder",
        provider,
    )
}

/// Picks the certificate for a handshake: a TLS-ALPN-01 challenge
/// certificate when the client offers `acme-tls/1`, else a managed
/// certificate whose names match the SNI exactly, else the static
/// certificates' [`SniResolver`].
#[derive(Debug)]
pub struct Resolver {
    files: Option<SniResolver>,
    managed: HashMap<String, Vec<Arc<CertSlot>>>,
    /// Candidates without a match when the listener's first certificate is
    /// a managed one (or there is no static one).
    managed_default: Option<Vec<Arc<CertSlot>>>,
    challenges: Option<Arc<AlpnChallenges>>,
}

impl Resolver {
    /// `files` are the certificates loaded from files (may be empty when
    /// every certificate is managed); `managed_first` says whether the
    /// listener's default certificate is the first managed one.
    pub fn new(
        files: Vec<LoadedCert>,
        managed: &[ManagedCert],
        managed_first: bool,
        challenges: Option<Arc<AlpnChallenges>>,
    ) -> Result<Self, TlsError> {
        let files = if files.is_empty() {
            None
        } else {
            Some(SniResolver::new(files)?)
        };
        if files.is_none() && managed.is_empty() {
            return Err(TlsError::NoCertificates);
        }
        // Cheap signatures first, as SniResolver does.
        let mut ordered: Vec<&ManagedCert> = managed.iter().collect();
        ordered.sort_by_key(|m| m.key_kind.is_rsa());
        let mut by_name: HashMap<String, Vec<Arc<CertSlot>>> = HashMap::new();
        for m in &ordered {
            for name in &m.names {
                by_name
                    .entry(name.to_ascii_lowercase())
                    .or_default()
                    .push(m.slot.clone());
            }
        }
        let managed_default = match managed.first() {
            Some(first) if managed_first || files.is_none() => first
                .names
                .first()
                .and_then(|n| by_name.get(&n.to_ascii_lowercase()).cloned()),
            _ => None,
        };
        Ok(Resolver {
            files,
            managed: by_name,
            managed_default,
            challenges,
        })
    }

    /// Whether this resolver answers TLS-ALPN-01 (the listener must then
    /// offer `acme-tls/1` in ALPN).
    pub fn answers_tls_alpn(&self) -> bool {
        self.challenges.is_some()
    }
}

fn pick(slots: &[Arc<CertSlot>], hello: &ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
    let schemes = hello.signature_schemes();
    let mut first = None;
    for slot in slots {
        let cert = slot.get();
        if cert.key.choose_scheme(schemes).is_some() {
            return Some(cert);
        }
        first.get_or_insert(cert);
    }
    first
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let name = hello.server_name().map(|n| n.trim_end_matches('.'));
        if let Some(challenges) = &self.challenges {
            let acme = hello
                .alpn()
                .is_some_and(|mut protocols| protocols.any(|p| p == ACME_TLS_ALPN));
            if acme {
                // Only the challenge certificate may answer acme-tls/1;
                // none means the handshake fails (RFC 8737 section 3).
                return name.and_then(|n| challenges.get(n));
            }
        }
        if let Some(n) = name {
            if let Some(slots) = self.managed.get(&n.to_ascii_lowercase()) {
                return pick(slots, &hello);
            }
        }
        let unknown = match (name, &self.files) {
            (_, None) => true,
            (None, Some(_)) => true,
            (Some(n), Some(files)) => !files.knows(n),
        };
        if unknown {
            if let Some(slots) = &self.managed_default {
                return pick(slots, &hello);
            }
        }
        self.files.as_ref().and_then(|f| f.resolve(hello))
    }
}

/// Seconds left before `not_after`, negative once expired.
pub fn seconds_left(not_after: SystemTime) -> i64 {
    match not_after.duration_since(SystemTime::now()) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}
