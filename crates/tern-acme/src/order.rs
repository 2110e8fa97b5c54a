//! One certificate order: answer a challenge for each name, send the CSR,
//! fetch the chain.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use instant_acme::{
    Account, AuthorizationStatus, ChallengeType, Identifier, NewOrder, Order, OrderStatus,
    RetryPolicy,
};
use rcgen::{
    CertificateParams, DistinguishedName, KeyPair, PKCS_ECDSA_P256_SHA256, PKCS_RSA_SHA256,
};
use rustls::crypto::CryptoProvider;
use tern_tls::managed::AlpnChallenges;

use crate::error::problem_text;
use crate::settings::{CertSpec, Challenge, KeyType};
use crate::store::Store;
use crate::AcmeError;

/// How long the CA may take to validate, and then to issue.
const POLL: RetryPolicy = RetryPolicy::new()
    .initial_delay(Duration::from_millis(250))
    .backoff(1.5)
    .timeout(Duration::from_secs(90));

/// HTTP-01 answers by token, served on the plain-HTTP listener. Like
/// [`AlpnChallenges`], a token this process does not know is looked up in
/// the shared state directories (`DIR/http-01/TOKEN`), where the instance
/// that ordered wrote it.
#[derive(Debug, Default)]
pub struct HttpTokens {
    by_token: Mutex<HashMap<String, String>>,
    shared: Mutex<Vec<PathBuf>>,
}

impl HttpTokens {
    /// The key authorization for `token`, while its challenge is pending.
    pub fn answer(&self, token: &str) -> Option<String> {
        if let Some(found) = self.by_token.lock().ok()?.get(token) {
            return Some(found.clone());
        }
        // Tokens are base64url (RFC 8555 section 8.3): nothing else
        // reaches the file system.
        let safe = !token.is_empty()
            && token.len() <= 256
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !safe {
            return None;
        }
        let dirs = self.shared.lock().ok()?.clone();
        dirs.iter()
            .find_map(|d| std::fs::read_to_string(d.join("http-01").join(token)).ok())
            .map(|t| t.trim().to_string())
    }

    pub(crate) fn share(&self, dir: PathBuf) {
        if let Ok(mut shared) = self.shared.lock() {
            if !shared.contains(&dir) {
                shared.push(dir);
            }
        }
    }

    fn insert(&self, token: &str, key_authorization: &str) {
        if let Ok(mut map) = self.by_token.lock() {
            map.insert(token.to_string(), key_authorization.to_string());
        }
    }

    fn remove(&self, token: &str) {
        if let Ok(mut map) = self.by_token.lock() {
            map.remove(token);
        }
    }
}

/// Where challenge answers are published for the listeners to serve.
#[derive(Debug, Default, Clone)]
pub struct Challenges {
    /// TLS-ALPN-01 certificates, read by the TLS listeners' resolver.
    pub tls_alpn: Arc<AlpnChallenges>,
    /// HTTP-01 key authorizations, read by the plain-HTTP listeners.
    pub http: Arc<HttpTokens>,
}

/// Orders a certificate for `spec`; returns the new private key and the
/// chain as one PEM text. Challenge answers are withdrawn whatever happens.
pub(crate) async fn obtain(
    account: &Account,
    spec: &CertSpec,
    challenges: &Challenges,
    store: &Store,
    provider: &CryptoProvider,
) -> Result<String, AcmeError> {
    let identifiers: Vec<Identifier> = spec
        .names
        .iter()
        .map(|n| Identifier::Dns(n.clone()))
        .collect();
    let mut order = account
        .new_order(&NewOrder::new(&identifiers))
        .await
        .map_err(|e| AcmeError::from_acme("creating the order", e))?;
    let mut published: Vec<(String, String)> = Vec::new();
    let result = answer_and_finalize(
        &mut order,
        spec,
        challenges,
        store,
        provider,
        &mut published,
    )
    .await;
    for (name, token) in published {
        challenges.tls_alpn.remove(&name);
        challenges.http.remove(&token);
        store.withdraw_challenge("tls-alpn-01", &name);
        store.withdraw_challenge("http-01", &token);
    }
    result
}

async fn answer_and_finalize(
    order: &mut Order,
    spec: &CertSpec,
    challenges: &Challenges,
    store: &Store,
    provider: &CryptoProvider,
    published: &mut Vec<(String, String)>,
) -> Result<String, AcmeError> {
    let kind = match spec.challenge {
        Challenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
        Challenge::Http01 => ChallengeType::Http01,
    };
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let mut authz = authz.map_err(|e| AcmeError::from_acme("fetching an authorization", e))?;
        match authz.status {
            AuthorizationStatus::Pending => {}
            // Validated recently for this account: nothing to answer.
            AuthorizationStatus::Valid => continue,
            other => {
                return Err(AcmeError::Protocol {
                    context: "fetching an authorization",
                    message: format!("authorization is {other:?}"),
                })
            }
        }
        let mut challenge = authz.challenge(kind.clone()).ok_or(AcmeError::Protocol {
            context: "choosing a challenge",
            message: format!("the CA does not offer {}", spec.challenge.name()),
        })?;
        let name = challenge.identifier().to_string();
        let key_authorization = challenge.key_authorization();
        published.push((name.clone(), challenge.token.clone()));
        // In memory for this process, in the state directory for the
        // other instances the validator may reach instead.
        match spec.challenge {
            Challenge::TlsAlpn01 => {
                let digest = key_authorization.digest();
                challenges
                    .tls_alpn
                    .insert(&name, digest.as_ref(), provider)
                    .map_err(|e| AcmeError::Certificate(e.to_string()))?;
                let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
                store.publish_challenge("tls-alpn-01", &name, &hex)?;
            }
            Challenge::Http01 => {
                challenges
                    .http
                    .insert(&challenge.token, key_authorization.as_str());
                store.publish_challenge("http-01", &challenge.token, key_authorization.as_str())?;
            }
        }
        challenge
            .set_ready()
            .await
            .map_err(|e| AcmeError::from_acme("answering a challenge", e))?;
    }
    let status = order
        .poll_ready(&POLL)
        .await
        .map_err(|e| AcmeError::from_acme("waiting for validation", e))?;
    if status == OrderStatus::Invalid {
        return Err(validation_failure(order, spec).await);
    }
    if status != OrderStatus::Ready {
        return Err(AcmeError::Protocol {
            context: "waiting for validation",
            message: format!("order is {status:?}"),
        });
    }

    let err = |e: rcgen::Error| AcmeError::Certificate(format!("making the key and CSR: {e}"));
    let key = match spec.key {
        KeyType::EcdsaP256 => KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256),
        KeyType::Rsa2048 => KeyPair::generate_rsa_for(&PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048),
    }
    .map_err(err)?;
    let mut params = CertificateParams::new(spec.names.clone()).map_err(err)?;
    params.distinguished_name = DistinguishedName::new();
    let csr = params.serialize_request(&key).map_err(err)?;
    order
        .finalize_csr(csr.der())
        .await
        .map_err(|e| AcmeError::from_acme("finalizing the order", e))?;
    let chain = order
        .poll_certificate(&POLL)
        .await
        .map_err(|e| AcmeError::from_acme("downloading the certificate", e))?;
    Ok(format!("{}{chain}", key.serialize_pem()))
}

/// The CA's reasons for an invalid order, from its authorizations.
async fn validation_failure(order: &mut Order, spec: &CertSpec) -> AcmeError {
    let mut authorizations = order.authorizations();
    while let Some(Ok(authz)) = authorizations.next().await {
        if authz.status == AuthorizationStatus::Valid {
            continue;
        }
        let name = authz.identifier().to_string();
        for challenge in &authz.challenges {
            if let Some(problem) = &challenge.error {
                return AcmeError::Validation {
                    name,
                    challenge: spec.challenge.name(),
                    problem: problem_text(problem),
                };
            }
        }
    }
    AcmeError::Validation {
        name: spec.names.join(", "),
        challenge: spec.challenge.name(),
        problem: "the order became invalid (the CA gave no reason)".into(),
    }
}
