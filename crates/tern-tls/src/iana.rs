//! The names of TLS versions, cipher suites and key-exchange groups by IANA
//! code point, and what each suite costs: the one table `tern serve` (access
//! log, metrics, policy), `tern probe` and the tests name things by. A code
//! point without a name here is shown in hex (`0x00ff`), everywhere.

use std::borrow::Cow;

/// How a suite agrees on keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyExchange {
    /// TLS 1.3: (EC)DHE chosen by the group, not the suite.
    Tls13,
    /// Ephemeral elliptic-curve Diffie-Hellman (TLS 1.2).
    Ecdhe,
    /// Finite-field Diffie-Hellman: several times the CPU of ECDHE.
    Dhe,
    /// RSA key transport: no forward secrecy, a private-key decryption each.
    Rsa,
}

/// How a suite protects records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BulkCipher {
    /// Authenticated encryption (GCM, ChaCha20-Poly1305).
    Aead,
    /// CBC with a MAC: open to padding oracles.
    Cbc,
}

/// A cipher suite we know by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Suite {
    /// IANA code point.
    pub id: u16,
    /// IANA name.
    pub name: &'static str,
    /// How it agrees on keys.
    pub kx: KeyExchange,
    /// How it protects records.
    pub bulk: BulkCipher,
}

const fn s(id: u16, name: &'static str, kx: KeyExchange, bulk: BulkCipher) -> Suite {
    Suite { id, name, kx, bulk }
}

use BulkCipher::{Aead, Cbc};
use KeyExchange::{Dhe, Ecdhe, Rsa, Tls13};

/// Every suite tern has a name for: those `tern serve` can enable and the
/// slow or unsafe ones it refuses but `tern probe` offers and reports.
#[rustfmt::skip]
pub const SUITES: &[Suite] = &[
    s(0x1301, "TLS_AES_128_GCM_SHA256", Tls13, Aead),
    s(0x1302, "TLS_AES_256_GCM_SHA384", Tls13, Aead),
    s(0x1303, "TLS_CHACHA20_POLY1305_SHA256", Tls13, Aead),
    s(0xc02b, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", Ecdhe, Aead),
    s(0xc02c, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", Ecdhe, Aead),
    s(0xcca9, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", Ecdhe, Aead),
    s(0xc02f, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", Ecdhe, Aead),
    s(0xc030, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", Ecdhe, Aead),
    s(0xcca8, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", Ecdhe, Aead),
    s(0xc009, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", Ecdhe, Cbc),
    s(0xc00a, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", Ecdhe, Cbc),
    s(0xc023, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", Ecdhe, Cbc),
    s(0xc013, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", Ecdhe, Cbc),
    s(0xc014, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", Ecdhe, Cbc),
    s(0xc027, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", Ecdhe, Cbc),
    s(0x009e, "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", Dhe, Aead),
    s(0x009f, "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", Dhe, Aead),
    s(0xccaa, "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", Dhe, Aead),
    s(0x0033, "TLS_DHE_RSA_WITH_AES_128_CBC_SHA", Dhe, Cbc),
    s(0x0039, "TLS_DHE_RSA_WITH_AES_256_CBC_SHA", Dhe, Cbc),
    s(0x0067, "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256", Dhe, Cbc),
    s(0x009c, "TLS_RSA_WITH_AES_128_GCM_SHA256", Rsa, Aead),
    s(0x009d, "TLS_RSA_WITH_AES_256_GCM_SHA384", Rsa, Aead),
    s(0x002f, "TLS_RSA_WITH_AES_128_CBC_SHA", Rsa, Cbc),
    s(0x0035, "TLS_RSA_WITH_AES_256_CBC_SHA", Rsa, Cbc),
    s(0x003c, "TLS_RSA_WITH_AES_128_CBC_SHA256", Rsa, Cbc),
];

/// Looks a suite up by its code point.
pub fn suite(id: u16) -> Option<&'static Suite> {
    SUITES.iter().find(|s| s.id == id)
}

/// The IANA name of a suite ("TLS_AES_128_GCM_SHA256"), or its code point
/// in hex.
pub fn suite_name(id: impl Into<u16>) -> Cow<'static, str> {
    let id = id.into();
    suite(id).map_or_else(|| hex(id), |s| Cow::Borrowed(s.name))
}

/// The name OpenSSL gives a suite tern can negotiate, from its IANA name:
/// `ECDHE-RSA-AES128-GCM-SHA256` for
/// `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`. TLS 1.3 suites keep their IANA
/// names in OpenSSL, and so does any name not listed here. For consumers
/// that compare against what OpenSSL-based servers write (HAProxy fills
/// the PROXY v2 `PP2_SUBTYPE_SSL_CIPHER` with it); tern's own logs,
/// metrics and fields use the IANA names.
pub fn openssl_suite_name(iana: &str) -> &str {
    match iana {
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => "ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => "ECDHE-ECDSA-AES256-GCM-SHA384",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256" => "ECDHE-ECDSA-CHACHA20-POLY1305",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256" => "ECDHE-RSA-CHACHA20-POLY1305",
        other => other,
    }
}

/// Named groups (IANA code points) tern has a name for.
pub const X25519: u16 = 0x001d;
/// secp256r1 (P-256).
pub const SECP256R1: u16 = 0x0017;
/// secp384r1 (P-384).
pub const SECP384R1: u16 = 0x0018;
/// secp521r1 (P-521).
pub const SECP521R1: u16 = 0x0019;
/// The hybrid post-quantum group.
pub const X25519MLKEM768: u16 = 0x11ec;
/// Finite-field DHE, 2048 bits (RFC 7919).
pub const FFDHE2048: u16 = 0x0100;

const GROUPS: &[(u16, &str)] = &[
    (X25519MLKEM768, "X25519MLKEM768"),
    (X25519, "X25519"),
    (SECP256R1, "secp256r1"),
    (SECP384R1, "secp384r1"),
    (SECP521R1, "secp521r1"),
    (FFDHE2048, "ffdhe2048"),
    (0x11eb, "SecP256r1MLKEM768"),
    (0x0201, "MLKEM768"),
    (0x0202, "MLKEM1024"),
];

/// The canonical name of a group, when tern has one.
pub fn group(id: u16) -> Option<&'static str> {
    GROUPS.iter().find(|(g, _)| *g == id).map(|(_, name)| *name)
}

/// The canonical name of a group ("X25519", "secp256r1", ...), or its code
/// point in hex.
pub fn group_name(id: impl Into<u16>) -> Cow<'static, str> {
    let id = id.into();
    group(id).map_or_else(|| hex(id), Cow::Borrowed)
}

/// TLS protocol versions on the wire.
pub const TLS10: u16 = 0x0301;
/// TLS 1.1.
pub const TLS11: u16 = 0x0302;
/// TLS 1.2.
pub const TLS12: u16 = 0x0303;
/// TLS 1.3.
pub const TLS13: u16 = 0x0304;

/// The OpenSSL-style name of a TLS version ("TLSv1.3"), or its code point
/// in hex.
pub fn version_name(v: impl Into<u16>) -> Cow<'static, str> {
    match v.into() {
        TLS10 => "TLSv1.0".into(),
        TLS11 => "TLSv1.1".into(),
        TLS12 => "TLSv1.2".into(),
        TLS13 => "TLSv1.3".into(),
        other => hex(other),
    }
}

fn hex(id: u16) -> Cow<'static, str> {
    Cow::Owned(format!("0x{id:04x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_code_points_have_iana_names_and_others_show_in_hex() {
        assert_eq!(suite_name(0x1301u16), "TLS_AES_128_GCM_SHA256");
        assert_eq!(
            suite_name(rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
        );
        assert_eq!(suite_name(0x00ffu16), "0x00ff");
        assert_eq!(group_name(rustls::NamedGroup::X25519), "X25519");
        assert_eq!(group_name(0x0a0au16), "0x0a0a");
        assert_eq!(version_name(TLS12), "TLSv1.2");
        assert_eq!(version_name(0x0300u16), "0x0300");
    }

    #[test]
    fn tls12_suites_rustls_offers_have_openssl_names_and_tls13_keep_theirs() {
        for s in rustls::crypto::aws_lc_rs::ALL_CIPHER_SUITES {
            let iana = suite_name(s.suite());
            let openssl = openssl_suite_name(&iana);
            match s.version().version {
                rustls::ProtocolVersion::TLSv1_3 => assert_eq!(openssl, iana),
                // OpenSSL's form: no TLS_ prefix, dashes ("ECDHE-RSA-...").
                _ => assert!(
                    openssl.starts_with("ECDHE-") && !openssl.contains('_'),
                    "{iana} -> {openssl}"
                ),
            }
        }
        assert_eq!(
            openssl_suite_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
            "ECDHE-RSA-AES128-GCM-SHA256"
        );
    }

    #[test]
    fn every_suite_rustls_offers_has_a_name() {
        for s in rustls::crypto::aws_lc_rs::ALL_CIPHER_SUITES {
            assert!(suite(s.suite().into()).is_some(), "{:?}", s.suite());
        }
        for g in rustls::crypto::aws_lc_rs::ALL_KX_GROUPS {
            assert!(!group_name(g.name()).starts_with("0x"), "{:?}", g.name());
        }
    }
}
