//! The one error type of this crate.
//!
//! Every message is one line that names the file (when there is one) and the
//! problem, because it is printed to an operator at start-up or reload and
//! must be actionable without reading code.

use std::path::PathBuf;

/// Why a certificate, key, policy or ticket-key file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read (missing, permissions, ...).
    #[error("{what} {}: cannot read: {source}", path.display())]
    Read {
        /// What the file was meant to hold: "cert", "key", "ocsp", "ticket keys".
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },

    /// The certificate input held no PEM `CERTIFICATE` block.
    #[error("cert {source_label}: no PEM CERTIFICATE block found")]
    NoCertificate {
        /// The cert path or label.
        source_label: String,
    },

    /// The key input held no private key in a format we read.
    #[error("key {source_label}: no private key found (expected a PEM PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY block)")]
    NoPrivateKey {
        /// The key path or label.
        source_label: String,
    },

    /// A PEM file was malformed.
    #[error("{what} {source_label}: malformed PEM: {reason}")]
    BadPem {
        /// "cert" or "key".
        what: &'static str,
        /// The path or label.
        source_label: String,
        /// The parser's reason.
        reason: String,
    },

    /// The leaf certificate could not be parsed as X.509.
    #[error("cert {source_label}: cannot parse the certificate: {reason}")]
    BadCertificate {
        /// The cert path or label.
        source_label: String,
        /// The parser's reason.
        reason: String,
    },

    /// The private key was read but the crypto provider cannot use it.
    #[error("key {source_label}: unusable private key: {reason}")]
    UnusableKey {
        /// The key path or label.
        source_label: String,
        /// The provider's reason.
        reason: String,
    },

    /// The private key is not the one certified by the leaf certificate.
    #[error("key {key} does not match the certificate in {cert}")]
    KeyMismatch {
        /// The key path or label.
        key: String,
        /// The cert path or label.
        cert: String,
    },

    /// The leaf certificate's notAfter is in the past.
    #[error("cert {source_label}: certificate expired on {when}")]
    Expired {
        /// The cert path or label.
        source_label: String,
        /// notAfter, formatted "YYYY-MM-DD hh:mm:ss UTC".
        when: String,
    },

    /// The leaf certificate's notBefore is in the future.
    #[error("cert {source_label}: certificate is not valid before {when}")]
    NotYetValid {
        /// The cert path or label.
        source_label: String,
        /// notBefore, formatted "YYYY-MM-DD hh:mm:ss UTC".
        when: String,
    },

    /// A protocol version, cipher suite or group was refused for a stated reason.
    #[error("{what} {name} refused: {reason}")]
    Refused {
        /// "version", "cipher" or "group".
        what: &'static str,
        /// The name as the operator wrote it.
        name: String,
        /// Why tern will not use it.
        reason: &'static str,
    },

    /// A protocol version, cipher suite or group name is not known.
    #[error("{what} {name} unknown; accepted: {accepted}")]
    UnknownName {
        /// "version", "cipher" or "group".
        what: &'static str,
        /// The name as the operator wrote it.
        name: String,
        /// The accepted names, comma separated.
        accepted: String,
    },

    /// The chosen versions, suites and groups cannot work together.
    #[error("tls policy: {0}")]
    PolicyConflict(String),

    /// The OCSP staple file is empty.
    #[error("ocsp {}: file is empty (expected a DER OCSP response)", path.display())]
    EmptyOcsp {
        /// The staple file.
        path: PathBuf,
    },

    /// The SNI resolver was given no certificate.
    #[error("no certificate configured: at least one certificate is needed")]
    NoCertificates,

    /// A line of a ticket keys file is malformed.
    #[error("ticket keys {} line {line}: {reason}", path.display())]
    TicketKeyLine {
        /// The keys file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },

    /// A ticket keys file held no key.
    #[error("ticket keys {}: no key found (one hex or base64 line of 48 bytes per key)", path.display())]
    NoTicketKeys {
        /// The keys file.
        path: PathBuf,
    },

    /// A client-certificate policy is incomplete or contradictory.
    #[error("{0}")]
    ClientAuth(String),

    /// The crypto library failed (random number generation, key setup).
    #[error("crypto: {0}")]
    Crypto(String),

    /// rustls refused the configuration we built.
    #[error("rustls refused the configuration: {0}")]
    Rustls(#[from] rustls::Error),

    /// Self-signed certificate generation failed.
    #[error("self-signed certificate: {0}")]
    SelfSigned(String),
}
