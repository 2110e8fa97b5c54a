//! Worker threads: each runs its share of the connections on its own
//! single-threaded tokio runtime, records into its own [`Stats`], and the
//! results are merged when all have finished.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::config::{BenchConfig, ConnectionPlan, HttpVersion, LoadModel, StopCondition};
use crate::conn::Connector;
use crate::error::BenchError;
use crate::http1::{request_headers, RequestBytes};
use crate::http2::H2Request;
use crate::http3::H3Connector;
use crate::progress::LiveLatency;
use crate::stats::Stats;
use crate::target::{Scheme, Target};
use crate::timeout::Watchdog;
use crate::tls;

mod h1;
mod h2;
mod h3;
mod lines;
mod pace;
mod record;
mod slot;

use lines::{Lines, Passage};
use pace::{pace, Pacer, Shape};
use record::{Opened, Setup, SlotCtx};

/// How long a kept-alive round waits, once every connection is set up,
/// before it reads the server's CPU and starts its clock: the server's
/// answer to the last client Finished (its session tickets; HTTP/1.1 has
/// no round trip to wait on, HTTP/2 and HTTP/3 waited on one) goes out.
const SETTLE: Duration = Duration::from_millis(10);

/// Run-wide controls shared by all threads: Ctrl-C and progress.
#[derive(Debug)]
pub struct Control {
    /// Set on Ctrl-C: no new requests start.
    pub stop: AtomicBool,
    /// Finished requests (completed or failed), for the progress bar.
    pub done: AtomicU64,
    /// Of those, failed: the live view counts them apart.
    pub failed: AtomicU64,
    /// Flips to true on Ctrl-C so workers drop requests in flight.
    pub stopped: watch::Sender<bool>,
    /// Latencies for the live view's last-second p50 and p99.
    pub live: LiveLatency,
}

impl Control {
    /// A control in the running state.
    pub fn new() -> Arc<Control> {
        Arc::new(Control {
            stop: AtomicBool::new(false),
            done: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            stopped: watch::Sender::new(false),
            live: LiveLatency::default(),
        })
    }

    /// Stops the run: no new requests, requests in flight abandoned.
    pub fn interrupt(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.stopped.send_replace(true);
    }
}

/// Tickets for requests: a count, a deadline, or both, and Ctrl-C.
struct Budget {
    limit: Option<u64>,
    taken: AtomicU64,
    /// Tickets are numbered (a mix picks its request by number) even
    /// without a limit; otherwise an unlimited run shares no counter
    /// between threads.
    numbered: bool,
    /// Run time from the start, for a run that stops after a duration.
    duration: Option<Duration>,
    /// Set once every worker is ready and, in a kept-alive round, every
    /// connection set up (see `run_job`): nothing before reads it.
    start: OnceLock<Instant>,
    control: Arc<Control>,
}

impl Budget {
    /// The instant the target's clock started: the first caller after all
    /// workers were ready sets it, everyone reads the same.
    fn start(&self) -> Instant {
        *self.start.get_or_init(Instant::now)
    }

    fn past_deadline(&self) -> bool {
        self.duration
            .is_some_and(|d| Instant::now() >= self.start() + d)
    }

    /// A ticket for one request, numbered from 0 over the whole target
    /// (the number picks the request of a mix), or `None` when the budget
    /// is spent.
    fn take(&self) -> Option<u64> {
        if self.control.stop.load(Ordering::Relaxed) || self.past_deadline() {
            return None;
        }
        if self.limit.is_none() && !self.numbered {
            return Some(0);
        }
        let n = self.taken.fetch_add(1, Ordering::Relaxed);
        match self.limit {
            Some(limit) if n >= limit => None,
            _ => Some(n),
        }
    }

    /// Returns a ticket taken for a request that was never processed
    /// (and is sent again).
    fn give_back(&self) {
        if self.limit.is_some() || self.numbered {
            self.taken.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn exhausted(&self) -> bool {
        self.control.stop.load(Ordering::Relaxed)
            || self.past_deadline()
            || self
                .limit
                .is_some_and(|l| self.taken.load(Ordering::Relaxed) >= l)
    }
}

/// One target run by all workers under one stop condition.
struct Job {
    /// The protocol this target is run with (its own in a protocol
    /// comparison, else the run's).
    http: HttpVersion,
    /// HTTP/3: the address QUIC connections go to.
    h3_addr: Option<std::net::SocketAddr>,
    config: Arc<BenchConfig>,
    /// The request, or each request of the mix.
    requests: Vec<Prepared>,
    /// Which of `requests` each ticket carries, in a cycle.
    schedule: Vec<u16>,
    budget: Budget,
    /// Every worker waits here, its runtime built and its crypto warm,
    /// before the clock starts: a worker's first handshake then costs
    /// what the others do.
    ready: Barrier,
    /// Open loop: time between two sends of one slot (connection or stream).
    slot_interval: Option<Duration>,
    slots_total: usize,
    /// Streams each connection carries at once (1 unless multiplexed and
    /// kept alive).
    streams: usize,
    /// A load shape run as this one job; its stages are recorded apart.
    shape: Option<Arc<Shape>>,
    /// A round that keeps its connections alive: opened before its clock
    /// starts, closed after it ends (see [`lines`]).
    lines: Option<Arc<Lines>>,
}

impl Job {
    /// The request ticket `n` carries.
    fn request(&self, n: u64) -> &Prepared {
        let i = self.schedule[(n % self.schedule.len() as u64) as usize];
        &self.requests[usize::from(i)]
    }
}

/// One request of the run, encoded once for each protocol, with the
/// checks made on its responses.
pub(crate) struct Prepared {
    h1: RequestBytes,
    h2: H2Request,
    check: crate::mix::Check,
}

impl Prepared {
    /// The run's one request, or each entry of its mix.
    fn all(config: &BenchConfig, target: &Target) -> Result<Vec<Prepared>, BenchError> {
        let one = |config: &BenchConfig, target: &Target, check| {
            Ok::<_, BenchError>(Prepared {
                h1: RequestBytes::new(config, target),
                h2: H2Request::new(config, target, &request_headers(config, target))?,
                check,
            })
        };
        let Some(mix) = &config.mix else {
            return Ok(vec![one(config, target, Default::default())?]);
        };
        mix.entries
            .iter()
            .map(|e| {
                // The entry's method, path and body; its headers replace
                // the command line's of the same name.
                let mut c = config.clone();
                c.mix = None;
                c.method = e.method.clone();
                c.body = e.body.clone();
                c.headers
                    .retain(|(n, _)| !e.headers.iter().any(|(m, _)| m.eq_ignore_ascii_case(n)));
                c.headers.extend(e.headers.iter().cloned());
                let mut t = target.clone();
                t.path = e.path.clone();
                one(&c, &t, e.check.clone())
            })
            .collect()
    }

    fn expect_body(&self) -> Option<&[u8]> {
        self.check.body_contains.as_deref()
    }
}

/// Runs `target` under `stop` with all workers; returns the merged stats.
pub fn run_target(
    config: &Arc<BenchConfig>,
    target: &Target,
    stop: StopCondition,
    control: &Arc<Control>,
) -> Result<Stats, BenchError> {
    let (merged, _, _) = run_job(config, target, stop, control, None, None)?;
    Ok(merged)
}

/// Like [`run_target`], reading the server's CPU (`server`) at the edges
/// of the measured window; returns the merged stats and the server CPU
/// seconds spent inside the window, when known.
pub(crate) fn run_target_metered(
    config: &Arc<BenchConfig>,
    target: &Target,
    stop: StopCondition,
    control: &Arc<Control>,
    server: &mut crate::server::ServerMeter,
) -> Result<(Stats, Option<f64>), BenchError> {
    let (merged, _, cpu) = run_job(config, target, stop, control, None, Some(server))?;
    Ok((merged, cpu))
}

/// Whether a round of `config` measures its requests alone, its connections
/// set up before its clock starts: plans that keep connections alive,
/// except a load shape (whose stages open connections as they reach them).
pub fn measured_after_set_up(config: &BenchConfig) -> bool {
    config.plan == ConnectionPlan::KeepAlive && config.stages.is_empty()
}

/// Runs `target` through the load shape `stages` as one job (connections
/// kept from stage to stage) for the stages' whole length; returns the
/// merged stats and each stage's.
pub(crate) fn run_target_shaped(
    config: &Arc<BenchConfig>,
    target: &Target,
    stages: &[crate::stages::Stage],
    control: &Arc<Control>,
    server: &mut crate::server::ServerMeter,
) -> Result<(Stats, Vec<Stats>, Option<f64>), BenchError> {
    let held = stages.iter().map(|s| s.duration).sum();
    run_job(
        config,
        target,
        StopCondition::Duration(held),
        control,
        Some(Arc::new(Shape::new(stages))),
        Some(server),
    )
}

/// Runs one target with all workers. The measured window, in which the
/// clock runs and `server`'s CPU is read, starts once every worker is
/// ready and, in a round that keeps its connections alive, once every
/// connection is set up; it ends when the last request has finished
/// (before a kept-alive round closes its connections).
fn run_job(
    config: &Arc<BenchConfig>,
    target: &Target,
    stop: StopCondition,
    control: &Arc<Control>,
    shape: Option<Arc<Shape>>,
    mut server: Option<&mut crate::server::ServerMeter>,
) -> Result<(Stats, Vec<Stats>, Option<f64>), BenchError> {
    let workers = config.workers.clamp(1, config.connections.max(1));
    let http = target.http.unwrap_or(config.http);
    let streams = match config.plan {
        ConnectionPlan::KeepAlive if http.multiplexed() => config.streams_per_connection.max(1),
        _ => 1,
    };
    if http == HttpVersion::Http3 {
        h3::check_plan(config, target)?;
    }
    let slots_total = config.connections.max(1) * streams;
    let slot_interval = match config.load {
        LoadModel::Closed => None,
        LoadModel::Open { rate } => Some(Duration::from_secs_f64(slots_total as f64 / rate)),
    };
    let (limit, duration) = match stop {
        StopCondition::Requests(n) => (Some(n), None),
        StopCondition::Duration(d) => (None, Some(d)),
    };
    let tickets = Arc::new(AtomicU64::new(0));
    let tls_configs = (0..workers)
        .map(|_| match target.scheme {
            Scheme::Https => tls::client_config(&config.tls, config.plan, http, tickets.clone())
                .map(|c| Some(Arc::new(c))),
            Scheme::Http => Ok(None),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let h3_addr = match http {
        HttpVersion::Http3 => Some(h3::address(target)?),
        _ => None,
    };
    let job = Arc::new(Job {
        http,
        h3_addr,
        config: config.clone(),
        requests: Prepared::all(config, target)?,
        schedule: config
            .mix
            .as_ref()
            .map_or_else(|| vec![0], |m| m.schedule()),
        budget: Budget {
            limit,
            taken: AtomicU64::new(0),
            numbered: config.mix.as_ref().is_some_and(|m| m.entries.len() > 1),
            duration,
            start: OnceLock::new(),
            control: control.clone(),
        },
        ready: Barrier::new(workers + 1),
        slot_interval,
        slots_total,
        streams,
        // The report's `measured_after_set_up` and the lines come from one
        // rule (a shaped job has stages, so it gets none).
        lines: measured_after_set_up(config).then(|| Arc::new(Lines::new(workers))),
        shape,
    });
    let mut spent = None;
    let mut ended = None;
    let results: Vec<Result<Vec<Stats>, BenchError>> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        let mut first_conn = 0;
        for (w, tls_config) in tls_configs.into_iter().enumerate() {
            // Spread connections as evenly as possible over workers.
            let conns =
                config.connections / workers + usize::from(w < config.connections % workers);
            let sni = config
                .tls
                .sni
                .clone()
                .unwrap_or_else(|| target.host.clone());
            let h3_tls = tls_config.clone().filter(|_| http == HttpVersion::Http3);
            let connector = Connector::new(
                target,
                tls_config,
                config.tls.sni.as_deref(),
                config.proxy.as_deref(),
            )
            .map(|c| c.bind_to(config.local_addr));
            let job = job.clone();
            let control = control.clone();
            let https = target.scheme == Scheme::Https;
            let tls_options = &config.tls;
            let first = first_conn;
            first_conn += conns;
            handles.push(scope.spawn(move || {
                // Made first: a worker that fails from here on still
                // arrives at every line when it is dropped.
                let passage = job.lines.clone().map(|l| Passage::new(l, conns));
                crate::warmup::warm_crypto();
                if https {
                    crate::warmup::warm_tls(tls_options);
                }
                job.ready.wait();
                run_worker(
                    job,
                    connector?,
                    h3_tls.map(|t| (t, sni)),
                    first,
                    conns,
                    control,
                    passage,
                )
            }));
        }
        job.ready.wait();
        if let Some(lines) = &job.lines {
            lines.wait_set_up();
            std::thread::sleep(SETTLE);
        }
        if let Some(server) = server.as_deref_mut() {
            server.before();
        }
        job.budget.start();
        if let Some(lines) = &job.lines {
            lines.start();
            lines.wait_finished();
            ended = Some(Instant::now());
            spent = server.as_deref_mut().and_then(|s| s.after());
            lines.release();
        }
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(BenchError::Runtime(std::io::Error::other(
                        "a worker thread panicked",
                    )))
                })
            })
            .collect()
    });
    let ended = ended.unwrap_or_else(|| {
        // A connection per request: closing each is part of the work.
        spent = server.and_then(|s| s.after());
        Instant::now()
    });
    let mut parts: Vec<Stats> = Vec::new();
    for r in results {
        let r = r?;
        parts.resize_with(r.len(), Stats::default);
        for (part, theirs) in parts.iter_mut().zip(&r) {
            part.merge(theirs);
        }
    }
    let mut merged = Stats::default();
    for (k, part) in parts.iter_mut().enumerate() {
        merged.merge(part);
        if let Some(shape) = &job.shape {
            part.elapsed = shape.duration(k);
        }
    }
    merged.tickets = tickets.load(Ordering::Relaxed);
    merged.elapsed = ended.saturating_duration_since(job.budget.start());
    Ok((merged, parts, spent))
}

fn run_worker(
    job: Arc<Job>,
    connector: Connector,
    h3_tls: Option<(Arc<rustls::ClientConfig>, String)>,
    first_conn: usize,
    conns: usize,
    control: Arc<Control>,
    passage: Option<Passage>,
) -> Result<Vec<Stats>, BenchError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(BenchError::Runtime)?;
    let local = tokio::task::LocalSet::new();
    let parts = job.shape.as_ref().map_or(1, |s| s.len());
    let stats = Rc::new(RefCell::new(vec![Stats::default(); parts]));
    let mut stopped = control.stopped.subscribe();
    let slot_stats = stats.clone();
    local.block_on(&rt, async move {
        // Made on the worker's runtime: the endpoint's socket is
        // registered with it.
        let h3 = match (h3_tls, job.h3_addr) {
            (Some((tls, name)), Some(addr)) => {
                Some(H3Connector::new(addr, &name, tls, job.config.local_addr)?)
            }
            _ => None,
        };
        let ctx = Rc::new(SlotCtx {
            job: job.clone(),
            connector,
            h3,
            stats: slot_stats,
            live: control.live.shard(),
            control: control.clone(),
            passage: passage.map(Rc::new),
        });
        let mut handles = Vec::with_capacity(conns);
        for c in first_conn..first_conn + conns {
            let ctx = ctx.clone();
            handles.push(tokio::task::spawn_local(async move {
                use slot::{multiplexed_slot, serial_slot};
                let keepalive = ctx.job.config.plan == ConnectionPlan::KeepAlive;
                match ctx.job.http {
                    HttpVersion::Http2 if keepalive => {
                        multiplexed_slot(ctx, h2::H2::default(), c).await
                    }
                    HttpVersion::Http2 => serial_slot(ctx, h2::H2::default(), c).await,
                    HttpVersion::Http3 if keepalive => {
                        multiplexed_slot(ctx, h3::H3::default(), c).await
                    }
                    HttpVersion::Http3 => serial_slot(ctx, h3::H3::default(), c).await,
                    HttpVersion::Http1 => serial_slot(ctx, h1::H1::default(), c).await,
                }
            }));
        }
        let all = async {
            for h in handles {
                let _ = h.await;
            }
        };
        tokio::select! {
            _ = all => {}
            _ = stopped.wait_for(|s| *s) => {}
        }
        Ok::<(), BenchError>(())
    })?;
    drop(local);
    let stats = stats.borrow().clone();
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn sleep_ok(ms: u64) -> Result<u64, &'static str> {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(ms)
    }

    #[test]
    fn watchdog_times_out_each_request_from_its_own_start() {
        // Paused time: the clock moves only from timer to timer, so the
        // bounds below hold exactly, however busy the machine is.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let mut dog = Watchdog::new(Some(Duration::from_millis(200)));
            assert_eq!(dog.run(sleep_ok(150), || "timeout").await, Ok(150));
            // The timer armed for the first request fires 50 ms into this
            // one; it must re-arm, not time this request out.
            assert_eq!(dog.run(sleep_ok(150), || "timeout").await, Ok(150));
            let start = tokio::time::Instant::now();
            assert_eq!(dog.run(sleep_ok(1000), || "timeout").await, Err("timeout"));
            let took = start.elapsed();
            assert!(
                took >= Duration::from_millis(195) && took < Duration::from_millis(600),
                "timed out after {took:?}"
            );
            let mut none = Watchdog::new(None);
            assert_eq!(none.run(sleep_ok(10), || "timeout").await, Ok(10));
        });
    }
}
