//! What a certificate's algorithms are called by OpenSSL-based servers,
//! for consumers that compare against what those write: the PROXY v2
//! `PP2_SUBTYPE_SSL_SIG_ALG` and `PP2_SUBTYPE_SSL_KEY_ALG` sub-TLVs, which
//! name "the certificate presented by the frontend", and which HAProxy
//! fills with `RSA-SHA256` / `ecdsa-with-SHA384` (OpenSSL's short name of
//! the certificate's signature algorithm) and `RSA2048` / `EC256` (key
//! type and size; nothing for other key types).

use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::public_key::PublicKey;

/// The signature and key algorithm of a certificate, as HAProxy names
/// them in a PROXY v2 SSL TLV.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertAlgorithms {
    /// The algorithm the issuer signed the certificate with: OpenSSL's
    /// short name (`RSA-SHA256`, `ecdsa-with-SHA256`, `ED25519`), else the
    /// dotted OID.
    pub sig_alg: String,
    /// `RSA<bits>` or `EC<bits>` (`RSA2048`, `EC256`); None for other key
    /// types (Ed25519, RSA-PSS keys), for which HAProxy sends nothing.
    pub key_alg: Option<String>,
}

impl CertAlgorithms {
    /// Reads them from a certificate's DER. None if x509-parser cannot
    /// read it.
    pub fn of(der: &[u8]) -> Option<CertAlgorithms> {
        let (_, cert) = X509Certificate::from_der(der).ok()?;
        let sig_alg = oid_short_name(&cert.signature_algorithm.algorithm.to_id_string());
        let spki = cert.public_key();
        let key_alg = match spki.parsed() {
            Ok(PublicKey::RSA(rsa)) => Some(format!("RSA{}", bit_length(rsa.modulus))),
            Ok(PublicKey::EC(_)) => spki
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok())
                .and_then(|curve| curve_bits(&curve.to_id_string()))
                .map(|bits| format!("EC{bits}")),
            _ => None,
        };
        Some(CertAlgorithms { sig_alg, key_alg })
    }
}

/// The bits of a big-endian unsigned integer, leading zeros not counted
/// (OpenSSL's `EVP_PKEY_bits` for an RSA modulus).
fn bit_length(be: &[u8]) -> usize {
    let be = match be.iter().position(|&b| b != 0) {
        Some(first) => &be[first..],
        None => return 0,
    };
    8 * be.len() - be[0].leading_zeros() as usize
}

/// The order size of the named curves certificates use, by OID.
fn curve_bits(oid: &str) -> Option<u32> {
    match oid {
        "1.2.840.10045.3.1.7" => Some(256),
        "1.3.132.0.34" => Some(384),
        "1.3.132.0.35" => Some(521),
        _ => None,
    }
}

/// OpenSSL's short names (`OBJ_nid2sn`) for the signature algorithms
/// certificates use, else the dotted OID.
fn oid_short_name(oid: &str) -> String {
    let name = match oid {
        "1.2.840.113549.1.1.5" => "RSA-SHA1",
        "1.2.840.113549.1.1.11" => "RSA-SHA256",
        "1.2.840.113549.1.1.12" => "RSA-SHA384",
        "1.2.840.113549.1.1.13" => "RSA-SHA512",
        "1.2.840.113549.1.1.10" => "RSASSA-PSS",
        "1.2.840.10045.4.1" => "ecdsa-with-SHA1",
        "1.2.840.10045.4.3.2" => "ecdsa-with-SHA256",
        "1.2.840.10045.4.3.3" => "ecdsa-with-SHA384",
        "1.2.840.10045.4.3.4" => "ecdsa-with-SHA512",
        "1.3.101.112" => "ED25519",
        "1.3.101.113" => "ED448",
        other => other,
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, KeyPair};

    fn algorithms_of(alg: &'static rcgen::SignatureAlgorithm) -> CertAlgorithms {
        let key = KeyPair::generate_for(alg).expect("key");
        let cert = CertificateParams::new(vec!["localhost".into()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        CertAlgorithms::of(cert.der()).expect("readable")
    }

    #[test]
    fn ecdsa_certificates_are_named_as_haproxy_names_them() {
        assert_eq!(
            algorithms_of(&rcgen::PKCS_ECDSA_P256_SHA256),
            CertAlgorithms {
                sig_alg: "ecdsa-with-SHA256".into(),
                key_alg: Some("EC256".into()),
            }
        );
        assert_eq!(
            algorithms_of(&rcgen::PKCS_ECDSA_P384_SHA384),
            CertAlgorithms {
                sig_alg: "ecdsa-with-SHA384".into(),
                key_alg: Some("EC384".into()),
            }
        );
    }

    #[test]
    fn an_ed25519_certificate_has_no_key_name() {
        assert_eq!(
            algorithms_of(&rcgen::PKCS_ED25519),
            CertAlgorithms {
                sig_alg: "ED25519".into(),
                key_alg: None,
            }
        );
    }

    #[test]
    fn rsa_key_sizes_count_bits_not_bytes() {
        assert_eq!(bit_length(&[0x00, 0x80, 0, 0]), 24);
        assert_eq!(bit_length(&[0x7f, 0xff]), 15);
        assert_eq!(bit_length(&[0, 0]), 0);
        assert_eq!(bit_length(&[]), 0);
    }

    #[test]
    fn unreadable_der_gives_nothing() {
        assert_eq!(CertAlgorithms::of(b"not a certificate"), None);
    }
}
