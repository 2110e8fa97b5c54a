//! Counters split into per-thread shards, so workers on different cores
//! never write the same cache line.
//!
//! One shared counter that every worker increments moves its cache line
//! between cores on nearly every request once two workers are busy (each
//! move costs tens of nanoseconds, and a request touches several
//! counters). Each thread instead adds into its own shard (threads are
//! given shards in turn), and a scrape sums the shards. Shards are whole
//! cache lines apart.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Shards per counter set. More than the worker threads tern runs on the
/// machines it targets; if there are more threads, some share a shard,
/// which costs speed, not correctness.
const SHARDS: usize = 16;

/// Counters per cache line (64 bytes).
const PER_LINE: usize = 8;

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
}

/// The calling thread's shard.
fn shard() -> usize {
    // Fails only while the thread is being torn down; any shard is correct.
    SHARD.try_with(|s| *s).unwrap_or(0)
}

/// One cache line of counters.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Line([AtomicU64; PER_LINE]);

/// A fixed number of counters, sharded by thread.
#[derive(Debug)]
pub(crate) struct ShardedCounters {
    slots: usize,
    lines_per_shard: usize,
    lines: Box<[Line]>,
}

impl ShardedCounters {
    /// `slots` counters, all zero.
    pub fn new(slots: usize) -> Self {
        let lines_per_shard = slots.div_ceil(PER_LINE).max(1);
        ShardedCounters {
            slots,
            lines_per_shard,
            lines: (0..lines_per_shard * SHARDS)
                .map(|_| Line::default())
                .collect(),
        }
    }

    /// Adds `n` to counter `slot` (ignored when out of range).
    pub fn add(&self, slot: usize, n: u64) {
        if slot >= self.slots {
            return;
        }
        let line = shard() * self.lines_per_shard + slot / PER_LINE;
        if let Some(line) = self.lines.get(line) {
            line.0[slot % PER_LINE].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The total of counter `slot` over all shards (0 when out of range).
    pub fn get(&self, slot: usize) -> u64 {
        if slot >= self.slots {
            return 0;
        }
        (0..SHARDS)
            .filter_map(|s| self.lines.get(s * self.lines_per_shard + slot / PER_LINE))
            .map(|line| line.0[slot % PER_LINE].load(Ordering::Relaxed))
            .fold(0u64, u64::wrapping_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_sum_every_threads_shard() {
        let counters = std::sync::Arc::new(ShardedCounters::new(10));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = counters.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.add(9, 1);
                        c.add(0, 2);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(counters.get(9), 4000);
        assert_eq!(counters.get(0), 8000);
        assert_eq!(counters.get(5), 0);
        counters.add(10, 1); // out of range: ignored
        assert_eq!(counters.get(10), 0);
    }

    #[test]
    fn shards_do_not_share_cache_lines() {
        assert_eq!(std::mem::align_of::<Line>(), 64);
        assert_eq!(std::mem::size_of::<Line>(), 64);
    }
}
