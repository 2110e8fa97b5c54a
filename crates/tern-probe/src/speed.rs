//! `tern speed`: what this machine's TLS crypto (aws-lc through aws-lc-rs,
//! the provider tern uses) can do on one core, with and without the CPU
//! features it would use.
//!
//! aws-lc reads `OPENSSL_ia32cap` once, at its start-up, to mask CPUID bits;
//! it cannot be changed in a running process. The "features off" figures
//! therefore come from a child process (the same executable, re-run with
//! arguments the caller provides) started with that variable set. We then
//! check from the numbers that the mask took effect.

use std::ffi::OsString;
use std::process::Command;
use std::time::{Duration, Instant};

use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::agreement::{self, EphemeralPrivateKey, UnparsedPublicKey};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, EcdsaKeyPair, RsaKeyPair};
use serde::{Deserialize, Serialize};
use tern_tls::cpu::CpuFeatures;

/// Environment variable aws-lc (like OpenSSL) reads to mask CPU features.
pub const IA32CAP_ENV: &str = "OPENSSL_ia32cap";

/// The mask used for "features off": in CPUID leaf 1 ECX, clear PCLMULQDQ
/// (bit 1), SSSE3 (9), MOVBE (22), AES-NI (25) and AVX (28); clear all of
/// leaf 7 (AVX2, BMI1/2, ADX, SHA-NI, AVX-512, VAES, VPCLMULQDQ). What is
/// left is the baseline x86-64 code paths.
pub const IA32CAP_MASK: &str = "~0x1240020200000000:~0xffffffffffffffff";

/// Bulk-cipher input per operation: one full TLS record.
pub const RECORD_BYTES: usize = 16 * 1024;

/// One measured rate.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Rate {
    pub name: String,
    /// MB/s (10^6 bytes) for ciphers, operations/s otherwise.
    pub per_second: f64,
}

/// Handshake ceiling for one certificate type.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Ceiling {
    pub certificate: String,
    pub key_exchange: String,
    /// 1 / (signature time + key agreement time): what one core could do if
    /// the handshake cost nothing but its public-key crypto.
    pub handshakes_per_second: f64,
}

/// All figures of one run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SpeedFigures {
    /// AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305 seal of 16 KiB records.
    pub bulk_mb_per_s: Vec<Rate>,
    /// ECDSA P-256, ECDSA P-384, RSA-2048 (PSS-SHA256) signatures/s.
    pub signatures_per_s: Vec<Rate>,
    /// X25519 and P-256: key generation plus agreement, as a server does;
    /// X25519MLKEM768: the server's whole share of the hybrid (ML-KEM-768
    /// encapsulation plus X25519), through rustls' own provider call.
    pub key_agreements_per_s: Vec<Rate>,
    pub handshake_ceilings: Vec<Ceiling>,
}

/// `tern speed`'s report.
#[derive(Debug, Clone, Serialize)]
pub struct SpeedReport {
    /// The measuring binary's version and build (set by the caller: a
    /// library cannot know how the executable was built).
    pub binary: Option<String>,
    pub cpu_model: Option<String>,
    /// CPU features present that the provider can use.
    pub cpu_features: Vec<&'static str>,
    pub with_features: SpeedFigures,
    /// Same figures with the features masked; `None` when not measured.
    pub without_features: Option<SpeedFigures>,
    /// The `OPENSSL_ia32cap` value used for the masked run.
    pub mask: Option<String>,
    /// Whether the masked run was measurably slower (AES-GCM below half),
    /// i.e. whether the mask reached the provider.
    pub mask_took_effect: Option<bool>,
    pub notes: Vec<String>,
}

/// Errors of `tern speed`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpeedError {
    #[error("crypto provider refused an operation: {0}")]
    Crypto(&'static str),
    #[error("could not run the masked measurement: {0}")]
    Child(String),
}

fn crypto<T, E>(r: Result<T, E>, what: &'static str) -> Result<T, SpeedError> {
    r.map_err(|_| SpeedError::Crypto(what))
}

/// Runs `op` repeatedly for about `budget`; returns operations per second.
fn rate(
    budget: Duration,
    mut op: impl FnMut() -> Result<(), SpeedError>,
) -> Result<f64, SpeedError> {
    op()?; // warm caches and lazy initialisation outside the clock
    let start = Instant::now();
    let mut n: u64 = 0;
    while start.elapsed() < budget {
        for _ in 0..8 {
            op()?;
        }
        n += 8;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// Measures every figure in this process, spending about `budget` on each.
pub fn measure(budget: Duration) -> Result<SpeedFigures, SpeedError> {
    let rng = SystemRandom::new();
    let mut bulk = Vec::new();
    for (name, alg) in [
        ("AES-128-GCM", &aead::AES_128_GCM),
        ("AES-256-GCM", &aead::AES_256_GCM),
        ("ChaCha20-Poly1305", &aead::CHACHA20_POLY1305),
    ] {
        let key_bytes = vec![0x42u8; alg.key_len()];
        let key = LessSafeKey::new(crypto(UnboundKey::new(alg, &key_bytes), "AEAD key")?);
        let mut record = vec![0u8; RECORD_BYTES];
        let ops = rate(budget, || {
            // A fixed nonce is fine: nothing sealed here is ever sent.
            let nonce = Nonce::assume_unique_for_key([0u8; 12]);
            let _tag = crypto(
                key.seal_in_place_separate_tag(nonce, Aad::empty(), &mut record),
                "AEAD seal",
            )?;
            Ok(())
        })?;
        bulk.push(Rate {
            name: name.into(),
            per_second: ops * RECORD_BYTES as f64 / 1e6,
        });
    }

    let msg = [0x17u8; 32];
    let mut sigs = Vec::new();
    for (name, alg) in [
        ("ECDSA P-256", &signature::ECDSA_P256_SHA256_ASN1_SIGNING),
        ("ECDSA P-384", &signature::ECDSA_P384_SHA384_ASN1_SIGNING),
    ] {
        let key = crypto(EcdsaKeyPair::generate(alg), "ECDSA key generation")?;
        let ops = rate(budget, || {
            crypto(key.sign(&rng, &msg), "ECDSA sign").map(|_| ())
        })?;
        sigs.push(Rate {
            name: name.into(),
            per_second: ops,
        });
    }
    let rsa = crypto(
        RsaKeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048),
        "RSA key generation",
    )?;
    let mut sig = vec![0u8; rsa.public_modulus_len()];
    let ops = rate(budget, || {
        crypto(
            rsa.sign(&signature::RSA_PSS_SHA256, &rng, &msg, &mut sig),
            "RSA sign",
        )
    })?;
    sigs.push(Rate {
        name: "RSA-2048".into(),
        per_second: ops,
    });

    let mut kx = Vec::new();
    for (name, alg) in [
        ("X25519", &agreement::X25519),
        ("P-256", &agreement::ECDH_P256),
    ] {
        let peer = crypto(EphemeralPrivateKey::generate(alg, &rng), "key generation")?;
        let peer_public = crypto(peer.compute_public_key(), "public key")?;
        let peer_bytes = peer_public.as_ref().to_vec();
        let ops = rate(budget, || {
            let mine = crypto(EphemeralPrivateKey::generate(alg, &rng), "key generation")?;
            let _share = crypto(mine.compute_public_key(), "public key")?;
            crypto(
                agreement::agree_ephemeral(
                    mine,
                    UnparsedPublicKey::new(alg, &peer_bytes),
                    (),
                    |k| Ok(k.len()),
                ),
                "key agreement",
            )?;
            Ok(())
        })?;
        kx.push(Rate {
            name: name.into(),
            per_second: ops,
        });
    }

    kx.push(Rate {
        name: "X25519MLKEM768".into(),
        per_second: hybrid_rate(budget)?,
    });

    // Every signature with X25519, then the two certificates tern serves
    // most with the hybrid group browsers offer first.
    let mut handshake_ceilings = Vec::new();
    for (sig, group) in sigs.iter().map(|s| (s, &kx[0])).chain(
        sigs.iter()
            .filter(|s| s.name != "ECDSA P-384")
            .map(|s| (s, &kx[2])),
    ) {
        handshake_ceilings.push(Ceiling {
            certificate: sig.name.clone(),
            key_exchange: group.name.clone(),
            handshakes_per_second: 1.0 / (1.0 / sig.per_second + 1.0 / group.per_second),
        });
    }
    Ok(SpeedFigures {
        bulk_mb_per_s: bulk,
        signatures_per_s: sigs,
        key_agreements_per_s: kx,
        handshake_ceilings,
    })
}

/// Server side of X25519MLKEM768 per second: rustls' `start_and_complete`
/// on a client's share, the call a TLS 1.3 server makes for that group.
fn hybrid_rate(budget: Duration) -> Result<f64, SpeedError> {
    let group = rustls::crypto::aws_lc_rs::kx_group::X25519MLKEM768;
    let client = crypto(group.start(), "X25519MLKEM768 client share")?;
    let share = client.pub_key().to_vec();
    rate(budget, || {
        crypto(
            group.start_and_complete(&share),
            "X25519MLKEM768 encapsulation",
        )
        .map(|_| ())
    })
}

/// Re-runs this executable with `child_args` and [`IA32CAP_ENV`] set to
/// [`IA32CAP_MASK`]; the child must print [`SpeedFigures`] as JSON on stdout.
pub fn measure_masked(child_args: &[OsString]) -> Result<SpeedFigures, SpeedError> {
    let exe = std::env::current_exe().map_err(|e| SpeedError::Child(e.to_string()))?;
    let out = Command::new(exe)
        .args(child_args)
        .env(IA32CAP_ENV, IA32CAP_MASK)
        .output()
        .map_err(|e| SpeedError::Child(e.to_string()))?;
    if !out.status.success() {
        return Err(SpeedError::Child(format!(
            "child exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| SpeedError::Child(format!("bad child output: {e}")))
}

/// Measures with features, then (on x86-64) without them in a child.
pub fn run(budget: Duration, child_args: Option<&[OsString]>) -> Result<SpeedReport, SpeedError> {
    let features = CpuFeatures::detect();
    let with_features = measure(budget)?;
    let mut notes = Vec::new();
    let (without_features, mask) = match child_args {
        Some(args) if cfg!(target_arch = "x86_64") => match measure_masked(args) {
            Ok(f) => (Some(f), Some(IA32CAP_MASK.to_string())),
            Err(e) => {
                notes.push(e.to_string());
                (None, None)
            }
        },
        Some(_) => {
            notes.push("CPU features can only be masked on x86-64 (OPENSSL_ia32cap)".into());
            (None, None)
        }
        None => (None, None),
    };
    let mask_took_effect = without_features.as_ref().map(|w| {
        let on = bulk(&with_features, "AES-128-GCM");
        let off = bulk(w, "AES-128-GCM");
        off < on * 0.5
    });
    if mask_took_effect == Some(false) {
        notes.push(
            "the masked run was not clearly slower: the mask did not reach the provider, or \
             this CPU lacks the features to begin with"
                .into(),
        );
    }
    if cfg!(debug_assertions) {
        notes.push(
            "this is a debug build: the provider's C code is compiled without optimisation, \
             so figures on paths without assembly are far too low; measure with a release build"
                .into(),
        );
    }
    if !features.aes_gcm_accelerated() {
        notes
            .push("this CPU has no AES-GCM acceleration: expect AES-GCM far below ChaCha20".into());
    }
    Ok(SpeedReport {
        binary: None,
        cpu_model: tern_tls::cpu::cpu_model(),
        cpu_features: features.names(),
        with_features,
        without_features,
        mask,
        mask_took_effect,
        notes,
    })
}

fn bulk(f: &SpeedFigures, name: &str) -> f64 {
    f.bulk_mb_per_s
        .iter()
        .find(|r| r.name == name)
        .map_or(0.0, |r| r.per_second)
}

impl SpeedFigures {
    /// One-line JSON, the form a masked child prints for its parent.
    pub fn to_json(&self) -> String {
        // Serializing plain structs of strings and numbers cannot fail.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// One list of rates of a [`SpeedFigures`] (to find its counterpart in the
/// run without CPU features).
type RatesOf = fn(&SpeedFigures) -> &[Rate];

impl SpeedReport {
    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The human report, one row per figure, with and without features.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        if let Some(binary) = &self.binary {
            let _ = writeln!(o, "Binary: {binary}");
        }
        let _ = writeln!(o, "CPU: {}", self.cpu_model.as_deref().unwrap_or("unknown"));
        let feats = if self.cpu_features.is_empty() {
            "none".to_string()
        } else {
            self.cpu_features.join(" ")
        };
        let _ = writeln!(o, "CPU features the provider (aws-lc) can use: {feats}");
        if let Some(mask) = &self.mask {
            let _ = writeln!(o, "features off = {IA32CAP_ENV}={mask}");
        }
        let w = &self.with_features;
        let wo = self.without_features.as_ref();
        // Rows first, then the label column as wide as the longest label,
        // so no row pushes its figures out of line.
        let mut rows: Vec<(String, f64, Option<f64>)> = Vec::new();
        let find = |v: &[Rate], n: &str| v.iter().find(|r| r.name == n).map(|r| r.per_second);
        let groups: [(&[Rate], RatesOf, &str); 3] = [
            (&w.bulk_mb_per_s, |x| &x.bulk_mb_per_s, "MB/s"),
            (&w.signatures_per_s, |x| &x.signatures_per_s, "sign/s"),
            (
                &w.key_agreements_per_s,
                |x| &x.key_agreements_per_s,
                "agreements/s",
            ),
        ];
        for (rates, other, unit) in groups {
            for r in rates {
                let off = wo.and_then(|x| find(other(x), &r.name));
                rows.push((format!("{} {unit}", r.name), r.per_second, off));
            }
        }
        for c in &w.handshake_ceilings {
            let off = wo.and_then(|x| {
                x.handshake_ceilings
                    .iter()
                    .find(|d| d.certificate == c.certificate && d.key_exchange == c.key_exchange)
                    .map(|d| d.handshakes_per_second)
            });
            rows.push((
                format!("handshakes {} + {} /s", c.certificate, c.key_exchange),
                c.handshakes_per_second,
                off,
            ));
        }
        let header = "one core";
        let width = rows
            .iter()
            .map(|(label, _, _)| label.chars().count())
            .chain([header.len()])
            .max()
            .unwrap_or(0);
        let _ = writeln!(
            o,
            "\n{header:<width$} {:>14} {:>14}",
            "features on", "features off"
        );
        for (label, on, off) in rows {
            let off = off.map_or("-".to_string(), |v| format!("{v:.0}"));
            let _ = writeln!(o, "{label:<width$} {on:>14.0} {off:>14}");
        }
        match self.mask_took_effect {
            Some(true) => {
                let _ = writeln!(
                    o,
                    "\nThe mask took effect: AES-GCM without the features is below half its speed."
                );
            }
            Some(false) => {
                let _ = writeln!(
                    o,
                    "\nThe mask did NOT clearly take effect (AES-GCM not slower)."
                );
            }
            None => {}
        }
        for n in &self.notes {
            let _ = writeln!(o, "note: {n}");
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_figure_is_measured_and_positive() {
        let f = measure(Duration::from_millis(20)).unwrap();
        assert_eq!(f.bulk_mb_per_s.len(), 3);
        assert_eq!(f.signatures_per_s.len(), 3);
        assert_eq!(f.key_agreements_per_s.len(), 3);
        assert_eq!(f.handshake_ceilings.len(), 5);
        let all = f
            .bulk_mb_per_s
            .iter()
            .chain(&f.signatures_per_s)
            .chain(&f.key_agreements_per_s);
        for r in all {
            assert!(r.per_second > 0.0, "{} measured {}", r.name, r.per_second);
        }
        // The ceiling is below both of its parts (computed from them).
        let p256 = &f.handshake_ceilings[0];
        assert!(p256.handshakes_per_second < f.signatures_per_s[0].per_second);
        assert!(p256.handshakes_per_second < f.key_agreements_per_s[0].per_second);
        assert_eq!(f.handshake_ceilings[3].key_exchange, "X25519MLKEM768");
        // Orders that hold on any CPU: the hybrid does X25519 and more,
        // RSA-2048 signing is much slower than ECDSA P-256. Each figure is
        // 20 ms of wall time, so a loaded machine that deschedules this
        // thread inside one window can invert a pair (3 runs in 20 did here
        // at load average 25): the orders must hold in one of three
        // measurements. Swapped labels or figures fail all three.
        let ordered = |f: &SpeedFigures| {
            f.key_agreements_per_s[2].per_second < f.key_agreements_per_s[0].per_second
                && f.signatures_per_s[2].per_second < f.signatures_per_s[0].per_second
        };
        let mut tries = vec![f.clone()];
        while !ordered(tries.last().unwrap()) && tries.len() < 3 {
            tries.push(measure(Duration::from_millis(20)).unwrap());
        }
        assert!(
            ordered(tries.last().unwrap()),
            "hybrid not slower than X25519, or RSA not slower than P-256, in {} measurements: {:?}",
            tries.len(),
            tries
                .iter()
                .map(|t| (&t.key_agreements_per_s, &t.signatures_per_s))
                .collect::<Vec<_>>()
        );
        let json = serde_json::to_string(&f).unwrap();
        let back: SpeedFigures = serde_json::from_str(&json).unwrap();
        // serde_json may round the last bit of an f64; names and counts are exact.
        assert_eq!(back.signatures_per_s.len(), 3);
        for (a, b) in back.bulk_mb_per_s.iter().zip(&f.bulk_mb_per_s) {
            assert_eq!(a.name, b.name);
            assert!((a.per_second - b.per_second).abs() <= b.per_second * 1e-12);
        }
    }
}
