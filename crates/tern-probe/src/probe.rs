//! `tern probe`: runs every check against one endpoint on blocking sockets
//! (timing is cleaner without a scheduler in the way). Checks run one after
//! another, except the idle-timeout watch, which waits on its own thread
//! while the others run.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::pki_types::ServerName;
use tern_tls::verify::SignatureOnlyVerifier;

use crate::handshake::{self, Established};
use crate::report::{Negotiated, Report, RoundTrips};
use crate::{address, certinfo, findings, http, negotiate, resumption, suites, ProbeError};

/// Initial congestion window of Linux and most stacks: 10 segments of
/// 1460 bytes (RFC 6928).
pub const INITIAL_WINDOW_BYTES: usize = 14_600;

/// Below this RTT, server CPU time and scheduling swamp a round trip, so we
/// do not count round trips (loopback is ~0.05 ms).
pub const MIN_COUNTABLE_RTT: Duration = Duration::from_millis(2);

/// What to probe and how hard.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// `HOST:PORT`.
    pub target: String,
    /// Server name to send; defaults to HOST when HOST is a name.
    pub sni: Option<String>,
    /// Bound on each connect, read and write. Default 5 s.
    pub timeout: Duration,
    /// Requests timed per variant in the split-write measurement, and full
    /// handshakes timed for round trips. Default 5.
    pub samples: usize,
    /// How long an idle keepalive connection is watched for the server's
    /// idle timeout; zero skips the watch. Default 5 s. The probe takes at
    /// least this long unless the server closes sooner.
    pub idle_wait: Duration,
}

impl ProbeOptions {
    /// Options with the defaults documented on each field.
    pub fn new(target: impl Into<String>) -> Self {
        ProbeOptions {
            target: target.into(),
            sni: None,
            timeout: Duration::from_secs(5),
            samples: 5,
            idle_wait: Duration::from_secs(5),
        }
    }
}

/// Where and how to connect, shared by every check.
#[derive(Clone)]
pub(crate) struct Target {
    pub addr: SocketAddr,
    pub server_name: ServerName<'static>,
    /// Host header value.
    pub host: String,
    pub verifier: Arc<SignatureOnlyVerifier>,
    pub timeout: Duration,
    pub samples: usize,
}

impl Target {
    /// A client config for `versions` and `alpn`, with or without resumption.
    pub fn config(
        &self,
        versions: &[&'static rustls::SupportedProtocolVersion],
        alpn: &[&[u8]],
        resume: bool,
    ) -> Result<Arc<rustls::ClientConfig>, ProbeError> {
        let mut config = handshake::client_config(versions, alpn, self.verifier.clone())?;
        if !resume {
            if let Some(c) = Arc::get_mut(&mut config) {
                c.resumption = rustls::client::Resumption::disabled();
            }
        }
        Ok(config)
    }

    /// A handshake on a new connection.
    pub fn connect(
        &self,
        config: Arc<rustls::ClientConfig>,
        nodelay: bool,
    ) -> Result<Established, ProbeError> {
        handshake::handshake(self.addr, &self.server_name, config, nodelay, self.timeout)
    }
}

/// Probes the endpoint. Errors only when not even one TLS handshake worked;
/// checks that fail individually are listed in [`Report::notes`].
pub fn probe(opts: &ProbeOptions) -> Result<Report, ProbeError> {
    let (host, port) = address::parse_target(&opts.target)?;
    let host = host.as_str();
    let addr = resolve(host, port)?;
    let sni = opts.sni.clone().or_else(|| {
        host.parse::<std::net::IpAddr>()
            .is_err()
            .then(|| host.to_string())
    });
    let server_name: ServerName<'static> = match &sni {
        Some(name) => ServerName::try_from(name.clone())
            .map_err(|_| ProbeError::BadServerName(name.clone()))?,
        None => ServerName::IpAddress(addr.ip().into()),
    };
    let target = Target {
        addr,
        server_name,
        host: sni.clone().unwrap_or_else(|| addr.ip().to_string()),
        // Records what the server presented; trust is not judged (the
        // certificate report says so).
        verifier: Arc::new(SignatureOnlyVerifier::new(&handshake::provider()).recording()),
        timeout: opts.timeout,
        samples: opts.samples.clamp(1, 20),
    };
    let mut notes = Vec::new();

    // The browser-like offer first. If it fails at TCP level nothing else
    // can work; if only the TLS handshake fails (a server with nothing but
    // DHE or CBC suites, say), the hand-built offers still tell why.
    let browser_cfg = target.config(rustls::ALL_VERSIONS, &[b"h2", b"http/1.1"], false)?;
    let first = match target.connect(browser_cfg.clone(), true) {
        Ok(first) => Some(first),
        Err(e @ ProbeError::Connect(_)) => return Err(e),
        Err(e) => {
            notes.push(format!(
                "browser-like offer: {e}; only the hand-built offers ran"
            ));
            None
        }
    };
    let presented = target.verifier.presented().unwrap_or_default();
    let browser = first.as_ref().map(describe);
    let tls13 = first
        .as_ref()
        .is_some_and(|f| f.timing.version == Some(rustls::ProtocolVersion::TLSv1_3));
    let failure = first.is_none().then_some(ProbeError::NoHandshake);
    // Close it now: some servers (openssl s_server) serve one connection at
    // a time.
    drop(first);

    let idle_watch = (browser.is_some() && !opts.idle_wait.is_zero())
        .then(|| http::watch_idle(&target, opts.idle_wait));

    let mut negotiation = negotiate::run(addr, sni.as_deref(), opts.timeout, &mut notes);
    negotiation.browser = browser.clone();
    let any_accepted = negotiation.versions.iter().any(|(_, a)| *a == Some(true));
    if let (Some(err), false) = (failure, any_accepted) {
        return Err(match address::plain_http_status(addr, opts.timeout) {
            Some(status) => ProbeError::PlainHttp(status),
            None => err,
        });
    }

    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let certificate = certinfo::inspect(&presented.chain, &presented.ocsp, tls13, now);

    let (round_trips, resumption, mut http) = match &browser {
        Some(browser) => (
            measure_round_trips(&target, browser_cfg, &certificate, &mut notes),
            resumption::measure(&target, &mut notes),
            http::measure(&target, browser, &mut notes),
        ),
        None => Default::default(),
    };
    if browser.is_some() {
        let rtt = round_trips
            .as_ref()
            .filter(|r| r.rtt_large_enough)
            .map(|r| r.rtt_ms);
        http.h3 = crate::h3::check(&target, http.alt_svc.as_deref(), rtt, &mut notes);
    }
    if let Some(watch) = idle_watch {
        match watch.join() {
            Ok(Ok(idle)) => http.idle = Some(idle),
            Ok(Err(e)) => notes.push(format!("idle timeout: {e}")),
            Err(_) => notes.push("idle timeout: the watch thread failed".into()),
        }
    }

    let mut report = Report {
        target: opts.target.clone(),
        address: addr.to_string(),
        server_name: sni.unwrap_or_else(|| "(none: IP address)".into()),
        findings: Vec::new(),
        negotiation,
        round_trips,
        resumption,
        http,
        certificate,
        notes,
    };
    report.findings = findings::evaluate(&report);
    report.sort_findings();
    Ok(report)
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, ProbeError> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| ProbeError::Resolve(format!("{host}:{port}"), e.to_string()))?
        .next()
        .ok_or_else(|| ProbeError::Resolve(format!("{host}:{port}"), "no address".into()))
}

fn describe(e: &Established) -> Negotiated {
    let t = &e.timing;
    Negotiated {
        version: t
            .version
            .map_or("?".into(), |v| suites::version_name(v).into_owned()),
        suite: t
            .suite
            .map_or("?".into(), |s| suites::suite_name(s).into_owned()),
        key_exchange: t.suite.and_then(|s| suites::suite(s.into())).map(|s| s.kx),
        group: t.group.map(|g| suites::group_name(g).into_owned()),
        alpn: t
            .alpn
            .as_ref()
            .map(|a| String::from_utf8_lossy(a).into_owned()),
    }
}

/// Milliseconds, for reports.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn measure_round_trips(
    target: &Target,
    config: Arc<rustls::ClientConfig>,
    cert: &Option<certinfo::CertReport>,
    notes: &mut Vec<String>,
) -> Option<RoundTrips> {
    let mut samples = Vec::new();
    for _ in 0..target.samples.min(10) {
        match target.connect(config.clone(), true) {
            Ok(e) => samples.push(e.timing),
            Err(err) => notes.push(format!("round-trip handshake: {err}")),
        }
    }
    // Minimums: a structural stall shows in every sample, noise in a few.
    let rtt = samples.iter().map(|t| t.connect).min()?;
    let handshake = samples.iter().map(|t| t.handshake).min()?;
    let spread = samples.iter().map(|t| t.flight_spread).min()?;
    let first_byte = samples.iter().map(|t| t.first_byte).min()?;
    let flight_bytes = samples.iter().map(|t| t.flight_bytes).max()?;
    let hello_retry = samples
        .iter()
        .any(|t| t.kind == Some(rustls::HandshakeKind::FullWithHelloRetryRequest));
    let rtt_large_enough = rtt >= MIN_COUNTABLE_RTT;
    let extra_round_trips = if rtt_large_enough {
        (spread.as_secs_f64() / rtt.as_secs_f64()).round() as u32
    } else {
        0
    };
    let chain_bytes = cert.as_ref().map_or(0, |c| c.chain_bytes);
    let ocsp_bytes = cert.as_ref().map_or(0, |c| c.ocsp_bytes);
    Some(RoundTrips {
        rtt_ms: ms(rtt),
        handshake_ms: ms(handshake),
        first_byte_ms: ms(first_byte),
        handshake_rtts: handshake.as_secs_f64() / rtt.as_secs_f64().max(1e-6),
        flight_spread_ms: ms(spread),
        extra_round_trips,
        hello_retry,
        flight_bytes,
        chain_bytes,
        ocsp_bytes,
        other_bytes: flight_bytes.saturating_sub(chain_bytes + ocsp_bytes),
        initial_window_bytes: INITIAL_WINDOW_BYTES,
        rtt_large_enough,
    })
}
