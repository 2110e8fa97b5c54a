//! The cipher suites, versions and groups the hand-built offers name, and
//! what each costs: key exchange (ECDHE, DHE, RSA) and bulk cipher (AEAD,
//! CBC).

use crate::wire::{
    FFDHE2048, SECP256R1, SECP384R1, SECP521R1, TLS10, TLS11, TLS12, TLS13, X25519, X25519MLKEM768,
};

/// How a suite agrees on keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyExchange {
    /// TLS 1.3: (EC)DHE chosen by the group, not the suite.
    Tls13,
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
    Aead,
    Cbc,
}

/// A cipher suite we know by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Suite {
    pub id: u16,
    pub name: &'static str,
    pub kx: KeyExchange,
    pub bulk: BulkCipher,
}

const fn s(id: u16, name: &'static str, kx: KeyExchange, bulk: BulkCipher) -> Suite {
    Suite { id, name, kx, bulk }
}

use BulkCipher::{Aead, Cbc};
use KeyExchange::{Dhe, Ecdhe, Rsa, Tls13};

/// Every suite the hand-built offers can contain.
pub const SUITES: &[Suite] = &[
    s(0x1301, "TLS_AES_128_GCM_SHA256", Tls13, Aead),
    s(0x1302, "TLS_AES_256_GCM_SHA384", Tls13, Aead),
    s(0x1303, "TLS_CHACHA20_POLY1305_SHA256", Tls13, Aead),
    s(
        0xc02b,
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        Ecdhe,
        Aead,
    ),
    s(
        0xc02c,
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        Ecdhe,
        Aead,
    ),
    s(
        0xcca9,
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        Ecdhe,
        Aead,
    ),
    s(0xc02f, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", Ecdhe, Aead),
    s(0xc030, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", Ecdhe, Aead),
    s(
        0xcca8,
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        Ecdhe,
        Aead,
    ),
    s(0xc009, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", Ecdhe, Cbc),
    s(0xc00a, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", Ecdhe, Cbc),
    s(
        0xc023,
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        Ecdhe,
        Cbc,
    ),
    s(0xc013, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", Ecdhe, Cbc),
    s(0xc014, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", Ecdhe, Cbc),
    s(0xc027, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", Ecdhe, Cbc),
    s(0x009e, "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", Dhe, Aead),
    s(0x009f, "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", Dhe, Aead),
    s(
        0xccaa,
        "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        Dhe,
        Aead,
    ),
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

/// The name of a suite, or its code point in hex when unknown.
pub fn suite_name(id: u16) -> String {
    suite(id).map_or_else(|| format!("0x{id:04x}"), |s| s.name.to_string())
}

/// The name of a TLS version.
pub fn version_name(v: u16) -> &'static str {
    match v {
        TLS10 => "TLSv1.0",
        TLS11 => "TLSv1.1",
        TLS12 => "TLSv1.2",
        TLS13 => "TLSv1.3",
        _ => "unknown",
    }
}

/// The name of a named group.
pub fn group_name(g: u16) -> String {
    match g {
        X25519 => "X25519".into(),
        SECP256R1 => "secp256r1".into(),
        SECP384R1 => "secp384r1".into(),
        SECP521R1 => "secp521r1".into(),
        X25519MLKEM768 => "X25519MLKEM768".into(),
        FFDHE2048 => "ffdhe2048".into(),
        _ => format!("0x{g:04x}"),
    }
}

/// Every TLS 1.2-and-below suite in [`SUITES`], in the order an old
/// OpenSSL-based client lists them: ECDHE first, then DHE, then RSA; AEAD
/// before CBC inside each. A server that answers this with DHE chose DHE
/// itself.
pub fn legacy_suites() -> Vec<u16> {
    let rank = |s: &Suite| {
        let kx = match s.kx {
            Tls13 => 0,
            Ecdhe => 1,
            Dhe => 2,
            Rsa => 3,
        };
        (kx, s.bulk == Cbc)
    };
    let mut v: Vec<&Suite> = SUITES.iter().filter(|s| s.kx != Tls13).collect();
    v.sort_by_key(|s| rank(s));
    v.into_iter().map(|s| s.id).collect()
}

/// The TLS 1.3 suites.
pub fn tls13_suites() -> Vec<u16> {
    SUITES
        .iter()
        .filter(|s| s.kx == Tls13)
        .map(|s| s.id)
        .collect()
}
