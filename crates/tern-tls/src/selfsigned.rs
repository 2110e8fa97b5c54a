//! A throw-away certificate so `tern serve` can start (and tests can run)
//! without any files. Clients will not trust it; it is for localhost only.

use std::time::Duration;

use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, PKCS_ECDSA_P256_SHA256};

use crate::TlsError;

/// How long before "now" the certificate starts being valid, so a client
/// whose clock is slightly behind still accepts it.
const BACKDATE: Duration = Duration::from_secs(3600);
/// How long the certificate stays valid.
const VALIDITY: Duration = Duration::from_secs(30 * 24 * 3600);

/// A fresh self-signed ECDSA P-256 certificate for localhost, 127.0.0.1 and
/// ::1, valid from one hour ago to 30 days from now. Returns
/// `(cert_pem, key_pem)`; the key is PKCS#8.
pub fn localhost() -> Result<(String, String), TlsError> {
    let err = |e: rcgen::Error| TlsError::SelfSigned(e.to_string());
    let mut params = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ])
    .map_err(err)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "tern self-signed localhost");
    params.distinguished_name = dn;
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - BACKDATE;
    params.not_after = now + VALIDITY;
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(err)?;
    let cert = params.self_signed(&key).map_err(err)?;
    Ok((cert.pem(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::{self, KeyKind};

    #[test]
    fn localhost_certificate_loads_with_its_names() {
        let (cert, key) = localhost().unwrap();
        let provider = rustls::crypto::aws_lc_rs::default_provider();
        let loaded = certs::from_pem(
            cert.as_bytes(),
            key.as_bytes(),
            "built-in self-signed",
            &provider,
        )
        .unwrap();
        assert_eq!(loaded.names, ["localhost", "127.0.0.1", "::1"]);
        assert_eq!(loaded.key_kind, KeyKind::EcdsaP256);
        let left = loaded
            .not_after
            .duration_since(std::time::SystemTime::now())
            .unwrap();
        assert!(left > Duration::from_secs(29 * 24 * 3600) && left <= VALIDITY);
    }
}
