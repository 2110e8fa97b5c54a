//! Certificate compression (RFC 8879): which algorithms tern offers, the
//! cache of compressed chains, and how big a chain is once compressed.
//!
//! A TLS 1.3 client that lists brotli or zlib in `compress_certificate`
//! gets the server's Certificate message compressed (rustls picks tern's
//! order: brotli first). A chain that overflows the initial congestion
//! window whole often fits compressed, which saves the full handshake a
//! round trip. Compressing costs CPU, so each compressed chain is kept:
//! rustls's `CompressionCache` compresses a chain once at its best level
//! and serves the stored bytes afterwards; tern sizes it so that every
//! certificate of a listener stays in it.

use std::sync::Arc;

use rustls::compress::{
    CertCompressor, CompressionCache, CompressionLevel, BROTLI_COMPRESSOR, ZLIB_COMPRESSOR,
};
use rustls::pki_types::CertificateDer;
use rustls::sign::CertifiedKey;
use rustls::CertificateCompressionAlgorithm;

/// The compressors tern offers, in its order of preference: brotli
/// compresses certificates best and is what browsers ask for; zlib is what
/// OpenSSL-based clients can add.
pub fn compressors() -> Vec<&'static dyn CertCompressor> {
    vec![BROTLI_COMPRESSOR, ZLIB_COMPRESSOR]
}

/// Most compressed chains a listener keeps.
const MAX_CACHED_CHAINS: usize = 256;

/// A cache holding every compressed chain `certs` certificates can need:
/// per certificate two algorithms, with and without the OCSP staple (a
/// client that did not ask for the staple gets the chain without it, and
/// the cache keys on the exact message). Bounded by 256 entries; each is
/// the chain twice (whole, as the key, and compressed).
pub fn cache_for(certs: usize) -> Arc<CompressionCache> {
    Arc::new(CompressionCache::new(
        (certs.max(1) * 2 * 2).min(MAX_CACHED_CHAINS),
    ))
}

/// Most certificates whose chains are compressed ahead of the first
/// handshake: each costs a few milliseconds of brotli at its best level
/// when a configuration is built (start and reload).
const MAX_PRIMED_CERTS: usize = 64;

/// Compresses every chain of `certs` into `cache` with each of tern's
/// compressors, with and without its staple, so no handshake waits for a
/// compression (without this the first full handshake per chain and
/// algorithm compresses inline, at the best level). Certificates past 64
/// compress on first use instead.
pub fn prime(cache: &CompressionCache, certs: &[Arc<CertifiedKey>]) {
    for certified in certs.iter().take(MAX_PRIMED_CERTS) {
        for compressor in compressors() {
            // A failed compression is tried again (and then sent whole)
            // in the handshake: nothing to report here.
            let _ = cache.prime(compressor, &certified.cert, None);
            if let Some(ocsp) = certified.ocsp.as_deref().filter(|o| !o.is_empty()) {
                let _ = cache.prime(compressor, &certified.cert, Some(ocsp));
            }
        }
    }
}

/// The name of an algorithm for logs and reports: "brotli", "zlib", "zstd".
pub fn algorithm_name(algorithm: CertificateCompressionAlgorithm) -> &'static str {
    match algorithm {
        CertificateCompressionAlgorithm::Brotli => "brotli",
        CertificateCompressionAlgorithm::Zlib => "zlib",
        CertificateCompressionAlgorithm::Zstd => "zstd",
        _ => "other",
    }
}

/// The TLS 1.3 Certificate message body rustls sends for this chain
/// (RFC 8446 4.4.2: empty request context, each certificate with its
/// extensions; the staple as the leaf's status_request extension): the
/// bytes certificate compression works on.
pub fn certificate_message(chain: &[CertificateDer<'_>], ocsp: Option<&[u8]>) -> Vec<u8> {
    let mut entries = Vec::new();
    for (i, cert) in chain.iter().enumerate() {
        put_u24(&mut entries, cert.len());
        entries.extend_from_slice(cert);
        match ocsp.filter(|o| i == 0 && !o.is_empty()) {
            Some(ocsp) => {
                // status_request (5): CertificateStatus { ocsp(1), u24 response }.
                let ext_len = 4 + 1 + 3 + ocsp.len();
                entries.extend_from_slice(&(ext_len as u16).to_be_bytes());
                entries.extend_from_slice(&5u16.to_be_bytes());
                entries.extend_from_slice(&((ext_len - 4) as u16).to_be_bytes());
                entries.push(1);
                put_u24(&mut entries, ocsp.len());
                entries.extend_from_slice(ocsp);
            }
            None => entries.extend_from_slice(&0u16.to_be_bytes()),
        }
    }
    let mut message = Vec::with_capacity(entries.len() + 4);
    message.push(0); // certificate_request_context
    put_u24(&mut message, entries.len());
    message.extend_from_slice(&entries);
    message
}

/// Sizes of one chain's Certificate message, whole and compressed the way
/// tern's cache stores it (the algorithm's best level).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressedSizes {
    /// The Certificate message body, uncompressed.
    pub whole: usize,
    /// Compressed with brotli; None if compression failed.
    pub brotli: Option<usize>,
    /// Compressed with zlib; None if compression failed.
    pub zlib: Option<usize>,
}

/// Compresses a chain (with its staple) as a client offering each
/// algorithm would receive it. Costs a few milliseconds: for start-up
/// warnings and reports, not per handshake.
pub fn compressed_sizes(chain: &[CertificateDer<'_>], ocsp: Option<&[u8]>) -> CompressedSizes {
    let message = certificate_message(chain, ocsp);
    // CompressedCertificate adds algorithm (2), uncompressed length (3)
    // and the compressed length (3).
    let size = |c: &dyn CertCompressor| {
        c.compress(message.clone(), CompressionLevel::Amortized)
            .ok()
            .map(|out| out.len() + 8)
    };
    CompressedSizes {
        whole: message.len(),
        brotli: size(BROTLI_COMPRESSOR),
        zlib: size(ZLIB_COMPRESSOR),
    }
}

fn put_u24(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_be_bytes()[1..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_message_frames_each_certificate_and_the_staple() {
        let leaf = CertificateDer::from(vec![0xAA; 3]);
        let ca = CertificateDer::from(vec![0xBB; 2]);
        let m = certificate_message(&[leaf.clone(), ca.clone()], None);
        // context 0, list length 3+3+2 + 3+2+2 = 15.
        assert_eq!(
            m,
            [
                &[0, 0, 0, 15][..],
                &[0, 0, 3, 0xAA, 0xAA, 0xAA, 0, 0],
                &[0, 0, 2, 0xBB, 0xBB, 0, 0]
            ]
            .concat()
        );
        let stapled = certificate_message(&[leaf], Some(&[1, 2]));
        assert_eq!(
            &stapled[10..],
            &[0, 10, 0, 5, 0, 6, 1, 0, 0, 2, 1, 2][..],
            "{stapled:?}"
        );
    }

    #[test]
    fn a_repetitive_chain_compresses_with_both_algorithms() {
        let chain = [CertificateDer::from(vec![7u8; 4000])];
        let sizes = compressed_sizes(&chain, None);
        assert_eq!(sizes.whole, 4 + 3 + 4000 + 2);
        for size in [sizes.brotli, sizes.zlib] {
            let size = size.expect("compressed");
            assert!(size < 200, "{sizes:?}");
        }
    }
}
