//! Several load machines through an existing engine (a Kubernetes Indexed
//! Job, pdsh, ssh), not a coordinator of our own: `--shard i/N` gives this
//! process its exact part of the connections, the rate and the request
//! count (as k6's execution segments do), and `--start-at TIME` starts
//! every shard at one wall-clock moment. `tern report merge` adds the
//! shards' JSON reports.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::config::{BenchConfig, LoadModel, StopCondition};
use crate::error::BenchError;

/// Most shards of one run.
pub const MAX_SHARDS: u32 = 10_000;
/// Latest `--start-at` accepted, from now: a typo in a date should not
/// leave a load machine waiting for a year.
pub const MAX_START_DELAY: Duration = Duration::from_secs(24 * 3600);
/// A shard that started this much after its `--start-at` is reported late.
pub const LATE_START: Duration = Duration::from_millis(500);

/// This process's part of a run split over `count` processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// From 0 (Kubernetes' `JOB_COMPLETION_INDEX`) to `count - 1`.
    pub index: u32,
    /// Shards in the run.
    pub count: u32,
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// `i/N`, 0-based: `0/4` .. `3/4`.
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad =
            || format!("--shard {s:?}: expected INDEX/COUNT with 0 <= INDEX < COUNT, e.g. 0/4");
        let (i, n) = s.trim().split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count || count > MAX_SHARDS {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// This shard's part of `total` things that cannot be split (connections,
    /// requests): the first `total % count` shards take one more, so the
    /// parts add up to `total` exactly.
    pub fn part(&self, total: u64) -> u64 {
        let (n, i) = (u64::from(self.count), u64::from(self.index));
        total / n + u64::from(i < total % n)
    }

    /// This shard's part of a rate: an equal share (the shares add up to
    /// the rate, to the float's precision).
    pub fn rate(&self, rate: f64) -> f64 {
        rate / f64::from(self.count)
    }

    /// Gives `config` this shard's part of the connections, the rate, the
    /// request count and each stage's level. A shard that would get no
    /// connection is refused: it would measure nothing.
    pub fn apply(&self, config: &mut BenchConfig) -> Result<(), BenchError> {
        let connections = self.part(config.connections as u64) as usize;
        if connections == 0 {
            return Err(BenchError::Config(format!(
                "--shard {self}: -c {} gives this shard no connection; use at least {} connections",
                config.connections, self.count
            )));
        }
        config.connections = connections;
        if let LoadModel::Open { rate } = config.load {
            config.load = LoadModel::Open {
                rate: self.rate(rate),
            };
        }
        if let StopCondition::Requests(n) = config.stop {
            let part = self.part(n);
            if part == 0 {
                return Err(BenchError::Config(format!(
                    "--shard {self}: -n {n} gives this shard no request"
                )));
            }
            config.stop = StopCondition::Requests(part);
        }
        let open = matches!(config.load, LoadModel::Open { .. });
        for stage in &mut config.stages {
            stage.level = if open {
                self.rate(stage.level)
            } else {
                self.part(stage.level as u64) as f64
            };
        }
        if let Some(search) = &mut config.search {
            search.start_rate = self.rate(search.start_rate);
            search.max_rate = self.rate(search.max_rate);
        }
        Ok(())
    }
}

/// Parses `--start-at`: Unix seconds (`1767225600`, `1767225600.5`), RFC
/// 3339 (`2026-11-25T21:30:00Z`, `...+01:00`), or `now+2s` (`now+500ms`,
/// `now+1m`). `duration` parses the part after `now+`.
pub fn parse_start_at(
    text: &str,
    now: SystemTime,
    duration: impl Fn(&str) -> Option<Duration>,
) -> Result<SystemTime, String> {
    let t = text.trim();
    let at = if let Some(rest) = t.strip_prefix("now+") {
        let d = duration(rest).ok_or_else(|| {
            format!("--start-at {text:?}: {rest:?} is not a duration like 2s or 500ms")
        })?;
        now + d
    } else if let Ok(secs) = t.parse::<f64>() {
        if !(secs.is_finite() && secs >= 0.0) {
            return Err(format!("--start-at {text:?}: not a Unix time"));
        }
        UNIX_EPOCH + Duration::from_secs_f64(secs)
    } else {
        rfc3339(t).ok_or_else(|| {
            format!(
                "--start-at {text:?}: expected Unix seconds, RFC 3339 (2026-11-25T21:30:00Z) or now+2s"
            )
        })?
    };
    if at > now + MAX_START_DELAY {
        return Err(format!(
            "--start-at {text:?} is more than {} h away",
            MAX_START_DELAY.as_secs() / 3600
        ));
    }
    Ok(at)
}

/// RFC 3339 with any offset, through the `time` crate.
fn rfc3339(s: &str) -> Option<SystemTime> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    let nanos = u64::try_from(t.unix_timestamp_nanos()).ok()?;
    Some(UNIX_EPOCH + Duration::from_nanos(nanos))
}

/// Waits until `at` on the wall clock (returns at once when it has
/// passed). Sleeps in steps of at most a second, so a clock stepped
/// meanwhile (NTP) is noticed.
/// Returns how late the wait ended (the moment had passed already when
/// the process got here: launched late).
pub fn wait_until(at: SystemTime) -> Duration {
    while let Ok(left) = at.duration_since(SystemTime::now()) {
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_secs(1)));
    }
    SystemTime::now().duration_since(at).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: &str) -> Option<Duration> {
        s.strip_suffix('s')?.parse().ok().map(Duration::from_secs)
    }

    #[test]
    fn parts_add_up_exactly() {
        for (total, n) in [(10u64, 4u32), (3, 4), (1000, 7), (50, 1)] {
            let sum: u64 = (0..n)
                .map(|i| Shard { index: i, count: n }.part(total))
                .sum();
            assert_eq!(sum, total, "{total} over {n}");
        }
        let s: Shard = "1/4".parse().unwrap();
        assert_eq!((s.part(10), s.rate(1000.0)), (3, 250.0));
        assert_eq!(Shard { index: 3, count: 4 }.part(10), 2);
    }

    #[test]
    fn bad_shards_are_refused() {
        for bad in ["4/4", "1", "a/4", "0/0", "-1/4"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn start_times_parse_in_three_spellings() {
        let now = UNIX_EPOCH + Duration::from_secs(1_764_100_000);
        let at = |s| parse_start_at(s, now, secs).unwrap();
        assert_eq!(at("now+2s"), now + Duration::from_secs(2));
        assert_eq!(
            at("1764100005"),
            UNIX_EPOCH + Duration::from_secs(1_764_100_005)
        );
        // 2025-11-25T19:46:40Z is 1764100000.
        assert_eq!(at("2025-11-25T19:46:40Z"), now);
        assert_eq!(at("2025-11-25T20:46:40+01:00"), now);
        assert_eq!(
            at("2025-11-25T19:46:40.5Z"),
            now + Duration::from_millis(500)
        );
        for bad in [
            "tomorrow",
            "now+x",
            "2025-13-01T00:00:00Z",
            "2099-01-01T00:00:00Z",
        ] {
            assert!(parse_start_at(bad, now, secs).is_err(), "{bad}");
        }
    }
}
