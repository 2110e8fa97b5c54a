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
use crate::server::{cpu_seconds, detect_server_pids, PidSource, ServerCpu};
use crate::stats::Stats;
use crate::worker::{run_target, Control};

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
    let run_start = std::time::Instant::now();
    let started_unix_ms = unix_ms();
    let progress = Progress::start(config.progress, control.clone(), total, duration);
    let mut stats: Vec<Stats> = config.targets.iter().map(|_| Stats::default()).collect();
    let mut figures: Vec<Vec<RoundFigures>> = config.targets.iter().map(|_| Vec::new()).collect();
    let mut timelines: Vec<Vec<RoundSpan>> = config.targets.iter().map(|_| Vec::new()).collect();
    let mut servers: Vec<ServerMeter> = addresses
        .iter()
        .map(|a| ServerMeter::new(&config.server_pids, a))
        .collect();
    'rounds: for _ in 0..rounds {
        for (i, target) in config.targets.iter().enumerate() {
            if control.stop.load(std::sync::atomic::Ordering::SeqCst) {
                break 'rounds;
            }
            servers[i].before();
            let round_start = run_start.elapsed();
            let round = run_target(&config, target, per_round, &control)?;
            servers[i].after();
            timelines[i].push(RoundSpan {
                start_s: round_start.as_secs_f64(),
                elapsed_s: round.elapsed.as_secs_f64(),
                series: round.series.clone(),
            });
            let summary = crate::report::Summary::from_stats(&round);
            figures[i].push(RoundFigures {
                rps: summary.rps,
                p50_ms: summary.percentile(50.0),
                p99_ms: summary.percentile(99.0),
                errors: summary.failed,
            });
            if rounds == 1 {
                stats[i] = round;
            } else {
                stats[i].append(&round);
            }
        }
    }
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
        .map(|(((t, a), (s, f)), (server, timeline))| {
            let mut report = TargetReport::new(t.url.clone(), a, f, s);
            report.server_cpu = Some(server.finish(report.summary.completed));
            report.http = t.http;
            report.stats.series = crate::report::series_on_the_clock(&timeline);
            report.timeline = timeline;
            report
        })
        .collect();
    let warnings = negotiation_warnings(&targets);
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
    })
}

/// Now, in milliseconds since the Unix epoch (`None` if the clock is set
/// before 1970).
fn unix_ms() -> Option<u64> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_millis() as u64)
}

/// Server CPU of one target, summed over that target's rounds only.
struct ServerMeter {
    pids: Vec<u32>,
    found_by: Option<PidSource>,
    cpu_s: f64,
    start: Option<f64>,
    /// Set once a reading failed (or no PIDs were found): the figure is
    /// then unknown for the whole run.
    failed: Option<String>,
}

impl ServerMeter {
    fn new(given: &[u32], addresses: &[Address]) -> ServerMeter {
        let (pids, found_by, failed) = if !given.is_empty() {
            (given.to_vec(), Some(PidSource::Given), None)
        } else {
            match detect_server_pids(addresses) {
                Ok(p) => (p, Some(PidSource::ListeningSocketOwner), None),
                Err(reason) => (Vec::new(), None, Some(reason)),
            }
        };
        ServerMeter {
            pids,
            found_by,
            cpu_s: 0.0,
            start: None,
            failed,
        }
    }

    fn read(&mut self) -> Option<f64> {
        if self.failed.is_some() {
            return None;
        }
        match cpu_seconds(&self.pids) {
            Ok(v) => Some(v),
            Err(e) => {
                self.failed = Some(format!("{e} (did the server exit?)"));
                None
            }
        }
    }

    fn before(&mut self) {
        self.start = self.read();
    }

    fn after(&mut self) {
        if let (Some(start), Some(end)) = (self.start.take(), self.read()) {
            self.cpu_s += (end - start).max(0.0);
        }
    }

    fn finish(self, completed: u64) -> ServerCpu {
        if let Some(reason) = self.failed {
            return ServerCpu::unknown(self.pids, self.found_by, reason);
        }
        ServerCpu {
            pids: self.pids,
            found_by: self.found_by,
            cpu_s: Some(self.cpu_s),
            us_per_request: (completed > 0).then(|| self.cpu_s * 1e6 / completed as f64),
            ticks: Some(crate::server::ticks(self.cpu_s)),
            unknown_reason: None,
        }
    }
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
        connections: config.connections,
        streams_per_connection: streams,
        stop: match config.stop {
            StopCondition::Requests(n) => format!("{n} requests"),
            StopCondition::Duration(d) => format!("{:.1}s", d.as_secs_f64()),
        },
        rounds: config.rounds.max(1),
        method: config.method.clone(),
        request_body_bytes: config.body.len(),
        verification: match (&t.ca_file, t.insecure) {
            (Some(p), false) => format!("chain verified against {}", p.display()),
            _ => "chain not verified (hey's default; signatures still checked)".to_string(),
        },
        tls_offer: if offer.is_empty() {
            "rustls/aws-lc-rs defaults".to_string()
        } else {
            offer.join("; ")
        },
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
