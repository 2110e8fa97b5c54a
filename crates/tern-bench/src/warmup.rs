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

use rustls::crypto::SupportedKxGroup;

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
