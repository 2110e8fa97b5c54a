//! `tern report diff base.json new.json`: each figure's change with its
//! interval and a verdict, better / worse / same, so a CI job can fail on
//! a performance regression.
//!
//! Method: for a figure measured per round (requests/s, p50, p99) in both
//! reports with at least two rounds each, the ratio new/base gets a 95%
//! bootstrap interval ([`super::interval`]); requests/s of a one-round run
//! uses its whole seconds as the samples instead. A figure is worse (or
//! better) only when its interval excludes 1.0 *and* the change is beyond
//! the tolerance; without an interval the tolerance alone decides, and the
//! line says so. Error shares compare in percentage points; server CPU per
//! request is left undecided when either side rests on fewer than 100
//! ticks.

use std::fmt::Write;

use serde::Serialize;

use super::interval::{self, Ratio};
use super::{Report, RoundFigures, TargetReport};

/// The verdict on one figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Changed for the better beyond the tolerance, and beyond noise.
    Better,
    /// Changed for the worse beyond the tolerance, and beyond noise.
    Worse,
    /// Within the tolerance, or within noise.
    Same,
    /// Not measured on one side, or too coarse to tell.
    Unknown,
}

/// One figure of one target, base against new.
#[derive(Debug, Clone, Serialize)]
pub struct FigureDiff {
    /// The target's URL in the new report.
    pub target: String,
    /// `rps`, `p50_ms`, `p99_ms`, `errors`, `server_cpu_us_per_request`.
    pub figure: &'static str,
    /// Base value.
    pub base: Option<f64>,
    /// New value.
    pub new: Option<f64>,
    /// new / base - 1 (for errors: the difference of the shares).
    pub change: Option<f64>,
    /// 95% interval of new / base, when the rounds give one.
    pub interval: Option<[f64; 2]>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why the verdict rests on less than an interval, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The whole comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    /// A change smaller than this share is "same" (0.05 = 5%).
    pub tolerance: f64,
    /// Every figure of every target.
    pub figures: Vec<FigureDiff>,
    /// Conditions that differ between the runs.
    pub warnings: Vec<String>,
}

/// Which way is better for a figure.
#[derive(Clone, Copy)]
enum Better {
    Higher,
    Lower,
}

impl Diff {
    /// Compares target by target (by position; a URL change is a warning).
    pub fn new(base: &Report, new: &Report, tolerance: f64) -> Diff {
        let mut warnings = Vec::new();
        if base.targets.len() != new.targets.len() {
            warnings.push(format!(
                "base has {} targets, new has {}: compared the first {}",
                base.targets.len(),
                new.targets.len(),
                base.targets.len().min(new.targets.len())
            ));
        }
        if base.plan != new.plan {
            warnings.push("the runs used different plans: the change mixes conditions".into());
        }
        let mut figures = Vec::new();
        for (b, n) in base.targets.iter().zip(&new.targets) {
            if b.url != n.url {
                warnings.push(format!("target {} was {}", n.url, b.url));
            }
            figures.push(rate(b, n, tolerance));
            for (figure, get) in [
                (
                    "p50_ms",
                    (|f: &RoundFigures| f.p50_ms) as fn(&RoundFigures) -> f64,
                ),
                ("p99_ms", |f: &RoundFigures| f.p99_ms),
            ] {
                let q = if figure == "p50_ms" { 50.0 } else { 99.0 };
                let values = (b.summary.percentile(q), n.summary.percentile(q));
                let samples = (
                    b.rounds.iter().map(get).collect::<Vec<_>>(),
                    n.rounds.iter().map(get).collect::<Vec<_>>(),
                );
                figures.push(judge(n, figure, values, samples, Better::Lower, tolerance));
            }
            figures.push(errors(b, n, tolerance));
            figures.push(server_cpu(b, n, tolerance));
        }
        Diff {
            tolerance,
            figures,
            warnings,
        }
    }

    /// The comparison as pretty JSON.
    pub fn to_json(&self) -> String {
        // Plain numbers, strings and enums: serializing cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// True when a figure got worse: the gate fails.
    pub fn regressed(&self) -> bool {
        self.figures.iter().any(|f| f.verdict == Verdict::Worse)
    }

    /// The comparison as text, one line per figure.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for w in &self.warnings {
            let _ = writeln!(out, "!!! {w}");
        }
        let _ = writeln!(
            out,
            "Diff (tolerance {:.1}%; interval: 95% bootstrap over rounds, see docs/bench.md):",
            self.tolerance * 100.0
        );
        let mut target = "";
        for f in &self.figures {
            if f.target != target {
                target = &f.target;
                let _ = writeln!(out, "  {target}");
            }
            let show = |v: Option<f64>| v.map_or("unknown".to_string(), |v| format!("{v:.3}"));
            let change = match (f.change, f.figure) {
                (Some(c), "errors") => format!("{:+.2} points", c * 100.0),
                (Some(c), _) => format!("{:+.1}%", c * 100.0),
                (None, _) => "-".to_string(),
            };
            let interval = f
                .interval
                .map(|[lo, hi]| format!(" [{lo:.2}x-{hi:.2}x]"))
                .unwrap_or_default();
            let note = f
                .note
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "    {:<27} {:>12} -> {:<12} {change:>13}{interval}  {}{note}",
                f.figure,
                show(f.base),
                show(f.new),
                match f.verdict {
                    Verdict::Better => "better",
                    Verdict::Worse => "WORSE",
                    Verdict::Same => "same",
                    Verdict::Unknown => "unknown",
                }
            );
        }
        out
    }
}

/// Requests/s, with rounds (or whole seconds of a one-round run) as samples.
fn rate(b: &TargetReport, n: &TargetReport, tolerance: f64) -> FigureDiff {
    let samples = |t: &TargetReport| -> Vec<f64> {
        if t.rounds.len() >= 2 {
            return t.rounds.iter().map(|r| r.rps).collect();
        }
        t.timeline
            .iter()
            .flat_map(|span| {
                let whole = span.elapsed_s.floor() as usize;
                span.series.iter().take(whole).map(|s| s.completed as f64)
            })
            .collect()
    };
    judge(
        n,
        "rps",
        (b.summary.rps, n.summary.rps),
        (samples(b), samples(n)),
        Better::Higher,
        tolerance,
    )
}

fn judge(
    n: &TargetReport,
    figure: &'static str,
    (base, new): (f64, f64),
    (base_samples, new_samples): (Vec<f64>, Vec<f64>),
    better: Better,
    tolerance: f64,
) -> FigureDiff {
    let ci: Option<Ratio> = interval::ratio(&base_samples, &new_samples);
    let change = (base > 0.0).then(|| new / base - 1.0);
    let beyond = change.is_some_and(|c| c.abs() > tolerance);
    let up = change.is_some_and(|c| c > 0.0);
    let noisy = ci.is_some_and(|ci| !ci.significant());
    let verdict = match (change, beyond && !noisy, better, up) {
        (None, ..) => Verdict::Unknown,
        (_, false, ..) => Verdict::Same,
        (_, true, Better::Higher, true) | (_, true, Better::Lower, false) => Verdict::Better,
        (_, true, ..) => Verdict::Worse,
    };
    FigureDiff {
        target: n.url.clone(),
        figure,
        base: Some(base),
        new: Some(new),
        change,
        interval: ci.map(|ci| [ci.low, ci.high]),
        verdict,
        note: ci
            .is_none()
            .then(|| "no interval: fewer than 2 rounds or seconds a side; tolerance alone".into()),
    }
}

fn errors(b: &TargetReport, n: &TargetReport, tolerance: f64) -> FigureDiff {
    let share = |t: &TargetReport| {
        let all = t.summary.completed + t.summary.failed;
        (all > 0).then(|| t.summary.failed as f64 / all as f64)
    };
    let (bs, ns) = (share(b), share(n));
    let change = bs.zip(ns).map(|(b, n)| n - b);
    // Points, not a ratio: 0 -> 0.1% is a change, 0 -> 0 is not.
    let margin = bs.map_or(0.0, |b| (b * tolerance).max(0.001));
    let verdict = match change {
        None => Verdict::Unknown,
        Some(c) if c > margin => Verdict::Worse,
        Some(c) if c < -margin => Verdict::Better,
        Some(_) => Verdict::Same,
    };
    FigureDiff {
        target: n.url.clone(),
        figure: "errors",
        base: bs,
        new: ns,
        change,
        interval: None,
        verdict,
        note: None,
    }
}

fn server_cpu(b: &TargetReport, n: &TargetReport, tolerance: f64) -> FigureDiff {
    let per_request = |t: &TargetReport| t.server_cpu.as_ref().and_then(|c| c.us_per_request);
    let few = |t: &TargetReport| t.server_cpu.as_ref().is_some_and(|c| c.few_ticks());
    let (bv, nv) = (per_request(b), per_request(n));
    let change = bv.zip(nv).and_then(|(b, n)| (b > 0.0).then(|| n / b - 1.0));
    let (verdict, note) = match change {
        None => (
            Verdict::Unknown,
            Some("not measured on both sides".to_string()),
        ),
        Some(_) if few(b) || few(n) => (
            Verdict::Unknown,
            Some("fewer than 100 ticks of 10 ms on a side: run longer".to_string()),
        ),
        Some(c) if c > tolerance => (Verdict::Worse, None),
        Some(c) if c < -tolerance => (Verdict::Better, None),
        Some(_) => (Verdict::Same, None),
    };
    FigureDiff {
        target: n.url.clone(),
        figure: "server_cpu_us_per_request",
        base: bv,
        new: nv,
        change,
        interval: None,
        verdict,
        note,
    }
}
