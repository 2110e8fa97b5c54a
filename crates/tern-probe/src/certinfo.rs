//! What the presented certificate chain costs and whether it is in order.

use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::public_key::PublicKey;

/// Facts about the chain the server presented.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CertReport {
    /// Subject of the end-entity certificate.
    pub subject: String,
    /// e.g. "ECDSA P-256", "RSA-2048".
    pub key: String,
    /// Key size in bits.
    pub key_bits: usize,
    /// Whole days until the end-entity certificate expires (negative once
    /// expired).
    pub days_left: i64,
    pub not_after: String,
    /// Certificates in the chain, end-entity included.
    pub chain_len: usize,
    /// Bytes of the Certificate message content: each DER plus its 3-byte
    /// length (and, in TLS 1.3, 2 bytes of per-entry extensions).
    pub chain_bytes: usize,
    /// Each certificate is issued by the next one.
    pub chain_in_order: bool,
    /// Bytes of the stapled OCSP response (0 when none was stapled).
    pub ocsp_bytes: usize,
    /// What the staple says, when one was stapled and could be read.
    pub ocsp: Option<crate::ocsp::StapleInfo>,
    /// The staple's validity window contains the probe's clock.
    pub ocsp_fresh: Option<bool>,
    /// Trust in a root is not checked: probe diagnoses performance, and
    /// internal CAs are common where it is used.
    pub trust_checked: bool,
}

/// Looks at a chain (end-entity first) and its OCSP staple.
pub fn inspect(chain: &[Vec<u8>], ocsp: &[u8], tls13: bool, now_unix: i64) -> Option<CertReport> {
    let parsed: Vec<X509Certificate<'_>> = chain
        .iter()
        .filter_map(|der| X509Certificate::from_der(der).ok().map(|(_, c)| c))
        .collect();
    let leaf = parsed.first()?;
    let (key, key_bits) = describe_key(leaf);
    let not_after = leaf.validity().not_after.timestamp();
    let chain_in_order = parsed.len() == chain.len()
        && parsed
            .windows(2)
            .all(|w| w[0].issuer().as_raw() == w[1].subject().as_raw());
    let per_entry = if tls13 { 5 } else { 3 };
    let staple = (!ocsp.is_empty())
        .then(|| crate::ocsp::parse(ocsp))
        .flatten();
    Some(CertReport {
        subject: leaf.subject().to_string(),
        key,
        key_bits,
        days_left: (not_after - now_unix).div_euclid(86_400),
        not_after: leaf.validity().not_after.to_string(),
        chain_len: chain.len(),
        chain_bytes: chain.iter().map(|c| c.len() + per_entry).sum(),
        chain_in_order,
        ocsp_bytes: ocsp.len(),
        ocsp: staple.clone(),
        ocsp_fresh: staple.map(|st| st.fresh_at(now_unix)),
        trust_checked: false,
    })
}

fn describe_key(cert: &X509Certificate<'_>) -> (String, usize) {
    let spki = cert.public_key();
    match spki.parsed() {
        Ok(PublicKey::RSA(rsa)) => {
            let bits = rsa.key_size();
            (format!("RSA-{bits}"), bits)
        }
        Ok(PublicKey::EC(ec)) => {
            let bits = ec.key_size();
            let curve = match bits {
                256 => "P-256",
                384 => "P-384",
                521 | 528 => "P-521",
                _ => "curve",
            };
            (format!("ECDSA {curve}"), bits)
        }
        _ => {
            let oid = spki.algorithm.algorithm.to_id_string();
            let name = match oid.as_str() {
                "1.3.101.112" => "Ed25519".to_string(),
                "1.3.101.113" => "Ed448".to_string(),
                other => format!("key {other}"),
            };
            (name, spki.subject_public_key.data.len() * 8)
        }
    }
}
