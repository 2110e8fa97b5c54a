//! Choosing a certificate for a handshake from the client's SNI and the
//! signature schemes it accepts.
//!
//! Serving ECDSA to every client that takes it and RSA only to the rest is
//! how a terminator keeps the cheap signature (ECDSA P-256 signs ~15x faster
//! than RSA-2048) without locking out old clients.

use std::collections::HashMap;
use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::certs::LoadedCert;
use crate::TlsError;

/// Picks a certificate by SNI using each certificate's SAN names: exact match
/// first, then wildcard ("*.example.com" matches "a.example.com", not
/// "example.com" nor "a.b.example.com"), else the default (the first
/// certificate given, together with any others for its first name).
///
/// Among certificates for the same name, an ECDSA (or Ed25519) one goes to
/// clients whose signature_schemes include a scheme it can sign with, RSA to
/// the rest.
#[derive(Debug)]
pub struct SniResolver {
    /// Exact names (lowercase, IP SANs as text) to candidates, preferred first.
    exact: HashMap<String, Vec<Arc<CertifiedKey>>>,
    /// "example.com" for "*.example.com", to candidates, preferred first.
    wildcard: HashMap<String, Vec<Arc<CertifiedKey>>>,
    /// Candidates when nothing matches (or there is no SNI).
    default: Vec<Arc<CertifiedKey>>,
}

impl SniResolver {
    /// Indexes the certificates by name. The first one is the default.
    /// Errors if `certs` is empty.
    pub fn new(certs: Vec<LoadedCert>) -> Result<Self, TlsError> {
        let Some(first) = certs.first() else {
            return Err(TlsError::NoCertificates);
        };
        let first_name = first.names.first().cloned();
        let first_key = first.certified.clone();

        // Non-RSA keys first, keeping the configured order otherwise, so the
        // first candidate a client can use is the cheapest to sign with.
        let mut ordered: Vec<&LoadedCert> = certs.iter().collect();
        ordered.sort_by_key(|c| c.key_kind.is_rsa());

        let mut exact: HashMap<String, Vec<Arc<CertifiedKey>>> = HashMap::new();
        let mut wildcard: HashMap<String, Vec<Arc<CertifiedKey>>> = HashMap::new();
        for cert in &ordered {
            for name in &cert.names {
                let name = name.to_ascii_lowercase();
                let (map, key) = match name.strip_prefix("*.") {
                    Some(parent) => (&mut wildcard, parent.to_string()),
                    None => (&mut exact, name),
                };
                let list = map.entry(key).or_default();
                if !list.iter().any(|k| Arc::ptr_eq(k, &cert.certified)) {
                    list.push(cert.certified.clone());
                }
            }
        }

        let mut default = first_name
            .and_then(|n| {
                let n = n.to_ascii_lowercase();
                match n.strip_prefix("*.") {
                    Some(parent) => wildcard.get(parent).cloned(),
                    None => exact.get(&n).cloned(),
                }
            })
            .unwrap_or_default();
        if !default.iter().any(|k| Arc::ptr_eq(k, &first_key)) {
            default.insert(0, first_key);
        }
        Ok(SniResolver {
            exact,
            wildcard,
            default,
        })
    }

    /// Whether some certificate names `server_name` (exactly or by
    /// wildcard), as opposed to it falling to the default.
    pub fn knows(&self, server_name: &str) -> bool {
        let name = server_name.trim_end_matches('.').to_ascii_lowercase();
        self.exact.contains_key(&name)
            || name
                .split_once('.')
                .is_some_and(|(_, parent)| self.wildcard.contains_key(parent))
    }

    /// The candidates for a server name, preferred first.
    fn candidates(&self, server_name: Option<&str>) -> &[Arc<CertifiedKey>] {
        let Some(name) = server_name else {
            return &self.default;
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if let Some(list) = self.exact.get(&name) {
            return list;
        }
        if let Some((_, parent)) = name.split_once('.') {
            if let Some(list) = self.wildcard.get(parent) {
                return list;
            }
        }
        &self.default
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let candidates = self.candidates(client_hello.server_name());
        let schemes = client_hello.signature_schemes();
        candidates
            .iter()
            .find(|c| c.key.choose_scheme(schemes).is_some())
            // No candidate can sign for this client: hand rustls the
            // preferred one so the failure is a clear handshake alert.
            .or_else(|| candidates.first())
            .cloned()
    }
}
