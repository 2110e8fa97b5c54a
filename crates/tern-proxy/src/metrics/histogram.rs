//! A fixed-bucket latency histogram that many threads update without locks.

use std::time::Duration;

use super::sharded::ShardedCounters;

/// Upper bounds (µs) for TLS handshake durations: from a resumed handshake
/// on loopback (~100 µs) to a full one across continents on a lossy link.
pub(crate) const HANDSHAKE_BOUNDS_US: &[u64] = &[
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// Upper bounds (µs) for backend response times: from a cache hit next door
/// (~250 µs) to a report that takes a minute.
pub(crate) const BACKEND_BOUNDS_US: &[u64] = &[
    250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

/// Upper bounds (µs) for gRPC calls: from a unary call next door to a
/// stream held open for an hour.
pub(crate) const GRPC_BOUNDS_US: &[u64] = &[
    1_000,
    5_000,
    25_000,
    100_000,
    500_000,
    2_500_000,
    10_000_000,
    60_000_000,
    600_000_000,
    3_600_000_000,
];

/// Counts of observations per bucket (not cumulative: each observation
/// touches one counter) plus their sum, sharded by thread. Allocated once,
/// when the histogram is made.
#[derive(Debug)]
pub(crate) struct Histogram {
    /// Inclusive upper bound of each finite bucket, µs, ascending.
    bounds_us: &'static [u64],
    /// One counter per finite bucket, then the +Inf bucket, then the sum of
    /// all observations in µs.
    counters: ShardedCounters,
}

/// What a scrape reads from a [`Histogram`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct HistogramSnapshot {
    /// (upper bound µs, cumulative count) per finite bucket.
    pub cumulative: Vec<(u64, u64)>,
    /// All observations (the +Inf bucket).
    pub count: u64,
    /// Sum of all observations, µs.
    pub sum_us: u64,
}

impl Histogram {
    /// An empty histogram with `bounds_us` (ascending) as its finite buckets.
    pub fn new(bounds_us: &'static [u64]) -> Self {
        debug_assert!(bounds_us.windows(2).all(|w| w[0] < w[1]));
        Histogram {
            bounds_us,
            counters: ShardedCounters::new(bounds_us.len() + 2),
        }
    }

    /// Records one observation.
    pub fn observe(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        // `bucket` is at most bounds.len(), the +Inf slot, which exists.
        let bucket = self.bounds_us.partition_point(|&bound| bound < us);
        self.counters.add(bucket, 1);
        self.counters.add(self.sum_slot(), us);
    }

    /// The buckets as Prometheus wants them (cumulative). Observations that
    /// land while this runs may be counted in some buckets and not others;
    /// the next scrape sees them everywhere.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut running = 0u64;
        let mut cumulative = Vec::with_capacity(self.bounds_us.len());
        for (i, bound) in self.bounds_us.iter().enumerate() {
            running = running.wrapping_add(self.counters.get(i));
            cumulative.push((*bound, running));
        }
        let overflow = self.counters.get(self.bounds_us.len());
        HistogramSnapshot {
            cumulative,
            count: running.wrapping_add(overflow),
            sum_us: self.counters.get(self.sum_slot()),
        }
    }

    /// The counter holding the sum (after the +Inf bucket).
    fn sum_slot(&self) -> usize {
        self.bounds_us.len() + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        static BOUNDS: &[u64] = &[10, 100];
        let h = Histogram::new(BOUNDS);
        h.observe(Duration::from_micros(10)); // le=10 is inclusive
        h.observe(Duration::from_micros(11));
        h.observe(Duration::from_micros(100));
        h.observe(Duration::from_secs(1));
        assert_eq!(
            h.snapshot(),
            HistogramSnapshot {
                cumulative: vec![(10, 1), (100, 3)],
                count: 4,
                sum_us: 10 + 11 + 100 + 1_000_000,
            }
        );
    }

    #[test]
    fn bucket_bounds_ascend() {
        for bounds in [HANDSHAKE_BOUNDS_US, BACKEND_BOUNDS_US, GRPC_BOUNDS_US] {
            assert!(bounds.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
