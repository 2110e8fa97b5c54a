//! Backend response-time histograms keyed by (upstream, server).
//!
//! The set of servers is open (it comes from the configuration and can grow
//! on reload), so the series live in a map. Workers record a response on
//! every request, and a shared lock there would bounce its cache line
//! between cores on each one; instead each thread keeps its own list of
//! handles to the series it has used, and only its first response from a
//! server takes the map's lock (and allocates).

use crate::config::BackendAddr;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use super::histogram::{Histogram, HistogramSnapshot, BACKEND_BOUNDS_US};

/// Handles one thread keeps before it starts over. Far more servers than a
/// worker talks to; reaching it means many reloads brought new servers, and
/// starting over (refilling from the map) keeps the list short to scan.
const THREAD_CACHE_MAX: usize = 256;

/// Distinguishes `BackendLatency` instances in the per-thread caches (tests
/// make many in one thread; a real process has one).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static THREAD_CACHE: RefCell<Vec<Cached>> = const { RefCell::new(Vec::new()) };
}

/// One thread's handle to a series.
struct Cached {
    owner: u64,
    server: BackendAddr,
    upstream: Box<str>,
    histogram: Arc<Histogram>,
}

/// All backend latency series of one [`super::Metrics`].
#[derive(Debug)]
pub(crate) struct BackendLatency {
    id: u64,
    series: RwLock<HashMap<String, HashMap<BackendAddr, Arc<Histogram>>>>,
}

impl Default for BackendLatency {
    fn default() -> Self {
        BackendLatency {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            series: RwLock::new(HashMap::new()),
        }
    }
}

impl BackendLatency {
    /// Records that `server` of `upstream` answered after `took`.
    pub fn observe(&self, upstream: &str, server: BackendAddr, took: Duration) {
        let cached = THREAD_CACHE
            .try_with(|cache| {
                let cache = cache.borrow();
                let hit = cache
                    .iter()
                    .find(|c| c.server == server && c.owner == self.id && &*c.upstream == upstream);
                hit.map(|c| c.histogram.observe(took)).is_some()
            })
            .unwrap_or(false);
        if cached {
            return;
        }
        let histogram = self.series(upstream, server);
        histogram.observe(took);
        // Fails only while the thread is being torn down: then the next
        // response simply takes the slow path again.
        let _ = THREAD_CACHE.try_with(|cache| {
            let mut cache = cache.borrow_mut();
            if cache.len() >= THREAD_CACHE_MAX {
                cache.clear();
            }
            cache.push(Cached {
                owner: self.id,
                server,
                upstream: upstream.into(),
                histogram,
            });
        });
    }

    /// Every series, sorted by (upstream, server).
    pub fn snapshot(&self) -> Vec<(String, BackendAddr, HistogramSnapshot)> {
        let map = self.series.read().unwrap_or_else(PoisonError::into_inner);
        let mut all: Vec<_> = map
            .iter()
            .flat_map(|(upstream, servers)| {
                servers
                    .iter()
                    .map(move |(addr, h)| (upstream.clone(), *addr, h.snapshot()))
            })
            .collect();
        all.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        all
    }

    /// The series for (upstream, server), made on first use.
    fn series(&self, upstream: &str, server: BackendAddr) -> Arc<Histogram> {
        {
            let map = self.series.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(h) = map.get(upstream).and_then(|servers| servers.get(&server)) {
                return h.clone();
            }
        }
        let mut map = self.series.write().unwrap_or_else(PoisonError::into_inner);
        map.entry(upstream.to_string())
            .or_default()
            .entry(server)
            .or_insert_with(|| Arc::new(Histogram::new(BACKEND_BOUNDS_US)))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_record_into_the_same_series_and_instances_stay_apart() {
        let a = Arc::new(BackendLatency::default());
        let b = BackendLatency::default();
        let server = BackendAddr::Tcp("127.0.0.1:9".parse().expect("address"));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let a = a.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        a.observe("api", server, Duration::from_micros(300));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        // This thread has a cached handle for `a`'s series now; `b` must
        // not record into it.
        a.observe("api", server, Duration::from_micros(300));
        b.observe("api", server, Duration::from_micros(300));
        b.observe("web", server, Duration::from_micros(300));
        let counts = |m: &BackendLatency| {
            m.snapshot()
                .into_iter()
                .map(|(u, _, h)| (u, h.count))
                .collect::<Vec<_>>()
        };
        assert_eq!(counts(&a), vec![("api".to_string(), 201)]);
        assert_eq!(
            counts(&b),
            vec![("api".to_string(), 1), ("web".to_string(), 1)]
        );
    }
}
