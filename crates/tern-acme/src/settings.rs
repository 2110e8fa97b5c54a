//! What tern asks an ACME CA for, and where it keeps what it gets.

use std::path::PathBuf;
use std::time::Duration;

/// Let's Encrypt's production directory, the default.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";
/// Let's Encrypt's staging directory (untrusted certificates, high limits).
pub const LETS_ENCRYPT_STAGING: &str = "https://acme-staging-v02.api.letsencrypt.org/directory";

/// How tern talks to one ACME CA.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AcmeSettings {
    /// The directory URL.
    pub directory: String,
    /// Account contacts, e.g. `mailto:ops@example.com`.
    pub contact: Vec<String>,
    /// Where the account, certificates, keys and locks live.
    pub state_dir: PathBuf,
    /// A root certificate (PEM) to trust for the directory's HTTPS instead
    /// of the system's, for private or test CAs.
    pub ca_root: Option<PathBuf>,
    /// External Account Binding, for CAs that require one.
    pub eab: Option<Eab>,
    /// The first wait after a failed order; it doubles on each further
    /// failure up to [`MAX_RETRY`], with ±25 % jitter.
    pub retry_base: Duration,
}

/// The longest wait between two attempts after failures.
pub const MAX_RETRY: Duration = Duration::from_secs(6 * 3600);

/// External Account Binding credentials (RFC 8555 section 7.3.4).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Eab {
    /// The key identifier the CA gave.
    pub kid: String,
    /// The HMAC key, decoded from the CA's base64url.
    pub hmac_key: Vec<u8>,
}

impl std::fmt::Debug for Eab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The HMAC key is a secret: never in logs.
        f.debug_struct("Eab").field("kid", &self.kid).finish()
    }
}

/// The key type a certificate is ordered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyType {
    /// ECDSA P-256 (the default: cheapest to sign with).
    EcdsaP256,
    /// RSA 2048, for clients without ECDSA.
    Rsa2048,
}

impl KeyType {
    /// The configuration spelling.
    pub fn name(self) -> &'static str {
        match self {
            KeyType::EcdsaP256 => "ecdsa",
            KeyType::Rsa2048 => "rsa",
        }
    }

    /// Parses "ecdsa" or "rsa".
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "ecdsa" | "ecdsa-p256" | "p256" => Some(KeyType::EcdsaP256),
            "rsa" | "rsa2048" | "rsa-2048" => Some(KeyType::Rsa2048),
            _ => None,
        }
    }

    /// The tern-tls key kind, for SNI and policy checks.
    pub fn kind(self) -> tern_tls::KeyKind {
        match self {
            KeyType::EcdsaP256 => tern_tls::KeyKind::EcdsaP256,
            KeyType::Rsa2048 => tern_tls::KeyKind::Rsa(2048),
        }
    }
}

/// How the CA checks that tern answers for a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Challenge {
    /// TLS-ALPN-01 (RFC 8737): on the TLS listener itself, no port 80.
    TlsAlpn01,
    /// HTTP-01: a file under `/.well-known/acme-challenge/` on port 80.
    Http01,
}

impl Challenge {
    /// The ACME name of the challenge.
    pub fn name(self) -> &'static str {
        match self {
            Challenge::TlsAlpn01 => "tls-alpn-01",
            Challenge::Http01 => "http-01",
        }
    }
}

/// One certificate to keep: its names, key type and challenge.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CertSpec {
    /// DNS names, lowercase; the first names the certificate in logs.
    pub names: Vec<String>,
    /// Key type.
    pub key: KeyType,
    /// The challenge answered for each name.
    pub challenge: Challenge,
}

impl CertSpec {
    /// `first-name+N (ecdsa)`: how logs, metrics and /health name it.
    pub fn label(&self) -> String {
        let first = self.names.first().map(String::as_str).unwrap_or("?");
        match self.names.len() {
            0 | 1 => format!("{first} ({})", self.key.name()),
            n => format!("{first}+{} ({})", n - 1, self.key.name()),
        }
    }
}

/// Checks a DNS name tern can obtain a certificate for with HTTP-01 or
/// TLS-ALPN-01: no wildcard (those need DNS-01), no IP address, LDH labels.
pub fn check_name(name: &str) -> Result<String, String> {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name.starts_with("*.") {
        return Err(format!(
            "{name:?}: wildcard names need the DNS-01 challenge, which tern does not answer"
        ));
    }
    if name.parse::<std::net::IpAddr>().is_ok() {
        return Err(format!(
            "{name:?}: certificates for IP addresses are not ordered, give a DNS name"
        ));
    }
    let labels_ok = !name.is_empty()
        && name.len() <= 253
        && name.contains('.')
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !labels_ok {
        return Err(format!("{name:?} is not a DNS name with a dot in it"));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_lowercased() {
        assert_eq!(check_name("WWW.Example.com.").unwrap(), "www.example.com");
        assert!(check_name("*.example.com").unwrap_err().contains("DNS-01"));
        assert!(check_name("127.0.0.1").unwrap_err().contains("IP"));
        assert!(check_name("localhost").is_err());
        assert!(check_name("a_b.example.com").is_err());
        assert!(check_name("-a.example.com").is_err());
    }

    #[test]
    fn eab_debug_hides_the_key() {
        let eab = Eab {
            kid: "kid-1".into(),
            hmac_key: b"secret".to_vec(),
        };
        assert!(!format!("{eab:?}").contains("secret"));
    }
}
