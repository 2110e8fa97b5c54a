//! The ACME families of the exposition: one series per kept certificate,
//! labelled `certificate="first-name+N (key type)"`.

use tern_acme::StatusSnapshot;

use super::text::{Exposition, Kind};

pub(super) fn render(e: &mut Exposition, certs: &[StatusSnapshot]) {
    if certs.is_empty() {
        return;
    }
    e.family(
        "tern_acme_orders_total",
        Kind::Counter,
        "Certificates this process obtained from the ACME CA.",
    );
    for c in certs {
        e.sample(
            "tern_acme_orders_total",
            &[("certificate", &c.label)],
            c.orders,
        );
    }
    e.family(
        "tern_acme_failures_total",
        Kind::Counter,
        "Failed ACME attempts (CA refused or unreachable, validation failed); each is retried with backoff.",
    );
    for c in certs {
        e.sample(
            "tern_acme_failures_total",
            &[("certificate", &c.label)],
            c.failures,
        );
    }
    e.family(
        "tern_acme_certificate_ready",
        Kind::Gauge,
        "1 when a CA-issued certificate is served, 0 while the self-signed placeholder is.",
    );
    for c in certs {
        let ready = u64::from(c.not_after.is_some());
        e.sample(
            "tern_acme_certificate_ready",
            &[("certificate", &c.label)],
            ready,
        );
    }
    e.family(
        "tern_acme_certificate_not_after_seconds",
        Kind::Gauge,
        "End of validity of the served certificate since the Unix epoch, in seconds (0 for the placeholder).",
    );
    for c in certs {
        let t = c.not_after.unwrap_or(0).max(0) as u64;
        e.sample(
            "tern_acme_certificate_not_after_seconds",
            &[("certificate", &c.label)],
            t,
        );
    }
}

/// `/health` lines: one per certificate, saying whether it is served from
/// the CA and what the last failure was.
pub fn health_lines(certs: &[StatusSnapshot]) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let mut out = String::new();
    for c in certs {
        let state = match c.not_after {
            Some(t) => format!("issued, expires in {}s", t - now),
            None if c.ordering => "placeholder served, ordering".to_string(),
            None => "placeholder served, not issued yet".to_string(),
        };
        out.push_str(&format!("acme {}: {state}", c.label));
        if let Some(next) = c.next_attempt.filter(|t| *t > now) {
            out.push_str(&format!("; next check in {}s", next - now));
        }
        if let Some(error) = &c.last_error {
            out.push_str(&format!("; last error: {error}"));
        }
        out.push('\n');
    }
    out
}
