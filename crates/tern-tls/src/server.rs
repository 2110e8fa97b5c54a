//! The rustls `ServerConfig` tern serves with, and what a handshake negotiated.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls::compress::CompressionCache;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{
    NoServerSessionStorage, ProducesTickets, ServerSessionMemoryCache, StoresServerSessions,
};
use rustls::sign::CertifiedKey;
use rustls::{HandshakeKind, ProtocolVersion, ServerConfig, ServerConnection};

use crate::certs::LoadedCert;
use crate::client_auth::{ByNameVerifier, ClientAuth, ClientAuthMode, ClientCert, NameIndex};
use crate::compression;
use crate::cpu::CpuFeatures;
use crate::iana::{group_name, suite_name};
use crate::managed::{AlpnChallenges, ManagedCert, Resolver, ACME_TLS_ALPN};
use crate::policy::TlsPolicy;
use crate::tickets::TicketKeys;
use crate::TlsError;

/// Bytes that fit in a typical initial congestion window: 10 segments of
/// 1460 bytes (RFC 6928). A server flight larger than this waits one round
/// trip for the client's ACKs.
pub const INITCWND_BYTES: usize = 14_600;

/// Lifetime announced for tickets made with keys from a file, and the age
/// beyond which they are refused. Operators rotate fleet keys at least this
/// often.
pub const FILE_TICKET_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// Where session ticket keys come from.
#[derive(Clone, Debug)]
pub enum TicketSource {
    /// No tickets: resumption only through the stateful session cache.
    Disabled,
    /// Random in-process keys rotated every period (single instance).
    Rotating(Duration),
    /// Keys shared by a fleet, read from this file (see [`TicketKeys::from_file`]).
    File(PathBuf),
}

/// Everything needed to build the server's TLS configuration.
#[derive(Clone, Debug)]
pub struct ServerTlsSettings {
    /// Certificates; the first is the default for unknown or absent SNI.
    pub certs: Vec<LoadedCert>,
    /// Versions, suites and groups.
    pub policy: TlsPolicy,
    /// ALPN protocols in server preference order, e.g. `[b"h2", b"http/1.1"]`.
    pub alpn: Vec<Vec<u8>>,
    /// Entries of the stateful session cache (TLS 1.2 session IDs; TLS 1.3
    /// when tickets are off); 0 turns it off. Each entry is a few hundred
    /// bytes; the cache evicts at random when full.
    pub session_cache_entries: usize,
    /// Session ticket keys.
    pub tickets: TicketSource,
    /// TLS 1.3 tickets sent after a full handshake (default 2: one per
    /// parallel connection a browser typically opens next).
    pub tls13_tickets: usize,
    /// Certificates an ACME task keeps current (empty without ACME).
    pub managed: Vec<ManagedCert>,
    /// Whether the default certificate is the first managed one rather
    /// than the first of `certs`.
    pub managed_first: bool,
    /// TLS-ALPN-01 challenge certificates to answer `acme-tls/1` with;
    /// `acme-tls/1` is then offered in ALPN, after the HTTP protocols.
    pub acme_tls_alpn: Option<Arc<AlpnChallenges>>,
    /// Client certificates asked for on this listener (names without a
    /// policy of their own).
    pub client_auth: ClientAuth,
    /// Client-certificate policies of certificate names (SNI), where one
    /// differs from the listener's.
    pub name_client_auth: Vec<NamedClientAuth>,
    /// Certificate compression (RFC 8879, brotli then zlib) for TLS 1.3
    /// clients that offer it; see [`crate::compression`].
    pub cert_compression: bool,
}

/// A client-certificate policy for the names of one certificate.
#[derive(Clone, Debug)]
pub struct NamedClientAuth {
    /// Names as in [`LoadedCert::names`] (`*.example.com` for a wildcard).
    pub names: Vec<String>,
    /// The policy.
    pub auth: ClientAuth,
}

/// The configurations of one listener: the default one, and those of
/// certificate names whose client-certificate policy differs from the
/// listener's (rustls asks for a client certificate per `ServerConfig`, so
/// such a name needs its own, chosen from the ClientHello's SNI).
#[derive(Clone, Debug)]
pub struct ServerConfigs {
    /// For names without a policy of their own, and clients without SNI.
    pub default: Arc<ServerConfig>,
    /// Per-name configurations; `None` when every name follows the listener.
    pub by_name: Option<Arc<NameConfigs>>,
    /// What a QUIC endpoint (one configuration for every connection)
    /// starts from: `default`, or with per-name configurations one that
    /// asks for client certificates by SNI as they do (see
    /// [`quic_server_config`]).
    pub quic: Arc<ServerConfig>,
}

/// Configurations chosen by SNI, with the same exact-then-wildcard rules
/// as [`crate::SniResolver`].
#[derive(Debug)]
pub struct NameConfigs {
    names: NameIndex,
    configs: Vec<(ClientAuthMode, Arc<ServerConfig>)>,
    default: (ClientAuthMode, Arc<ServerConfig>),
}

impl NameConfigs {
    /// The configuration for a server name (SNI or a request's host),
    /// and the client-certificate mode it applies.
    pub fn for_name(&self, name: Option<&str>) -> (ClientAuthMode, &Arc<ServerConfig>) {
        let (mode, config) = match self.names.find(name) {
            Some(i) => &self.configs[i],
            None => &self.default,
        };
        (*mode, config)
    }
}

/// Builds the rustls ServerConfig: provider and versions from the policy,
/// [`SniResolver`], server cipher preference, no 0-RTT, ALPN, a bounded
/// stateful session cache and the ticketer. `TicketSource::File` is read here.
pub fn build_server_config(settings: &ServerTlsSettings) -> Result<Arc<ServerConfig>, TlsError> {
    Ok(build_server_configs(settings)?.default)
}

/// Like [`build_server_config`], with the per-name configurations of
/// names whose client-certificate policy differs from the listener's.
pub fn build_server_configs(settings: &ServerTlsSettings) -> Result<ServerConfigs, TlsError> {
    let ticketer: Arc<dyn ProducesTickets> = match &settings.tickets {
        TicketSource::Disabled => Arc::new(NoTickets),
        TicketSource::Rotating(period) => TicketKeys::rotating(*period)?,
        TicketSource::File(path) => TicketKeys::from_file(path, FILE_TICKET_LIFETIME)?,
    };
    let storage: Arc<dyn StoresServerSessions> = if settings.session_cache_entries > 0 {
        ServerSessionMemoryCache::new(settings.session_cache_entries)
    } else {
        Arc::new(NoServerSessionStorage {})
    };
    build(settings, ticketer, storage)
}

/// Like [`build_server_config`] for a reload: keeps `previous`'s in-process
/// ticket keys (when the new settings also rotate in-process) and its session
/// cache (when the new settings keep one), so clients resume across the
/// reload. A changed rotation period or cache size takes effect on restart.
pub fn build_server_config_reusing(
    settings: &ServerTlsSettings,
    previous: &ServerConfig,
) -> Result<Arc<ServerConfig>, TlsError> {
    Ok(build_server_configs_reusing(settings, previous)?.default)
}

/// Like [`build_server_config_reusing`], with the per-name configurations
/// (see [`build_server_configs`]); they share the reused keys and cache.
pub fn build_server_configs_reusing(
    settings: &ServerTlsSettings,
    previous: &ServerConfig,
) -> Result<ServerConfigs, TlsError> {
    let ticketer: Arc<dyn ProducesTickets> = match &settings.tickets {
        TicketSource::Rotating(_) if previous.ticketer.enabled() => previous.ticketer.clone(),
        TicketSource::Rotating(period) => TicketKeys::rotating(*period)?,
        TicketSource::Disabled => Arc::new(NoTickets),
        TicketSource::File(path) => TicketKeys::from_file(path, FILE_TICKET_LIFETIME)?,
    };
    let storage: Arc<dyn StoresServerSessions> = match (
        settings.session_cache_entries,
        previous.session_storage.can_cache(),
    ) {
        (0, _) => Arc::new(NoServerSessionStorage {}),
        (_, true) => previous.session_storage.clone(),
        (n, false) => ServerSessionMemoryCache::new(n),
    };
    build(settings, ticketer, storage)
}

fn build(
    settings: &ServerTlsSettings,
    ticketer: Arc<dyn ProducesTickets>,
    storage: Arc<dyn StoresServerSessions>,
) -> Result<ServerConfigs, TlsError> {
    for cert in &settings.certs {
        if !settings.policy.can_serve(cert) {
            return Err(TlsError::PolicyConflict(format!(
                "cert {}: no enabled cipher suite can use its {} key ({})",
                cert.source,
                cert.key_kind,
                settings.policy.describe()
            )));
        }
    }
    for m in &settings.managed {
        if !settings.policy.can_sign_with(m.slot.get().key.algorithm()) {
            return Err(TlsError::PolicyConflict(format!(
                "ACME certificate for {}: no enabled cipher suite can use its {} key ({})",
                m.names.join(", "),
                m.key_kind,
                settings.policy.describe()
            )));
        }
    }
    let resolver = Resolver::new(
        settings.certs.clone(),
        &settings.managed,
        settings.managed_first,
        settings.acme_tls_alpn.clone(),
    )?;
    let answers_tls_alpn = resolver.answers_tls_alpn();
    // One cache for every configuration of the listener (and its QUIC
    // copy): a chain is compressed once whichever policy served it.
    let compression = settings.cert_compression.then(|| {
        let cache = compression::cache_for(settings.certs.len() + settings.managed.len());
        let certified: Vec<_> = settings
            .certs
            .iter()
            .map(|c| c.certified.clone())
            .chain(settings.managed.iter().map(|m| m.slot.get()))
            .collect();
        compression::prime(&cache, &certified);
        cache
    });
    let parts = Parts {
        compression,
        settings,
        provider: Arc::new(settings.policy.crypto_provider()),
        resolver: Arc::new(resolver),
        answers_tls_alpn,
        ticketer,
        storage,
    };
    let default = parts.config(&settings.client_auth)?;
    if settings.name_client_auth.is_empty() {
        return Ok(ServerConfigs {
            quic: default.clone(),
            default,
            by_name: None,
        });
    }
    let mut names = NameConfigs {
        names: NameIndex::default(),
        configs: Vec::new(),
        default: (settings.client_auth.mode(), default.clone()),
    };
    // One configuration per distinct policy; names sharing one share it
    // (and so its session cache entries stay valid across those names).
    let mut policies: Vec<&ClientAuth> = Vec::new();
    for named in &settings.name_client_auth {
        let index = match policies.iter().position(|p| p.files == named.auth.files) {
            Some(i) => i,
            None => {
                policies.push(&named.auth);
                names
                    .configs
                    .push((named.auth.mode(), parts.config(&named.auth)?));
                names.configs.len() - 1
            }
        };
        for name in &named.names {
            if !names.names.insert(name, index) {
                return Err(TlsError::ClientAuth(format!(
                    "name {name} is on two certificates with different client_auth policies"
                )));
            }
        }
    }
    let by_sni = ByNameVerifier::new(
        names.names.clone(),
        &policies,
        &settings.client_auth,
        &parts.provider,
    );
    let quic = parts.config_verified(Some(Arc::new(by_sni)))?;
    Ok(ServerConfigs {
        default,
        by_name: Some(Arc::new(names)),
        quic,
    })
}

/// What every configuration of a listener shares.
struct Parts<'a> {
    settings: &'a ServerTlsSettings,
    provider: Arc<rustls::crypto::CryptoProvider>,
    resolver: Arc<Resolver>,
    answers_tls_alpn: bool,
    ticketer: Arc<dyn ProducesTickets>,
    storage: Arc<dyn StoresServerSessions>,
    compression: Option<Arc<CompressionCache>>,
}

impl Parts<'_> {
    /// A configuration asking for client certificates as `auth` says.
    fn config(&self, auth: &ClientAuth) -> Result<Arc<ServerConfig>, TlsError> {
        self.config_verified(auth.verifier.clone())
    }

    /// A configuration asking for client certificates as `verifier` says
    /// (none without one).
    fn config_verified(
        &self,
        verifier: Option<Arc<dyn ClientCertVerifier>>,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let settings = self.settings;
        let builder = ServerConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&settings.policy.versions())?;
        let builder = match verifier {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(self.resolver.clone());
        // Server order wins: our list puts the cheap suites and groups first,
        // and a client's order is often arbitrary.
        config.ignore_client_order = true;
        // 0-RTT data can be replayed; an HTTP terminator cannot know which
        // requests are idempotent for the backend.
        config.max_early_data_size = 0;
        config.alpn_protocols = settings.alpn.clone();
        if self.answers_tls_alpn {
            config.alpn_protocols.push(ACME_TLS_ALPN.to_vec());
        }
        config.session_storage = self.storage.clone();
        config.ticketer = self.ticketer.clone();
        config.send_tls13_tickets = settings.tls13_tickets;
        // RFC 9149: a client that says how many tickets it wants gets that
        // many, never more than tern sends anyway. One that will not resume
        // (a one-shot client) can ask for none: each ticket costs the server
        // about 2 µs and a record on the wire (docs/benchmarks-history.md).
        config.max_tls13_tickets = settings.tls13_tickets;
        match &self.compression {
            Some(cache) => {
                config.cert_compressors = compression::compressors();
                config.cert_compression_cache = cache.clone();
            }
            None => config.cert_compressors = Vec::new(),
        }
        Ok(Arc::new(config))
    }
}

/// The TLS configuration of a listener's QUIC (HTTP/3) endpoint, from
/// [`ServerConfigs::quic`]: the same certificates, SNI resolver, policy,
/// client-certificate policies, session cache and ticket keys as over TCP
/// (so a session resumes over either), ALPN `h3` only. QUIC itself
/// negotiates TLS 1.3 only.
///
/// With `early_data`, 0-RTT: QUIC wants the early-data limit at its
/// maximum (the stream limits bound it), and rustls takes early data only
/// when resuming from its stateful session cache, never from a stateless
/// ticket: each cached session resumes once, so a captured 0-RTT flight
/// cannot be replayed to this process (the cache is shared by its workers).
/// QUIC sessions then resume only on the instance that issued them, not
/// across a fleet sharing ticket keys. The caller must still take only
/// safe requests in 0-RTT: a client may send the same request twice.
///
/// A QUIC handshake ends with at most [`QUIC_TICKETS`] session ticket.
pub fn quic_server_config(tcp: &ServerConfig, early_data: bool) -> Arc<ServerConfig> {
    let mut config = tcp.clone();
    config.alpn_protocols = vec![b"h3".to_vec()];
    config.send_tls13_tickets = config.send_tls13_tickets.min(QUIC_TICKETS);
    config.max_tls13_tickets = config.max_tls13_tickets.min(QUIC_TICKETS);
    if early_data {
        config.max_early_data_size = u32::MAX;
        config.ticketer = Arc::new(NoTickets);
        config.send_tls13_tickets = QUIC_TICKETS;
    } else {
        config.max_early_data_size = 0;
    }
    Arc::new(config)
}

/// Session tickets a QUIC handshake ends with (over TCP, `tls13_tickets`,
/// two by default). A client's second ticket over TCP is for the parallel
/// connection it opens next (browsers open up to six per origin over
/// HTTP/1.1); an HTTP/3 client multiplexes one connection per origin and
/// opens the next when this one closes, which then brings it a ticket of
/// its own, so one ticket serves it. Each ticket costs the server a
/// resumption secret and an encrypted ticket (about 2 µs), and its bytes
/// in the handshake's last flight.
pub const QUIC_TICKETS: usize = 1;

/// The ticketer when tickets are off: rustls then falls back to the
/// stateful cache (session IDs in TLS 1.2, cache-backed tickets in TLS 1.3).
#[derive(Debug)]
struct NoTickets;

impl ProducesTickets for NoTickets {
    fn enabled(&self) -> bool {
        false
    }
    fn lifetime(&self) -> u32 {
        0
    }
    fn encrypt(&self, _plain: &[u8]) -> Option<Vec<u8>> {
        None
    }
    fn decrypt(&self, _cipher: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// What a finished handshake negotiated, for logs and metrics. Names are
/// IANA-style: "TLSv1.3", "TLS_AES_128_GCM_SHA256", "X25519" /
/// "X25519MLKEM768" / "secp256r1"; empty when not (yet) known. `group` is
/// empty for a resumed TLS 1.2 session, which does no key exchange.
#[derive(Clone, Debug, Default)]
pub struct Negotiated {
    /// "TLSv1.3" or "TLSv1.2".
    pub version: &'static str,
    /// IANA cipher suite name ([`crate::iana::suite_name`]).
    pub cipher: Cow<'static, str>,
    /// Key-exchange group ([`crate::iana::group_name`]).
    pub group: Cow<'static, str>,
    /// ALPN protocol, if one was agreed.
    pub alpn: Option<String>,
    /// SNI the client sent.
    pub sni: Option<String>,
    /// True when the session was resumed (ticket or session ID).
    pub resumed: bool,
    /// True when the server had to ask for another key share (TLS 1.3
    /// HelloRetryRequest): the client guessed a group we do not offer, and
    /// the handshake took an extra round trip.
    pub hello_retry_request: bool,
    /// The client's certificate, when it sent one and it was verified.
    pub client_cert: Option<Arc<ClientCert>>,
    /// The algorithm tern's certificate chain was compressed with
    /// ("brotli", "zlib"); None when it went whole or was not sent.
    pub cert_compression: Option<&'static str>,
    /// The certificate tern chose for this client (by SNI and signature
    /// schemes), also on a resumed session; None over QUIC, where quinn
    /// does not hand it on.
    pub served_cert: Option<Arc<CertifiedKey>>,
}

/// Reads what `conn` negotiated. Call after the handshake completed.
pub fn negotiated(conn: &ServerConnection) -> Negotiated {
    let version = match conn.protocol_version() {
        Some(ProtocolVersion::TLSv1_3) => "TLSv1.3",
        Some(ProtocolVersion::TLSv1_2) => "TLSv1.2",
        Some(_) => "other",
        None => "",
    };
    Negotiated {
        version,
        cipher: conn
            .negotiated_cipher_suite()
            .map_or(Cow::Borrowed(""), |s| suite_name(s.suite())),
        group: conn
            .negotiated_key_exchange_group()
            .map_or(Cow::Borrowed(""), |g| group_name(g.name())),
        alpn: conn
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned()),
        sni: conn.server_name().map(str::to_string),
        resumed: conn.handshake_kind() == Some(HandshakeKind::Resumed),
        hello_retry_request: conn.handshake_kind()
            == Some(HandshakeKind::FullWithHelloRetryRequest),
        client_cert: conn
            .peer_certificates()
            .and_then(ClientCert::from_chain)
            .map(Arc::new),
        cert_compression: conn
            .certificate_compression()
            .map(compression::algorithm_name),
        served_cert: conn.served_certified_key().cloned(),
    }
}

/// Warning text when chain + OCSP staple exceed the initial congestion
/// window: full handshakes then take an extra round trip. None when it
/// fits. With `compression` on, the warning says whether clients that
/// offer certificate compression fit (they then avoid the round trip) or
/// not; compressing here costs a few milliseconds per certificate, and
/// only for a chain that overflows whole.
pub fn initcwnd_warning(cert: &LoadedCert, compression: bool) -> Option<String> {
    let total = cert.chain_der_len + cert.ocsp_len;
    if total <= INITCWND_BYTES {
        return None;
    }
    let head = format!(
        "cert {}: chain {} B + OCSP {} B exceeds the initial congestion window (~{} B)",
        cert.source, cert.chain_der_len, cert.ocsp_len, INITCWND_BYTES
    );
    let advice = "Use an ECDSA certificate or a shorter chain.";
    if !compression {
        return Some(format!(
            "{head}; full handshakes will take an extra round trip. {advice}"
        ));
    }
    let ocsp = cert.certified.ocsp.as_deref();
    let sizes = compression::compressed_sizes(&cert.certified.cert, ocsp);
    // Best case for a client that offers compression: brotli (tern's first
    // choice); the flight besides the chain changes nothing compressed.
    let compressed = sizes
        .brotli
        .or(sizes.zlib)
        .map(|c| total - sizes.whole.min(total) + c);
    Some(match compressed {
        Some(c) if c <= INITCWND_BYTES => format!(
            "{head}; clients offering certificate compression get it in {c} B (brotli) and \
             no extra round trip, others (TLS 1.2, OpenSSL before 3.2, most non-browser \
             clients) take an extra round trip. {advice}"
        ),
        Some(c) => format!(
            "{head}, and {c} B compressed (brotli) still does; full handshakes will take an \
             extra round trip. {advice}"
        ),
        None => format!("{head}; full handshakes will take an extra round trip. {advice}"),
    })
}

/// Warning text when a certificate expires within `within` (e.g. 14 days),
/// so the start-up and reload logs say so while there is time to act.
pub fn expiry_warning(cert: &LoadedCert, within: Duration) -> Option<String> {
    let left = cert
        .not_after
        .duration_since(std::time::SystemTime::now())
        .unwrap_or(Duration::ZERO);
    (left < within).then(|| {
        format!(
            "cert {}: expires on {} (in {} h); renew it",
            cert.source,
            crate::certs::format_utc(cert.not_after),
            left.as_secs() / 3600
        )
    })
}

/// Warning text when some enabled protocol version cannot use this
/// certificate (a TLS 1.2 client would fail the handshake), e.g. an RSA
/// certificate with only ECDHE_ECDSA suites for TLS 1.2. None when every
/// enabled version can serve it. A certificate no version can serve is an
/// error in [`build_server_config`] instead.
pub fn policy_warning(policy: &TlsPolicy, cert: &LoadedCert) -> Option<String> {
    let unusable = policy.versions_unable_to_serve(cert);
    (!unusable.is_empty()).then(|| {
        format!(
            "cert {}: {} clients cannot use its {} key: no matching cipher suite is enabled",
            cert.source,
            unusable.join(","),
            cert.key_kind
        )
    })
}

/// One line describing the crypto provider for the start-up log, e.g.
/// "crypto: aws-lc-rs (AWS-LC 5.12.0), FIPS no, CPU features: AES-NI PCLMULQDQ AVX2".
pub fn provider_summary() -> String {
    let version = std::str::from_utf8(aws_lc_sys::AWSLC_VERSION_NUMBER_STRING)
        .unwrap_or("")
        .trim_end_matches('\0');
    let fips = if rustls::crypto::aws_lc_rs::default_provider().fips() {
        "yes"
    } else {
        "no"
    };
    let cpu = CpuFeatures::detect();
    let warning = if cpu.aes_gcm_accelerated() {
        ""
    } else {
        " (no AES-GCM acceleration: bulk crypto will be several times slower)"
    };
    format!("crypto: aws-lc-rs (AWS-LC {version}), FIPS {fips}, CPU features: {cpu}{warning}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_summary_names_the_library_and_cpu() {
        let s = provider_summary();
        assert!(s.starts_with("crypto: aws-lc-rs (AWS-LC "), "{s}");
        assert!(s.contains("FIPS no"), "{s}");
        assert!(s.contains("CPU features: "), "{s}");
    }
}
