//! Pass/fail gates on a run's figures, in the style k6 users know:
//! `p99<50ms`, `errors<0.1%`, `rps>10000`, `server_cpu_per_request<20us`.
//! Each is checked for every target and printed as PASS or FAIL at the end
//! of the report and in the JSON; `tern bench` exits 99 when one fails.

use serde::{Deserialize, Serialize};

use crate::report::{Report, Summary, TargetReport};

/// A figure a threshold can gate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// Latency at a percentile (`p50`, `p99`, `p99.9`), ms.
    Percentile(f64),
    /// Mean latency, ms.
    Mean,
    /// Slowest request, ms.
    Max,
    /// Completed requests per second.
    Rps,
    /// Failed requests over all requests, as a fraction.
    Errors,
    /// Server CPU per completed request, µs.
    ServerCpuPerRequest,
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// One parsed threshold: `metric op limit`, the limit in the metric's unit
/// (ms, µs, a fraction, requests per second).
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// As given.
    pub text: String,
    /// What is gated.
    pub metric: Metric,
    /// How.
    pub op: Op,
    /// Against what, in the metric's unit.
    pub limit: f64,
}

/// A threshold checked against one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdResult {
    /// The expression as given.
    pub threshold: String,
    /// The target's URL.
    pub target: String,
    /// The figure in the threshold's unit; `None` when unknown (then it
    /// fails: a gate that cannot be checked does not pass).
    pub value: Option<f64>,
    /// Whether it held.
    pub pass: bool,
}

impl std::str::FromStr for Threshold {
    type Err = String;

    fn from_str(text: &str) -> Result<Threshold, String> {
        let t = text.trim();
        let at = t.find(['<', '>']).ok_or_else(|| {
            format!("{text:?}: expected METRIC<VALUE or METRIC>VALUE, e.g. p99<50ms, errors<0.1%, rps>1000")
        })?;
        let (name, rest) = (t[..at].trim(), &t[at..]);
        let (op, value) = match rest.as_bytes() {
            [b'<', b'=', ..] => (Op::Le, &rest[2..]),
            [b'>', b'=', ..] => (Op::Ge, &rest[2..]),
            [b'<', ..] => (Op::Lt, &rest[1..]),
            _ => (Op::Gt, &rest[1..]),
        };
        let metric = match name {
            "mean" | "avg" => Metric::Mean,
            "max" => Metric::Max,
            "rps" => Metric::Rps,
            "errors" => Metric::Errors,
            "server_cpu_per_request" => Metric::ServerCpuPerRequest,
            p if p.starts_with('p') => {
                let q: f64 = p[1..].parse().map_err(|_| unknown_metric(text, name))?;
                if !(q > 0.0 && q <= 100.0) {
                    return Err(format!("{text:?}: percentile {q} is not in (0, 100]"));
                }
                Metric::Percentile(q)
            }
            _ => return Err(unknown_metric(text, name)),
        };
        let limit = parse_limit(metric, value.trim())
            .ok_or_else(|| format!("{text:?}: {:?} is not {}", value.trim(), unit_hint(metric)))?;
        Ok(Threshold {
            text: t.to_string(),
            metric,
            op,
            limit,
        })
    }
}

fn unknown_metric(text: &str, name: &str) -> String {
    format!(
        "{text:?}: unknown figure {name:?} (p50, p99, p99.9, mean, max, rps, errors, server_cpu_per_request)"
    )
}

fn unit_hint(metric: Metric) -> &'static str {
    match metric {
        Metric::Percentile(_) | Metric::Mean | Metric::Max => "a duration (50ms, 1.5s, 800us)",
        Metric::Rps => "a number of requests per second",
        Metric::Errors => "a share (0.1%, or 0.001)",
        Metric::ServerCpuPerRequest => "a CPU time (20us, 1.5ms)",
    }
}

/// The limit in the metric's unit: ms for latency, µs for server CPU, a
/// fraction for errors.
fn parse_limit(metric: Metric, v: &str) -> Option<f64> {
    let number = |s: &str| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
    };
    let micros = |s: &str| -> Option<f64> {
        for (suffix, us) in [("ms", 1e3), ("us", 1.0), ("µs", 1.0), ("s", 1e6)] {
            if let Some(n) = s.strip_suffix(suffix) {
                return number(n).map(|n| n * us);
            }
        }
        None
    };
    match metric {
        Metric::Percentile(_) | Metric::Mean | Metric::Max => micros(v).map(|us| us / 1e3),
        Metric::ServerCpuPerRequest => micros(v),
        Metric::Rps => number(v),
        Metric::Errors => match v.strip_suffix('%') {
            Some(p) => number(p).map(|p| p / 100.0),
            None => number(v),
        },
    }
}

impl Threshold {
    /// The figure of one target, in the threshold's unit.
    pub fn value(&self, t: &TargetReport) -> Option<f64> {
        let s: &Summary = &t.summary;
        match self.metric {
            Metric::Percentile(q) => {
                (s.completed > 0).then(|| t.stats.total.value_at_percentile(q) as f64 / 1e3)
            }
            Metric::Mean => (s.completed > 0).then_some(s.mean_ms),
            Metric::Max => (s.completed > 0).then_some(s.max_ms),
            Metric::Rps => Some(s.rps),
            Metric::Errors => {
                let all = s.completed + s.failed;
                (all > 0).then(|| s.failed as f64 / all as f64)
            }
            Metric::ServerCpuPerRequest => t.server_cpu.as_ref().and_then(|c| c.us_per_request),
        }
    }

    /// Checks every target of `report`.
    pub fn check(&self, report: &Report) -> Vec<ThresholdResult> {
        report
            .targets
            .iter()
            .map(|t| {
                let value = self.value(t);
                let pass = value.is_some_and(|v| match self.op {
                    Op::Lt => v < self.limit,
                    Op::Le => v <= self.limit,
                    Op::Gt => v > self.limit,
                    Op::Ge => v >= self.limit,
                });
                ThresholdResult {
                    threshold: self.text.clone(),
                    target: t.url.clone(),
                    value,
                    pass,
                }
            })
            .collect()
    }

    /// The unit a value of this threshold is written in.
    pub fn unit(&self) -> &'static str {
        match self.metric {
            Metric::Percentile(_) | Metric::Mean | Metric::Max => "ms",
            Metric::ServerCpuPerRequest => "µs",
            Metric::Rps => "req/s",
            Metric::Errors => "",
        }
    }
}

/// Checks every threshold against `report` and stores the results in it.
pub fn apply(thresholds: &[Threshold], report: &mut Report) {
    report.thresholds = thresholds.iter().flat_map(|t| t.check(report)).collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Threshold {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn k6_style_expressions_parse_into_their_units() {
        let t = parse("p99<50ms");
        assert_eq!(
            (t.metric, t.op, t.limit),
            (Metric::Percentile(99.0), Op::Lt, 50.0)
        );
        assert_eq!(parse("p99.9 <= 1.5s").limit, 1500.0);
        assert_eq!(parse("errors<0.1%").limit, 0.001);
        assert_eq!(parse("rps>10000").op, Op::Gt);
        assert_eq!(parse("server_cpu_per_request<20us").limit, 20.0);
        assert_eq!(parse("mean>=800us").limit, 0.8);
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        for (bad, says) in [
            ("p99", "expected METRIC<VALUE"),
            ("latency<5ms", "unknown figure"),
            ("p99<fast", "a duration"),
            ("p150<1ms", "not in (0, 100]"),
            ("errors<-1%", "a share"),
        ] {
            let e = bad.parse::<Threshold>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
