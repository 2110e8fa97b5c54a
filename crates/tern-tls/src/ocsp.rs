//! Checking an OCSP response (RFC 6960) before it is stapled.
//!
//! A staple is sent to every client as-is, and clients that honour it
//! (must-staple certificates, Firefox) fail the connection when it is wrong.
//! So a staple is served only when it is a successful basic response that
//! speaks about *this* leaf (serial number, issuer name and, when the chain
//! holds the issuer, issuer key) and is not past its nextUpdate. Anything
//! else is dropped with a warning that says why; the certificate is still
//! served, without a staple.
//!
//! The responder's signature is not verified here: clients verify it against
//! their own trust store, and a forged staple can only make them fail.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::digest;
use der::{Decode, Encode};
use rustls_pki_types::CertificateDer;
use x509_ocsp::{BasicOcspResponse, CertStatus, OcspResponse, OcspResponseStatus, SingleResponse};
use x509_parser::prelude::{FromDer, X509Certificate};

/// id-pkix-ocsp-basic (RFC 6960 §4.2.1): the only response type clients use.
const ID_PKIX_OCSP_BASIC: &str = "1.3.6.1.5.5.7.48.1.1";

/// How far in the future a thisUpdate may lie before the staple is refused:
/// responders and servers disagree on the clock by a little.
pub const CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// What the check concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StapleVerdict {
    /// Serve it.
    Serve,
    /// Serve it, but tell the operator (e.g. the certificate is revoked:
    /// clients should learn that, and the operator must act).
    ServeWithWarning(String),
    /// Do not serve it, for this reason.
    Refuse(String),
}

/// What a staple says about the leaf it was read against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staple {
    /// The certificate's status.
    pub status: CertState,
    /// When the responder vouched for the status.
    pub this_update: SystemTime,
    /// When the responder will have newer information; `None` when it gave
    /// no time.
    pub next_update: Option<SystemTime>,
}

/// A certificate's status as an OCSP responder states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertState {
    /// Not revoked.
    Good,
    /// Revoked at that time.
    Revoked(SystemTime),
    /// The responder does not know the certificate.
    Unknown,
}

impl CertState {
    /// `good`, `revoked` or `unknown`, as RFC 6960 names them.
    pub fn name(self) -> &'static str {
        match self {
            CertState::Good => "good",
            CertState::Revoked(_) => "revoked",
            CertState::Unknown => "unknown",
        }
    }
}

impl Staple {
    /// Why the staple is not fresh at `now`, or `None` when it is: its
    /// thisUpdate may lie up to [`CLOCK_SKEW`] in the future, and `now`
    /// must not be past its nextUpdate. The one freshness rule for what
    /// `tern serve` staples and what `tern probe` reports.
    pub fn staleness(&self, now: SystemTime) -> Option<String> {
        if self.this_update > now + CLOCK_SKEW {
            return Some(format!(
                "its thisUpdate {} is in the future",
                crate::certs::format_utc(self.this_update)
            ));
        }
        match self.next_update {
            Some(next) if now > next => Some(format!(
                "it is past its nextUpdate {}",
                crate::certs::format_utc(next)
            )),
            _ => None,
        }
    }
}

/// Checks `response` (DER) against `chain` (leaf first, then its issuer if
/// present) at time `now`.
pub fn check_staple(
    response: &[u8],
    chain: &[CertificateDer<'_>],
    now: SystemTime,
) -> StapleVerdict {
    match check(response, chain, now) {
        Ok(None) => StapleVerdict::Serve,
        Ok(Some(warning)) => StapleVerdict::ServeWithWarning(warning),
        Err(reason) => StapleVerdict::Refuse(reason),
    }
}

fn check(
    response: &[u8],
    chain: &[CertificateDer<'_>],
    now: SystemTime,
) -> Result<Option<String>, String> {
    let staple = read_staple(response, chain)?;
    if let Some(stale) = staple.staleness(now) {
        return Err(stale);
    }
    match staple.status {
        CertState::Good => Ok(None),
        CertState::Revoked(at) => Ok(Some(format!(
            "it says the certificate was REVOKED at {}: replace the certificate",
            crate::certs::format_utc(at)
        ))),
        CertState::Unknown => Err("the responder does not know the certificate".into()),
    }
}

/// Reads a DER `OCSPResponse` and what it says about `chain`'s leaf (the
/// issuer, when `chain` holds it, must match too). `Err` says why it
/// cannot be used: not a successful basic response, or about another
/// certificate.
pub fn read_staple(response: &[u8], chain: &[CertificateDer<'_>]) -> Result<Staple, String> {
    let outer =
        OcspResponse::from_der(response).map_err(|e| format!("not a DER OCSP response: {e}"))?;
    if outer.response_status != OcspResponseStatus::Successful {
        return Err(format!(
            "the responder answered {:?}, not successful",
            outer.response_status
        ));
    }
    let bytes = outer
        .response_bytes
        .ok_or("a successful response without responseBytes")?;
    if bytes.response_type.to_string() != ID_PKIX_OCSP_BASIC {
        return Err(format!(
            "response type {} is not id-pkix-ocsp-basic",
            bytes.response_type
        ));
    }
    let basic = BasicOcspResponse::from_der(bytes.response.as_bytes())
        .map_err(|e| format!("bad BasicOCSPResponse: {e}"))?;

    let leaf_der = chain.first().ok_or("no leaf certificate")?;
    let leaf = parse(leaf_der)?;
    let issuer = match chain.get(1) {
        Some(der) => Some(parse(der)?),
        None => None,
    };
    let single = basic
        .tbs_response_data
        .responses
        .iter()
        .find(|r| speaks_about(r, &leaf, issuer.as_ref()))
        .ok_or_else(|| another_certificate(&basic, &leaf))?;
    Ok(Staple {
        status: match &single.cert_status {
            CertStatus::Good(_) => CertState::Good,
            CertStatus::Revoked(info) => CertState::Revoked(unix_time(&info.revocation_time.0)),
            CertStatus::Unknown(_) => CertState::Unknown,
        },
        this_update: unix_time(&single.this_update.0),
        next_update: single.next_update.as_ref().map(|t| unix_time(&t.0)),
    })
}

/// Why no SingleResponse matched: another serial, or the same serial from
/// another issuer.
fn another_certificate(basic: &BasicOcspResponse, leaf: &X509Certificate<'_>) -> String {
    let leaf_serial = trim_zeros(leaf.raw_serial());
    let serials: Vec<&[u8]> = basic
        .tbs_response_data
        .responses
        .iter()
        .map(|r| trim_zeros(r.cert_id.serial_number.as_bytes()))
        .collect();
    if serials.contains(&leaf_serial) {
        format!(
            "it is for serial {} of another issuer (issuer name or key hash differs)",
            hex_colon(leaf_serial)
        )
    } else {
        let named: Vec<String> = serials.iter().map(|s| hex_colon(s)).collect();
        format!(
            "it is for another certificate: serial {}, the leaf has serial {}",
            named.join(", "),
            hex_colon(leaf_serial)
        )
    }
}

fn parse<'a>(der: &'a CertificateDer<'_>) -> Result<X509Certificate<'a>, String> {
    X509Certificate::from_der(der.as_ref())
        .map(|(_, c)| c)
        .map_err(|e| format!("cannot parse the certificate: {e}"))
}

/// True when `single`'s CertID names `leaf`: same serial, same issuer name
/// hash, and the same issuer key hash when the issuer is known.
fn speaks_about(
    single: &SingleResponse,
    leaf: &X509Certificate<'_>,
    issuer: Option<&X509Certificate<'_>>,
) -> bool {
    let id = &single.cert_id;
    if trim_zeros(id.serial_number.as_bytes()) != trim_zeros(leaf.raw_serial()) {
        return false;
    }
    let Ok(oid) = id.hash_algorithm.oid.to_der() else {
        return false;
    };
    let Some(algorithm) = hash_algorithm(&oid) else {
        return false;
    };
    let hash = |data: &[u8]| digest::digest(algorithm, data);
    if hash(leaf.issuer().as_raw()).as_ref() != id.issuer_name_hash.as_bytes() {
        return false;
    }
    match issuer {
        Some(issuer) => {
            // The key hash covers the subjectPublicKey BIT STRING's value only.
            let key = &issuer.public_key().subject_public_key.data;
            hash(key).as_ref() == id.issuer_key_hash.as_bytes()
        }
        None => true,
    }
}

/// The digest for a CertID hashAlgorithm, by its DER-encoded OID.
fn hash_algorithm(oid_der: &[u8]) -> Option<&'static digest::Algorithm> {
    // 06 len, then the OID's content bytes.
    const SHA1: &[u8] = &[0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a];
    const SHA256: &[u8] = &[
        0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01,
    ];
    const SHA384: &[u8] = &[
        0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02,
    ];
    const SHA512: &[u8] = &[
        0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03,
    ];
    match oid_der {
        // SHA-1 is what nearly every responder uses in CertID; it only
        // names the issuer here, it secures nothing.
        SHA1 => Some(&digest::SHA1_FOR_LEGACY_USE_ONLY),
        SHA256 => Some(&digest::SHA256),
        SHA384 => Some(&digest::SHA384),
        SHA512 => Some(&digest::SHA512),
        _ => None,
    }
}

fn unix_time(t: &der::asn1::GeneralizedTime) -> SystemTime {
    UNIX_EPOCH + t.to_unix_duration()
}

fn trim_zeros(bytes: &[u8]) -> &[u8] {
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    &bytes[first..]
}

fn hex_colon(bytes: &[u8]) -> String {
    let parts: Vec<String> = bytes.iter().map(|b| format!("{b:02X}")).collect();
    parts.join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn staple(this: u64, next: Option<u64>) -> Staple {
        let at = |s| UNIX_EPOCH + Duration::from_secs(s);
        Staple {
            status: CertState::Good,
            this_update: at(this),
            next_update: next.map(at),
        }
    }

    #[test]
    fn freshness_allows_the_clock_skew_before_this_update_and_none_after_next_update() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let skew = CLOCK_SKEW.as_secs();
        // A responder's clock a little ahead of ours: still fresh.
        assert_eq!(staple(1_000_000 + skew, None).staleness(now), None);
        let ahead = staple(1_000_000 + skew + 1, None).staleness(now);
        assert!(ahead.unwrap().contains("in the future"));
        assert_eq!(staple(0, Some(1_000_000)).staleness(now), None);
        let past = staple(0, Some(999_999)).staleness(now);
        assert!(past.unwrap().contains("past its nextUpdate"));
    }
}
