//! The suite lists the hand-built offers make, from tern-tls's one table of
//! names and costs (`tern_tls::iana`).

pub use tern_tls::iana::{
    group_name, suite, suite_name, version_name, BulkCipher, KeyExchange, Suite, SUITES,
};
use BulkCipher::Cbc;
use KeyExchange::{Dhe, Ecdhe, Rsa, Tls13};

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
