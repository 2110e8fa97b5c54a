//! The rules that turn measurements into findings, each with the fix.

use crate::report::{Finding, Report, Severity};
use crate::wire::KeyExchange;

/// Split-write penalties whose server part (penalty minus one RTT) is above
/// this are flagged: the delayed-ACK timer is 40 ms on Linux and 200 ms
/// elsewhere, so a real penalty is far above it, while noise on a quiet path
/// is far below.
pub const SPLIT_WRITE_THRESHOLD_MS: f64 = 10.0;

/// A small request this much slower than the round trip, and not much
/// more, waited for a timer of the delayed-ACK class (Linux: 40 ms), not
/// for work.
pub const STALL_MIN_MS: f64 = 30.0;
/// Past this, a slow request is slowness, not a delayed ACK.
pub const STALL_MAX_MS: f64 = 250.0;

/// Idle keepalive timeouts below this many seconds are flagged.
pub const SHORT_IDLE_TIMEOUT_S: f64 = 2.0;

/// Certificates closer than this to expiry are flagged.
pub const EXPIRY_WARNING_DAYS: i64 = 14;

/// All findings for a report, in rule order (the caller sorts by severity).
pub fn evaluate(r: &Report) -> Vec<Finding> {
    let mut f = Vec::new();
    negotiation(r, &mut f);
    round_trips(r, &mut f);
    resumption(r, &mut f);
    http(r, &mut f);
    backend_leg_stall(r, &mut f);
    h3(r, &mut f);
    certificate(r, &mut f);
    f
}

fn push(
    f: &mut Vec<Finding>,
    severity: Severity,
    id: &'static str,
    title: String,
    detail: String,
    fix: &str,
) {
    f.push(Finding {
        severity,
        id,
        title,
        detail,
        fix: fix.to_string(),
    });
}

fn negotiation(r: &Report, f: &mut Vec<Finding>) {
    let n = &r.negotiation;
    if n.browser.is_none() {
        push(
            f,
            Severity::High,
            "modern_offer_refused",
            "A browser-like offer (TLS 1.3/1.2, ECDHE, AEAD suites) was refused".into(),
            "Current browsers and HTTP clients cannot connect; only legacy offers work (see \
             the negotiation details)."
                .into(),
            "Enable TLS 1.2+ with ECDHE and AES-GCM or ChaCha20-Poly1305 suites.",
        );
    }
    if let Some(legacy) = &n.legacy {
        match legacy.key_exchange {
            Some(KeyExchange::Dhe) => push(
                f,
                Severity::High,
                "dhe_selected",
                format!(
                    "Server picks finite-field DHE ({}) although the client offered ECDHE first",
                    legacy.suite
                ),
                "Every TLS 1.2 client that still offers DHE gets a key exchange costing several \
                 times the CPU of ECDHE on both sides, typically from a copied cipher string."
                    .into(),
                "Remove DHE suites from the server's cipher list (keep ECDHE with AES-GCM or \
                 ChaCha20-Poly1305), or at least order ECDHE first with server preference on.",
            ),
            Some(KeyExchange::Rsa) => push(
                f,
                Severity::Medium,
                "rsa_key_exchange",
                format!("Server picks RSA key exchange ({})", legacy.suite),
                "RSA key transport has no forward secrecy and costs an RSA private-key \
                 decryption per handshake."
                    .into(),
                "Offer ECDHE suites and prefer them.",
            ),
            _ => {}
        }
        if legacy.suite.contains("_CBC_") {
            push(
                f,
                Severity::Low,
                "cbc_selected",
                format!(
                    "Server picks a CBC suite ({}) over the AEAD suites offered",
                    legacy.suite
                ),
                "CBC with HMAC is slower than AES-GCM or ChaCha20-Poly1305 and rules out HTTP/2."
                    .into(),
                "Prefer AEAD suites (AES-GCM, ChaCha20-Poly1305).",
            );
        }
    }
    let legacy_dhe = n.legacy.as_ref().and_then(|l| l.key_exchange) == Some(KeyExchange::Dhe);
    if !legacy_dhe {
        if let Some(d) = &n.legacy_dhe_first {
            if d.key_exchange == Some(KeyExchange::Dhe) {
                push(
                    f,
                    Severity::Low,
                    "dhe_enabled",
                    format!(
                        "Server accepts DHE ({}) when a client lists it first",
                        d.suite
                    ),
                    "The server follows the client's suite order and has DHE enabled; clients \
                     that prefer DHE pay several times the handshake CPU."
                        .into(),
                    "Remove DHE suites, or turn on server preference with ECDHE first.",
                );
            }
        }
    }
    for (version, accepted) in &n.versions {
        if (version == "TLSv1.0" || version == "TLSv1.1") && *accepted == Some(true) {
            push(
                f,
                Severity::Low,
                "old_tls_version",
                format!("Server accepts {version}"),
                "Versions below TLS 1.2 offer only CBC and legacy hashes, and no HTTP/2.".into(),
                "Accept TLS 1.2 and 1.3 only.",
            );
        }
        if version == "TLSv1.3" && *accepted == Some(false) {
            push(
                f,
                Severity::Medium,
                "no_tls13",
                "Server does not accept TLS 1.3".into(),
                "A full TLS 1.2 handshake takes two round trips; TLS 1.3 takes one.".into(),
                "Enable TLS 1.3.",
            );
        }
    }
}

fn round_trips(r: &Report, f: &mut Vec<Finding>) {
    let Some(rt) = &r.round_trips else { return };
    if rt.extra_round_trips > 0 {
        let cause = if rt.flight_bytes > rt.initial_window_bytes {
            "the flight is larger than the initial congestion window"
        } else {
            "the server wrote its flight in pieces without TCP_NODELAY, so Nagle held the rest back until our ACK"
        };
        push(
            f,
            Severity::High,
            "extra_round_trip",
            format!(
                "The server's first handshake flight took {} extra round trip(s) ({:.1} ms at {:.1} ms RTT)",
                rt.extra_round_trips, rt.flight_spread_ms, rt.rtt_ms
            ),
            format!(
                "{} bytes arrived over {:.1} ms instead of at once: {cause}.",
                rt.flight_bytes, rt.flight_spread_ms
            ),
            "Set TCP_NODELAY before the handshake and write the whole flight in one write \
             (a TLS write buffer of at least 16 KiB); keep chain + OCSP staple under ~14 KB.",
        );
    }
    if rt.hello_retry {
        push(
            f,
            Severity::Medium,
            "hello_retry_request",
            "The server asks browser-like clients for another key share".into(),
            "It answered a ClientHello with X25519 (and X25519MLKEM768) key shares with a \
             HelloRetryRequest: every full handshake takes an extra round trip."
                .into(),
            "Prefer X25519 (and X25519MLKEM768) on the server, or at least accept them.",
        );
    }
    // Clients that cannot decompress get the chain whole.
    let whole = rt
        .without_compression
        .as_ref()
        .map_or(rt.flight_bytes, |w| w.flight_bytes);
    if whole > rt.initial_window_bytes {
        let compressed_fits =
            rt.cert_compression.is_some() && rt.flight_bytes <= rt.initial_window_bytes;
        let (severity, title, compression) = if compressed_fits {
            (
                Severity::Low,
                format!(
                    "First flight is {whole} bytes without certificate compression, above the \
                     initial congestion window ({} bytes); {} bytes compressed",
                    rt.initial_window_bytes, rt.flight_bytes
                ),
                " Clients that offer certificate compression (browsers) avoid it; the others \
                 (TLS 1.2, OpenSSL before 3.2, most non-browser clients) do not.",
            )
        } else {
            (
                Severity::Medium,
                format!(
                    "First flight is {} bytes, above the initial congestion window ({} bytes)",
                    rt.flight_bytes, rt.initial_window_bytes
                ),
                match rt.cert_compression {
                    Some(_) => " Certificate compression does not make it fit.",
                    None => " The server does not compress its certificate chain (RFC 8879).",
                },
            )
        };
        push(
            f,
            severity,
            "flight_exceeds_initial_window",
            title,
            format!(
                "Certificate chain {} bytes, OCSP staple {} bytes, the rest {} bytes; a new \
                 connection needs an extra round trip to receive it.{compression}",
                rt.chain_bytes, rt.ocsp_bytes, rt.other_bytes
            ),
            "Send a shorter chain (no root, fewer intermediates), use an ECDSA certificate, \
             offer certificate compression (brotli), or drop a stale OCSP staple.",
        );
    }
}

fn resumption(r: &Report, f: &mut Vec<Finding>) {
    let s = &r.resumption;
    let tried = [s.tls13_psk, s.tls12_session_id, s.tls12_ticket_or_id];
    if tried.iter().any(Option::is_some) && !tried.contains(&Some(true)) {
        push(
            f,
            Severity::Medium,
            "no_resumption",
            "Server does not resume TLS sessions".into(),
            "Every reconnecting client pays a full handshake: a signature and a key agreement \
             on the server."
                .into(),
            "Enable session tickets (with rotated keys) or a session cache.",
        );
    }
}

fn http(r: &Report, f: &mut Vec<Finding>) {
    let h = &r.http;
    if r.negotiation.browser.is_some() && !h.h2 {
        push(
            f,
            Severity::Low,
            "no_h2",
            "HTTP/2 is not negotiated over ALPN".into(),
            format!(
                "A browser-like offer of h2 and http/1.1 got {}; browsers open up to six \
                 connections (six handshakes) per origin instead of one.",
                h.alpn.as_deref().unwrap_or("no ALPN")
            ),
            "Offer h2 in ALPN (it needs TLS 1.2+ with an AEAD suite).",
        );
    }
    if h.keepalive == Some(false) {
        push(
            f,
            Severity::Medium,
            "no_keepalive",
            "Server closes the connection after each HTTP/1.1 request".into(),
            "Every request pays a TCP and TLS handshake.".into(),
            "Enable HTTP keepalive.",
        );
    }
    if let Some(t) = h.idle.as_ref().and_then(|i| i.closed_after_s) {
        if t < SHORT_IDLE_TIMEOUT_S {
            push(
                f,
                Severity::Low,
                "short_idle_timeout",
                format!("Server closes idle keepalive connections after {t:.1} s"),
                "Clients that pause between requests (browsers, API clients with think time) \
                 reconnect and pay a new handshake."
                    .into(),
                "Keep idle connections open for tens of seconds (nginx's default is 75 s).",
            );
        }
    }
    if let Some(sw) = &h.split_write {
        // One round trip of the penalty is the client's own Nagle wait for
        // the ACK of the head: no server can remove it. The rest is the
        // server's delayed ACK, which the server can.
        let rtt = r.round_trips.as_ref().map_or(0.0, |rt| rt.rtt_ms);
        let server_part = sw.penalty_ms - rtt;
        if server_part > SPLIT_WRITE_THRESHOLD_MS {
            push(
                f,
                Severity::High,
                "split_write_penalty",
                format!(
                    "A POST written in two pieces takes {:.1} ms longer, {:.1} ms of it the \
                     server's delayed ACK",
                    sw.penalty_ms, server_part
                ),
                format!(
                    "One write: {:.1} ms; head then body in two writes with Nagle on: {:.1} ms. \
                     Nagle holds the body until the head is acknowledged ({:.1} ms, one round \
                     trip, is that wait), and the server delays that ACK while it waits for \
                     the body.",
                    sw.one_write_ms, sw.split_write_ms, rtt
                ),
                "Servers: re-arm TCP_QUICKACK after each read while a request body is \
                 expected (or answer before the body). Clients: write head and body in one \
                 write, or set TCP_NODELAY; only this removes the round trip as well.",
            );
        }
    }
}

/// Small GETs on a warm keepalive connection taking about one delayed-ACK
/// timeout longer than the fastest of them: the classic stall of a backend
/// that writes its response head and body apart, behind a terminator that
/// does not acknowledge at once. From outside the probe
/// cannot see the backend, so the finding says "likely"; a backend that
/// really needs 40 ms per request looks the same.
fn backend_leg_stall(r: &Report, f: &mut Vec<Finding>) {
    let Some(kl) = r.http.keepalive_get.as_ref() else {
        return;
    };
    // Beyond the network's round trip (the fastest request stands in when
    // no round trip was measured).
    let base = r.round_trips.as_ref().map_or(kl.min_ms, |rt| rt.rtt_ms);
    let extra: Vec<f64> = kl
        .times_ms
        .iter()
        .map(|t| t - base)
        .filter(|x| (STALL_MIN_MS..STALL_MAX_MS).contains(x))
        .collect();
    let stalled = extra.len();
    let stall_ms = extra.iter().sum::<f64>() / stalled.max(1) as f64;
    // A stall on a share of the requests, not one slow request: depending
    // on the kernel's quick-ACK heuristics every request pays it, or about
    // every other one.
    if stalled >= 2 && stalled * 3 >= kl.samples {
        push(
            f,
            Severity::High,
            "backend_leg_stall",
            format!(
                "{} of {} small requests on a kept-alive connection took {:.1} ms more than \
                 the round trip: likely a delayed-ACK stall on the backend leg",
                stalled, kl.samples, stall_ms
            ),
            format!(
                "GETs back to back, each in one write with TCP_NODELAY: fastest {:.2} ms, \
                 median {:.2} ms. A terminator's own work costs well under a millisecond; a \
                 steady extra ~40 ms is Linux's delayed ACK. The usual cause: the backend \
                 writes its response head and body in two writes with Nagle on (Python's \
                 http.server, many frameworks), so the body waits for the terminator to \
                 acknowledge the head on its pooled backend connection.",
                kl.min_ms, kl.median_ms
            ),
            "Backend: write head and body in one write, or set TCP_NODELAY. Terminator: \
             acknowledge backend data at once (TCP_QUICKACK after reading a response head, \
             as tern does). Confirm with the same requests to the backend directly.",
        );
    }
}

/// An Alt-Svc that promises HTTP/3 where no QUIC handshake completes:
/// browsers that believe it try QUIC first (or race it), wait, and only
/// then fall back, on every new visit until they mark it broken.
fn h3(r: &Report, f: &mut Vec<Finding>) {
    let q = &r.http.h3;
    let Some(port) = q.advertised_port else {
        return;
    };
    if q.reachable {
        return;
    }
    push(
        f,
        Severity::Medium,
        "alt_svc_h3_unreachable",
        format!("Alt-Svc advertises HTTP/3 on UDP port {port}, but no QUIC handshake completed"),
        format!(
            "Alt-Svc: {}. {}. Browsers that trust the advertisement try QUIC and fall back to \
             TCP only after a timeout or a failed attempt, so new visitors pay for it.",
            q.alt_svc.as_deref().unwrap_or(""),
            q.error.as_deref().unwrap_or("no handshake")
        ),
        "Open the UDP port on every firewall, load balancer and security group in the path \
         (and serve HTTP/3 there: tern serve --http3), or stop advertising it (in tern: \
         alt_svc_max_age = 0, or no --http3; elsewhere, remove the backend's Alt-Svc field).",
    );
}

fn certificate(r: &Report, f: &mut Vec<Finding>) {
    let Some(c) = &r.certificate else { return };
    if c.days_left < 0 {
        push(
            f,
            Severity::High,
            "cert_expired",
            format!("Certificate expired on {}", c.not_after),
            "Clients refuse the handshake.".into(),
            "Renew the certificate.",
        );
    } else if c.days_left < EXPIRY_WARNING_DAYS {
        push(
            f,
            Severity::Medium,
            "cert_expires_soon",
            format!(
                "Certificate expires in {} days ({})",
                c.days_left, c.not_after
            ),
            "Renewal automation may have failed.".into(),
            "Renew the certificate.",
        );
    }
    match (&c.ocsp, c.ocsp_fresh) {
        (Some(st), _) if st.status == "revoked" => push(
            f,
            Severity::High,
            "ocsp_revoked",
            "The stapled OCSP response says the certificate is revoked".into(),
            "Clients that check the staple refuse the handshake.".into(),
            "Replace the certificate.",
        ),
        (Some(_), Some(false)) => push(
            f,
            Severity::Medium,
            "ocsp_stale",
            "The stapled OCSP response is outside its validity window".into(),
            "Clients ignore a stale staple; some then query the CA's responder themselves, \
             a DNS lookup and a connection on the critical path (must-staple certificates fail)."
                .into(),
            "Refresh the staple well before nextUpdate (or stop stapling).",
        ),
        (None, _) if c.ocsp_bytes > 0 => push(
            f,
            Severity::Low,
            "ocsp_unreadable",
            "The stapled OCSP response cannot be read for this certificate".into(),
            format!(
                "{} bytes were stapled ({}); clients will ignore them.",
                c.ocsp_bytes,
                c.ocsp_problem.as_deref().unwrap_or("unreadable")
            ),
            "Staple the DER OCSPResponse exactly as the responder returned it.",
        ),
        _ => {}
    }
    if !c.chain_in_order {
        push(
            f,
            Severity::Low,
            "chain_out_of_order",
            "Certificate chain is not in issuing order".into(),
            "Strict clients fail, lenient ones spend time rebuilding the path.".into(),
            "Serve the leaf first, then each issuer in turn.",
        );
    }
    if c.key.starts_with("RSA") && c.key_bits > 2048 {
        push(
            f,
            Severity::Low,
            "large_rsa_key",
            format!("{} certificate key", c.key),
            "An RSA-3072/4096 signature costs 3-7x an RSA-2048 one and ~20x an ECDSA P-256 one \
             on every full handshake."
                .into(),
            "Use an ECDSA P-256 certificate (alongside RSA-2048 for old clients if needed).",
        );
    }
}
