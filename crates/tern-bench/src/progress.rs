//! The live view on stderr: on a terminal a bar redrawn in place, otherwise
//! a plain line every second. Both say how many requests finished, how
//! many failed (red on a terminal), the rate of completed requests, p50 and
//! p99 of the last whole second, and the time left.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::stats::new_histogram;
use crate::worker::Control;

/// Redraw interval on a terminal.
const TICK: Duration = Duration::from_millis(250);
/// The window p50 and p99 are taken over, and the plain line's interval.
const WINDOW: Duration = Duration::from_secs(1);
/// Width of the bar in characters.
const WIDTH: usize = 40;

/// One worker's latencies since the live view last took them.
pub type LiveShard = Arc<Mutex<Histogram<u64>>>;

/// Latencies of the last moments, for the live view. Each worker records
/// into its own shard (a lock only the view ever contends, once a tick);
/// nothing is recorded while no view is drawn.
#[derive(Debug, Default)]
pub struct LiveLatency {
    on: AtomicBool,
    /// Every worker's shard; the view holds one reference, the worker the
    /// other until it ends.
    shards: Mutex<Vec<LiveShard>>,
}

impl LiveLatency {
    /// A shard for a worker to record into, when a view is drawn.
    pub fn shard(&self) -> Option<LiveShard> {
        if !self.on.load(Ordering::Relaxed) {
            return None;
        }
        let shard = Arc::new(Mutex::new(new_histogram()));
        if let Ok(mut shards) = self.shards.lock() {
            shards.push(shard.clone());
        }
        Some(shard)
    }

    /// Moves what every shard holds into `into`; forgets finished workers.
    fn drain_into(&self, into: &mut Histogram<u64>) {
        let Ok(mut shards) = self.shards.lock() else {
            return;
        };
        shards.retain(|shard| {
            if let Ok(mut h) = shard.lock() {
                let _ = into.add(&*h);
                h.reset();
            }
            // A worker that has ended is forgotten once its last
            // latencies are taken (a weak reference lost them: a round
            // ending just before a tick showed an empty last second).
            Arc::strong_count(shard) > 1
        });
    }
}

/// A running live view; dropping it (or [`Progress::finish`]) clears it.
pub struct Progress {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// What the view knows of the run's end.
#[derive(Clone, Copy)]
struct Goal {
    /// Requests in the whole run, when it stops after a count.
    total: Option<u64>,
    /// Running time of the whole run, when it stops after a duration.
    duration: Option<Duration>,
}

impl Progress {
    /// Starts the view when `enabled`: a bar when stderr is a terminal, a
    /// plain line a second otherwise. `total` is the request count when
    /// known; `duration` the run time when known.
    pub fn start(
        enabled: bool,
        control: Arc<Control>,
        total: Option<u64>,
        duration: Option<Duration>,
    ) -> Progress {
        if !enabled {
            return Progress {
                stop: None,
                thread: None,
            };
        }
        let terminal = std::io::stderr().is_terminal();
        control.live.on.store(true, Ordering::Relaxed);
        let goal = Goal { total, duration };
        let (tx, rx) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let tick = if terminal { TICK } else { WINDOW };
            let mut window = new_histogram();
            let mut window_start = start;
            let mut last_second: Option<(f64, f64)> = None;
            let mut drawn = 0usize;
            let mut first = true;
            loop {
                control.live.drain_into(&mut window);
                if window_start.elapsed() >= WINDOW {
                    last_second = (!window.is_empty()).then(|| {
                        let ms = |q: f64| window.value_at_quantile(q) as f64 / 1000.0;
                        (ms(0.5), ms(0.99))
                    });
                    window.reset();
                    window_start = Instant::now();
                }
                let line = view(&control, goal, start.elapsed(), last_second, terminal);
                let mut err = std::io::stderr().lock();
                if terminal {
                    let _ = write!(err, "\r{line}");
                    // Wipe what a longer earlier line left behind.
                    let width = line.chars().count();
                    let _ = write!(err, "{}", " ".repeat(drawn.saturating_sub(width)));
                    drawn = width;
                } else if !first {
                    let _ = writeln!(err, "{line}");
                }
                first = false;
                let _ = err.flush();
                drop(err);
                if rx.recv_timeout(tick) != Err(mpsc::RecvTimeoutError::Timeout) {
                    if terminal {
                        let _ = write!(std::io::stderr(), "\r{}\r", " ".repeat(drawn));
                    }
                    return;
                }
            }
        });
        Progress {
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    /// Clears the bar and waits for its thread.
    pub fn finish(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// One rendering of the view.
fn view(
    control: &Control,
    goal: Goal,
    elapsed: Duration,
    last_second: Option<(f64, f64)>,
    terminal: bool,
) -> String {
    let done = control.done.load(Ordering::Relaxed);
    let failed = control.failed.load(Ordering::Relaxed);
    let secs = elapsed.as_secs_f64().max(1e-3);
    // Completed requests only: a run where everything fails must not
    // show a healthy rate.
    let rate = done.saturating_sub(failed) as f64 / secs;
    let errors = match (failed, terminal) {
        (0, _) => "0 errors".to_string(),
        (n, true) => format!("\x1b[31m{n} errors\x1b[0m"),
        (n, false) => format!("{n} errors"),
    };
    let latency = match last_second {
        Some((p50, p99)) => format!("p50 {p50:.2} ms, p99 {p99:.2} ms"),
        None => "p50 -, p99 -".to_string(),
    };
    let left = time_left(goal, elapsed, done as f64 / secs);
    let fraction = match (goal.total, goal.duration) {
        (Some(t), _) if t > 0 => done as f64 / t as f64,
        (_, Some(d)) if !d.is_zero() => elapsed.as_secs_f64() / d.as_secs_f64(),
        _ => 0.0,
    }
    .clamp(0.0, 1.0);
    if terminal {
        let filled = (fraction * WIDTH as f64) as usize;
        format!(
            "[{}{}] {:>3.0}% {done} requests, {errors}, {rate:.0} ok/s, {latency}, {left} ",
            "=".repeat(filled),
            " ".repeat(WIDTH - filled),
            fraction * 100.0
        )
    } else {
        format!(
            "tern bench: {:.0}s, {done} requests, {errors}, {rate:.0} ok/s, last second {latency}, {left}",
            elapsed.as_secs_f64()
        )
    }
}

/// "7s left" for a run of known duration, "~7s left" estimated from the
/// rate for a run of known count.
fn time_left(goal: Goal, elapsed: Duration, finished_per_s: f64) -> String {
    match (goal.duration, goal.total) {
        (Some(d), _) => format!("{:.0}s left", d.saturating_sub(elapsed).as_secs_f64()),
        (None, Some(total)) if finished_per_s > 0.0 => {
            let done = finished_per_s * elapsed.as_secs_f64();
            format!(
                "~{:.0}s left",
                (total as f64 - done).max(0.0) / finished_per_s
            )
        }
        _ => "time left unknown".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_left_counts_down_a_duration_and_estimates_a_count() {
        let d = Goal {
            total: None,
            duration: Some(Duration::from_secs(10)),
        };
        assert_eq!(time_left(d, Duration::from_secs(3), 100.0), "7s left");
        let n = Goal {
            total: Some(1000),
            duration: None,
        };
        // 200 done in 2 s: 800 more at 100/s.
        assert_eq!(time_left(n, Duration::from_secs(2), 100.0), "~8s left");
        assert_eq!(
            time_left(n, Duration::from_secs(2), 0.0),
            "time left unknown"
        );
    }

    #[test]
    fn the_live_window_takes_what_workers_recorded_and_empties_them() {
        let live = LiveLatency::default();
        assert!(live.shard().is_none(), "nothing recorded without a view");
        live.on.store(true, Ordering::Relaxed);
        let a = live.shard().expect("shard");
        let b = live.shard().expect("shard");
        a.lock().unwrap().record(1_000).unwrap();
        b.lock().unwrap().record(9_000).unwrap();
        let mut window = new_histogram();
        live.drain_into(&mut window);
        assert_eq!(window.len(), 2);
        assert!(a.lock().unwrap().is_empty());
        // A worker that ends between two ticks: what it recorded since the
        // last one still counts, then it is forgotten.
        b.lock().unwrap().record(7_000).unwrap();
        drop(b);
        live.drain_into(&mut window);
        assert_eq!(window.len(), 3, "a finished worker's last latencies");
        assert_eq!(
            live.shards.lock().unwrap().len(),
            1,
            "a finished worker is forgotten"
        );
    }
}
