//! Which protocol versions, cipher suites and key-exchange groups tern offers.
//!
//! The defaults are the fast and safe set: TLS 1.3 and 1.2, ECDHE groups only,
//! AEAD suites only. Narrowing by name is allowed; widening to something slow
//! or broken is refused with the reason, because a cipher string copied from
//! an old how-to (finite-field DHE, CBC, RSA key exchange) is exactly how a
//! fleet ends up several times slower or attackable without anyone noticing.

use rustls::crypto::aws_lc_rs::{cipher_suite as cs, default_provider, kx_group};
use rustls::crypto::{CryptoProvider, SupportedKxGroup};
use rustls::{NamedGroup, SupportedCipherSuite};

use crate::TlsError;

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

/// A suite the policy can enable: its IANA name, OpenSSL name and rustls value.
struct SuiteEntry {
    iana: &'static str,
    openssl: &'static str,
    suite: SupportedCipherSuite,
}

/// All suites tern knows, in default server preference order: TLS 1.3 first,
/// then TLS 1.2 ECDSA before RSA; AES-128-GCM before AES-256-GCM (same
/// security margin against practical attacks, less CPU), ChaCha20 last
/// (chosen only by clients that lack AES, since the server order wins).
const SUITES: &[SuiteEntry] = &[
    SuiteEntry {
        iana: "TLS_AES_128_GCM_SHA256",
        openssl: "TLS_AES_128_GCM_SHA256",
        suite: cs::TLS13_AES_128_GCM_SHA256,
    },
    SuiteEntry {
        iana: "TLS_AES_256_GCM_SHA384",
        openssl: "TLS_AES_256_GCM_SHA384",
        suite: cs::TLS13_AES_256_GCM_SHA384,
    },
    SuiteEntry {
        iana: "TLS_CHACHA20_POLY1305_SHA256",
        openssl: "TLS_CHACHA20_POLY1305_SHA256",
        suite: cs::TLS13_CHACHA20_POLY1305_SHA256,
    },
    SuiteEntry {
        iana: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        openssl: "ECDHE-ECDSA-AES128-GCM-SHA256",
        suite: cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    },
    SuiteEntry {
        iana: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        openssl: "ECDHE-ECDSA-AES256-GCM-SHA384",
        suite: cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    },
    SuiteEntry {
        iana: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        openssl: "ECDHE-ECDSA-CHACHA20-POLY1305",
        suite: cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    },
    SuiteEntry {
        iana: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        openssl: "ECDHE-RSA-AES128-GCM-SHA256",
        suite: cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    },
    SuiteEntry {
        iana: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        openssl: "ECDHE-RSA-AES256-GCM-SHA384",
        suite: cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    },
    SuiteEntry {
        iana: "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        openssl: "ECDHE-RSA-CHACHA20-POLY1305",
        suite: cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    },
];

/// A group the policy can enable: its canonical name, aliases and rustls value.
struct GroupEntry {
    name: &'static str,
    aliases: &'static [&'static str],
    group: &'static dyn SupportedKxGroup,
}

/// All groups tern knows, in default server preference order. The hybrid
/// post-quantum group goes first because clients that offer it want it; its
/// cost over X25519 is mostly bytes (about 1.1 KB each way), not CPU.
const GROUPS: &[GroupEntry] = &[
    GroupEntry {
        name: "X25519MLKEM768",
        aliases: &[],
        group: kx_group::X25519MLKEM768,
    },
    GroupEntry {
        name: "X25519",
        aliases: &[],
        group: kx_group::X25519,
    },
    GroupEntry {
        name: "secp256r1",
        aliases: &["P-256", "prime256v1"],
        group: kx_group::SECP256R1,
    },
    GroupEntry {
        name: "secp384r1",
        aliases: &["P-384"],
        group: kx_group::SECP384R1,
    },
];

const REASON_DHE: &str = "finite-field DHE is several times slower than ECDHE";
const REASON_RSA_KX: &str = "RSA key exchange has no forward secrecy";
const REASON_STATIC_KX: &str = "static (EC)DH or PSK-only key exchange has no forward secrecy";
const REASON_CBC: &str =
    "CBC suites are open to padding-oracle attacks (Lucky13, POODLE); use an AEAD suite";
const REASON_BROKEN: &str = "RC4, 3DES, NULL, EXPORT and MD5 suites are broken";
const REASON_OLD_VERSION: &str = "TLS versions below 1.2 are unsafe (RFC 8996)";

/// The versions, suites and groups tern offers, each in server preference order.
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

    /// IANA names of the enabled suites, in preference order.
    pub fn suite_names(&self) -> Vec<&'static str> {
        self.suites.iter().map(|s| suite_name(s.suite())).collect()
    }

    /// Names of the enabled groups, in preference order.
    pub fn group_names(&self) -> Vec<&'static str> {
        self.groups.iter().map(|g| group_name(g.name())).collect()
    }

    /// True when at least one enabled suite can be used with `cert`'s key
    /// (TLS 1.3 suites work with any key; TLS 1.2 suites name ECDSA or RSA).
    pub fn can_serve(&self, cert: &crate::LoadedCert) -> bool {
        let algorithm = cert.certified.key.algorithm();
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

    /// Human summary for the start-up log, e.g.
    /// "TLSv1.3,TLSv1.2 groups=X25519MLKEM768,X25519,... suites=...".
    pub fn describe(&self) -> String {
        let versions: Vec<&str> = self.versions.iter().map(|v| v.name()).collect();
        format!(
            "{} groups={} suites={}",
            versions.join(","),
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

/// The IANA name of a cipher suite ("TLS_AES_128_GCM_SHA256"), or "unknown".
pub fn suite_name(suite: rustls::CipherSuite) -> &'static str {
    SUITES
        .iter()
        .find(|s| s.suite.suite() == suite)
        .map_or("unknown", |s| s.iana)
}

/// The canonical name of a group ("X25519", "secp256r1", ...), or "unknown".
pub fn group_name(group: NamedGroup) -> &'static str {
    GROUPS
        .iter()
        .find(|g| g.group.name() == group)
        .map_or("unknown", |g| g.name)
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

fn parse_version(name: &str) -> Result<TlsVersion, TlsError> {
    let upper = name.to_ascii_uppercase();
    match upper.as_str() {
        "TLSV1.3" | "1.3" | "TLS1.3" | "TLS13" => Ok(TlsVersion::Tls13),
        "TLSV1.2" | "1.2" | "TLS1.2" | "TLS12" => Ok(TlsVersion::Tls12),
        "TLSV1.1" | "1.1" | "TLS1.1" | "TLSV1" | "TLSV1.0" | "1.0" | "TLS1.0" | "SSLV3"
        | "SSLV2" | "3.0" => Err(TlsError::Refused {
            what: "version",
            name: name.to_string(),
            reason: REASON_OLD_VERSION,
        }),
        _ => Err(TlsError::UnknownName {
            what: "version",
            name: name.to_string(),
            accepted: "TLSv1.3, TLSv1.2".into(),
        }),
    }
}

fn parse_suite(name: &str) -> Result<SupportedCipherSuite, TlsError> {
    let upper = name.to_ascii_uppercase();
    let known = SUITES.iter().find(|s| {
        s.iana == upper
            || s.openssl == upper
            // rustls spells TLS 1.3 suites "TLS13_..."
            || upper.strip_prefix("TLS13_") == s.iana.strip_prefix("TLS_")
    });
    if let Some(entry) = known {
        return Ok(entry.suite);
    }
    let refused = |reason| TlsError::Refused {
        what: "cipher",
        name: name.to_string(),
        reason,
    };
    if let Some(reason) = suite_refusal(&upper) {
        return Err(refused(reason));
    }
    Err(TlsError::UnknownName {
        what: "cipher",
        name: name.to_string(),
        accepted: SUITES.iter().map(|s| s.iana).collect::<Vec<_>>().join(", "),
    })
}

/// Why a suite name outside the accepted set is unsafe or slow, when it is
/// recognisably one of the known bad classes.
fn suite_refusal(upper: &str) -> Option<&'static str> {
    let tokens: Vec<&str> = upper.split(['_', '-']).filter(|t| !t.is_empty()).collect();
    let has = |t: &str| tokens.contains(&t);
    let broken = [
        "RC4", "3DES", "DES", "DES40", "NULL", "EXPORT", "EXPORT40", "EXP", "MD5", "ANON", "ADH",
        "AECDH",
    ];
    if broken.iter().any(|b| has(b)) || upper.contains("DES_EDE") {
        return Some(REASON_BROKEN);
    }
    if has("DHE") || has("EDH") || has("FFDHE") || has("DH") {
        return Some(REASON_DHE);
    }
    let aead = has("GCM") || has("CHACHA20") || has("POLY1305") || has("CCM") || has("CCM8");
    let iana = tokens.first() == Some(&"TLS");
    if iana {
        match tokens.get(1) {
            Some(&"RSA") => return Some(REASON_RSA_KX),
            Some(&"ECDH") | Some(&"PSK") | Some(&"SRP") => return Some(REASON_STATIC_KX),
            _ => {}
        }
        if has("CBC") {
            return Some(REASON_CBC);
        }
        return None;
    }
    // OpenSSL names: no key-exchange token means RSA key exchange
    // ("AES128-GCM-SHA256"), and a MAC suffix without an AEAD means CBC
    // ("ECDHE-RSA-AES128-SHA256").
    let cipher_first = tokens.first().is_some_and(|t| {
        t.starts_with("AES")
            || t.starts_with("CAMELLIA")
            || t.starts_with("ARIA")
            || *t == "SEED"
            || *t == "IDEA"
    });
    if cipher_first || tokens.first() == Some(&"RSA") {
        return Some(REASON_RSA_KX);
    }
    if matches!(tokens.first(), Some(&"ECDH") | Some(&"PSK") | Some(&"SRP")) {
        return Some(REASON_STATIC_KX);
    }
    let mac_suffix = tokens.last().is_some_and(|t| t.starts_with("SHA"));
    if has("CBC") || (has("ECDHE") && mac_suffix && !aead) {
        return Some(REASON_CBC);
    }
    None
}

fn parse_group(name: &str) -> Result<&'static dyn SupportedKxGroup, TlsError> {
    let known = GROUPS.iter().find(|g| {
        g.name.eq_ignore_ascii_case(name) || g.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    });
    if let Some(entry) = known {
        return Ok(entry.group);
    }
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("ffdhe") || lower == "dh" || lower == "dhe" || lower.starts_with("modp") {
        return Err(TlsError::Refused {
            what: "group",
            name: name.to_string(),
            reason: REASON_DHE,
        });
    }
    let accepted: Vec<String> = GROUPS
        .iter()
        .map(|g| {
            let mut all = vec![g.name];
            all.extend_from_slice(g.aliases);
            all.join("/")
        })
        .collect();
    Err(TlsError::UnknownName {
        what: "group",
        name: name.to_string(),
        accepted: accepted.join(", "),
    })
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
