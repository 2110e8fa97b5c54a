//! Capacity search: `--find-max-rate --slo 'p99<50ms,errors<0.1%'`.
//!
//! An open-loop rate is doubled from `--start-rate` until a step breaks
//! the SLO (or halved until one meets it), then the last rate that met it
//! and the first that did not are bisected until they are within
//! `precision` of each other. Each step first settles at its rate (a
//! quarter of the step, not measured: connections open, queues from the
//! step before drain or build) and is then measured for the whole step.
//! A step also fails when it completed fewer than 90% of the requests
//! asked: a rate not sustained is not a rate met. In compare mode each
//! target has its own search and the steps are interleaved.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::threshold::{Op, Threshold};

/// Most steps of one target's search.
pub const MAX_STEPS: usize = 30;
/// Lowest rate tried, requests per second.
pub const MIN_RATE: f64 = 1.0;
/// Share of the asked rate a step must complete to pass.
pub const SUSTAINED: f64 = 0.9;

/// What a capacity search looks for.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchConfig {
    /// The SLO: every threshold must hold.
    pub slo: Vec<Threshold>,
    /// First rate tried, requests per second.
    pub start_rate: f64,
    /// Highest rate tried.
    pub max_rate: f64,
    /// How long each step is measured (it settles a quarter of that before).
    pub step: Duration,
    /// The search ends when the bracket is this narrow, relative to the
    /// rate that met the SLO (0.05: within 5%).
    pub precision: f64,
}

/// Parses `p99<50ms,errors<0.1%` into thresholds.
pub fn parse_slo(text: &str) -> Result<Vec<Threshold>, String> {
    let slo = text
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| p.parse::<Threshold>().map_err(|e| format!("--slo: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if slo.is_empty() {
        return Err("--slo is empty: give e.g. 'p99<50ms,errors<0.1%'".into());
    }
    Ok(slo)
}

/// One step of a search, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepFigures {
    /// Rate asked, requests per second.
    pub rate: f64,
    /// Completed requests per second.
    pub rps: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// Failed over all requests.
    pub errors: f64,
    /// Server CPU per completed request, µs, when known.
    pub server_cpu_us_per_request: Option<f64>,
    /// Whether the step met the SLO.
    pub pass: bool,
    /// Why it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The result of one target's search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// The SLO, as given.
    pub slo: String,
    /// Highest rate that met the SLO; `None` when none did.
    pub max_rate: Option<f64>,
    /// Lowest rate that did not, and why.
    pub first_failing: Option<f64>,
    /// Why the first failing rate failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing_reason: Option<String>,
    /// How the search ended when it is not a bracket (the highest rate
    /// tried met the SLO; even the lowest did not; out of steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Every step, in the order run.
    pub steps: Vec<StepFigures>,
}

/// One target's search in progress.
#[derive(Debug, Clone)]
pub struct Search {
    config: SearchConfig,
    next: Option<f64>,
    pass: Option<f64>,
    fail: Option<(f64, String)>,
    note: Option<String>,
    steps: Vec<StepFigures>,
}

impl Search {
    /// A search starting at `config.start_rate`.
    pub fn new(config: SearchConfig) -> Search {
        Search {
            next: Some(config.start_rate.clamp(MIN_RATE, config.max_rate)),
            config,
            pass: None,
            fail: None,
            note: None,
            steps: Vec::new(),
        }
    }

    /// The next rate to try, or `None` when the search is over.
    pub fn next_rate(&self) -> Option<f64> {
        self.next
    }

    /// Why a step with these figures breaks the SLO (`None`: it met it).
    /// `value` gives each threshold's figure.
    pub fn verdict(
        &self,
        rate: f64,
        rps: f64,
        value: impl Fn(&Threshold) -> Option<f64>,
    ) -> Option<String> {
        let mut broken = Vec::new();
        for t in &self.config.slo {
            let v = value(t);
            let holds = v.is_some_and(|v| match t.op {
                Op::Lt => v < t.limit,
                Op::Le => v <= t.limit,
                Op::Gt => v > t.limit,
                Op::Ge => v >= t.limit,
            });
            if !holds {
                broken.push(match v {
                    Some(v) if t.unit().is_empty() => {
                        format!("{} at {:.3}%", t.text, 100.0 * v)
                    }
                    Some(v) => format!("{} at {v:.3} {}", t.text, t.unit()),
                    None => format!("{} unknown", t.text),
                });
            }
        }
        if rps < SUSTAINED * rate {
            broken.push(format!(
                "completed {rps:.1} req/s of {rate:.1} asked (below {:.0}%)",
                SUSTAINED * 100.0
            ));
        }
        (!broken.is_empty()).then(|| broken.join("; "))
    }

    /// Records a step at the current rate and picks the next.
    pub fn record(&mut self, step: StepFigures) {
        let rate = step.rate;
        match &step.reason {
            None => self.pass = Some(self.pass.map_or(rate, |p| p.max(rate))),
            Some(why) => {
                if self.fail.as_ref().is_none_or(|(f, _)| rate < *f) {
                    self.fail = Some((rate, why.clone()));
                }
            }
        }
        self.steps.push(step);
        self.next = self.pick();
    }

    fn pick(&mut self) -> Option<f64> {
        if self.steps.len() >= MAX_STEPS {
            self.note = Some(format!("stopped after {MAX_STEPS} steps"));
            return None;
        }
        match (self.pass, &self.fail) {
            (Some(p), None) if p >= self.config.max_rate => {
                self.note = Some(format!(
                    "the highest rate tried ({:.1} req/s, --max-rate) met the SLO",
                    self.config.max_rate
                ));
                None
            }
            (Some(p), None) => Some((p * 2.0).min(self.config.max_rate)),
            (None, Some((f, _))) if *f / 2.0 < MIN_RATE => {
                self.note = Some(format!("even {MIN_RATE} req/s broke the SLO"));
                None
            }
            (None, Some((f, _))) => Some(f / 2.0),
            (Some(p), Some((f, _))) if f - p <= self.config.precision * p => None,
            (Some(p), Some((f, _))) => Some((p + f) / 2.0),
            (None, None) => self.next,
        }
    }

    /// The result.
    pub fn finish(self) -> Capacity {
        let slo: Vec<&str> = self.config.slo.iter().map(|t| t.text.as_str()).collect();
        Capacity {
            slo: slo.join(","),
            max_rate: self.pass,
            first_failing: self.fail.as_ref().map(|f| f.0),
            failing_reason: self.fail.map(|f| f.1),
            note: self.note,
            steps: self.steps,
        }
    }
}

/// Searches every target's capacity, the steps of the targets
/// interleaved; each target's figures are then those of its step at
/// capacity (or its last step when no rate met the SLO).
pub(crate) fn run(
    runner: &mut crate::run::Runner,
    config: &SearchConfig,
) -> Result<(), crate::error::BenchError> {
    use std::sync::Arc;

    use crate::config::{LoadModel, StopCondition};
    use crate::report::{Summary, TargetReport};
    use crate::server::ServerCpu;

    let n = runner.config.targets.len();
    let mut searches: Vec<Search> = (0..n).map(|_| Search::new(config.clone())).collect();
    let mut at_capacity: Vec<Option<(f64, Option<f64>)>> = vec![None; n];
    let settle = StopCondition::Duration(config.step / 4);
    let measure = StopCondition::Duration(config.step);
    while searches.iter().any(|s| s.next_rate().is_some()) {
        for i in 0..n {
            let Some(rate) = searches[i].next_rate() else {
                continue;
            };
            if runner.stopped() {
                return finish(runner, searches, at_capacity);
            }
            let mut c = (*runner.config).clone();
            c.load = LoadModel::Open { rate };
            let c = Arc::new(c);
            // Settles at the new rate: connections open, the last step's
            // queues drain or this one's build. Not measured.
            crate::worker::run_target(&c, &c.targets[i], settle, &runner.control)?;
            let (stats, cpu_s) = runner.segment(i, &c, measure)?;
            let summary = Summary::from_stats(&stats);
            let us_per_request = cpu_s
                .filter(|_| summary.completed > 0)
                .map(|c| c * 1e6 / summary.completed as f64);
            let mut view = TargetReport::new(String::new(), Vec::new(), Vec::new(), stats);
            view.server_cpu = Some(ServerCpu {
                pids: Vec::new(),
                found_by: None,
                cpu_s,
                us_per_request,
                ticks: None,
                unknown_reason: None,
            });
            let reason = searches[i].verdict(rate, summary.rps, |t| t.value(&view));
            let all = summary.completed + summary.failed;
            let step = StepFigures {
                rate,
                rps: summary.rps,
                p50_ms: summary.percentile(50.0),
                p99_ms: summary.percentile(99.0),
                errors: if all > 0 {
                    summary.failed as f64 / all as f64
                } else {
                    0.0
                },
                server_cpu_us_per_request: us_per_request,
                pass: reason.is_none(),
                reason,
            };
            // The report's figures: the step at capacity, or the last
            // step while no rate met the SLO.
            if step.pass && at_capacity[i].is_none_or(|(r, _)| rate > r) {
                at_capacity[i] = Some((rate, cpu_s));
                runner.stats[i] = view.stats;
            } else if at_capacity[i].is_none() {
                runner.stats[i] = view.stats;
            }
            searches[i].record(step);
        }
    }
    finish(runner, searches, at_capacity)
}

fn finish(
    runner: &mut crate::run::Runner,
    searches: Vec<Search>,
    at_capacity: Vec<Option<(f64, Option<f64>)>>,
) -> Result<(), crate::error::BenchError> {
    for ((slot, search), best) in runner.capacity.iter_mut().zip(searches).zip(at_capacity) {
        *slot = Some((search.finish(), best.and_then(|b| b.1)));
    }
    Ok(())
}

/// The capacity as report lines, the headline first.
pub fn render(c: &Capacity) -> Vec<String> {
    let mut out = vec![match c.max_rate {
        Some(r) => format!("  Max rate at SLO: {r:.0} req/s  (SLO {})", c.slo),
        None => format!("  Max rate at SLO: none  (SLO {})", c.slo),
    }];
    if let (Some(f), Some(why)) = (c.first_failing, &c.failing_reason) {
        out.push(format!("  First rate that broke it: {f:.0} req/s: {why}"));
    }
    if let Some(note) = &c.note {
        out.push(format!("  Search: {note}"));
    }
    out.push(format!(
        "  {:>10}  {:>10}  {:>9}  {:>9}  {:>8}  {:>14}  verdict",
        "rate", "req/s", "p50 ms", "p99 ms", "errors", "server µs/req"
    ));
    for s in &c.steps {
        let cpu = s
            .server_cpu_us_per_request
            .map_or_else(|| "unknown".to_string(), |v| format!("{v:.1}"));
        out.push(format!(
            "  {:>10.1}  {:>10.1}  {:>9.3}  {:>9.3}  {:>7.3}%  {:>14}  {}",
            s.rate,
            s.rps,
            s.p50_ms,
            s.p99_ms,
            100.0 * s.errors,
            cpu,
            match &s.reason {
                None => "met".to_string(),
                Some(why) => format!("broke: {why}"),
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(start: f64) -> Search {
        Search::new(SearchConfig {
            slo: parse_slo("p99<50ms").unwrap(),
            start_rate: start,
            max_rate: 1e6,
            step: Duration::from_secs(1),
            precision: 0.05,
        })
    }

    /// Runs a search against a server whose p99 is fine below `knee`.
    fn run(mut s: Search, knee: f64) -> Capacity {
        while let Some(rate) = s.next_rate() {
            let p99 = if rate <= knee { 5.0 } else { 500.0 };
            let reason = s.verdict(rate, rate, |_| Some(p99));
            s.record(StepFigures {
                rate,
                rps: rate,
                p50_ms: 1.0,
                p99_ms: p99,
                errors: 0.0,
                server_cpu_us_per_request: None,
                pass: reason.is_none(),
                reason,
            });
        }
        s.finish()
    }

    #[test]
    fn the_search_brackets_the_knee_within_its_precision() {
        for (start, knee) in [(50.0, 200.0), (100.0, 1234.0), (1000.0, 30.0)] {
            let c = run(search(start), knee);
            let max = c.max_rate.unwrap();
            assert!(max <= knee && max >= knee * 0.95, "{start} {knee}: {c:?}");
            assert!(c.first_failing.unwrap() > knee);
            assert!(c.failing_reason.unwrap().contains("p99<50ms at 500.000 ms"));
        }
    }

    #[test]
    fn a_rate_not_sustained_breaks_the_slo() {
        let s = search(100.0);
        let why = s.verdict(100.0, 80.0, |_| Some(1.0)).unwrap();
        assert!(why.contains("completed 80.0 req/s of 100.0"), "{why}");
    }

    #[test]
    fn a_server_below_the_lowest_rate_has_no_capacity() {
        let c = run(search(8.0), 0.5);
        assert_eq!(c.max_rate, None);
        assert!(c.note.unwrap().contains("even 1 req/s"));
    }
}
