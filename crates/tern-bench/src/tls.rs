//! Client TLS: builds the rustls configuration from [`TlsOptions`] and
//! describes what a handshake really negotiated.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustls::client::{
    ClientSessionMemoryCache, ClientSessionStore, Resumption, Tls12ClientSessionValue,
    Tls12Resumption, Tls13ClientSessionValue,
};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, NamedGroup};
use rustls_pki_types::pem::PemObject;
use tern_tls::iana;
use tern_tls::verify::SignatureOnlyVerifier;

use crate::config::{ConnectionPlan, HttpVersion, ResumptionMode, TlsOptions, TlsVersion};
use crate::error::BenchError;

/// Sessions kept for resumption per worker. Each worker talks to one target
/// at a time, so a handful is plenty.
const SESSION_CACHE_SIZE: usize = 64;

/// TLS 1.3 tickets kept per server and worker. Each is used once, and the
/// handshakes of a worker's slots finish in bursts when the server is
/// saturated: rustls' own cache keeps 8 per server and dropped the rest of
/// a burst, so a `--plan resumed` run of 20 slots on one worker resumed
/// only 69% (HTTP/3) and 84% (HTTP/2) of its connections; the others
/// measured full handshakes. Servers send one or two tickets per
/// handshake, so the pool stays full; at a few hundred bytes each this is
/// a few hundred KiB per worker at most.
const TLS13_TICKETS_KEPT: usize = 1024;

/// Builds the client configuration for one worker. Each worker gets its own
/// so the session cache is never shared across threads (no lock contention,
/// and "resumed" means resumed by this worker's earlier connection).
/// `tickets` counts the TLS 1.3 session tickets servers send this worker.
pub fn client_config(
    opts: &TlsOptions,
    plan: ConnectionPlan,
    http: HttpVersion,
    tickets: Arc<AtomicU64>,
) -> Result<ClientConfig, BenchError> {
    let base = rustls::crypto::aws_lc_rs::default_provider();
    let mut provider = base.clone();
    if !opts.ciphers.is_empty() {
        provider.cipher_suites = opts
            .ciphers
            .iter()
            .map(|name| {
                base.cipher_suites
                    .iter()
                    .find(|s| suite_matches(s.suite(), name))
                    .copied()
                    .ok_or_else(|| {
                        BenchError::TlsConfig(format!(
                            "unknown cipher suite {name:?}; known: {}",
                            base.cipher_suites
                                .iter()
                                .map(|s| iana::suite_name(s.suite()))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))
                    })
            })
            .collect::<Result<_, _>>()?;
    }
    if !opts.groups.is_empty() {
        provider.kx_groups = opts
            .groups
            .iter()
            .map(|name| {
                base.kx_groups
                    .iter()
                    .find(|g| group_matches(g.name(), name))
                    .copied()
                    .ok_or_else(|| {
                        BenchError::TlsConfig(format!(
                            "unknown group {name:?}; known: {}",
                            base.kx_groups
                                .iter()
                                .map(|g| iana::group_name(g.name()))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))
                    })
            })
            .collect::<Result<_, _>>()?;
    }
    let min = opts.min_version.unwrap_or(crate::config::defaults::TLS_MIN);
    let max = opts.max_version.unwrap_or(crate::config::defaults::TLS_MAX);
    if min > max {
        return Err(BenchError::TlsConfig(
            "minimum TLS version above maximum".into(),
        ));
    }
    let mut versions = Vec::new();
    if min <= TlsVersion::Tls13 && max >= TlsVersion::Tls13 {
        versions.push(&rustls::version::TLS13);
    }
    // QUIC is TLS 1.3 only.
    if min <= TlsVersion::Tls12 && max >= TlsVersion::Tls12 && http != HttpVersion::Http3 {
        versions.push(&rustls::version::TLS12);
    }
    if versions.is_empty() {
        return Err(BenchError::TlsConfig(
            "HTTP/3 (QUIC) needs TLS 1.3; the version bounds exclude it".into(),
        ));
    }
    let provider = Arc::new(provider);
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| BenchError::TlsConfig(format!("suites and versions do not fit: {e}")))?;

    let mut config = match (&opts.ca_file, opts.insecure) {
        (Some(path), false) => {
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| BenchError::TlsConfig(format!("{}: {e}", path.display())))?;
            for cert in certs {
                let cert =
                    cert.map_err(|e| BenchError::TlsConfig(format!("{}: {e}", path.display())))?;
                roots
                    .add(cert)
                    .map_err(|e| BenchError::TlsConfig(format!("{}: {e}", path.display())))?;
            }
            if roots.is_empty() {
                return Err(BenchError::TlsConfig(format!(
                    "{}: no certificates",
                    path.display()
                )));
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        _ => builder
            .dangerous()
            // hey's default (`InsecureSkipVerify`) when no CA file is given.
            .with_custom_certificate_verifier(Arc::new(SignatureOnlyVerifier::new(&provider)))
            .with_no_client_auth(),
    };
    config.alpn_protocols = match &opts.alpn {
        Some(list) => list.iter().map(|p| p.as_bytes().to_vec()).collect(),
        None => match http {
            HttpVersion::Http1 => vec![b"http/1.1".to_vec()],
            HttpVersion::Http2 => vec![b"h2".to_vec()],
            HttpVersion::Http3 => vec![b"h3".to_vec()],
        },
    };
    // Every plan counts the tickets it is sent; only the resuming plans
    // (and keepalive, for reconnects) keep them. A client that never
    // resumes still offers psk_dhe_ke, as browsers do, so servers send it
    // tickets (hey offers nothing and gets none): the report says so.
    let store = |keep: bool| {
        Arc::new(TicketCountingStore {
            sessions: keep.then(|| ClientSessionMemoryCache::new(SESSION_CACHE_SIZE)),
            tls13: Mutex::default(),
            tickets: tickets.clone(),
        })
    };
    config.resumption = match plan {
        ConnectionPlan::NewConnection => Resumption::store(store(false)),
        ConnectionPlan::KeepAlive => Resumption::store(store(true)),
        ConnectionPlan::Resumed(ResumptionMode::Tickets) => {
            Resumption::store(store(true)).tls12_resumption(Tls12Resumption::SessionIdOrTickets)
        }
        ConnectionPlan::Resumed(ResumptionMode::SessionIds) => {
            Resumption::store(store(true)).tls12_resumption(Tls12Resumption::SessionIdOnly)
        }
    };
    Ok(config)
}

/// A client session store that counts the TLS 1.3 tickets it is given;
/// without `sessions` it keeps nothing (no resumption), like
/// `Resumption::disabled()` but with the count. With `sessions`, TLS 1.3
/// tickets are kept in `tls13` (up to [`TLS13_TICKETS_KEPT`] per server,
/// newest used first) and the rest in `sessions`.
#[derive(Debug)]
struct TicketCountingStore {
    sessions: Option<ClientSessionMemoryCache>,
    tls13: Mutex<HashMap<ServerName<'static>, VecDeque<Tls13ClientSessionValue>>>,
    tickets: Arc<AtomicU64>,
}

impl ClientSessionStore for TicketCountingStore {
    fn set_kx_hint(&self, name: ServerName<'static>, group: NamedGroup) {
        if let Some(s) = &self.sessions {
            s.set_kx_hint(name, group);
        }
    }

    fn kx_hint(&self, name: &ServerName<'_>) -> Option<NamedGroup> {
        self.sessions.as_ref()?.kx_hint(name)
    }

    fn set_tls12_session(&self, name: ServerName<'static>, value: Tls12ClientSessionValue) {
        if let Some(s) = &self.sessions {
            s.set_tls12_session(name, value);
        }
    }

    fn tls12_session(&self, name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.sessions.as_ref()?.tls12_session(name)
    }

    fn remove_tls12_session(&self, name: &ServerName<'static>) {
        if let Some(s) = &self.sessions {
            s.remove_tls12_session(name);
        }
    }

    fn insert_tls13_ticket(&self, name: ServerName<'static>, value: Tls13ClientSessionValue) {
        self.tickets.fetch_add(1, Ordering::Relaxed);
        if self.sessions.is_none() {
            return;
        }
        // A worker's slots are tasks of one thread: the lock is never
        // contended, and a poisoned one only means no resumption.
        if let Ok(mut tls13) = self.tls13.lock() {
            let kept = tls13.entry(name).or_default();
            if kept.len() == TLS13_TICKETS_KEPT {
                kept.pop_front();
            }
            kept.push_back(value);
        }
    }

    fn take_tls13_ticket(&self, name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        self.sessions.as_ref()?;
        self.tls13.lock().ok()?.get_mut(name)?.pop_back()
    }
}

/// A one-line summary of what the configuration offers, for TLS errors.
pub fn describe_offer(config: &ClientConfig) -> String {
    let provider = config.crypto_provider();
    let suites: Vec<_> = provider
        .cipher_suites
        .iter()
        .map(|s| iana::suite_name(s.suite()))
        .collect();
    let groups: Vec<_> = provider
        .kx_groups
        .iter()
        .map(|g| iana::group_name(g.name()))
        .collect();
    let alpn: Vec<String> = config
        .alpn_protocols
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    format!(
        "suites [{}], groups [{}], ALPN [{}]",
        suites.join(" "),
        groups.join(" "),
        alpn.join(" ")
    )
}

/// A suite named by its IANA name, or rustls' `TLS13_` spelling of one.
fn suite_matches(known: rustls::CipherSuite, wanted: &str) -> bool {
    let wanted = wanted.to_ascii_uppercase();
    let wanted = wanted
        .strip_prefix("TLS13_")
        .map_or(wanted.clone(), |rest| format!("TLS_{rest}"));
    iana::suite_name(known) == wanted
}

fn group_matches(known: rustls::NamedGroup, wanted: &str) -> bool {
    let known = iana::group_name(known);
    let alias = match wanted.to_ascii_lowercase().as_str() {
        "p-256" | "p256" | "prime256v1" => "secp256r1".to_string(),
        "p-384" | "p384" => "secp384r1".to_string(),
        "p-521" | "p521" => "secp521r1".to_string(),
        other => other.to_string(),
    };
    known.eq_ignore_ascii_case(&alias)
}

/// What one handshake negotiated. Equal values are counted together.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Negotiated {
    /// `TLSv1.3`, `TLSv1.2`, or `none` for plain HTTP.
    pub version: String,
    /// IANA cipher suite name.
    pub cipher: String,
    /// Key-exchange group (`X25519`, `secp256r1`, ...); on a TLS 1.3
    /// resumption without (EC)DHE, `none`.
    pub group: String,
    /// Server key as `ECDSA P-256` or `RSA 2048`.
    pub server_key: String,
    /// ALPN protocol or `none`.
    pub alpn: String,
}

impl Negotiated {
    /// The values for a plain `http://` connection.
    pub fn plain() -> Negotiated {
        let none = || "none".to_string();
        Negotiated {
            version: none(),
            cipher: none(),
            group: none(),
            server_key: none(),
            alpn: none(),
        }
    }
}

/// A cipher suite as reports name it: its IANA name (`TLS_AES_128_GCM_SHA256`,
/// never rustls' `TLS13_` spelling), as `tern serve`'s log and `tern probe`.
pub fn suite_label(suite: rustls::CipherSuite) -> String {
    iana::suite_name(suite).into_owned()
}

/// A key-exchange group as reports name it (`X25519`, `secp256r1`).
pub fn group_label(group: rustls::NamedGroup) -> String {
    iana::group_name(group).into_owned()
}

/// Reads the negotiated parameters from a finished handshake. `key_cache`
/// remembers the last leaf certificate so its key is parsed only when it
/// changes.
pub fn negotiated(conn: &ClientConnection, key_cache: &mut KeyCache) -> Negotiated {
    let version = conn
        .protocol_version()
        .map_or_else(|| "none".into(), |v| iana::version_name(v).into_owned());
    let cipher = conn
        .negotiated_cipher_suite()
        .map_or_else(|| "none".into(), |s| suite_label(s.suite()));
    let group = conn
        .negotiated_key_exchange_group()
        .map_or_else(|| "none".into(), |g| group_label(g.name()));
    let alpn = conn
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .unwrap_or_else(|| "none".into());
    let server_key = match conn.peer_certificates().and_then(|c| c.first()) {
        Some(leaf) => key_cache.describe(leaf.as_ref()),
        None => "unknown".to_string(),
    };
    Negotiated {
        version,
        cipher,
        group,
        server_key,
        alpn,
    }
}

/// Remembers the key description of the last leaf certificate seen.
#[derive(Debug, Default)]
pub struct KeyCache {
    der: Vec<u8>,
    description: String,
}

impl KeyCache {
    pub(crate) fn describe(&mut self, der: &[u8]) -> String {
        if self.der != der {
            self.der = der.to_vec();
            self.description = describe_key(der);
        }
        self.description.clone()
    }
}

/// `ECDSA P-256`, `RSA 2048`, `Ed25519`, or `unknown`.
pub fn describe_key(der: &[u8]) -> String {
    use x509_parser::public_key::PublicKey;
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return "unknown".into();
    };
    let spki = cert.public_key();
    match spki.parsed() {
        Ok(PublicKey::RSA(rsa)) => format!("RSA {}", rsa.key_size()),
        Ok(PublicKey::EC(ec)) => {
            let curve = spki
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok())
                .map(|oid| match oid.to_id_string().as_str() {
                    "1.2.840.10045.3.1.7" => "P-256".to_string(),
                    "1.3.132.0.34" => "P-384".to_string(),
                    "1.3.132.0.35" => "P-521".to_string(),
                    other => other.to_string(),
                })
                .unwrap_or_else(|| format!("{} bits", ec.key_size()));
            format!("ECDSA {curve}")
        }
        Ok(PublicKey::Unknown(_)) if spki.algorithm.algorithm.to_id_string() == "1.3.101.112" => {
            "Ed25519".into()
        }
        _ => format!("unknown ({})", spki.algorithm.algorithm.to_id_string()),
    }
}
