//! Measurements of one worker (and, merged, of a whole run): HDR histograms
//! for total latency and each phase, per-second series, status codes, error
//! kinds and what the handshakes negotiated.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::tls::Negotiated;

/// Highest latency recorded, in microseconds (one hour); larger values are
/// clamped so a stuck request never panics the recorder.
const MAX_MICROS: u64 = 3_600_000_000;
/// Significant digits kept by every histogram (0.1% relative error).
const SIGFIGS: u8 = 3;

/// A latency histogram in microseconds.
pub fn new_histogram() -> Histogram<u64> {
    // Bounds are constants known to be valid; a failure is a programming error.
    Histogram::new_with_bounds(1, MAX_MICROS, SIGFIGS).expect("valid constant histogram bounds")
}

/// Records `d` in `h`, in microseconds, clamped to the histogram's range.
pub fn record(h: &mut Histogram<u64>, d: Duration) {
    let us = (d.as_micros() as u64).clamp(1, MAX_MICROS);
    h.saturating_record(us);
}

/// Significant digits of the per-second latency histograms (1%): they
/// resize to the largest latency recorded, so a second of loopback
/// traffic costs about 10 KiB, not the 190 KiB of a full-range
/// histogram at 3 digits.
const SECOND_SIGFIGS: u8 = 2;

/// A per-second latency histogram in microseconds.
pub fn new_second_histogram() -> Histogram<u64> {
    // A constant known to be valid; a failure is a programming error.
    let mut h = Histogram::new(SECOND_SIGFIGS).expect("valid constant histogram precision");
    h.auto(true);
    h
}

/// Completions and errors in one second of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SecondBucket {
    /// Requests that got a complete response in this second.
    pub completed: u64,
    /// Requests that failed in this second.
    pub errors: u64,
}

/// One request, for CSV output (hey `-o csv` columns plus ours).
#[derive(Debug, Clone, Copy)]
pub struct RequestRecord {
    /// Offset of the (intended) start from the run start.
    pub offset: Duration,
    /// Total latency.
    pub total: Duration,
    /// DNS lookup (zero when the connection was reused).
    pub dns: Duration,
    /// TCP connect (zero when reused).
    pub connect: Duration,
    /// TLS handshake (zero when reused).
    pub tls: Duration,
    /// Request written to first response byte.
    pub ttfb: Duration,
    /// First response byte to end of body.
    pub body: Duration,
    /// Status code, 0 on error.
    pub status: u16,
    /// Whether the TLS session was resumed (false when reused or plain).
    pub resumed: bool,
}

/// Everything measured for one target by one worker, or merged.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Total latency of successful requests (from the intended start in
    /// open loop).
    pub total: Histogram<u64>,
    /// DNS lookup per new connection.
    pub dns: Histogram<u64>,
    /// TCP connect per new connection.
    pub connect: Histogram<u64>,
    /// TLS handshake per new connection.
    pub tls: Histogram<u64>,
    /// Time from request written to first response byte.
    pub ttfb: Histogram<u64>,
    /// Time from first response byte to the end of the body.
    pub body: Histogram<u64>,
    /// Per-second completions and errors, indexed by seconds since start.
    pub series: Vec<SecondBucket>,
    /// Latency of the requests completed in each second (same index as
    /// `series`): per-second percentiles of several load machines merge
    /// exactly, as histograms add.
    pub second_latency: Vec<Histogram<u64>>,
    /// Responses per status code.
    pub status: BTreeMap<u16, u64>,
    /// Failed requests per error kind.
    pub errors: BTreeMap<String, u64>,
    /// Response body bytes received.
    pub body_bytes: u64,
    /// Connections opened (TCP connects that succeeded).
    pub connections: u64,
    /// Of those, set up before a round's clock started (a round that keeps
    /// its connections alive): their set-up is outside every figure but
    /// these counts.
    pub set_up: u64,
    /// Connections that failed or timed out while being set up before a
    /// round's clock (their slots opened another inside the round).
    pub set_up_failed: u64,
    /// TLS handshakes completed.
    pub handshakes: u64,
    /// Of those, resumed (abbreviated) handshakes.
    pub resumed: u64,
    /// Bytes received from the server during handshakes.
    pub handshake_bytes: u64,
    /// TLS 1.3 session tickets the server sent (after handshakes).
    pub tickets: u64,
    /// Handshakes per negotiated parameter set.
    pub negotiated: BTreeMap<Negotiated, u64>,
    /// Full handshakes whose certificate chain came compressed, per
    /// algorithm (RFC 8879; TLS over TCP only: quinn does not say).
    pub cert_compressed: BTreeMap<String, u64>,
    /// Wall time the workers ran.
    pub elapsed: Duration,
    /// Per-request records (only when asked for).
    pub records: Vec<RequestRecord>,
    /// QUIC transport figures (HTTP/3 runs).
    pub quic: crate::http3::QuicStats,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            total: new_histogram(),
            dns: new_histogram(),
            connect: new_histogram(),
            tls: new_histogram(),
            ttfb: new_histogram(),
            body: new_histogram(),
            series: Vec::new(),
            second_latency: Vec::new(),
            status: BTreeMap::new(),
            errors: BTreeMap::new(),
            body_bytes: 0,
            connections: 0,
            set_up: 0,
            set_up_failed: 0,
            handshakes: 0,
            resumed: 0,
            handshake_bytes: 0,
            tickets: 0,
            negotiated: BTreeMap::new(),
            cert_compressed: BTreeMap::new(),
            elapsed: Duration::ZERO,
            records: Vec::new(),
            quic: crate::http3::QuicStats::default(),
        }
    }
}

impl Stats {
    /// Requests that got a response (any status).
    pub fn completed(&self) -> u64 {
        self.status.values().sum()
    }

    /// Requests that failed.
    pub fn failed(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Counts a completion or error in the second `at` falls into.
    pub fn bump_series(&mut self, at: Duration, error: bool) {
        let i = at.as_secs() as usize;
        if self.series.len() <= i {
            self.series.resize(i + 1, SecondBucket::default());
        }
        if error {
            self.series[i].errors += 1;
        } else {
            self.series[i].completed += 1;
        }
    }

    /// Records the latency of a request completed at `at`.
    pub fn record_second(&mut self, at: Duration, latency: Duration) {
        let i = at.as_secs() as usize;
        if self.second_latency.len() <= i {
            self.second_latency.resize_with(i + 1, new_second_histogram);
        }
        record(&mut self.second_latency[i], latency);
    }

    /// Counts a failed request.
    pub fn count_error(&mut self, kind: String, at: Duration) {
        *self.errors.entry(kind).or_insert(0) += 1;
        self.bump_series(at, true);
    }

    /// Adds `other` into `self`. Series are aligned on their start (runs from
    /// several machines are assumed to start together); elapsed is the max.
    pub fn merge(&mut self, other: &Stats) {
        self.merge_shifted(other, 0);
    }

    /// Adds `other` into `self`, its per-second series starting `shift`
    /// seconds after `self`'s (a run of another load machine that started
    /// later).
    pub fn merge_shifted(&mut self, other: &Stats, shift: usize) {
        for (mine, theirs) in [
            (&mut self.total, &other.total),
            (&mut self.dns, &other.dns),
            (&mut self.connect, &other.connect),
            (&mut self.tls, &other.tls),
            (&mut self.ttfb, &other.ttfb),
            (&mut self.body, &other.body),
        ] {
            // Same bounds everywhere (new_histogram), so add cannot fail;
            // deserialized histograms with other bounds auto-resize.
            let _ = mine.add(theirs);
        }
        if self.series.len() < other.series.len() + shift {
            self.series
                .resize(other.series.len() + shift, SecondBucket::default());
        }
        for (mine, theirs) in self.series[shift..].iter_mut().zip(&other.series) {
            mine.completed += theirs.completed;
            mine.errors += theirs.errors;
        }
        if self.second_latency.len() < other.second_latency.len() + shift {
            self.second_latency
                .resize_with(other.second_latency.len() + shift, new_second_histogram);
        }
        for (mine, theirs) in self.second_latency[shift..]
            .iter_mut()
            .zip(&other.second_latency)
        {
            // Auto-resizing histograms of the same precision always add.
            let _ = mine.add(theirs);
        }
        for (k, v) in &other.status {
            *self.status.entry(*k).or_insert(0) += v;
        }
        for (k, v) in &other.errors {
            *self.errors.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &other.negotiated {
            *self.negotiated.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &other.cert_compressed {
            *self.cert_compressed.entry(k.clone()).or_insert(0) += v;
        }
        self.body_bytes += other.body_bytes;
        self.connections += other.connections;
        self.set_up += other.set_up;
        self.set_up_failed += other.set_up_failed;
        self.handshakes += other.handshakes;
        self.resumed += other.resumed;
        self.handshake_bytes += other.handshake_bytes;
        self.tickets += other.tickets;
        self.elapsed = self.elapsed.max(other.elapsed);
        self.records.extend_from_slice(&other.records);
        self.quic.merge(&other.quic);
    }

    /// Appends `other` after `self` in time (compare-mode rounds of one
    /// target): counts add, series concatenate, elapsed times add.
    pub fn append(&mut self, other: &Stats) {
        let series = std::mem::take(&mut self.series);
        let mut seconds = std::mem::take(&mut self.second_latency);
        // Seconds with errors only have no histogram yet: keep the index
        // of `series`.
        seconds.resize_with(series.len(), new_second_histogram);
        let elapsed = self.elapsed;
        self.merge(other);
        let mut joined = series;
        joined.extend_from_slice(&other.series);
        self.series = joined;
        let mut joined = seconds;
        joined.extend(other.second_latency.iter().cloned());
        self.second_latency = joined;
        self.elapsed = elapsed + other.elapsed;
    }

    /// Moves the per-second series `shift` seconds later (empty seconds
    /// first).
    pub fn delay_series(&mut self, shift: usize) {
        if shift == 0 {
            return;
        }
        let mut series = vec![SecondBucket::default(); shift];
        series.append(&mut self.series);
        self.series = series;
        let mut seconds: Vec<Histogram<u64>> = (0..shift).map(|_| new_second_histogram()).collect();
        seconds.append(&mut self.second_latency);
        self.second_latency = seconds;
    }
}
