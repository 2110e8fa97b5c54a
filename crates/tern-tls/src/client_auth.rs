//! Client certificates (mutual TLS): which clients must show one, which CAs
//! and revocation lists decide whether it is good, why one was refused, and
//! what a verified certificate says about its holder.
//!
//! Verification is rustls's `WebPkiClientVerifier` (webpki): chain to one of
//! the configured CAs, validity dates, key usage for client authentication,
//! and, with CRLs, revocation of the leaf. A refused client gets the alert
//! rustls sends for the reason (`unknown_ca`, `certificate_expired`,
//! `certificate_revoked`, `certificate_required`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, CertificateRevocationListDer, DnsName, UnixTime};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::TlsError;

/// Whether a listener (or one certificate name) asks for a client certificate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAuthMode {
    /// Never asks (the default).
    #[default]
    None,
    /// Asks; a client without one is served, one with a bad one refused.
    Optional,
    /// Asks; a client without a good one is refused.
    Required,
}

impl ClientAuthMode {
    /// Parses `"none" | "optional" | "required"`.
    pub fn parse(text: &str) -> Option<ClientAuthMode> {
        match text {
            "none" => Some(ClientAuthMode::None),
            "optional" => Some(ClientAuthMode::Optional),
            "required" => Some(ClientAuthMode::Required),
            _ => None,
        }
    }

    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuthMode::None => "none",
            ClientAuthMode::Optional => "optional",
            ClientAuthMode::Required => "required",
        }
    }
}

/// Files a client-certificate policy is read from (re-read on every reload).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientAuthFiles {
    /// The mode.
    pub mode: ClientAuthMode,
    /// PEM bundles of the CAs client certificates must chain to.
    pub ca: Vec<PathBuf>,
    /// CRL files (PEM or DER); a leaf they revoke is refused.
    pub crl: Vec<PathBuf>,
}

/// A loaded client-certificate policy: its files and the verifier built
/// from them (`None` for mode `none`).
#[derive(Clone, Default)]
pub struct ClientAuth {
    /// Where it came from (also what tells two policies apart).
    pub files: ClientAuthFiles,
    /// The verifier rustls calls, when the mode asks for certificates.
    pub verifier: Option<Arc<dyn ClientCertVerifier>>,
}

impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientAuth")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl ClientAuth {
    /// Reads the CA bundles and CRLs and builds the verifier. Refuses a
    /// mode that asks for certificates without a CA, CA or CRL files
    /// without such a mode, an unreadable file, and a file holding no
    /// certificate (CA) or no CRL.
    pub fn load(files: &ClientAuthFiles, provider: &CryptoProvider) -> Result<Self, TlsError> {
        if files.mode == ClientAuthMode::None {
            if !files.ca.is_empty() || !files.crl.is_empty() {
                return Err(TlsError::ClientAuth(
                    "client_ca and client_crl need client_auth = \"optional\" or \"required\""
                        .into(),
                ));
            }
            return Ok(ClientAuth::default());
        }
        if files.ca.is_empty() {
            return Err(TlsError::ClientAuth(format!(
                "client_auth = \"{}\" needs client_ca: the CA certificates clients' certificates must chain to",
                files.mode.as_str()
            )));
        }
        let mut roots = RootCertStore::empty();
        for path in &files.ca {
            let pem = read("client_ca", path)?;
            let certs = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| TlsError::BadPem {
                    what: "client_ca",
                    source_label: path.display().to_string(),
                    reason: e.to_string(),
                })?;
            if certs.is_empty() {
                return Err(TlsError::NoCertificate {
                    source_label: path.display().to_string(),
                });
            }
            for cert in certs {
                roots.add(cert).map_err(|e| TlsError::BadCertificate {
                    source_label: path.display().to_string(),
                    reason: e.to_string(),
                })?;
            }
        }
        let mut crls = Vec::new();
        for path in &files.crl {
            let bytes = read("client_crl", path)?;
            let label = path.display().to_string();
            let found = if bytes.starts_with(b"-----") {
                CertificateRevocationListDer::pem_slice_iter(&bytes)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| TlsError::BadPem {
                        what: "client_crl",
                        source_label: label.clone(),
                        reason: e.to_string(),
                    })?
            } else {
                vec![CertificateRevocationListDer::from(bytes)]
            };
            if found.is_empty() {
                return Err(TlsError::ClientAuth(format!(
                    "client_crl {label}: no PEM X509 CRL block found"
                )));
            }
            crls.extend(found);
        }
        let mut builder = WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(provider.clone()),
        )
        .with_crls(crls)
        // Intermediates rarely have CRLs of their own at hand; the
        // leaf is what an operator revokes.
        .only_check_end_entity_revocation();
        if files.mode == ClientAuthMode::Optional {
            builder = builder.allow_unauthenticated();
        }
        let verifier = builder.build().map_err(|e| {
            TlsError::ClientAuth(format!(
                "client_ca/client_crl {}: {e}",
                files
                    .ca
                    .iter()
                    .chain(&files.crl)
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        Ok(ClientAuth {
            files: files.clone(),
            verifier: Some(verifier),
        })
    }

    /// The mode.
    pub fn mode(&self) -> ClientAuthMode {
        self.files.mode
    }
}

/// Server names (SNI, or a request's host) looked up exactly, then as
/// `*.parent` wildcards, as [`crate::SniResolver`] does.
#[derive(Clone, Debug, Default)]
pub(crate) struct NameIndex {
    exact: HashMap<String, usize>,
    wildcard: HashMap<String, usize>,
}

impl NameIndex {
    /// Files `name` (`*.example.com` for a wildcard) under `index`; false
    /// when it was already filed under another.
    pub(crate) fn insert(&mut self, name: &str, index: usize) -> bool {
        let name = name.to_ascii_lowercase();
        let (map, key) = match name.strip_prefix("*.") {
            Some(parent) => (&mut self.wildcard, parent.to_string()),
            None => (&mut self.exact, name.clone()),
        };
        map.insert(key, index).is_none_or(|other| other == index)
    }

    /// The index filed for `name`, if any.
    pub(crate) fn find(&self, name: Option<&str>) -> Option<usize> {
        let name = name?.trim_end_matches('.').to_ascii_lowercase();
        self.exact.get(&name).copied().or_else(|| {
            let (_, parent) = name.split_once('.')?;
            self.wildcard.get(parent).copied()
        })
    }
}

/// Client certificates asked for by server name in one configuration, for
/// a QUIC endpoint (one rustls configuration for every connection; TCP
/// picks a configuration per name from the ClientHello instead). The
/// vendored rustls asks [`ClientCertVerifier::for_server_name`] which
/// verifier decides a TLS 1.3 handshake (QUIC has no other); the methods
/// of this one are never asked to verify.
#[derive(Debug)]
pub(crate) struct ByNameVerifier {
    names: NameIndex,
    verifiers: Vec<Arc<dyn ClientCertVerifier>>,
    default: Arc<dyn ClientCertVerifier>,
    schemes: Vec<SignatureScheme>,
}

impl ByNameVerifier {
    /// `verifiers[i]` decides for the names filed under `i` in `names`,
    /// `default` for every other name and for clients without SNI.
    pub(crate) fn new(
        names: NameIndex,
        policies: &[&ClientAuth],
        default: &ClientAuth,
        provider: &CryptoProvider,
    ) -> Self {
        let verifier = |auth: &ClientAuth| {
            auth.verifier
                .clone()
                .unwrap_or_else(WebPkiClientVerifier::no_client_auth)
        };
        ByNameVerifier {
            names,
            verifiers: policies.iter().map(|a| verifier(a)).collect(),
            default: verifier(default),
            schemes: provider
                .signature_verification_algorithms
                .supported_schemes(),
        }
    }

    fn unused() -> rustls::Error {
        rustls::Error::General("client certificates are verified by server name".into())
    }
}

impl ClientCertVerifier for ByNameVerifier {
    fn for_server_name(
        &self,
        server_name: Option<&DnsName<'_>>,
    ) -> Option<Arc<dyn ClientCertVerifier>> {
        let found = self.names.find(server_name.map(|n| n.as_ref()));
        Some(match found.and_then(|i| self.verifiers.get(i)) {
            Some(v) => v.clone(),
            None => self.default.clone(),
        })
    }

    // Asked before the server name is known: rustls then keeps the
    // transcript a client certificate would need.
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Err(Self::unused())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(Self::unused())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(Self::unused())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes.clone()
    }
}

fn read(what: &'static str, path: &PathBuf) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.clone(),
        source,
    })
}

/// Why a client certificate was refused, for the log line and the metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientCertRefusal {
    /// A certificate was required and none was sent.
    NoneSent,
    /// It does not chain to a configured CA.
    UnknownCa,
    /// Outside its validity dates.
    Expired,
    /// A configured CRL revokes it.
    Revoked,
    /// Anything else: bad signature, wrong key usage, undecodable, no CRL
    /// says whether it is revoked.
    Invalid,
}

impl ClientCertRefusal {
    /// The reason behind a failed handshake, when it is a client
    /// certificate's.
    pub fn of(e: &rustls::Error) -> Option<ClientCertRefusal> {
        match e {
            rustls::Error::NoCertificatesPresented => Some(ClientCertRefusal::NoneSent),
            rustls::Error::InvalidCertificate(c) => Some(match c {
                CertificateError::UnknownIssuer => ClientCertRefusal::UnknownCa,
                CertificateError::Expired
                | CertificateError::ExpiredContext { .. }
                | CertificateError::NotValidYet
                | CertificateError::NotValidYetContext { .. } => ClientCertRefusal::Expired,
                CertificateError::Revoked => ClientCertRefusal::Revoked,
                _ => ClientCertRefusal::Invalid,
            }),
            _ => None,
        }
    }

    /// Label for logs and metrics.
    pub fn label(self) -> &'static str {
        match self {
            ClientCertRefusal::NoneSent => "none_sent",
            ClientCertRefusal::UnknownCa => "unknown_ca",
            ClientCertRefusal::Expired => "expired",
            ClientCertRefusal::Revoked => "revoked",
            ClientCertRefusal::Invalid => "invalid",
        }
    }
}

/// What a verified client certificate says, worked out once per
/// connection: for the access log, the backend's `Client-Cert` fields and
/// the PROXY v2 SSL TLV.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCert {
    /// The leaf's subject, RFC 4514 style (`CN=alice,O=Example`).
    pub subject: String,
    /// The subject's first commonName, if any.
    pub common_name: Option<String>,
    /// SHA-256 of the leaf's DER, lowercase hex.
    pub sha256: String,
    /// The chain as the client sent it, leaf first (DER).
    pub chain: Vec<CertificateDer<'static>>,
}

impl ClientCert {
    /// Reads the leaf of a chain rustls verified. `None` for an empty
    /// chain or a leaf x509-parser cannot read (webpki accepted it, so the
    /// identity is then passed on without a subject).
    pub fn from_chain(chain: &[CertificateDer<'_>]) -> Option<ClientCert> {
        let leaf = chain.first()?;
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, leaf.as_ref());
        let sha256 = crate::tickets::hex_encode(digest.as_ref());
        let owned = chain.iter().map(|c| c.clone().into_owned()).collect();
        let Ok((_, cert)) = X509Certificate::from_der(leaf.as_ref()) else {
            return Some(ClientCert {
                subject: String::new(),
                common_name: None,
                sha256,
                chain: owned,
            });
        };
        let subject = cert.subject().to_string();
        let common_name = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(str::to_string);
        Some(ClientCert {
            subject,
            common_name,
            sha256,
            chain: owned,
        })
    }
}
