//! Which protocol versions, cipher suites and key-exchange groups tern offers.
//!
//! The defaults are the fast and safe set: TLS 1.3 and 1.2, ECDHE groups only,
//! AEAD suites only. Narrowing by name is allowed; widening to something slow
//! or broken is refused with the reason, because a cipher string copied from
//! an old how-to (finite-field DHE, CBC, RSA key exchange) is exactly how a
//! fleet ends up several times slower or attackable without anyone noticing.

use rustls::crypto::aws_lc_rs::default_provider;
use rustls::crypto::{CryptoProvider, SupportedKxGroup};
use rustls::{NamedGroup, SupportedCipherSuite};

use crate::TlsError;

mod names;

use names::{group_name, parse_group, parse_suite, parse_version, suite_name, GROUPS, SUITES};

/// A protocol version tern can speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsVersion {
    /// TLS 1.3 (RFC 8446).
    Tls13,
    /// TLS 1.2 (RFC 5246), ECDHE + AEAD suites only.
    Tls12,
}

impl TlsVersion {
    /// The OpenSSL-style name: "TLSv1.3" or "TLSv1.2".
    pub fn name(self) -> &'static str {
        match self {
            TlsVersion::Tls13 => "TLSv1.3",
            TlsVersion::Tls12 => "TLSv1.2",
        }
    }

    fn rustls(self) -> &'static rustls::SupportedProtocolVersion {
        match self {
            TlsVersion::Tls13 => &rustls::version::TLS13,
            TlsVersion::Tls12 => &rustls::version::TLS12,
        }
    }
}

/// The versions, suites and groups tern offers.
///
/// Suites are in server preference order, and the server's order wins. The
/// group list is a set as far as rustls is concerned: it takes the first
/// group in the *client's* list that is enabled here (which avoids a
/// HelloRetryRequest round trip), so narrowing the set is how to pin a group.
#[derive(Clone, Debug)]
pub struct TlsPolicy {
    versions: Vec<TlsVersion>,
    suites: Vec<SupportedCipherSuite>,
    groups: Vec<&'static dyn SupportedKxGroup>,
}

impl TlsPolicy {
    /// TLS 1.3 + 1.2; groups X25519MLKEM768, X25519, secp256r1, secp384r1;
    /// AEAD suites only (TLS 1.3 AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305;
    /// TLS 1.2 ECDHE_ECDSA / ECDHE_RSA with AES-GCM or ChaCha20-Poly1305).
    pub fn default_fast() -> Self {
        TlsPolicy {
            versions: vec![TlsVersion::Tls13, TlsVersion::Tls12],
            suites: SUITES.iter().map(|s| s.suite).collect(),
            groups: GROUPS.iter().map(|g| g.group).collect(),
        }
    }

    /// Narrows the defaults by IANA / OpenSSL-style names. An empty slice
    /// keeps the default for that dimension. The order given becomes the
    /// server preference order.
    ///
    /// versions: "TLSv1.3" | "TLSv1.2" (also "1.3", "1.2"); suites: IANA or
    /// OpenSSL names; groups: "X25519MLKEM768", "X25519", "secp256r1" (or
    /// "P-256", "prime256v1"), "secp384r1" (or "P-384"). Names are
    /// case-insensitive.
    ///
    /// Refuses, saying why: finite-field DHE suites or groups, RSA key
    /// exchange, CBC suites, RC4/3DES/NULL/EXPORT, versions below TLS 1.2, and
    /// unknown names (listing the accepted ones). When `versions` is empty, a
    /// version for which none of the chosen suites applies is dropped; when
    /// it is given, that is an error.
    pub fn from_names(
        versions: &[String],
        suites: &[String],
        groups: &[String],
    ) -> Result<Self, TlsError> {
        let defaults = Self::default_fast();
        let explicit_versions = !versions.is_empty();
        let mut policy = TlsPolicy {
            versions: pick(versions, parse_version, |v| *v, defaults.versions)?,
            suites: pick(suites, parse_suite, |s| s.suite(), defaults.suites)?,
            groups: pick(groups, parse_group, |g| g.name(), defaults.groups)?,
        };
        let has_suite_for = |v: TlsVersion, suites: &[SupportedCipherSuite]| {
            suites.iter().any(|s| s.version() == v.rustls())
        };
        if explicit_versions {
            if let Some(v) = policy
                .versions
                .iter()
                .find(|v| !has_suite_for(**v, &policy.suites))
            {
                return Err(TlsError::PolicyConflict(format!(
                    "{} is enabled but none of the chosen cipher suites is a {} suite",
                    v.name(),
                    v.name()
                )));
            }
        } else {
            let suites = policy.suites.clone();
            policy.versions.retain(|v| has_suite_for(*v, &suites));
        }
        if policy.versions.is_empty() {
            return Err(TlsError::PolicyConflict(
                "no protocol version is left to offer".into(),
            ));
        }
        // Suites of a disabled version would only confuse `describe()`.
        let versions = policy.versions.clone();
        policy
            .suites
            .retain(|s| versions.iter().any(|v| s.version() == v.rustls()));
        let tls12_only = policy.versions == [TlsVersion::Tls12];
        if tls12_only && policy.groups.iter().all(|g| is_tls13_only(g.name())) {
            return Err(TlsError::PolicyConflict(
                "TLSv1.2 cannot use X25519MLKEM768; add X25519, secp256r1 or secp384r1".into(),
            ));
        }
        Ok(policy)
    }

    /// The aws-lc-rs provider narrowed to this policy's suites and groups.
    pub fn crypto_provider(&self) -> CryptoProvider {
        CryptoProvider {
            cipher_suites: self.suites.clone(),
            kx_groups: self.groups.clone(),
            ..default_provider()
        }
    }

    /// The rustls protocol versions, in preference order.
    pub fn versions(&self) -> Vec<&'static rustls::SupportedProtocolVersion> {
        self.versions.iter().map(|v| v.rustls()).collect()
    }

    /// The protocol versions, in preference order.
    pub fn tls_versions(&self) -> &[TlsVersion] {
        &self.versions
    }

    /// Names of the enabled versions ("TLSv1.3"), in preference order.
    pub fn version_names(&self) -> Vec<&'static str> {
        self.versions.iter().map(|v| v.name()).collect()
    }

    /// IANA names of the enabled suites, in preference order.
    pub fn suite_names(&self) -> Vec<&'static str> {
        self.suites.iter().map(|s| suite_name(s.suite())).collect()
    }

    /// Names of the enabled groups, in configured order.
    pub fn group_names(&self) -> Vec<&'static str> {
        self.groups.iter().map(|g| group_name(g.name())).collect()
    }

    /// True when at least one enabled suite can be used with `cert`'s key
    /// (TLS 1.3 suites work with any key; TLS 1.2 suites name ECDSA or RSA).
    pub fn can_serve(&self, cert: &crate::LoadedCert) -> bool {
        self.can_sign_with(cert.certified.key.algorithm())
    }

    /// Whether some enabled suite can use a key of this algorithm.
    pub fn can_sign_with(&self, algorithm: rustls::SignatureAlgorithm) -> bool {
        self.suites
            .iter()
            .any(|s| s.usable_for_signature_algorithm(algorithm))
    }

    /// Names of the enabled versions that have no suite for `cert`'s key.
    pub fn versions_unable_to_serve(&self, cert: &crate::LoadedCert) -> Vec<&'static str> {
        let algorithm = cert.certified.key.algorithm();
        self.versions
            .iter()
            .filter(|v| {
                !self.suites.iter().any(|s| {
                    s.version() == v.rustls() && s.usable_for_signature_algorithm(algorithm)
                })
            })
            .map(|v| v.name())
            .collect()
    }

    /// Why this policy cannot serve QUIC (HTTP/3), if it cannot: QUIC is
    /// TLS 1.3 only, and its Initial packets are protected with
    /// TLS_AES_128_GCM_SHA256 whatever suite the handshake then picks.
    pub fn quic_problem(&self) -> Option<String> {
        if !self.versions.contains(&TlsVersion::Tls13) {
            return Some("HTTP/3 (QUIC) needs TLSv1.3 in tls_versions".into());
        }
        let aes128 = rustls::CipherSuite::TLS13_AES_128_GCM_SHA256;
        if !self.suites.iter().any(|s| s.suite() == aes128) {
            return Some(
                "HTTP/3 (QUIC) needs TLS_AES_128_GCM_SHA256 in ciphers (QUIC Initial packets use it)"
                    .into(),
            );
        }
        None
    }

    /// Human summary for the start-up log, e.g.
    /// "TLSv1.3,TLSv1.2 groups=X25519MLKEM768,X25519,... suites=...".
    pub fn describe(&self) -> String {
        format!(
            "{} groups={} suites={}",
            self.version_names().join(","),
            self.group_names().join(","),
            self.suite_names().join(",")
        )
    }
}

impl Default for TlsPolicy {
    fn default() -> Self {
        Self::default_fast()
    }
}

fn is_tls13_only(group: NamedGroup) -> bool {
    group == NamedGroup::X25519MLKEM768
}

/// Parses each name with `parse`, dropping repeats (same `key`); empty
/// input keeps `default`.
fn pick<T, K: PartialEq>(
    names: &[String],
    parse: impl Fn(&str) -> Result<T, TlsError>,
    key: impl Fn(&T) -> K,
    default: Vec<T>,
) -> Result<Vec<T>, TlsError> {
    if names.is_empty() {
        return Ok(default);
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let item = parse(name.trim())?;
        if !out.iter().any(|seen| key(seen) == key(&item)) {
            out.push(item);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn refusal(versions: &[&str], suites: &[&str], groups: &[&str]) -> String {
        match TlsPolicy::from_names(&names(versions), &names(suites), &names(groups)) {
            Ok(p) => panic!("accepted: {}", p.describe()),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn defaults_are_fast_and_ordered() {
        let p = TlsPolicy::default_fast();
        assert_eq!(
            p.describe(),
            "TLSv1.3,TLSv1.2 groups=X25519MLKEM768,X25519,secp256r1,secp384r1 \
             suites=TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256,\
             TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,\
             TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,\
             TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
        );
        let provider = p.crypto_provider();
        assert_eq!(provider.cipher_suites.len(), 9);
        assert_eq!(provider.kx_groups.len(), 4);
    }

    #[test]
    fn dhe_suite_is_refused_as_slow() {
        assert_eq!(
            refusal(&[], &["TLS_DHE_RSA_WITH_AES_128_GCM_SHA256"], &[]),
            "cipher TLS_DHE_RSA_WITH_AES_128_GCM_SHA256 refused: finite-field DHE is several times slower than ECDHE"
        );
        assert!(refusal(&[], &["DHE-RSA-AES256-GCM-SHA384"], &[]).contains("finite-field DHE"));
    }

    #[test]
    fn ffdhe_group_is_refused_as_slow() {
        assert!(
            refusal(&[], &[], &["ffdhe2048"]).contains("group ffdhe2048 refused: finite-field DHE")
        );
    }

    #[test]
    fn rsa_key_exchange_is_refused_for_lack_of_forward_secrecy() {
        for name in ["TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256"] {
            assert!(
                refusal(&[], &[name], &[]).contains("no forward secrecy"),
                "{name}"
            );
        }
    }

    #[test]
    fn cbc_is_refused_for_padding_oracles() {
        for name in [
            "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
            "ECDHE-RSA-AES128-SHA256",
            "ECDHE-ECDSA-AES256-SHA",
        ] {
            assert!(
                refusal(&[], &[name], &[]).contains("padding-oracle"),
                "{name}"
            );
        }
    }

    #[test]
    fn broken_ciphers_are_refused() {
        for name in [
            "TLS_RSA_WITH_RC4_128_SHA",
            "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
            "DES-CBC3-SHA",
            "TLS_RSA_WITH_NULL_SHA256",
            "EXP-RC4-MD5",
        ] {
            assert!(refusal(&[], &[name], &[]).contains("are broken"), "{name}");
        }
    }

    #[test]
    fn old_versions_are_refused() {
        for name in ["TLSv1.1", "TLSv1", "SSLv3", "1.0"] {
            assert!(
                refusal(&[name], &[], &[]).contains("below 1.2 are unsafe"),
                "{name}"
            );
        }
    }

    #[test]
    fn unknown_names_list_the_accepted_ones() {
        let msg = refusal(&[], &["TLS_FOO"], &[]);
        assert!(
            msg.starts_with("cipher TLS_FOO unknown; accepted: TLS_AES_128_GCM_SHA256,"),
            "{msg}"
        );
        let msg = refusal(&[], &[], &["x448"]);
        assert!(
            msg.contains("accepted: X25519MLKEM768, X25519, secp256r1/P-256/prime256v1"),
            "{msg}"
        );
        assert!(refusal(&["TLSv9"], &[], &[]).contains("accepted: TLSv1.3, TLSv1.2"));
    }

    #[test]
    fn names_narrow_in_the_given_order() {
        let p = TlsPolicy::from_names(
            &names(&["1.2"]),
            &names(&[
                "ECDHE-RSA-AES256-GCM-SHA384",
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            ]),
            &names(&["P-256", "x25519"]),
        )
        .unwrap();
        assert_eq!(
            p.describe(),
            "TLSv1.2 groups=secp256r1,X25519 suites=TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
        );
        assert_eq!(p.versions(), vec![&rustls::version::TLS12]);
    }

    #[test]
    fn tls13_only_suites_drop_tls12_when_versions_are_default() {
        let p = TlsPolicy::from_names(&[], &names(&["TLS13_AES_256_GCM_SHA384"]), &[]).unwrap();
        assert_eq!(p.tls_versions(), &[TlsVersion::Tls13]);
        let msg = refusal(&["TLSv1.2"], &["TLS_AES_128_GCM_SHA256"], &[]);
        assert!(
            msg.contains("TLSv1.2 is enabled but none of the chosen cipher suites"),
            "{msg}"
        );
    }

    #[test]
    fn tls12_only_with_hybrid_group_only_is_a_conflict() {
        assert!(
            refusal(&["TLSv1.2"], &[], &["X25519MLKEM768"]).contains("cannot use X25519MLKEM768")
        );
    }
}
