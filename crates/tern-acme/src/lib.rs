//! Certificates obtained and renewed over ACME (RFC 8555) while tern
//! serves: the account, the orders, TLS-ALPN-01 and HTTP-01 answers, the
//! state directory a fleet can share, and the renewal loop.
//!
//! ```text
//!  Acme::prepare(spec) ──▶ ManagedCert (slot: stored cert, or a placeholder)
//!        │                        ▲ slot.set(new) — next handshakes get it
//!  Acme::run(managed) ── loop: due? ─ lock ─ order (instant-acme) ─ save ─┘
//!                                  └ locked by another instance: wait, then read its result
//! ```
//!
//! Serving never waits on the CA: a valid stored certificate is served
//! from the first handshake; a missing one is replaced by a self-signed
//! placeholder until the CA has issued. Failures are retried with
//! exponential backoff and jitter and reported in [`CertStatus`].

#![forbid(unsafe_code, unused_must_use)]
#![warn(missing_docs)]

mod ari;
mod error;
mod order;
mod settings;
mod status;
pub mod store;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use instant_acme::{Account, ExternalAccountKey, NewAccount};
use rustls::crypto::CryptoProvider;
use tern_tls::managed::{placeholder, CertSlot, ManagedCert};

pub use error::AcmeError;
pub use order::{Challenges, HttpTokens};
pub use settings::{
    check_name, AcmeSettings, CertSpec, Challenge, Eab, KeyType, LETS_ENCRYPT,
    LETS_ENCRYPT_STAGING, MAX_RETRY,
};
pub use status::{CertStatus, StatusSnapshot};
use store::{Store, Stored};

/// How long an ordering lock holds before others may take it over.
const LOCK_TTL: Duration = Duration::from_secs(10 * 60);
/// How often an instance waiting on another's lock looks again.
const LOCKED_WAIT: Duration = Duration::from_secs(3);
/// The longest sleep between two looks at the stored certificate, so a
/// certificate another instance renewed early is picked up within it.
const RECHECK: Duration = Duration::from_secs(3600);
/// Bound on asking the CA for renewal information.
const ARI_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on one whole order (validation and issuance included).
const ORDER_TIMEOUT: Duration = Duration::from_secs(180);

/// One ACME CA and state directory, shared by all certificates ordered
/// from it.
pub struct Acme {
    settings: AcmeSettings,
    store: Store,
    challenges: Challenges,
    provider: Arc<CryptoProvider>,
    account: tokio::sync::Mutex<Option<Account>>,
}

/// A certificate being kept current: what the TLS resolver reads and what
/// the renewal loop writes.
#[derive(Clone, Debug)]
pub struct Managed {
    /// Names, key type and challenge.
    pub spec: CertSpec,
    /// File stem in the state directory.
    pub id: String,
    /// The slot the TLS listeners serve from.
    pub cert: ManagedCert,
    /// Counters and the last error, for metrics and /health.
    pub status: Arc<CertStatus>,
}

impl Acme {
    /// Opens the state directory (creating it, mode 0700).
    pub fn new(
        settings: AcmeSettings,
        challenges: Challenges,
        provider: Arc<CryptoProvider>,
    ) -> Result<Arc<Self>, AcmeError> {
        let store = Store::open(&settings.state_dir)?;
        challenges.tls_alpn.share(store.challenge_dir());
        challenges.http.share(store.challenge_dir());
        Ok(Arc::new(Acme {
            settings,
            store,
            challenges,
            provider,
            account: tokio::sync::Mutex::new(None),
        }))
    }

    /// The settings this CA was opened with.
    pub fn settings(&self) -> &AcmeSettings {
        &self.settings
    }

    /// Where challenge answers are published.
    pub fn challenges(&self) -> &Challenges {
        &self.challenges
    }

    /// A slot for `spec`, serving the stored certificate at once when it is
    /// still valid, else a self-signed placeholder. Never contacts the CA.
    pub fn prepare(&self, spec: CertSpec) -> Result<Managed, AcmeError> {
        let id = Store::cert_id(&self.settings, &spec);
        let status = Arc::new(CertStatus::new(spec.label()));
        let stored = match self.store.load(&id) {
            Ok(stored) => stored.and_then(|s| self.usable(&spec, s)),
            Err(e) => {
                tracing::warn!("ACME {}: stored certificate unusable: {e}", spec.label());
                None
            }
        };
        let certified = match stored {
            Some((stored, loaded)) => {
                status.installed(stored.not_after, true);
                tracing::info!(
                    "ACME {}: serving the stored certificate (valid {}s more)",
                    spec.label(),
                    tern_tls::managed::seconds_left(stored.not_after)
                );
                loaded.certified
            }
            None => {
                let loaded = placeholder(&spec.names, spec.key.kind(), &self.provider)
                    .map_err(|e| AcmeError::Certificate(e.to_string()))?;
                tracing::info!(
                    "ACME {}: no valid certificate stored yet; a self-signed placeholder is served until the CA issues one",
                    spec.label()
                );
                loaded.certified
            }
        };
        Ok(Managed {
            cert: ManagedCert {
                names: spec.names.clone(),
                key_kind: spec.key.kind(),
                slot: Arc::new(CertSlot::new(certified)),
            },
            spec,
            id,
            status,
        })
    }

    /// Parses a stored certificate for serving; None (with a warning) if it
    /// is expired, not yet valid or broken.
    fn usable(&self, spec: &CertSpec, stored: Stored) -> Option<(Stored, tern_tls::LoadedCert)> {
        match tern_tls::certs::from_pem(&stored.pem, &stored.pem, "ACME state", &self.provider) {
            Ok(loaded) => Some((stored, loaded)),
            Err(e) => {
                tracing::warn!("ACME {}: stored certificate not served: {e}", spec.label());
                None
            }
        }
    }

    /// Keeps `managed` current until the task is aborted: renews two thirds
    /// into the certificate's lifetime, takes certificates another instance
    /// stored, and retries failures with backoff.
    pub async fn run(self: Arc<Self>, managed: Managed) {
        let label = managed.spec.label();
        let mut installed: Option<Vec<u8>> = None;
        let mut renew_at: Option<SystemTime> = None;
        let mut failures: u32 = 0;
        loop {
            // What is on disk: ours from before a restart, or another
            // instance's newer one.
            match self.store.load(&managed.id) {
                Ok(Some(stored)) if installed.as_deref() != Some(&stored.leaf[..]) => {
                    let newer = renew_at.is_none_or(|r| stored.renew_at() >= r);
                    if newer {
                        if let Some((stored, loaded)) = self.usable(&managed.spec, stored) {
                            // The first look finds what prepare() already serves.
                            if installed.is_some() || managed.status.snapshot().not_after.is_none()
                            {
                                tracing::info!(
                                    "ACME {label}: serving the certificate found in the state directory (another instance obtained it)"
                                );
                            }
                            managed.cert.slot.set(loaded.certified);
                            managed.status.installed(stored.not_after, true);
                            renew_at = Some(stored.renew_at());
                            installed = Some(stored.leaf);
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("ACME {label}: {e}"),
            }
            // Not due yet: the CA may want it earlier (RFC 9773), asked
            // at most once per wake-up and never for long.
            if let (Some(own), Some(leaf)) = (renew_at, installed.as_deref()) {
                if own > SystemTime::now() {
                    let ask = async {
                        let account = self.account().await.ok()?;
                        ari::window(&account, leaf).await
                    };
                    let suggested = tokio::time::timeout(ARI_TIMEOUT, ask).await.ok().flatten();
                    let chosen = ari::choose(own, suggested);
                    if chosen < own {
                        tracing::info!(
                            "ACME {label}: the CA's renewal information asks for an early renewal (in {}s)",
                            chosen
                                .duration_since(SystemTime::now())
                                .unwrap_or_default()
                                .as_secs()
                        );
                    }
                    renew_at = Some(chosen);
                }
            }
            let now = SystemTime::now();
            if let Some(at) = renew_at.filter(|at| *at > now) {
                let wait = at.duration_since(now).unwrap_or_default().min(RECHECK);
                managed.status.next_attempt(now + wait);
                tokio::time::sleep(wait).await;
                continue;
            }
            let lock = match self.store.try_lock(&managed.id, LOCK_TTL) {
                Ok(Some(lock)) => lock,
                Ok(None) => {
                    // Another instance is ordering it: read its result soon.
                    tracing::debug!("ACME {label}: another instance holds the order lock");
                    tokio::time::sleep(jitter(LOCKED_WAIT)).await;
                    continue;
                }
                Err(e) => {
                    failures += 1;
                    self.failed(&managed, &e, failures).await;
                    continue;
                }
            };
            // The other instance may have stored a fresh one just before.
            if let Ok(Some(stored)) = self.store.load(&managed.id) {
                if installed.as_deref() != Some(&stored.leaf[..]) && stored.renew_at() > now {
                    drop(lock);
                    continue;
                }
            }
            tracing::info!(
                "ACME {label}: ordering from {} ({})",
                self.settings.directory,
                managed.spec.challenge.name()
            );
            managed.status.ordering();
            let obtained = tokio::time::timeout(ORDER_TIMEOUT, self.obtain(&managed.spec))
                .await
                .unwrap_or_else(|_| {
                    Err(AcmeError::Protocol {
                        context: "ordering",
                        message: format!("no certificate within {}s", ORDER_TIMEOUT.as_secs()),
                    })
                })
                .and_then(|pem| {
                    self.store.save(&managed.id, pem.as_bytes())?;
                    Ok(pem)
                });
            drop(lock);
            match obtained {
                Ok(pem) => {
                    failures = 0;
                    managed.status.ordered();
                    match self.store.load(&managed.id) {
                        Ok(Some(stored)) => {
                            if let Some((stored, loaded)) = self.usable(&managed.spec, stored) {
                                managed.cert.slot.set(loaded.certified);
                                managed.status.installed(stored.not_after, true);
                                tracing::info!(
                                    "ACME {label}: new certificate served (valid {}s, renewal in {}s)",
                                    tern_tls::managed::seconds_left(stored.not_after),
                                    stored
                                        .renew_at()
                                        .duration_since(SystemTime::now())
                                        .unwrap_or_default()
                                        .as_secs()
                                );
                                renew_at = Some(stored.renew_at());
                                installed = Some(stored.leaf);
                            }
                        }
                        other => {
                            let e = match other {
                                Err(e) => e,
                                _ => AcmeError::Certificate(format!(
                                    "the issued certificate ({} bytes) did not read back",
                                    pem.len()
                                )),
                            };
                            failures += 1;
                            self.failed(&managed, &e, failures).await;
                        }
                    }
                }
                Err(e) => {
                    failures += 1;
                    self.failed(&managed, &e, failures).await;
                }
            }
        }
    }

    async fn failed(&self, managed: &Managed, e: &AcmeError, failures: u32) {
        let wait = jitter(
            self.settings
                .retry_base
                .saturating_mul(1u32 << (failures - 1).min(16))
                .min(MAX_RETRY),
        );
        tracing::error!(
            "ACME {}: {e}; attempt {failures} failed, next in {}s (the current certificate keeps serving)",
            managed.spec.label(),
            wait.as_secs()
        );
        managed.status.failed(e.to_string());
        managed.status.next_attempt(SystemTime::now() + wait);
        tokio::time::sleep(wait).await;
    }

    async fn obtain(&self, spec: &CertSpec) -> Result<String, AcmeError> {
        let account = self.account().await?;
        order::obtain(
            &account,
            spec,
            &self.challenges,
            &self.store,
            &self.provider,
        )
        .await
    }

    /// The account, restored from the state directory or registered.
    async fn account(&self) -> Result<Account, AcmeError> {
        let mut cached = self.account.lock().await;
        if let Some(account) = cached.as_ref() {
            return Ok(account.clone());
        }
        let builder = || {
            match &self.settings.ca_root {
                Some(root) => Account::builder_with_root(root),
                None => Account::builder(),
            }
            .map_err(|e| AcmeError::from_acme("setting up the HTTPS client", e))
        };
        let directory = &self.settings.directory;
        let account = match self.store.load_account(directory)? {
            Some(credentials) => builder()?
                .from_credentials(credentials)
                .await
                .map_err(|e| AcmeError::from_acme("reading the CA's directory", e))?,
            None => {
                let contact: Vec<&str> = self.settings.contact.iter().map(String::as_str).collect();
                let eab = self
                    .settings
                    .eab
                    .as_ref()
                    .map(|e| ExternalAccountKey::new(e.kid.clone(), &e.hmac_key));
                let (account, credentials) = builder()?
                    .create(
                        &NewAccount {
                            contact: &contact,
                            terms_of_service_agreed: true,
                            only_return_existing: false,
                        },
                        directory.clone(),
                        eab.as_ref(),
                    )
                    .await
                    .map_err(|e| AcmeError::from_acme("registering the account", e))?;
                self.store.save_account(directory, &credentials)?;
                tracing::info!("ACME: account {} registered at {directory}", account.id());
                account
            }
        };
        *cached = Some(account.clone());
        Ok(account)
    }
}

/// `d` ± 25 %, so a fleet that failed together does not retry together.
fn jitter(d: Duration) -> Duration {
    let factor = 0.75 + rand::random::<f64>() * 0.5;
    d.mul_f64(factor)
}
