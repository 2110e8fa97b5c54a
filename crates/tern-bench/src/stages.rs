//! Load shapes: `--stages 30s:500,60s:5000,30s:0`, a list of steps each
//! held for its duration. The level is the rate (requests per second) in
//! an open loop and the number of connections in a closed loop; a level
//! of 0 is a pause with no load (to watch a server recover). Every stage
//! is reported on its own (text and JSON) as well as added into the run.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::report::Summary;
use crate::stats::Stats;

/// Most stages in one run.
pub const MAX_STAGES: usize = 100;

/// One step of a load shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stage {
    /// How long it is held.
    pub duration: Duration,
    /// Requests per second (open loop) or connections (closed loop).
    pub level: f64,
}

/// Parses `30s:500,60s:5000,30s:0`; `duration` parses one duration.
pub fn parse(
    text: &str,
    duration: impl Fn(&str) -> Option<Duration>,
) -> Result<Vec<Stage>, String> {
    let mut stages = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let (d, level) = part
            .split_once(':')
            .ok_or_else(|| format!("stage {part:?}: expected DURATION:LEVEL, e.g. 30s:500"))?;
        let duration = duration(d.trim())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("stage {part:?}: {d:?} is not a duration like 30s or 1m"))?;
        let level: f64 = level
            .trim()
            .parse()
            .ok()
            .filter(|l: &f64| l.is_finite() && *l >= 0.0)
            .ok_or_else(|| {
                format!("stage {part:?}: {level:?} is not a rate or a number of connections")
            })?;
        stages.push(Stage { duration, level });
    }
    if stages.len() > MAX_STAGES {
        return Err(format!("{} stages; at most {MAX_STAGES}", stages.len()));
    }
    if stages.iter().all(|s| s.level == 0.0) {
        return Err("every stage has level 0: nothing to send".into());
    }
    Ok(stages)
}

/// One stage of one target, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageFigures {
    /// Position in the load shape, from 1.
    pub stage: usize,
    /// Duration held, seconds.
    pub duration_s: f64,
    /// The level asked.
    pub level: f64,
    /// `req/s` or `connections`.
    pub unit: String,
    /// Requests with a response.
    pub completed: u64,
    /// Requests that failed.
    pub failed: u64,
    /// Completed requests per second.
    pub rps: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
}

impl StageFigures {
    /// The figures of stage `stage` (from 1) measured as `stats`.
    pub fn new(stage: usize, s: &Stage, unit: &str, stats: &Stats) -> StageFigures {
        let summary = Summary::from_stats(stats);
        StageFigures {
            stage,
            duration_s: s.duration.as_secs_f64(),
            level: s.level,
            unit: unit.to_string(),
            completed: summary.completed,
            failed: summary.failed,
            rps: summary.rps,
            p50_ms: summary.percentile(50.0),
            p99_ms: summary.percentile(99.0),
        }
    }
}

/// The stages as text lines for the report.
pub fn render(stages: &[StageFigures]) -> Vec<String> {
    let mut out = vec![format!(
        "  {:>5}  {:>8}  {:>16}  {:>10}  {:>8}  {:>10}  {:>9}  {:>9}",
        "stage", "held", "level", "completed", "failed", "req/s", "p50 ms", "p99 ms"
    )];
    for s in stages {
        out.push(format!(
            "  {:>5}  {:>7.1}s  {:>16}  {:>10}  {:>8}  {:>10.1}  {:>9.3}  {:>9.3}",
            s.stage,
            s.duration_s,
            format!("{} {}", s.level, s.unit),
            s.completed,
            s.failed,
            s.rps,
            s.p50_ms,
            s.p99_ms
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: &str) -> Option<Duration> {
        s.strip_suffix('s')?.parse().ok().map(Duration::from_secs)
    }

    #[test]
    fn stages_parse_in_order() {
        let s = parse("30s:500, 60s:5000,30s:0", secs).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(
            (s[1].duration, s[1].level),
            (Duration::from_secs(60), 5000.0)
        );
        assert_eq!(s[2].level, 0.0);
    }

    #[test]
    fn bad_stages_say_which_and_why() {
        for (bad, says) in [
            ("30s", "DURATION:LEVEL"),
            ("x:5", "not a duration"),
            ("0s:5", "not a duration"),
            ("1s:-4", "not a rate"),
            ("1s:0,2s:0", "nothing to send"),
        ] {
            let e = parse(bad, secs).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
