//! Which CPU features the crypto provider can use on this machine.
//!
//! aws-lc picks its assembly paths at run time from CPUID; a build or a VM
//! that hides AES-NI or PCLMULQDQ silently runs bulk crypto several times
//! slower. We report what the CPU offers so the start-up log and `tern speed`
//! make such a machine obvious.

use std::fmt;

/// CPU features relevant to TLS crypto speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuFeatures {
    /// AES round instructions (AES-GCM bulk encryption).
    pub aes_ni: bool,
    /// Carry-less multiply (GHASH for AES-GCM).
    pub pclmulqdq: bool,
    /// 256-bit integer SIMD (ChaCha20, P-256 field arithmetic).
    pub avx2: bool,
    /// Vector AES on 256/512-bit registers (fastest AES-GCM path).
    pub vaes: bool,
    /// Vector carry-less multiply (paired with VAES).
    pub vpclmulqdq: bool,
    /// SHA-256 instructions (HKDF, transcript hashing).
    pub sha_ni: bool,
    /// Multi-precision add-carry / multiply (RSA, ECC big-number code).
    pub adx_bmi2: bool,
    /// AVX-512 foundation.
    pub avx512f: bool,
    /// ARMv8 crypto extensions (AES/PMULL/SHA2), for aarch64 machines.
    pub arm_crypto: bool,
}

impl CpuFeatures {
    /// Detects the features of the CPU this process runs on.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            CpuFeatures {
                aes_ni: std::arch::is_x86_feature_detected!("aes"),
                pclmulqdq: std::arch::is_x86_feature_detected!("pclmulqdq"),
                avx2: std::arch::is_x86_feature_detected!("avx2"),
                vaes: std::arch::is_x86_feature_detected!("vaes"),
                vpclmulqdq: std::arch::is_x86_feature_detected!("vpclmulqdq"),
                sha_ni: std::arch::is_x86_feature_detected!("sha"),
                adx_bmi2: std::arch::is_x86_feature_detected!("adx")
                    && std::arch::is_x86_feature_detected!("bmi2"),
                avx512f: std::arch::is_x86_feature_detected!("avx512f"),
                arm_crypto: false,
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            CpuFeatures {
                arm_crypto: std::arch::is_aarch64_feature_detected!("aes")
                    && std::arch::is_aarch64_feature_detected!("pmull")
                    && std::arch::is_aarch64_feature_detected!("sha2"),
                ..CpuFeatures::default()
            }
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            CpuFeatures::default()
        }
    }

    /// True when AES-GCM runs in hardware (AES-NI + PCLMULQDQ, or ARM crypto).
    pub fn aes_gcm_accelerated(&self) -> bool {
        (self.aes_ni && self.pclmulqdq) || self.arm_crypto
    }

    /// Names of the features present, in a fixed order.
    pub fn names(&self) -> Vec<&'static str> {
        let all = [
            (self.aes_ni, "AES-NI"),
            (self.pclmulqdq, "PCLMULQDQ"),
            (self.avx2, "AVX2"),
            (self.vaes, "VAES"),
            (self.vpclmulqdq, "VPCLMULQDQ"),
            (self.sha_ni, "SHA-NI"),
            (self.adx_bmi2, "ADX+BMI2"),
            (self.avx512f, "AVX-512F"),
            (self.arm_crypto, "ARMv8-crypto"),
        ];
        all.iter().filter(|(on, _)| *on).map(|(_, n)| *n).collect()
    }
}

impl fmt::Display for CpuFeatures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = self.names();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join(" "))
        }
    }
}

/// The CPU model name from /proc/cpuinfo, when readable.
pub fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_lists_detected_features_or_none() {
        let f = CpuFeatures::default();
        assert_eq!(f.to_string(), "none");
        let f = CpuFeatures {
            aes_ni: true,
            pclmulqdq: true,
            ..CpuFeatures::default()
        };
        assert_eq!(f.to_string(), "AES-NI PCLMULQDQ");
        assert!(f.aes_gcm_accelerated());
    }
}
