//! The state directory: the account, each certificate with its key, and
//! the locks that keep a fleet sharing the directory from ordering the same
//! certificate at once.
//!
//! ```text
//! STATE_DIR/                     0700
//!   accounts/<directory-id>.json  account key and URL (0600)
//!   certs/<cert-id>.pem           private key + chain, one file (0600)
//!   locks/<cert-id>.lock          "<expiry unix> <host> <pid>" while ordering
//!   challenges/tls-alpn-01/<name> challenge answers while a validation runs,
//!   challenges/http-01/<token>    for whichever instance the CA reaches
//! ```
//!
//! A certificate and its key are one file, replaced by rename, so a reader
//! (another instance) never sees a new chain with the old key.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::settings::{AcmeSettings, CertSpec};
use crate::AcmeError;

/// The state directory of one tern instance (or a fleet sharing it).
#[derive(Debug)]
pub struct Store {
    root: PathBuf,
}

/// A certificate read from the store.
pub struct Stored {
    /// Key and chain as PEM (what [`tern_tls::certs::from_pem`] takes).
    pub pem: Vec<u8>,
    /// The leaf, DER.
    pub leaf: Vec<u8>,
    /// Validity of the leaf.
    pub not_before: SystemTime,
    /// Validity of the leaf.
    pub not_after: SystemTime,
}

impl Stored {
    /// When to renew: two thirds into the certificate's lifetime (30 days
    /// before the end of a 90-day certificate).
    pub fn renew_at(&self) -> SystemTime {
        let life = self
            .not_after
            .duration_since(self.not_before)
            .unwrap_or(Duration::ZERO);
        self.not_before + life * 2 / 3
    }
}

impl Store {
    /// Opens (creating, mode 0700) the state directory.
    pub fn open(root: &Path) -> Result<Self, AcmeError> {
        for dir in [
            root.to_path_buf(),
            root.join("accounts"),
            root.join("certs"),
            root.join("locks"),
            root.join("challenges"),
            root.join("challenges/tls-alpn-01"),
            root.join("challenges/http-01"),
        ] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(AcmeError::state(&dir))?;
        }
        // An existing directory keeps its mode; make it private.
        fs::set_permissions(root, fs::Permissions::from_mode(0o700))
            .map_err(AcmeError::state(root))?;
        Ok(Store {
            root: root.to_path_buf(),
        })
    }

    /// The file name stem for a certificate: readable first name and key
    /// type, and a digest of the directory and all names, so two
    /// certificates (or a staging and a production one) never share files.
    pub fn cert_id(settings: &AcmeSettings, spec: &CertSpec) -> String {
        let mut names = spec.names.clone();
        names.sort();
        let digest = sha256_hex(&format!(
            "{}\n{}\n{}",
            settings.directory,
            names.join(","),
            spec.key.name()
        ));
        let first = spec.names.first().map(String::as_str).unwrap_or("cert");
        format!("{first}-{}-{}", spec.key.name(), &digest[..12])
    }

    fn cert_path(&self, id: &str) -> PathBuf {
        self.root.join("certs").join(format!("{id}.pem"))
    }

    fn account_path(&self, directory: &str) -> PathBuf {
        self.root
            .join("accounts")
            .join(format!("{}.json", &sha256_hex(directory)[..16]))
    }

    /// The stored certificate, if there is one whose leaf parses.
    pub fn load(&self, id: &str) -> Result<Option<Stored>, AcmeError> {
        let path = self.cert_path(id);
        let pem = match fs::read(&path) {
            Ok(pem) => pem,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(AcmeError::state(&path)(e)),
        };
        let leaf = rustls_pki_types::pem::PemObject::pem_slice_iter(&pem)
            .next()
            .and_then(|c: Result<rustls_pki_types::CertificateDer<'static>, _>| c.ok())
            .ok_or_else(|| {
                AcmeError::Certificate(format!("{}: no certificate in it", path.display()))
            })?;
        let (not_before, not_after) = validity(&leaf)
            .map_err(|e| AcmeError::Certificate(format!("{}: {e}", path.display())))?;
        Ok(Some(Stored {
            leaf: leaf.to_vec(),
            pem,
            not_before,
            not_after,
        }))
    }

    /// Replaces the stored certificate (key + chain) atomically.
    pub fn save(&self, id: &str, pem: &[u8]) -> Result<(), AcmeError> {
        write_private(&self.cert_path(id), pem)
    }

    /// Where challenge answers are shared with other instances.
    pub fn challenge_dir(&self) -> PathBuf {
        self.root.join("challenges")
    }

    /// Shares a challenge answer (`kind` is "tls-alpn-01" or "http-01").
    pub fn publish_challenge(&self, kind: &str, key: &str, answer: &str) -> Result<(), AcmeError> {
        write_private(
            &self.challenge_dir().join(kind).join(key),
            answer.as_bytes(),
        )
    }

    /// Removes a shared challenge answer (best effort: a leftover answers
    /// a validation that no longer exists).
    pub fn withdraw_challenge(&self, kind: &str, key: &str) {
        let _ = fs::remove_file(self.challenge_dir().join(kind).join(key));
    }

    /// The account credentials kept for `directory`, if any.
    pub fn load_account(
        &self,
        directory: &str,
    ) -> Result<Option<instant_acme::AccountCredentials>, AcmeError> {
        let path = self.account_path(directory);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                AcmeError::Certificate(format!("{}: not an account file: {e}", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(AcmeError::state(&path)(e)),
        }
    }

    /// Keeps the account credentials for `directory`.
    pub fn save_account(
        &self,
        directory: &str,
        credentials: &instant_acme::AccountCredentials,
    ) -> Result<(), AcmeError> {
        let json = serde_json::to_vec_pretty(credentials)
            .map_err(|e| AcmeError::Certificate(e.to_string()))?;
        write_private(&self.account_path(directory), &json)
    }

    /// Takes the ordering lock for `id` unless another live holder has it.
    /// A lock older than its expiry (a holder that died) is taken over.
    pub fn try_lock(&self, id: &str, ttl: Duration) -> Result<Option<LockGuard>, AcmeError> {
        let path = self.root.join("locks").join(format!("{id}.lock"));
        let host = fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "unknown-host".into());
        let expiry = unix_now() + ttl.as_secs();
        let content = format!("{expiry} {host} {}\n", std::process::id());
        for _ in 0..2 {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(mut file) => {
                    file.write_all(content.as_bytes())
                        .map_err(AcmeError::state(&path))?;
                    return Ok(Some(LockGuard { path, content }));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let held_until = fs::read_to_string(&path)
                        .ok()
                        .and_then(|t| t.split_whitespace().next()?.parse::<u64>().ok());
                    match held_until {
                        Some(t) if t > unix_now() => return Ok(None),
                        // Expired, or being written this instant (empty):
                        // an empty one is given its writer's chance first.
                        None if fs::metadata(&path)
                            .and_then(|m| m.modified())
                            .is_ok_and(|m| {
                                m.elapsed().unwrap_or_default() < Duration::from_secs(5)
                            }) =>
                        {
                            return Ok(None)
                        }
                        _ => {
                            tracing::warn!(
                                "ACME lock {} expired (its holder died?); taking it over",
                                path.display()
                            );
                            let _ = fs::remove_file(&path);
                        }
                    }
                }
                Err(e) => return Err(AcmeError::state(&path)(e)),
            }
        }
        Ok(None)
    }
}

/// Held while ordering; removes the lock file when dropped, if it is
/// still ours.
#[derive(Debug)]
pub struct LockGuard {
    path: PathBuf,
    content: String,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if fs::read_to_string(&self.path).is_ok_and(|c| c == self.content) {
            let _ = fs::remove_file(&self.path);
        }
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), AcmeError> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let result = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(AcmeError::state(path))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn sha256_hex(text: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, text.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// notBefore and notAfter of a DER certificate.
pub fn validity(der: &[u8]) -> Result<(SystemTime, SystemTime), String> {
    let (_, cert) =
        x509_parser::parse_x509_certificate(der).map_err(|e| format!("bad certificate: {e}"))?;
    let at = |t: x509_parser::time::ASN1Time| {
        let secs = t.timestamp();
        if secs >= 0 {
            UNIX_EPOCH + Duration::from_secs(secs as u64)
        } else {
            UNIX_EPOCH
        }
    };
    Ok((
        at(cert.validity().not_before),
        at(cert.validity().not_after),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "tern-acme-store-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        dir
    }

    #[test]
    fn state_is_private_and_locks_exclude_each_other() {
        let root = temp();
        let store = Store::open(&root).unwrap();
        let mode = fs::metadata(&root).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let first = store.try_lock("a", Duration::from_secs(60)).unwrap();
        assert!(first.is_some());
        assert!(store
            .try_lock("a", Duration::from_secs(60))
            .unwrap()
            .is_none());
        drop(first);
        let again = store.try_lock("a", Duration::from_secs(60)).unwrap();
        assert!(again.is_some());
        drop(again);
        // A lock whose holder died (expiry in the past) is taken over.
        fs::write(root.join("locks/b.lock"), "1 host 1\n").unwrap();
        assert!(store
            .try_lock("b", Duration::from_secs(60))
            .unwrap()
            .is_some());

        store.save("c", b"not pem").unwrap();
        let mode = fs::metadata(root.join("certs/c.pem"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        assert!(store.load("c").is_err());
        assert!(store.load("missing").unwrap().is_none());
        fs::remove_dir_all(&root).unwrap();
    }
}
