//! ACME Renewal Information (RFC 9773): the CA may ask for a renewal
//! earlier than tern's own schedule (after a mass revocation, say).
//! tern renews at two thirds of the lifetime unless the CA's suggested
//! window ends before that; then at a random time inside the window.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use instant_acme::{Account, CertificateIdentifier};
use rustls_pki_types::Der;

/// The RFC 9773 identifier of a DER certificate: its Authority Key
/// Identifier and serial (as encoded), or None without an AKI.
pub(crate) fn identifier(leaf: &[u8]) -> Option<CertificateIdentifier<'static>> {
    let (_, cert) = x509_parser::parse_x509_certificate(leaf).ok()?;
    let aki = cert
        .iter_extensions()
        .find_map(|ext| match ext.parsed_extension() {
            x509_parser::extensions::ParsedExtension::AuthorityKeyIdentifier(aki) => {
                aki.key_identifier.as_ref().map(|k| k.0.to_vec())
            }
            _ => None,
        })?;
    let serial = cert.tbs_certificate.raw_serial().to_vec();
    Some(CertificateIdentifier::new(Der::from(aki), Der::from(serial)).into_owned())
}

/// When to renew, given tern's own time and the CA's suggested window
/// (start, end): the CA's window wins only when it ends before tern's
/// time; a random point in it spreads a fleet's (or the world's) renewals.
pub(crate) fn choose(own: SystemTime, window: Option<(SystemTime, SystemTime)>) -> SystemTime {
    match window {
        Some((start, end)) if end <= own && start <= end => {
            let span = end.duration_since(start).unwrap_or_default();
            start + span.mul_f64(rand::random::<f64>())
        }
        _ => own,
    }
}

/// The CA's suggested renewal window for `leaf`, if the CA offers ARI and
/// answers; failures only lose the suggestion (logged at debug).
pub(crate) async fn window(account: &Account, leaf: &[u8]) -> Option<(SystemTime, SystemTime)> {
    let id = identifier(leaf)?;
    match account.renewal_info(&id).await {
        Ok((info, _retry_after)) => {
            let at = |t: time::OffsetDateTime| {
                let secs = t.unix_timestamp();
                (secs >= 0).then(|| UNIX_EPOCH + Duration::from_secs(secs as u64))
            };
            Some((
                at(info.suggested_window.start)?,
                at(info.suggested_window.end)?,
            ))
        }
        Err(e) => {
            tracing::debug!("ACME renewal information unavailable: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cas_window_wins_only_when_it_is_earlier() {
        let t = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
        let own = t(1000);
        assert_eq!(choose(own, None), own);
        // A window around or after tern's time: tern's time.
        assert_eq!(choose(own, Some((t(900), t(1100)))), own);
        assert_eq!(choose(own, Some((t(1200), t(1300)))), own);
        // A window before it (the CA wants an early renewal): inside it.
        for _ in 0..100 {
            let at = choose(own, Some((t(100), t(200))));
            assert!(at >= t(100) && at <= t(200));
        }
        // A malformed window is ignored.
        assert_eq!(choose(own, Some((t(300), t(200)))), own);
    }
}
