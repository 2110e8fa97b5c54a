//! `tern probe`: runs every check against one endpoint, in sequence, on
//! blocking sockets (timing is cleaner without a scheduler in the way).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::pki_types::ServerName;

use crate::handshake::{self, Established, RecordingVerifier};
use crate::http;
use crate::report::{Http, Negotiated, Report, Resumption, RoundTrips, SplitWrite};
use crate::{certinfo, findings, negotiate, ProbeError};

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
    /// Bound on each connect, read and write.
    pub timeout: Duration,
    /// Requests timed per variant in the split-write measurement, and full
    /// handshakes timed for round trips.
    pub samples: usize,
}

impl ProbeOptions {
    pub fn new(target: impl Into<String>) -> Self {
        ProbeOptions {
            target: target.into(),
            sni: None,
            timeout: Duration::from_secs(5),
            samples: 5,
        }
    }
}

/// Probes the endpoint. Errors only when not even one TLS handshake worked;
/// checks that fail individually are listed in [`Report::notes`].
pub fn probe(opts: &ProbeOptions) -> Result<Report, ProbeError> {
    let addr = resolve(&opts.target)?;
    let host = opts
        .target
        .rsplit_once(':')
        .map_or(opts.target.as_str(), |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
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
    let host_header = sni.clone().unwrap_or_else(|| addr.ip().to_string());
    let mut notes = Vec::new();

    // The browser-like offer first: if this fails, nothing else will work.
    let verifier = Arc::new(RecordingVerifier::new(handshake::provider()));
    let browser_cfg = handshake::client_config(
        rustls::ALL_VERSIONS,
        &[b"h2", b"http/1.1"],
        verifier.clone(),
    )?;
    let no_resume = {
        let mut c = (*browser_cfg).clone();
        c.resumption = rustls::client::Resumption::disabled();
        Arc::new(c)
    };
    let first = handshake::handshake(addr, &server_name, no_resume.clone(), true, opts.timeout)?;
    let presented = verifier.presented();
    let browser = describe(&first);
    let tls13 = first.timing.version == Some(rustls::ProtocolVersion::TLSv1_3);
    drop(first);

    let mut negotiation = negotiate::run(addr, sni.as_deref(), opts.timeout, &mut notes);
    negotiation.browser = Some(browser.clone());

    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let certificate = certinfo::inspect(&presented.chain, &presented.ocsp, tls13, now);

    let round_trips = measure_round_trips(
        addr,
        &server_name,
        no_resume,
        opts,
        &certificate,
        &mut notes,
    );
    let resumption = measure_resumption(
        addr,
        &server_name,
        &host_header,
        verifier.clone(),
        opts,
        &mut notes,
    );
    let http = measure_http(
        addr,
        &server_name,
        &host_header,
        verifier,
        &browser,
        opts,
        &mut notes,
    );

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

fn resolve(target: &str) -> Result<SocketAddr, ProbeError> {
    target
        .to_socket_addrs()
        .map_err(|e| ProbeError::Resolve(target.to_string(), e.to_string()))?
        .next()
        .ok_or_else(|| ProbeError::Resolve(target.to_string(), "no address".into()))
}

fn describe(e: &Established) -> Negotiated {
    let t = &e.timing;
    Negotiated {
        version: t
            .version
            .map_or("?".into(), |v| format!("{v:?}").replace('_', ".")),
        suite: t.suite.map_or("?".into(), |s| format!("{s:?}")),
        key_exchange: None,
        group: t.group.map(|g| format!("{g:?}")),
        alpn: t
            .alpn
            .as_ref()
            .map(|a| String::from_utf8_lossy(a).into_owned()),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn measure_round_trips(
    addr: SocketAddr,
    server_name: &ServerName<'static>,
    config: Arc<rustls::ClientConfig>,
    opts: &ProbeOptions,
    cert: &Option<certinfo::CertReport>,
    notes: &mut Vec<String>,
) -> Option<RoundTrips> {
    let mut samples = Vec::new();
    for _ in 0..opts.samples.clamp(1, 10) {
        match handshake::handshake(addr, server_name, config.clone(), true, opts.timeout) {
            Ok(e) => samples.push(e.timing),
            Err(err) => notes.push(format!("round-trip handshake: {err}")),
        }
    }
    // Minimums: a structural stall shows in every sample, noise in a few.
    let rtt = samples.iter().map(|t| t.connect).min()?;
    let handshake = samples.iter().map(|t| t.handshake).min()?;
    let spread = samples.iter().map(|t| t.flight_spread).min()?;
    let flight_bytes = samples.iter().map(|t| t.flight_bytes).max()?;
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
        handshake_rtts: handshake.as_secs_f64() / rtt.as_secs_f64().max(1e-6),
        flight_spread_ms: ms(spread),
        extra_round_trips,
        flight_bytes,
        chain_bytes,
        ocsp_bytes,
        other_bytes: flight_bytes.saturating_sub(chain_bytes + ocsp_bytes),
        initial_window_bytes: INITIAL_WINDOW_BYTES,
        rtt_large_enough,
    })
}

/// A full handshake, a request so that TLS 1.3 tickets arrive, then a second
/// connection from the same config: resumed or not.
fn resumed_pair(
    addr: SocketAddr,
    server_name: &ServerName<'static>,
    host: &str,
    config: Arc<rustls::ClientConfig>,
    opts: &ProbeOptions,
) -> Result<(bool, Duration, Duration), ProbeError> {
    let mut full = handshake::handshake(addr, server_name, config.clone(), true, opts.timeout)?;
    let full_time = full.timing.handshake;
    // Tickets come right after the handshake; the response proves we read them.
    full.send(&http::get_head(host, true))
        .map_err(ProbeError::Http)?;
    let _ = full.receive_until(|b| http::parse_head(b).is_some());
    full.conn.send_close_notify();
    let _ = full.conn.write_tls(&mut full.sock);
    drop(full);
    let again = handshake::handshake(addr, server_name, config, true, opts.timeout)?;
    let resumed = again.timing.kind == Some(rustls::HandshakeKind::Resumed);
    Ok((resumed, full_time, again.timing.handshake))
}

fn measure_resumption(
    addr: SocketAddr,
    server_name: &ServerName<'static>,
    host: &str,
    verifier: Arc<RecordingVerifier>,
    opts: &ProbeOptions,
    notes: &mut Vec<String>,
) -> Resumption {
    let mut r = Resumption::default();
    for (versions, is13) in [
        (&[&rustls::version::TLS13][..], true),
        (&[&rustls::version::TLS12][..], false),
    ] {
        let Ok(cfg) = handshake::client_config(versions, &[b"http/1.1"], verifier.clone()) else {
            continue;
        };
        match resumed_pair(addr, server_name, host, cfg, opts) {
            Ok((resumed, full, again)) => {
                if is13 {
                    r.tls13_psk = Some(resumed)
                } else {
                    r.tls12 = Some(resumed)
                }
                if resumed && r.resumed_handshake_ms.is_none() {
                    r.full_handshake_ms = Some(ms(full));
                    r.resumed_handshake_ms = Some(ms(again));
                }
            }
            Err(e) => notes.push(format!(
                "resumption over {}: {e}",
                if is13 { "TLS 1.3" } else { "TLS 1.2" }
            )),
        }
    }
    r
}

#[allow(clippy::too_many_arguments)]
fn measure_http(
    addr: SocketAddr,
    server_name: &ServerName<'static>,
    host: &str,
    verifier: Arc<RecordingVerifier>,
    browser: &Negotiated,
    opts: &ProbeOptions,
    notes: &mut Vec<String>,
) -> Http {
    let mut h = Http {
        alpn: browser.alpn.clone(),
        h2: browser.alpn.as_deref() == Some("h2"),
        ..Http::default()
    };
    let cfg = match handshake::client_config(rustls::ALL_VERSIONS, &[b"http/1.1"], verifier) {
        Ok(mut c) => {
            if let Some(c) = Arc::get_mut(&mut c) {
                c.resumption = rustls::client::Resumption::disabled();
            }
            c
        }
        Err(e) => {
            notes.push(format!("HTTP checks: {e}"));
            return h;
        }
    };
    // Keepalive: two GETs on one connection.
    match handshake::handshake(addr, server_name, cfg.clone(), true, opts.timeout) {
        Ok(mut conn) => {
            let first = http::request(&mut conn, &http::get_head(host, false), &[], false);
            match first {
                Ok((_, Some(head))) if !head.close => {
                    h.keepalive_timeout_s = head.keepalive_timeout;
                    let second = http::request(&mut conn, &http::get_head(host, false), &[], false);
                    h.keepalive = Some(matches!(second, Ok((_, Some(_)))));
                }
                Ok((_, Some(_))) => h.keepalive = Some(false),
                Ok((_, None)) => notes.push("HTTP: no HTTP/1.1 response to GET /".into()),
                Err(e) => notes.push(format!("HTTP: {e}")),
            }
        }
        Err(e) => notes.push(format!("HTTP: {e}")),
    }
    match split_write_penalty(addr, server_name, host, cfg, opts) {
        Ok(sw) => h.split_write = Some(sw),
        Err(e) => notes.push(format!("split-write penalty: {e}")),
    }
    h
}

/// POSTs with Nagle on (as old HTTP clients did), head and body in one
/// write and in two, interleaved on one keepalive connection when the server
/// keeps it open. Warm-up requests first: Linux acknowledges the first
/// segments of a connection at once (quick-ack mode), which would hide the
/// delayed ACK that the penalty comes from.
fn split_write_penalty(
    addr: SocketAddr,
    server_name: &ServerName<'static>,
    host: &str,
    config: Arc<rustls::ClientConfig>,
    opts: &ProbeOptions,
) -> Result<SplitWrite, ProbeError> {
    const WARM_UP: usize = 4;
    let head = http::post_head(host);
    let body = vec![b'x'; http::POST_BODY_LEN];
    let samples = opts.samples.clamp(1, 20);
    let mut one = Vec::new();
    let mut split = Vec::new();
    let mut conn: Option<Established> = None;
    for i in 0..(WARM_UP + 2 * samples) {
        let mut c = match conn.take() {
            Some(c) => c,
            None => handshake::handshake(addr, server_name, config.clone(), false, opts.timeout)?,
        };
        let is_split = i >= WARM_UP && i % 2 == 1;
        let (took, resp) =
            http::request(&mut c, &head, &body, is_split).map_err(ProbeError::Http)?;
        let resp = resp.ok_or(ProbeError::NoHttpResponse)?;
        if i >= WARM_UP {
            if is_split {
                split.push(took)
            } else {
                one.push(took)
            }
        }
        if !resp.close {
            conn = Some(c);
        }
    }
    let one_ms = ms(http::median(one));
    let split_ms = ms(http::median(split));
    Ok(SplitWrite {
        one_write_ms: one_ms,
        split_write_ms: split_ms,
        penalty_ms: split_ms - one_ms,
        samples,
    })
}
