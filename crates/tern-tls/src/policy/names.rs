//! The names tern accepts for versions, suites and groups, and the reasons
//! it gives for the ones it refuses.

use rustls::crypto::aws_lc_rs::{cipher_suite as cs, kx_group};
use rustls::crypto::SupportedKxGroup;
use rustls::{NamedGroup, SupportedCipherSuite};

use super::TlsVersion;
use crate::{iana, TlsError};

/// A suite the policy can enable: its OpenSSL name and rustls value (its
/// IANA name is in [`crate::iana`]).
pub(super) struct SuiteEntry {
    openssl: &'static str,
    pub(super) suite: SupportedCipherSuite,
}

impl SuiteEntry {
    fn iana(&self) -> &'static str {
        suite_name(self.suite.suite())
    }
}

/// All suites tern knows, in default server preference order: TLS 1.3 first,
/// then TLS 1.2 ECDSA before RSA; AES-128-GCM before AES-256-GCM (same
/// security margin against practical attacks, less CPU), ChaCha20 last
/// (chosen only by clients that lack AES, since the server order wins).
pub(super) const SUITES: &[SuiteEntry] = &[
    SuiteEntry {
        openssl: "TLS_AES_128_GCM_SHA256",
        suite: cs::TLS13_AES_128_GCM_SHA256,
    },
    SuiteEntry {
        openssl: "TLS_AES_256_GCM_SHA384",
        suite: cs::TLS13_AES_256_GCM_SHA384,
    },
    SuiteEntry {
        openssl: "TLS_CHACHA20_POLY1305_SHA256",
        suite: cs::TLS13_CHACHA20_POLY1305_SHA256,
    },
    SuiteEntry {
        openssl: "ECDHE-ECDSA-AES128-GCM-SHA256",
        suite: cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    },
    SuiteEntry {
        openssl: "ECDHE-ECDSA-AES256-GCM-SHA384",
        suite: cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    },
    SuiteEntry {
        openssl: "ECDHE-ECDSA-CHACHA20-POLY1305",
        suite: cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    },
    SuiteEntry {
        openssl: "ECDHE-RSA-AES128-GCM-SHA256",
        suite: cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    },
    SuiteEntry {
        openssl: "ECDHE-RSA-AES256-GCM-SHA384",
        suite: cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    },
    SuiteEntry {
        openssl: "ECDHE-RSA-CHACHA20-POLY1305",
        suite: cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    },
];

/// A group the policy can enable: its aliases and rustls value (its
/// canonical name is in [`crate::iana`]).
pub(super) struct GroupEntry {
    aliases: &'static [&'static str],
    pub(super) group: &'static dyn SupportedKxGroup,
}

impl GroupEntry {
    fn name(&self) -> &'static str {
        group_name(self.group.name())
    }
}

/// All groups tern knows, in the order `describe()` lists them (rustls picks
/// by the client's order among enabled groups). The hybrid
/// post-quantum group goes first because clients that offer it want it; it
/// costs about 1.1 KB more each way than X25519 and, in
/// `examples/handshake_cost`, roughly +40 µs of server CPU per full handshake.
pub(super) const GROUPS: &[GroupEntry] = &[
    GroupEntry {
        aliases: &[],
        group: kx_group::X25519MLKEM768,
    },
    GroupEntry {
        aliases: &[],
        group: kx_group::X25519,
    },
    GroupEntry {
        aliases: &["P-256", "prime256v1"],
        group: kx_group::SECP256R1,
    },
    GroupEntry {
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

/// The IANA name of a suite the policy can enable. Every one has a name in
/// [`crate::iana`] (a test checks), so the empty fallback is never shown.
pub(super) fn suite_name(suite: rustls::CipherSuite) -> &'static str {
    iana::suite(suite.into()).map_or("", |s| s.name)
}

/// The canonical name of a group the policy can enable; as for suites,
/// every one has a name (a test checks).
pub(super) fn group_name(group: NamedGroup) -> &'static str {
    iana::group(group.into()).unwrap_or("")
}

pub(super) fn parse_version(name: &str) -> Result<TlsVersion, TlsError> {
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

pub(super) fn parse_suite(name: &str) -> Result<SupportedCipherSuite, TlsError> {
    let upper = name.to_ascii_uppercase();
    let known = SUITES.iter().find(|s| {
        s.iana() == upper
            || s.openssl == upper
            // rustls spells TLS 1.3 suites "TLS13_..."
            || upper.strip_prefix("TLS13_") == s.iana().strip_prefix("TLS_")
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
        accepted: SUITES
            .iter()
            .map(SuiteEntry::iana)
            .collect::<Vec<_>>()
            .join(", "),
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

pub(super) fn parse_group(name: &str) -> Result<&'static dyn SupportedKxGroup, TlsError> {
    let known = GROUPS.iter().find(|g| {
        g.name().eq_ignore_ascii_case(name)
            || g.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
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
            let mut all = vec![g.name()];
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

    #[test]
    fn every_suite_and_group_the_policy_knows_has_an_iana_name() {
        for s in SUITES {
            assert!(!s.iana().is_empty(), "{:?}", s.suite.suite());
        }
        for g in GROUPS {
            assert!(!g.name().is_empty(), "{:?}", g.group.name());
        }
    }
}
