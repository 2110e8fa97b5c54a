//! Loading a certificate chain and its private key, checked before use.
//!
//! Everything that would otherwise surface as a failed handshake in
//! production (wrong key, expired leaf, empty file) is refused here, at start
//! or reload, with the file named.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls::InconsistentKeys;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
use x509_parser::public_key::PublicKey;

use crate::ocsp::{check_staple, StapleVerdict};
use crate::TlsError;

/// Where a certificate comes from on disk.
#[derive(Clone, Debug)]
pub struct CertFiles {
    /// PEM chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key: PKCS#8, SEC1 or PKCS#1.
    pub key: PathBuf,
    /// DER OCSP response to staple, if any.
    pub ocsp: Option<PathBuf>,
}

/// The type of the leaf's key, which decides handshake CPU cost and which
/// clients can use the certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// ECDSA on P-256 (the fast default).
    EcdsaP256,
    /// ECDSA on P-384.
    EcdsaP384,
    /// Ed25519 (few clients accept it).
    Ed25519,
    /// RSA with this many modulus bits.
    Rsa(u32),
    /// Anything else the provider could load.
    Other,
}

impl KeyKind {
    /// True for RSA keys: clients get an RSA certificate only when they
    /// cannot take an ECDSA/Ed25519 one for the same name.
    pub fn is_rsa(self) -> bool {
        matches!(self, KeyKind::Rsa(_))
    }
}

impl std::fmt::Display for KeyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyKind::EcdsaP256 => f.write_str("ECDSA P-256"),
            KeyKind::EcdsaP384 => f.write_str("ECDSA P-384"),
            KeyKind::Ed25519 => f.write_str("Ed25519"),
            KeyKind::Rsa(bits) => write!(f, "RSA-{bits}"),
            KeyKind::Other => f.write_str("other"),
        }
    }
}

/// A certificate chain with its key, ready for the SNI resolver.
#[derive(Clone, Debug)]
pub struct LoadedCert {
    /// SAN dNSNames (lowercased; "*.example.com" kept as is) and IP SANs as text.
    pub names: Vec<String>,
    /// The leaf's key type.
    pub key_kind: KeyKind,
    /// The leaf's notAfter.
    pub not_after: SystemTime,
    /// Bytes of all certificates in the chain.
    pub chain_der_len: usize,
    /// Bytes of the OCSP staple, 0 if none (or if it was not served).
    pub ocsp_len: usize,
    /// Why the OCSP file was not stapled (for another certificate, past its
    /// nextUpdate, not successful) or what is wrong with a stapled one
    /// (revoked). The caller logs it: loading may happen before logging is
    /// set up (at start) and again on every reload.
    pub ocsp_warning: Option<String>,
    /// What rustls serves.
    pub certified: Arc<CertifiedKey>,
    /// Label for messages: the cert path, or "built-in self-signed".
    pub source: String,
}

/// Reads a PEM chain (leaf first) and a PEM key (PKCS#8, SEC1 or PKCS#1).
///
/// Refuses an unreadable file, a file without certificate or key, a key that
/// does not match the leaf, and a leaf that is expired or not yet valid. The
/// OCSP file (DER), if given, is attached as the staple when
/// [`crate::ocsp::check_staple`] accepts it; otherwise the certificate loads
/// without a staple and `ocsp_warning` says why.
pub fn load(files: &CertFiles, provider: &CryptoProvider) -> Result<LoadedCert, TlsError> {
    let read = |what: &'static str, path: &PathBuf| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            what,
            path: path.clone(),
            source,
        })
    };
    let cert_pem = read("cert", &files.cert)?;
    let key_pem = read("key", &files.key)?;
    let cert_label = files.cert.display().to_string();
    let key_label = files.key.display().to_string();
    let mut loaded = build(&cert_pem, &key_pem, &cert_label, &key_label, provider)?;
    if let Some(ocsp_path) = &files.ocsp {
        let ocsp = read("ocsp", ocsp_path)?;
        if ocsp.is_empty() {
            // An empty staple would be sent as-is and fail must-staple clients.
            return Err(TlsError::EmptyOcsp {
                path: ocsp_path.clone(),
            });
        }
        let label = ocsp_path.display();
        let serve = match check_staple(&ocsp, &loaded.certified.cert, SystemTime::now()) {
            StapleVerdict::Serve => true,
            StapleVerdict::ServeWithWarning(why) => {
                loaded.ocsp_warning = Some(format!("OCSP staple {label}: {why}"));
                true
            }
            StapleVerdict::Refuse(why) => {
                loaded.ocsp_warning = Some(format!("OCSP staple {label} not served: {why}"));
                false
            }
        };
        if serve {
            loaded.ocsp_len = ocsp.len();
            let mut certified = (*loaded.certified).clone();
            certified.ocsp = Some(ocsp);
            loaded.certified = Arc::new(certified);
        }
    }
    Ok(loaded)
}

/// Like [`load`], from PEM bytes already in memory; `label` names them in errors.
pub fn from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
    label: &str,
    provider: &CryptoProvider,
) -> Result<LoadedCert, TlsError> {
    build(cert_pem, key_pem, label, label, provider)
}

fn build(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_label: &str,
    key_label: &str,
    provider: &CryptoProvider,
) -> Result<LoadedCert, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::BadPem {
            what: "cert",
            source_label: cert_label.to_string(),
            reason: e.to_string(),
        })?;
    let Some(leaf_der) = chain.first() else {
        return Err(TlsError::NoCertificate {
            source_label: cert_label.to_string(),
        });
    };
    let key = match PrivateKeyDer::from_pem_slice(key_pem) {
        Ok(key) => key,
        Err(rustls_pki_types::pem::Error::NoItemsFound) => {
            return Err(TlsError::NoPrivateKey {
                source_label: key_label.to_string(),
            })
        }
        Err(e) => {
            return Err(TlsError::BadPem {
                what: "key",
                source_label: key_label.to_string(),
                reason: e.to_string(),
            })
        }
    };

    let leaf = parse_leaf(leaf_der, cert_label)?;
    check_validity(&leaf, cert_label, SystemTime::now())?;

    let signing_key =
        provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| TlsError::UnusableKey {
                source_label: key_label.to_string(),
                reason: e.to_string(),
            })?;
    let chain_der_len = chain.iter().map(|c| c.len()).sum();
    let certified = CertifiedKey::new(chain, signing_key);
    match certified.keys_match() {
        // The provider could not say; the handshake will tell.
        Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => {}
        Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
            return Err(TlsError::KeyMismatch {
                key: key_label.to_string(),
                cert: cert_label.to_string(),
            })
        }
        Err(e) => {
            return Err(TlsError::BadCertificate {
                source_label: cert_label.to_string(),
                reason: e.to_string(),
            })
        }
    }

    Ok(LoadedCert {
        names: leaf.names,
        key_kind: leaf.key_kind,
        not_after: leaf.not_after,
        chain_der_len,
        ocsp_len: 0,
        ocsp_warning: None,
        certified: Arc::new(certified),
        source: cert_label.to_string(),
    })
}

/// What we need from the leaf certificate.
struct LeafInfo {
    names: Vec<String>,
    key_kind: KeyKind,
    not_before: SystemTime,
    not_after: SystemTime,
}

fn parse_leaf(der: &CertificateDer<'_>, label: &str) -> Result<LeafInfo, TlsError> {
    let bad = |reason: String| TlsError::BadCertificate {
        source_label: label.to_string(),
        reason,
    };
    let (_, cert) = X509Certificate::from_der(der.as_ref()).map_err(|e| bad(e.to_string()))?;
    let mut names = Vec::new();
    let san = cert
        .subject_alternative_name()
        .map_err(|e| bad(format!("subjectAltName: {e}")))?;
    if let Some(san) = san {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns) => {
                    names.push(dns.trim_end_matches('.').to_ascii_lowercase())
                }
                GeneralName::IPAddress(bytes) => {
                    if let Some(ip) = ip_from_bytes(bytes) {
                        names.push(ip.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    let validity = cert.validity();
    Ok(LeafInfo {
        names,
        key_kind: key_kind(&cert),
        not_before: system_time(validity.not_before.timestamp()),
        not_after: system_time(validity.not_after.timestamp()),
    })
}

fn check_validity(leaf: &LeafInfo, label: &str, now: SystemTime) -> Result<(), TlsError> {
    if now > leaf.not_after {
        return Err(TlsError::Expired {
            source_label: label.to_string(),
            when: format_utc(leaf.not_after),
        });
    }
    if now < leaf.not_before {
        return Err(TlsError::NotYetValid {
            source_label: label.to_string(),
            when: format_utc(leaf.not_before),
        });
    }
    Ok(())
}

fn key_kind(cert: &X509Certificate<'_>) -> KeyKind {
    const OID_ED25519: &str = "1.3.101.112";
    let spki = cert.public_key();
    if spki.algorithm.algorithm.to_id_string() == OID_ED25519 {
        return KeyKind::Ed25519;
    }
    match spki.parsed() {
        // Uncompressed points: 0x04 || X || Y.
        Ok(PublicKey::EC(point)) => match point.data().len() {
            65 => KeyKind::EcdsaP256,
            97 => KeyKind::EcdsaP384,
            _ => KeyKind::Other,
        },
        Ok(PublicKey::RSA(rsa)) => KeyKind::Rsa(modulus_bits(rsa.modulus)),
        _ => KeyKind::Other,
    }
}

fn modulus_bits(modulus: &[u8]) -> u32 {
    let significant: &[u8] = match modulus.iter().position(|b| *b != 0) {
        Some(first) => &modulus[first..],
        None => return 0,
    };
    let leading = significant.first().map_or(0, |b| b.leading_zeros());
    (significant.len() as u32) * 8 - leading
}

fn ip_from_bytes(bytes: &[u8]) -> Option<std::net::IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok().map(std::net::IpAddr::from),
        16 => <[u8; 16]>::try_from(bytes).ok().map(std::net::IpAddr::from),
        _ => None,
    }
}

fn system_time(unix_secs: i64) -> SystemTime {
    if unix_secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(unix_secs as u64)
    } else {
        UNIX_EPOCH - Duration::from_secs(unix_secs.unsigned_abs())
    }
}

/// Formats a time as "YYYY-MM-DD hh:mm:ss UTC" (the `time` crate's
/// calendar; a time it cannot represent is shown as seconds since the epoch).
pub(crate) fn format_utc(t: SystemTime) -> String {
    let secs: i64 = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    match time::OffsetDateTime::from_unix_timestamp(secs) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ),
        Err(_) => format!("{secs} s since the epoch"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_dates() {
        assert_eq!(format_utc(UNIX_EPOCH), "1970-01-01 00:00:00 UTC");
        assert_eq!(
            format_utc(system_time(1_704_067_200)),
            "2024-01-01 00:00:00 UTC"
        );
        assert_eq!(
            format_utc(system_time(951_825_599)),
            "2000-02-29 11:59:59 UTC"
        );
        assert_eq!(format_utc(system_time(-86_400)), "1969-12-31 00:00:00 UTC");
    }

    #[test]
    fn counts_modulus_bits() {
        assert_eq!(modulus_bits(&[0x00, 0x80, 0, 0]), 24);
        assert_eq!(modulus_bits(&[0x01, 0xff]), 9);
        assert_eq!(modulus_bits(&[0, 0]), 0);
    }
}
