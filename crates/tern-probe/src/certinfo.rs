//! What the presented certificate chain costs and whether it is in order.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::pki_types::CertificateDer;
use tern_tls::ocsp::{read_staple, Staple};
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
    pub ocsp: Option<StapleInfo>,
    /// The staple is fresh by the rule `tern serve` applies before it
    /// staples one (`tern_tls::ocsp`, with its clock skew).
    pub ocsp_fresh: Option<bool>,
    /// Why a stapled response could not be used (unreadable, or about
    /// another certificate).
    pub ocsp_problem: Option<String>,
    /// Trust in a root is not checked: probe diagnoses performance, and
    /// internal CAs are common where it is used.
    pub trust_checked: bool,
}

/// What the staple says about the leaf, as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StapleInfo {
    /// `good`, `revoked` or `unknown`.
    pub status: String,
    /// Seconds since the Unix epoch.
    pub this_update: i64,
    /// Seconds since the Unix epoch; `None` when the responder gave none.
    pub next_update: Option<i64>,
}

impl From<&Staple> for StapleInfo {
    fn from(s: &Staple) -> Self {
        StapleInfo {
            status: s.status.name().to_string(),
            this_update: unix_secs(s.this_update),
            next_update: s.next_update.map(unix_secs),
        }
    }
}

fn unix_secs(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}

fn system_time(unix: i64) -> SystemTime {
    match u64::try_from(unix) {
        Ok(secs) => UNIX_EPOCH + Duration::from_secs(secs),
        Err(_) => UNIX_EPOCH - Duration::from_secs(unix.unsigned_abs()),
    }
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
    let ders: Vec<CertificateDer<'_>> =
        chain.iter().map(|c| CertificateDer::from(&c[..])).collect();
    let staple = (!ocsp.is_empty()).then(|| read_staple(ocsp, &ders));
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
        ocsp: staple
            .as_ref()
            .and_then(|s| s.as_ref().ok())
            .map(StapleInfo::from),
        ocsp_fresh: staple
            .as_ref()
            .and_then(|s| s.as_ref().ok())
            .map(|s| s.staleness(system_time(now_unix)).is_none()),
        ocsp_problem: staple.and_then(Result::err),
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
