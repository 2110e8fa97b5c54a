//! A whole run: the targets (interleaved by rounds in compare mode), Ctrl-C,
//! the progress bar, and the disclosure gathered around it.

use std::sync::Arc;

use crate::config::{BenchConfig, ConnectionPlan, ResumptionMode, StopCondition};
use crate::conn::resolve_all;
use crate::env::{load_average, process_cpu_seconds, Address, Machine};
use crate::error::BenchError;
use crate::progress::Progress;
use crate::report::{
    negotiation_warnings, PlanInfo, Report, RoundFigures, RoundSpan, TargetReport, FORMAT,
};
use crate::server::ServerMeter;
use crate::stats::Stats;
use crate::worker::{run_target, run_target_metered, Control};

/// Runs the benchmark described by `config` and returns its report. Ctrl-C
/// stops it early; the report then holds what was measured so far and says
/// it was interrupted.
pub fn run(config: BenchConfig) -> Result<Report, BenchError> {
    validate(&config)?;
    let config = Arc::new(config);
    let control = Control::new();
    let _ctrl_c = CtrlC::install(control.clone());
    run_with(config, control)
}

/// Like [`run`], with a caller-provided [`Control`] (tests interrupt runs
/// through it) and no Ctrl-C handler.
pub fn run_with(config: Arc<BenchConfig>, control: Arc<Control>) -> Result<Report, BenchError> {
    validate(&config)?;
    crate::warmup::warm_crypto();
    let mut machine = Machine::detect(config.workers.clamp(1, config.connections.max(1)));
    let cpu_before = process_cpu_seconds();
    let addresses = config
        .targets
        .iter()
        .map(|t| resolve_all(t).map(|a| a.into_iter().map(Address::new).collect::<Vec<_>>()))
        .collect::<Result<Vec<_>, _>>()?;
    let rounds = config.rounds.max(1);
    let per_round = match config.stop {
        StopCondition::Requests(n) => StopCondition::Requests(n.div_ceil(rounds as u64)),
        StopCondition::Duration(d) => StopCondition::Duration(d / rounds as u32),
    };
    let (total, duration) = match per_round {
        StopCondition::Requests(n) => (Some(n * (rounds * config.targets.len()) as u64), None),
        StopCondition::Duration(d) => (None, Some(d * (rounds * config.targets.len()) as u32)),
    };
    // Every shard of a run starts here at the same wall-clock moment (its
    // warm-up first, when it has one).
    let started_late = config.start_at.map(crate::shard::wait_until);
    if let Some(warmup) = config.warmup {
        // The server's side of warming up (its caches, its allocator,
        // its CPU frequency): requests made, every figure left out.
        for target in &config.targets {
            run_target(&config, target, StopCondition::Duration(warmup), &control)?;
        }
        control.done.store(0, std::sync::atomic::Ordering::Relaxed);
        control
            .failed
            .store(0, std::sync::atomic::Ordering::Relaxed);
    }
    let started_unix_ms = unix_ms();
    let (total, duration) = if config.search.is_some() {
        (None, None)
    } else if !config.stages.is_empty() {
        let held: std::time::Duration = config.stages.iter().map(|s| s.duration).sum();
        (None, Some(held * config.targets.len() as u32))
    } else {
        (total, duration)
    };
    let progress = Progress::start(config.progress, control.clone(), total, duration);
    let mut runner = Runner {
        config: config.clone(),
        control: control.clone(),
        run_start: std::time::Instant::now(),
        stats: config.targets.iter().map(|_| Stats::default()).collect(),
        figures: config.targets.iter().map(|_| Vec::new()).collect(),
        timelines: config.targets.iter().map(|_| Vec::new()).collect(),
        servers: addresses
            .iter()
            .map(|a| ServerMeter::new(&config.server_pids, a))
            .collect(),
        stages: config.targets.iter().map(|_| Vec::new()).collect(),
        capacity: config.targets.iter().map(|_| None).collect(),
        clock_latency: config.targets.iter().map(|_| Vec::new()).collect(),
    };
    if let Some(search) = &config.search {
        crate::search::run(&mut runner, search)?;
    } else if !config.stages.is_empty() {
        runner.stages()?;
    } else {
        runner.rounds(rounds, per_round)?;
    }
    let Runner {
        stats,
        figures,
        timelines,
        servers,
        stages,
        capacity,
        clock_latency,
        ..
    } = runner;
    progress.finish();
    machine.load_after = load_average();
    machine.client_cpu_s = process_cpu_seconds()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let targets: Vec<TargetReport> = config
        .targets
        .iter()
        .zip(addresses)
        .zip(stats.into_iter().zip(figures))
        .zip(servers.into_iter().zip(timelines))
        .zip(stages.into_iter().zip(capacity))
        .zip(clock_latency)
        .map(
            |(((((t, a), (s, f)), (server, timeline)), (stages, capacity)), latency)| {
                let mut report = TargetReport::new(t.url.clone(), a, f, s);
                report.server_cpu = Some(match &capacity {
                    // The figures are those of the step at capacity.
                    Some((_, cpu_s)) => server.finish_with(*cpu_s, report.summary.completed),
                    None => server.finish(report.summary.completed),
                });
                report.http = t.http;
                report.stats.series = crate::report::series_on_the_clock(&timeline);
                report.stats.second_latency = latency;
                report.timeline = timeline;
                report.stages = stages;
                report.capacity = capacity.map(|c| c.0);
                report
            },
        )
        .collect();
    let mut warnings = negotiation_warnings(&targets);
    // A shard's own timestamps cannot show that its clock is off: read
    // the target's, which every shard reads, for the merge to compare.
    let clock_offset = match (&config.shard, &config.start_at, config.targets.first()) {
        (None, None, _) | (_, _, None) => None,
        (_, _, Some(target)) => match crate::clock::read(&config, target) {
            Ok(offset) => Some(offset),
            Err(why) => {
                warnings.push(format!(
                    "no reading of the target's clock ({why}): a merge cannot check this shard's clock against the others'"
                ));
                None
            }
        },
    };
    if let Some(late) = started_late.filter(|l| *l > crate::shard::LATE_START) {
        warnings.push(format!(
            "started {:.1} s after --start-at: launched late, so it ran apart from the other shards",
            late.as_secs_f64()
        ));
    }
    Ok(Report {
        format: FORMAT.to_string(),
        tool: format!("tern {}", env!("CARGO_PKG_VERSION")),
        command_lines: vec![config.command_line.clone()],
        plan: plan_info(&config),
        machines: vec![machine],
        targets,
        interrupted: control.stop.load(std::sync::atomic::Ordering::SeqCst),
        warnings,
        started_unix_ms,
        ended_unix_ms: unix_ms(),
        thresholds: Vec::new(),
        shard: config.shard,
        started_late_ms: started_late.map(|l| l.as_millis() as u64),
        clock_offset,
        start_at_unix_ms: config.start_at.and_then(|t| {
            t.duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_millis() as u64)
        }),
    })
}

/// The measured part of a run: each target's figures, added up over the
/// segments it ran (rounds, stages or search steps).
pub(crate) struct Runner {
    pub(crate) config: Arc<BenchConfig>,
    pub(crate) control: Arc<Control>,
    run_start: std::time::Instant,
    pub(crate) stats: Vec<Stats>,
    figures: Vec<Vec<RoundFigures>>,
    timelines: Vec<Vec<RoundSpan>>,
    servers: Vec<ServerMeter>,
    stages: Vec<Vec<crate::stages::StageFigures>>,
    /// A search's result per target, with the server CPU seconds of the
    /// step at capacity.
    pub(crate) capacity: Vec<Option<(crate::search::Capacity, Option<f64>)>>,
    /// Per-second latency histograms of each target on the run's clock,
    /// placed as `series_on_the_clock` places the counts.
    clock_latency: Vec<Vec<hdrhistogram::Histogram<u64>>>,
}

impl Runner {
    pub(crate) fn stopped(&self) -> bool {
        self.control.stop.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Runs target `i` under `config` until `stop`, placed on the run's
    /// timeline; returns its figures and the server CPU seconds it cost
    /// (when known).
    pub(crate) fn segment(
        &mut self,
        i: usize,
        config: &Arc<BenchConfig>,
        stop: StopCondition,
    ) -> Result<(Stats, Option<f64>), BenchError> {
        let start = self.run_start.elapsed();
        let (round, cpu) = run_target_metered(
            config,
            &self.config.targets[i],
            stop,
            &self.control,
            &mut self.servers[i],
        )?;
        self.place(i, start, &round);
        Ok((round, cpu))
    }

    /// Runs target `i` through the load shape `stages` (see
    /// [`Runner::segment`]); returns the whole run's figures, each
    /// stage's, and the server CPU seconds.
    fn segment_shaped(
        &mut self,
        i: usize,
        config: &Arc<BenchConfig>,
        stages: &[crate::stages::Stage],
    ) -> Result<(Stats, Vec<Stats>, Option<f64>), BenchError> {
        let start = self.run_start.elapsed();
        let (whole, parts, cpu) = crate::worker::run_target_shaped(
            config,
            &self.config.targets[i],
            stages,
            &self.control,
            &mut self.servers[i],
        )?;
        self.place(i, start, &whole);
        Ok((whole, parts, cpu))
    }

    /// Places a segment of target `i` that began `start` into the run on
    /// the run's timeline.
    fn place(&mut self, i: usize, start: std::time::Duration, round: &Stats) {
        let clock = &mut self.clock_latency[i];
        for (k, h) in round.second_latency.iter().enumerate() {
            let at = (start.as_secs_f64() + k as f64).round() as usize;
            if clock.len() <= at {
                clock.resize_with(at + 1, crate::stats::new_second_histogram);
            }
            // Same precision, auto-resizing: adding cannot fail.
            let _ = clock[at].add(h);
        }
        self.timelines[i].push(RoundSpan {
            start_s: start.as_secs_f64(),
            elapsed_s: round.elapsed.as_secs_f64(),
            series: round.series.clone(),
        });
    }

    /// Interleaved rounds of every target (one round for a single target).
    fn rounds(&mut self, rounds: usize, per_round: StopCondition) -> Result<(), BenchError> {
        let config = self.config.clone();
        for _ in 0..rounds {
            for i in 0..config.targets.len() {
                if self.stopped() {
                    return Ok(());
                }
                let (round, _) = self.segment(i, &config, per_round)?;
                let summary = crate::report::Summary::from_stats(&round);
                self.figures[i].push(RoundFigures {
                    rps: summary.rps,
                    p50_ms: summary.percentile(50.0),
                    p99_ms: summary.percentile(99.0),
                    errors: summary.failed,
                });
                if rounds == 1 {
                    self.stats[i] = round;
                } else {
                    self.stats[i].append(&round);
                }
            }
        }
        Ok(())
    }

    /// The load shape, each target through all of it in turn: one job
    /// per target, whose connections stay open from stage to stage.
    fn stages(&mut self) -> Result<(), BenchError> {
        let open = matches!(self.config.load, crate::config::LoadModel::Open { .. });
        let unit = if open { "req/s" } else { "connections" };
        let stages = self.config.stages.clone();
        let highest = stages.iter().map(|s| s.level).fold(0.0, f64::max);
        let mut c = (*self.config).clone();
        if open {
            // The rate only makes it an open loop: each stage sets its own.
            c.load = crate::config::LoadModel::Open { rate: highest };
        } else {
            // Opened for the largest stage; a smaller one lets the first
            // of them send.
            c.connections = (highest as usize).max(1);
        }
        let c = Arc::new(c);
        for i in 0..self.config.targets.len() {
            if self.stopped() {
                return Ok(());
            }
            let (whole, parts, _) = self.segment_shaped(i, &c, &stages)?;
            for (k, (stage, part)) in stages.iter().zip(&parts).enumerate() {
                self.stages[i].push(crate::stages::StageFigures::new(k + 1, stage, unit, part));
            }
            self.stats[i] = whole;
        }
        Ok(())
    }
}

/// Now, in milliseconds since the Unix epoch (`None` if the clock is set
/// before 1970).
fn unix_ms() -> Option<u64> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_millis() as u64)
}

fn validate(config: &BenchConfig) -> Result<(), BenchError> {
    if config.targets.is_empty() {
        return Err(BenchError::Config("no target URL".into()));
    }
    if config.connections == 0 {
        return Err(BenchError::Config("-c must be at least 1".into()));
    }
    if let crate::config::LoadModel::Open { rate } = config.load {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(BenchError::Config(format!(
                "--rate must be positive, got {rate}"
            )));
        }
    }
    if config.search.is_some() && !config.stages.is_empty() {
        return Err(BenchError::Config(
            "--find-max-rate and --stages: a capacity search sets its own load".into(),
        ));
    }
    if config.search.is_some() || !config.stages.is_empty() {
        // The stop condition and the rounds do not apply.
        return Ok(());
    }
    if config.stop == StopCondition::Requests(0) {
        return Err(BenchError::Config(
            "-n 0: nothing to send; -n must be at least 1".into(),
        ));
    }
    if let StopCondition::Requests(n) = config.stop {
        let rounds = config.rounds.max(1) as u64;
        let per_round = n.div_ceil(rounds);
        if per_round < config.connections as u64 && config.targets.len() == 1 {
            // hey refuses this too: some connections would never send.
            let split = if rounds > 1 {
                format!(" ({per_round} a round over {rounds} rounds)")
            } else {
                String::new()
            };
            return Err(BenchError::Config(format!(
                "-n {n}{split} is smaller than -c {}: some connections would never send",
                config.connections
            )));
        }
    }
    Ok(())
}

fn plan_info(config: &BenchConfig) -> PlanInfo {
    let resumption_asked = match config.plan {
        ConnectionPlan::NewConnection => "no",
        ConnectionPlan::KeepAlive => "on reconnect only",
        ConnectionPlan::Resumed(ResumptionMode::Tickets) => "tickets",
        ConnectionPlan::Resumed(ResumptionMode::SessionIds) => {
            "session-ids (TLS 1.2; TLS 1.3 uses tickets)"
        }
    };
    let t = &config.tls;
    let mut offer = Vec::new();
    if let Some(v) = t.min_version {
        offer.push(format!("min {}", v.name()));
    }
    if let Some(v) = t.max_version {
        offer.push(format!("max {}", v.name()));
    }
    if !t.ciphers.is_empty() {
        offer.push(format!("ciphers {}", t.ciphers.join(",")));
    }
    if !t.groups.is_empty() {
        offer.push(format!("groups {}", t.groups.join(",")));
    }
    if let Some(alpn) = &t.alpn {
        offer.push(format!("ALPN {}", alpn.join(",")));
    }
    if let Some(sni) = &t.sni {
        offer.push(format!("SNI {sni}"));
    }

    let plain_http = config
        .targets
        .iter()
        .all(|t| t.scheme == crate::target::Scheme::Http);
    // Streams multiplex only on a kept-alive HTTP/2 or HTTP/3 connection;
    // `-m 10` elsewhere still sends one request at a time.
    let multiplexed = config
        .targets
        .iter()
        .any(|t| t.http.unwrap_or(config.http).multiplexed());
    let streams = if multiplexed && config.plan == ConnectionPlan::KeepAlive {
        config.streams_per_connection.max(1)
    } else {
        1
    };
    PlanInfo {
        warmup: config.warmup.map(|d| format!("{:.1}s", d.as_secs_f64())),
        plain_http,
        connection_plan: config.plan,
        keepalive: !config.plan.connection_per_request(),
        resumption_asked: resumption_asked.to_string(),
        http: config.http,
        load: config.load,
        // A closed-loop shape opens as many as its largest stage.
        connections: match config.load {
            crate::config::LoadModel::Closed if !config.stages.is_empty() => config
                .stages
                .iter()
                .map(|s| s.level as usize)
                .max()
                .unwrap_or(1)
                .max(1),
            _ => config.connections,
        },
        streams_per_connection: streams,
        stop: if let Some(search) = &config.search {
            format!(
                "capacity search from {:.0} req/s, steps of {:.1}s after {:.1}s settling, SLO {}",
                search.start_rate,
                search.step.as_secs_f64(),
                search.step.as_secs_f64() / 4.0,
                search
                    .slo
                    .iter()
                    .map(|t| t.text.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        } else if !config.stages.is_empty() {
            let shape: Vec<String> = config
                .stages
                .iter()
                .map(|s| format!("{:.1}s:{}", s.duration.as_secs_f64(), s.level))
                .collect();
            format!("stages {}", shape.join(","))
        } else {
            match config.stop {
                StopCondition::Requests(n) => format!("{n} requests"),
                StopCondition::Duration(d) => format!("{:.1}s", d.as_secs_f64()),
            }
        },
        rounds: if config.search.is_some() || !config.stages.is_empty() {
            1
        } else {
            config.rounds.max(1)
        },
        method: config.method.clone(),
        request_body_bytes: config.body.len(),
        verification: match (&t.ca_file, t.insecure) {
            (Some(p), false) => format!("chain verified against {}", p.display()),
            _ => "chain not verified (hey's default; signatures still checked)".to_string(),
        },
        request_mix: config.mix.as_ref().map(crate::mix::RequestMix::describe),
        stage_levels: config.stages.iter().map(|s| s.level).collect(),
        measured_after_set_up: crate::worker::measured_after_set_up(config),
        tls_offer: format!(
            "{}; {}",
            if offer.is_empty() {
                "rustls/aws-lc-rs defaults".to_string()
            } else {
                offer.join("; ")
            },
            // Always said: it changes the server's first flight (bytes, and
            // a round trip when a chain overflows the initial window whole).
            if t.no_cert_compression {
                "cert compression refused"
            } else {
                "cert compression offered (brotli, zlib)"
            }
        ),
    }
}

/// Listens for Ctrl-C on a small thread of its own for the run's duration.
struct CtrlC {
    done: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CtrlC {
    fn install(control: Arc<Control>) -> CtrlC {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                tokio::select! {
                    r = tokio::signal::ctrl_c() => if r.is_ok() { control.interrupt() },
                    _ = rx => {}
                }
            });
        });
        CtrlC {
            done: Some(tx),
            thread: Some(thread),
        }
    }
}

impl Drop for CtrlC {
    fn drop(&mut self) {
        if let Some(tx) = self.done.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
