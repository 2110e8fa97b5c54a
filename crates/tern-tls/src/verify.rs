//! The one client-side certificate verifier tern uses where trust is not the
//! question: `tern bench` without a CA file (hey's `InsecureSkipVerify`),
//! `tern probe` (it diagnoses performance, and an internal or test CA must
//! not stop it), and the handshake-cost example and tests.
//!
//! It checks the server's handshake signature, so the server really signs
//! and the client does the same crypto work as a verifying client minus path
//! building, but it accepts any chain. It can narrow the signature schemes
//! it offers (to pose as an ECDSA-only or RSA-only client) and remember the
//! chain and OCSP staple the server presented.

use std::sync::Mutex;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{
    verify_tls12_signature, verify_tls13_signature, CryptoProvider, WebPkiSupportedAlgorithms,
};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// What the server presented during a full handshake.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Presented {
    /// The chain, end-entity first, as sent.
    pub chain: Vec<Vec<u8>>,
    /// The stapled OCSP response (empty when none was stapled).
    pub ocsp: Vec<u8>,
}

/// Checks handshake signatures, accepts any certificate chain.
#[derive(Debug)]
pub struct SignatureOnlyVerifier {
    algorithms: WebPkiSupportedAlgorithms,
    schemes: Vec<SignatureScheme>,
    /// `Some` when asked to record ([`SignatureOnlyVerifier::recording`]):
    /// a load generator should not pay a lock and a copy per handshake.
    seen: Option<Mutex<Option<Presented>>>,
}

impl SignatureOnlyVerifier {
    /// Verifies signatures with `provider`'s algorithms and offers all of
    /// their schemes.
    pub fn new(provider: &CryptoProvider) -> Self {
        let algorithms = provider.signature_verification_algorithms;
        SignatureOnlyVerifier {
            schemes: algorithms.supported_schemes(),
            algorithms,
            seen: None,
        }
    }

    /// Offers only `schemes` (a server then has to pick a certificate whose
    /// key can sign with one of them).
    pub fn with_schemes(mut self, schemes: Vec<SignatureScheme>) -> Self {
        self.schemes = schemes;
        self
    }

    /// Remembers the chain and staple of each full handshake; read them
    /// with [`SignatureOnlyVerifier::presented`].
    pub fn recording(mut self) -> Self {
        self.seen = Some(Mutex::new(None));
        self
    }

    /// The chain and staple of the most recent full handshake, `None` before
    /// the first one (or when not recording).
    pub fn presented(&self) -> Option<Presented> {
        let seen = self.seen.as_ref()?;
        seen.lock().ok().and_then(|p| p.clone())
    }
}

impl ServerCertVerifier for SignatureOnlyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(Ok(mut seen)) = self.seen.as_ref().map(Mutex::lock) {
            *seen = Some(Presented {
                chain: std::iter::once(end_entity)
                    .chain(intermediates)
                    .map(|c| c.as_ref().to_vec())
                    .collect(),
                ocsp: ocsp_response.to_vec(),
            });
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes.clone()
    }
}
