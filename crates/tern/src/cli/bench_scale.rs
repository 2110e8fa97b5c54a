//! `tern bench` options for runs at scale: a request mix (`--targets`),
//! load shapes (`--stages`), the capacity search (`--find-max-rate`) and
//! several load machines (`--shard`, `--start-at`, `--laddr`). Flattened
//! into [`super::bench::BenchArgs`] and declared the same way (see its
//! doc): a doc comment, an `Option`, the default a constant in
//! `tern_bench::config::defaults`, its effect in [`apply`].

use std::path::PathBuf;
use std::time::SystemTime;

use tern_bench::config::defaults;
use tern_bench::search::SearchConfig;
use tern_bench::{BenchConfig, BenchError, LoadModel};

use super::bench_values::{parse_go_duration, parse_share};

/// Options of `tern bench` for runs at scale.
#[derive(Debug, Clone, clap::Args)]
pub struct ScaleArgs {
    /// A targets file (TOML, see docs/bench.md): the requests sent, each
    /// with its method, path, headers, body, weight and response checks,
    /// instead of one request to the URL's path.
    #[arg(long = "targets", value_name = "FILE")]
    pub targets_file: Option<PathBuf>,
    /// A load shape, DURATION:LEVEL,...: each stage held in turn, its level
    /// the rate with --rate (open loop), else the connections; 0 pauses.
    /// Reported per stage.
    #[arg(long, value_name = "STAGES")]
    pub stages: Option<String>,
    /// Search the highest open-loop rate that meets --slo: doubling from
    /// --start-rate, then bisecting. Prints "Max rate at SLO: N req/s".
    #[arg(long)]
    pub find_max_rate: bool,
    /// The SLO of --find-max-rate: thresholds separated by commas
    /// (p99<50ms,errors<0.1%; as --threshold).
    #[arg(long, value_name = "EXPRS", default_value = defaults::SLO)]
    pub slo: Option<String>,
    /// First rate --find-max-rate tries, requests per second.
    #[arg(long, value_name = "RATE", default_value = defaults::START_RATE.to_string())]
    pub start_rate: Option<f64>,
    /// Highest rate --find-max-rate tries, requests per second.
    #[arg(long, value_name = "RATE", default_value = defaults::MAX_RATE.to_string())]
    pub max_rate: Option<f64>,
    /// How long --find-max-rate measures each rate (after a quarter of
    /// that settling, not measured).
    #[arg(long, value_name = "DURATION", default_value = defaults::STEP)]
    pub step: Option<String>,
    /// --find-max-rate stops when the last rate that met the SLO and the
    /// first that did not are this close (share of the former).
    #[arg(long, value_name = "SHARE", default_value = defaults::PRECISION)]
    pub precision: Option<String>,
    /// Run this process's part of a run split over COUNT (INDEX from 0,
    /// as Kubernetes' JOB_COMPLETION_INDEX): connections, rate and -n are
    /// split exactly. Merge the JSON reports with `tern report merge`.
    #[arg(long, value_name = "INDEX/COUNT")]
    pub shard: Option<tern_bench::shard::Shard>,
    /// Start at this wall-clock moment: Unix seconds, RFC 3339
    /// (2026-11-25T21:30:00Z) or now+2s. Every shard given the same
    /// moment starts together (clocks synchronised by NTP).
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// Local IP address every TCP connection (and each QUIC connection's UDP socket) is
    /// made from (vegeta's -laddr): load processes sharing a machine appear as distinct
    /// clients (127.0.0.2, 127.0.0.3 on loopback).
    #[arg(long, value_name = "IP")]
    pub laddr: Option<std::net::IpAddr>,
}

/// Applies the options to `c` (after every other option: the shard
/// splits the connections, rate and count already set).
pub fn apply(a: &ScaleArgs, c: &mut BenchConfig) -> Result<(), BenchError> {
    let duration = |s: &str| parse_go_duration(s).ok();
    if let Some(path) = &a.targets_file {
        let mix = tern_bench::mix::RequestMix::load(path)?;
        c.method = mix.entries[0].method.clone();
        c.mix = Some(mix);
    }
    if let Some(text) = &a.stages {
        c.stages = tern_bench::stages::parse(text, duration)
            .map_err(|e| BenchError::Config(format!("--stages: {e}")))?;
    }
    if a.find_max_rate {
        if matches!(c.load, LoadModel::Open { .. }) {
            return Err(BenchError::Config(
                "--find-max-rate picks the rate itself: drop --rate/-q (use --start-rate)".into(),
            ));
        }
        let slo = tern_bench::search::parse_slo(a.slo.as_deref().unwrap_or(defaults::SLO))
            .map_err(BenchError::Config)?;
        let start_rate = a.start_rate.unwrap_or(defaults::START_RATE);
        let max_rate = a.max_rate.unwrap_or(defaults::MAX_RATE);
        if !(start_rate.is_finite() && start_rate > 0.0 && max_rate >= start_rate) {
            return Err(BenchError::Config(format!(
                "--start-rate {start_rate} and --max-rate {max_rate}: need 0 < start <= max"
            )));
        }
        let step_text = a.step.as_deref().unwrap_or(defaults::STEP);
        let step = parse_go_duration(step_text).map_err(|_| {
            BenchError::Config(format!(
                "--step {step_text:?}: expected a duration like 10s"
            ))
        })?;
        let precision = parse_share(a.precision.as_deref().unwrap_or(defaults::PRECISION))
            .ok()
            .filter(|p| *p > 0.0 && *p < 1.0)
            .ok_or_else(|| {
                BenchError::Config(
                    "--precision: expected a share like 5% (above 0, below 100%)".into(),
                )
            })?;
        c.load = LoadModel::Open { rate: start_rate };
        c.search = Some(SearchConfig {
            slo,
            start_rate,
            max_rate,
            step,
            precision,
        });
    }
    c.local_addr = a.laddr;
    if let Some(shard) = a.shard {
        shard.apply(c)?;
        c.shard = Some(shard);
    }
    if let Some(text) = &a.start_at {
        c.start_at = Some(
            tern_bench::shard::parse_start_at(text, SystemTime::now(), duration)
                .map_err(BenchError::Config)?,
        );
    }
    Ok(())
}
