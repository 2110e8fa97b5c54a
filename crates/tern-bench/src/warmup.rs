//! Start-up costs paid before any clock starts.
//!
//! aws-lc seeds its CPU-jitter entropy source on the first use of its
//! random generator, inside whatever calls it first: in a load generator,
//! the first TLS handshake. That took 21 ms on an idle machine (100 ms on a
//! loaded one) against 1-3 ms for every later handshake: with `-c 1` it was
//! the slowest request, in a 5,000-request run the whole p99.9, and in
//! `--compare` the first target always paid it. So the client draws random
//! bytes, runs every key exchange it offers and verifies a signature once,
//! before the first target's clock starts.
//!
//! That left a smaller first-handshake cost: the first TLS handshake of a
//! worker thread still ran code and touched memory for the first time
//! (the record layer, key schedule, certificate parsing and
//! decompression, the thread's allocator arena growing: about 30-45 more
//! page faults than a later handshake). So each worker also makes one
//! whole handshake in memory, against a server in the same thread, with
//! the run's TLS options, before its clock starts.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use rustls::crypto::SupportedKxGroup;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::{ConnectionPlan, HttpVersion, TlsOptions};

/// Runs the client's crypto once: RNG, one key exchange per group of the
/// default provider, an ECDSA signature made and verified. Failures are
/// ignored: a failed warm-up only means the first handshake pays the
/// start-up, which it did before.
pub fn warm_crypto() {
    use aws_lc_rs::rand::{SecureRandom, SystemRandom};
    use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair};

    let rng = SystemRandom::new();
    let mut seed = [0u8; 32];
    let _ = rng.fill(&mut seed);
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    for group in &provider.kx_groups {
        exchange(*group);
    }
    let alg = &signature::ECDSA_P256_SHA256_ASN1_SIGNING;
    if let Ok(key) = EcdsaKeyPair::generate(alg) {
        if let Ok(sig) = key.sign(&rng, &seed) {
            let public = signature::UnparsedPublicKey::new(
                &signature::ECDSA_P256_SHA256_ASN1,
                key.public_key(),
            );
            let _ = public.verify(&seed, sig.as_ref());
        }
    }
}

/// One key exchange of `group` between two fresh key pairs.
fn exchange(group: &'static dyn SupportedKxGroup) {
    let (Ok(ours), Ok(theirs)) = (group.start(), group.start()) else {
        return;
    };
    let their_public = theirs.pub_key().to_vec();
    let _ = ours.complete(&their_public);
}

/// The in-memory server's certificate: self-signed ECDSA P-256, valid to
/// 2126, used for nothing else (no secret: the key only signs the
/// warm-up's own handshake, in memory).
const WARM_CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBkTCCATegAwIBAgIUaiukftoXQee+/F5XgJUb3WHQAU0wCgYIKoZIzj0EAwIw
HTEbMBkGA1UEAwwSdGVybi1iZW5jaCB3YXJtLXVwMCAXDTI2MTEyNjAwNTYyN1oY
DzIxMjYxMTAyMDA1NjI3WjAdMRswGQYDVQQDDBJ0ZXJuLWJlbmNoIHdhcm0tdXAw
WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQ12igu9yurILKaZBLJUtX5m0z1sfhw
d23iiZNh0vjIwo5+c2QF9SKM/erGL6So3LtnWrJovjwj67tfEF6EP/08o1MwUTAd
BgNVHQ4EFgQUMAKo8QMHi7rAb5hb38zgemCl53UwHwYDVR0jBBgwFoAUMAKo8QMH
i7rAb5hb38zgemCl53UwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBF
AiEAgd9CU4Va7y0K2HmWx04krMdVor3ZIg7AlFaUhYcDy30CIDDhrywuQwKh82nR
hv9iP8LD/OAr1lKcwd4h3pGzBOLn
-----END CERTIFICATE-----";
const WARM_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg/Vq8O9cdVTYyjk60
LeVbSaIZpOabKt8/X/D160nm5DehRANCAAQ12igu9yurILKaZBLJUtX5m0z1sfhw
d23iiZNh0vjIwo5+c2QF9SKM/erGL6So3LtnWrJovjwj67tfEF6EP/08
-----END PRIVATE KEY-----";

/// One whole TLS handshake and a request's worth of records each way,
/// in memory: the client as `opts` makes it (chain not verified: the
/// certificate is the warm-up's own), the server rustls' with brotli and
/// zlib certificate compression. Failures are ignored (the first real
/// handshake then pays what it paid before).
pub fn warm_tls(opts: &TlsOptions) {
    let _ = handshake_in_memory(opts);
}

fn handshake_in_memory(opts: &TlsOptions) -> Option<()> {
    use std::io::{Read, Write};

    let mut opts = opts.clone();
    opts.ca_file = None;
    let client = crate::tls::client_config(
        &opts,
        ConnectionPlan::NewConnection,
        HttpVersion::Http1,
        Arc::new(AtomicU64::new(0)),
    )
    .ok()?;
    let cert = CertificateDer::from_pem_slice(WARM_CERT.as_bytes()).ok()?;
    let key = PrivateKeyDer::from_pem_slice(WARM_KEY.as_bytes()).ok()?;
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_protocol_versions(rustls::ALL_VERSIONS)
    .ok()?
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .ok()?;
    let name = rustls::pki_types::ServerName::try_from("warm-up.invalid").ok()?;
    let mut c = rustls::ClientConnection::new(Arc::new(client), name).ok()?;
    let mut s = rustls::ServerConnection::new(Arc::new(server)).ok()?;
    let mut wire = Vec::new();
    let payload = [0x55u8; 1024];
    let _ = c.writer().write_all(&payload);
    // A handshake takes a few flights; the bound stops a stuck one.
    for _ in 0..16 {
        wire.clear();
        c.write_tls(&mut wire).ok()?;
        s.read_tls(&mut wire.as_slice()).ok()?;
        s.process_new_packets().ok()?;
        if !s.is_handshaking() {
            let _ = s.writer().write_all(&payload);
        }
        wire.clear();
        s.write_tls(&mut wire).ok()?;
        c.read_tls(&mut wire.as_slice()).ok()?;
        c.process_new_packets().ok()?;
        let mut got = Vec::new();
        let _ = c.reader().read_to_end(&mut got);
        if !got.is_empty() {
            return Some(());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_in_memory_handshake_completes_with_default_and_pinned_options() {
        assert_eq!(handshake_in_memory(&TlsOptions::default()), Some(()));
        let pinned = TlsOptions {
            max_version: Some(crate::config::TlsVersion::Tls12),
            groups: vec!["secp256r1".into()],
            ..TlsOptions::default()
        };
        assert_eq!(handshake_in_memory(&pinned), Some(()));
    }
}
