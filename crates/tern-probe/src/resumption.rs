//! Session resumption: TLS 1.3 PSK, TLS 1.2 session IDs, TLS 1.2 tickets,
//! and what a resumed handshake costs against a full one.

use std::sync::Arc;
use std::time::Duration;

use rustls::client::Tls12Resumption;

use crate::http;
use crate::probe::{ms, Target};
use crate::report::Resumption;
use crate::ProbeError;

/// A full handshake, a request so that TLS 1.3 tickets arrive (they follow
/// the handshake; reading the response proves we read them), then a second
/// connection from the same config: `(resumed, full time, second time)`.
fn resumed_pair(
    target: &Target,
    config: Arc<rustls::ClientConfig>,
) -> Result<(bool, Duration, Duration), ProbeError> {
    let mut full = target.connect(config.clone(), true)?;
    let full_time = full.timing.handshake;
    full.send(&http::get_head(&target.host, true))
        .map_err(ProbeError::Http)?;
    let _ = full.receive_until(|b| http::parse_head(b).is_some());
    full.conn.send_close_notify();
    let _ = full.conn.write_tls(&mut full.sock);
    drop(full);
    let again = target.connect(config, true)?;
    let resumed = again.timing.kind == Some(rustls::HandshakeKind::Resumed);
    Ok((resumed, full_time, again.timing.handshake))
}

/// Tries each resumption mechanism on its own pair of connections.
pub(crate) fn measure(target: &Target, notes: &mut Vec<String>) -> Resumption {
    let mut r = Resumption::default();
    let tls13 = [&rustls::version::TLS13];
    let tls12 = [&rustls::version::TLS12];
    let attempts: [(
        &str,
        &[&'static rustls::SupportedProtocolVersion],
        Tls12Resumption,
    ); 3] = [
        ("TLS 1.3 PSK", &tls13, Tls12Resumption::Disabled),
        ("TLS 1.2 session ID", &tls12, Tls12Resumption::SessionIdOnly),
        (
            "TLS 1.2 ticket",
            &tls12,
            Tls12Resumption::SessionIdOrTickets,
        ),
    ];
    for (label, versions, tls12_mode) in attempts {
        let config = match target.config(versions, &[b"http/1.1"], true) {
            Ok(mut c) => {
                if let Some(c) = Arc::get_mut(&mut c) {
                    c.resumption = c.resumption.clone().tls12_resumption(tls12_mode);
                }
                c
            }
            Err(e) => {
                notes.push(format!("{label}: {e}"));
                continue;
            }
        };
        let outcome = match resumed_pair(target, config) {
            Ok((resumed, full, again)) => {
                if resumed && r.resumed_handshake_ms.is_none() {
                    r.full_handshake_ms = Some(ms(full));
                    r.resumed_handshake_ms = Some(ms(again));
                }
                Some(resumed)
            }
            Err(e) => {
                notes.push(format!("{label} resumption: {e}"));
                None
            }
        };
        match label {
            "TLS 1.3 PSK" => r.tls13_psk = outcome,
            "TLS 1.2 session ID" => r.tls12_session_id = outcome,
            _ => r.tls12_ticket_or_id = outcome,
        }
    }
    r
}
