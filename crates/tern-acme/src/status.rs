//! What an ACME certificate is doing, for metrics and `/health`.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Counters and state of one managed certificate.
#[derive(Debug)]
pub struct CertStatus {
    /// `first-name+N (ecdsa)`.
    pub label: String,
    orders: AtomicU64,
    failures: AtomicU64,
    /// Unix seconds; 0 while a placeholder is served.
    not_after: AtomicI64,
    issued: AtomicBool,
    ordering: AtomicBool,
    next_attempt: AtomicI64,
    last_error: Mutex<Option<String>>,
}

/// A copy of [`CertStatus`] at one instant.
#[derive(Clone, Debug)]
pub struct StatusSnapshot {
    /// `first-name+N (ecdsa)`.
    pub label: String,
    /// Certificates obtained by this process.
    pub orders: u64,
    /// Failed attempts by this process.
    pub failures: u64,
    /// Unix seconds of the served certificate's notAfter; None for the placeholder.
    pub not_after: Option<i64>,
    /// An order is under way.
    pub ordering: bool,
    /// Unix seconds of the next look or attempt.
    pub next_attempt: Option<i64>,
    /// The last failure since the last success.
    pub last_error: Option<String>,
}

fn unix(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl CertStatus {
    pub(crate) fn new(label: String) -> Self {
        CertStatus {
            label,
            orders: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            not_after: AtomicI64::new(0),
            issued: AtomicBool::new(false),
            ordering: AtomicBool::new(false),
            next_attempt: AtomicI64::new(0),
            last_error: Mutex::new(None),
        }
    }

    pub(crate) fn installed(&self, not_after: SystemTime, issued: bool) {
        self.not_after.store(unix(not_after), Ordering::Relaxed);
        self.issued.store(issued, Ordering::Relaxed);
        if let Ok(mut e) = self.last_error.lock() {
            *e = None;
        }
    }

    pub(crate) fn ordering(&self) {
        self.ordering.store(true, Ordering::Relaxed);
    }

    pub(crate) fn ordered(&self) {
        self.ordering.store(false, Ordering::Relaxed);
        self.orders.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn failed(&self, error: String) {
        self.ordering.store(false, Ordering::Relaxed);
        self.failures.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut e) = self.last_error.lock() {
            *e = Some(error);
        }
    }

    pub(crate) fn next_attempt(&self, at: SystemTime) {
        self.next_attempt.store(unix(at), Ordering::Relaxed);
    }

    /// The current values.
    pub fn snapshot(&self) -> StatusSnapshot {
        let issued = self.issued.load(Ordering::Relaxed);
        let next = self.next_attempt.load(Ordering::Relaxed);
        StatusSnapshot {
            label: self.label.clone(),
            orders: self.orders.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            not_after: issued.then(|| self.not_after.load(Ordering::Relaxed)),
            ordering: self.ordering.load(Ordering::Relaxed),
            next_attempt: (next > 0).then_some(next),
            last_error: self.last_error.lock().ok().and_then(|e| e.clone()),
        }
    }
}
