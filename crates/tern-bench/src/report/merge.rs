//! `tern report merge`: runs of the same targets from several load
//! machines (at once) or one after the other, added up without inventing
//! throughput.

use super::{negotiation_warnings, series_on_the_clock, Report, Summary};
use crate::error::BenchError;
use crate::server::ServerCpu;

impl Report {
    /// Merges runs made from several load machines against the same
    /// targets: histograms and counts add up, machines are listed. Runs
    /// that overlapped in time (the load machines ran at once) divide
    /// their requests by the longest run; runs made one after the other
    /// divide by their running times added, so two sequential runs never
    /// read as twice the throughput.
    pub fn merge(reports: Vec<Report>) -> Result<Report, BenchError> {
        let Some(first) = reports.first() else {
            return Err(BenchError::Config("nothing to merge".into()));
        };
        let urls = |r: &Report| r.targets.iter().map(|t| t.url.clone()).collect::<Vec<_>>();
        for (i, other) in reports.iter().enumerate().skip(1) {
            if urls(first) != urls(other) {
                return Err(BenchError::Config(format!(
                    "report {} has targets {:?}, the first has {:?}",
                    i + 1,
                    urls(other),
                    urls(first)
                )));
            }
        }
        let timing = merge_timing(&reports);
        let mut shard_warnings = shard_warnings(&reports);
        shard_warnings.extend(clock_warnings(&reports));
        // Per-second series line up on the wall clock, to the second.
        let shifts: Vec<usize> = timing
            .offsets_s
            .iter()
            .map(|o| o.round().max(0.0) as usize)
            .collect();
        let mut it = reports.into_iter().enumerate();
        let Some((_, mut merged)) = it.next() else {
            return Err(BenchError::Config("nothing to merge".into()));
        };
        let mut elapsed_sum: Vec<std::time::Duration> =
            merged.targets.iter().map(|t| t.stats.elapsed).collect();
        shift_timeline(&mut merged, timing.offsets_s[0]);
        for t in &mut merged.targets {
            t.stats.delay_series(shifts[0]);
        }
        for (i, mut other) in it {
            if other.plan != merged.plan {
                merged.warnings.push(format!(
                    "merged report {} ran a different plan; figures mix conditions",
                    i + 1
                ));
            }
            shift_timeline(&mut other, timing.offsets_s[i]);
            merged.command_lines.extend(other.command_lines);
            merged.machines.extend(other.machines);
            merged.interrupted |= other.interrupted;
            for ((mine, theirs), sum) in merged
                .targets
                .iter_mut()
                .zip(other.targets)
                .zip(&mut elapsed_sum)
            {
                *sum += theirs.stats.elapsed;
                mine.stats.merge_shifted(&theirs.stats, shifts[i]);
                for a in theirs.addresses {
                    if !mine.addresses.contains(&a) {
                        mine.addresses.push(a);
                    }
                }
                mine.rounds.extend(theirs.rounds);
                mine.timeline.extend(theirs.timeline);
                mine.server_cpu = merge_server_cpu(mine.server_cpu.take(), theirs.server_cpu);
            }
        }
        if timing.sequential {
            for (t, sum) in merged.targets.iter_mut().zip(elapsed_sum) {
                t.stats.elapsed = sum;
            }
        }
        for t in &mut merged.targets {
            if !t.timeline.is_empty() {
                t.stats.series = series_on_the_clock(&t.timeline);
            }
            t.summary = Summary::from_stats(&t.stats);
        }
        merged.started_unix_ms = timing.start_ms;
        merged.ended_unix_ms = timing.end_ms;
        merged.warnings.retain(|w| !w.contains(" negotiated "));
        merged.warnings.extend(timing.warnings);
        merged.warnings.extend(shard_warnings);
        merged.shard = None;
        merged.start_at_unix_ms = None;
        merged.started_late_ms = None;
        merged.clock_offset = None;
        let mismatch = negotiation_warnings(&merged.targets);
        merged.warnings.extend(mismatch);
        Ok(merged)
    }
}

/// How merged runs sat in time.
struct MergeTiming {
    /// Each run's start after the earliest, seconds (0 when unknown).
    offsets_s: Vec<f64>,
    /// No two runs overlapped.
    sequential: bool,
    start_ms: Option<u64>,
    end_ms: Option<u64>,
    warnings: Vec<String>,
}

fn merge_timing(reports: &[Report]) -> MergeTiming {
    let spans: Option<Vec<(u64, u64)>> = reports
        .iter()
        .map(|r| r.started_unix_ms.zip(r.ended_unix_ms))
        .collect();
    let Some(spans) = spans else {
        return MergeTiming {
            offsets_s: vec![0.0; reports.len()],
            sequential: false,
            start_ms: None,
            end_ms: None,
            warnings: vec![
                "a merged report has no wall-clock start (written by an older tern): the runs are assumed to have run at the same time".to_string(),
            ],
        };
    };
    let start = spans.iter().map(|s| s.0).min().unwrap_or(0);
    let end = spans.iter().map(|s| s.1).max().unwrap_or(0);
    let mut sorted = spans.clone();
    sorted.sort_unstable();
    let sequential = sorted.len() > 1 && sorted.windows(2).all(|w| w[0].1 <= w[1].0);
    let mut warnings = Vec::new();
    if sequential {
        warnings.push(
            "merged runs did not overlap in time: requests per second are over their running times added, not the longest run"
                .to_string(),
        );
    } else if sorted.windows(2).any(|w| w[0].1 <= w[1].0) {
        warnings.push(
            "merged runs overlapped only in part: requests per second assume they ran at the same time"
                .to_string(),
        );
    }
    MergeTiming {
        offsets_s: spans
            .iter()
            .map(|s| (s.0 - start) as f64 / 1000.0)
            .collect(),
        sequential,
        start_ms: Some(start),
        end_ms: Some(end),
        warnings,
    }
}

/// A merged run by name: its shard, position and machine.
fn name(i: usize, r: &Report) -> String {
    let host = r
        .machines
        .first()
        .map(|m| m.hostname.as_str())
        .unwrap_or("?");
    match r.shard {
        Some(s) => format!("shard {s} (report {}, {host})", i + 1),
        None => format!("report {} ({host})", i + 1),
    }
}

/// Shards whose clocks disagree with the first one's that has a reading
/// of the target's clock, by more than a late start would be flagged: a
/// common `--start-at` then started them that far apart.
fn clock_warnings(reports: &[Report]) -> Vec<String> {
    let mut readings = reports
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.clock_offset.map(|o| (i, o)));
    let Some((first, base)) = readings.next() else {
        return Vec::new();
    };
    let tolerance = crate::shard::LATE_START.as_millis() as i64;
    readings
        .filter_map(|(i, o)| {
            let skew = base.certain_skew_ms(&o);
            (skew.abs() > tolerance).then(|| {
                format!(
                    "{}'s clock is at least {:.1} s {} {}'s (both read the target's Date header): \
                     a common --start-at started them that far apart; synchronise their clocks (NTP)",
                    name(i, &reports[i]),
                    skew.abs() as f64 / 1000.0,
                    if skew > 0 { "ahead of" } else { "behind" },
                    name(first, &reports[first]),
                )
            })
        })
        .collect()
}

/// Shards that started late or ran apart from all the others, by name.
fn shard_warnings(reports: &[Report]) -> Vec<String> {
    let mut out = Vec::new();
    let late = crate::shard::LATE_START.as_millis() as u64;
    for (i, r) in reports.iter().enumerate() {
        if let Some(ms) = r.started_late_ms.filter(|ms| *ms > late) {
            out.push(format!(
                "{} started {:.1} s after its --start-at",
                name(i, r),
                ms as f64 / 1000.0
            ));
        }
    }
    let spans: Vec<Option<(u64, u64)>> = reports
        .iter()
        .map(|r| r.started_unix_ms.zip(r.ended_unix_ms))
        .collect();
    if reports.len() > 1 {
        let first = spans.iter().flatten().map(|s| s.0).min().unwrap_or(0);
        for (i, r) in reports.iter().enumerate() {
            let Some((a, b)) = spans[i] else { continue };
            let overlaps = spans
                .iter()
                .enumerate()
                .any(|(j, s)| j != i && s.is_some_and(|(c, d)| a < d && c < b));
            if !overlaps {
                out.push(format!(
                    "{} did not overlap any other run (it started {:.1} s after the first): its load did not add to theirs",
                    name(i, r),
                    (a - first) as f64 / 1000.0
                ));
            }
        }
    }
    out
}

fn shift_timeline(report: &mut Report, offset_s: f64) {
    for t in &mut report.targets {
        for span in &mut t.timeline {
            span.start_s += offset_s;
        }
    }
}

/// Server CPU of merged runs: the runs may have overlapped in time, each
/// then counting the server's work for the others' requests too, and the
/// merged request count covers runs that did not measure it. So the figure
/// is unknown after a merge; each run's own report has it.
fn merge_server_cpu(a: Option<ServerCpu>, b: Option<ServerCpu>) -> Option<ServerCpu> {
    if a.is_none() && b.is_none() {
        return None;
    }
    let mut pids: Vec<u32> = a
        .iter()
        .chain(b.iter())
        .flat_map(|s| s.pids.clone())
        .collect();
    pids.sort_unstable();
    pids.dedup();
    let found_by = a.as_ref().or(b.as_ref()).and_then(|s| s.found_by);
    Some(ServerCpu::unknown(
        pids,
        found_by,
        "merged runs: server CPU does not add up, see each run's report".to_string(),
    ))
}
