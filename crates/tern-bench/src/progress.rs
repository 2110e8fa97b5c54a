//! A one-line progress bar on stderr, drawn only when stderr is a terminal.

use std::io::{IsTerminal, Write};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::worker::Control;

/// Redraw interval.
const TICK: Duration = Duration::from_millis(250);
/// Width of the bar in characters.
const WIDTH: usize = 40;

/// A running progress bar; dropping it (or [`Progress::finish`]) clears it.
pub struct Progress {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts drawing when `enabled` and stderr is a terminal. `total` is
    /// the request count when known; `duration` the run time when known.
    pub fn start(
        enabled: bool,
        control: Arc<Control>,
        total: Option<u64>,
        duration: Option<Duration>,
    ) -> Progress {
        if !enabled || !std::io::stderr().is_terminal() {
            return Progress {
                stop: None,
                thread: None,
            };
        }
        let (tx, rx) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            loop {
                let done = control.done.load(Ordering::Relaxed);
                let failed = control.failed.load(Ordering::Relaxed);
                let elapsed = start.elapsed();
                let fraction = match (total, duration) {
                    (Some(t), _) if t > 0 => done as f64 / t as f64,
                    (_, Some(d)) if !d.is_zero() => elapsed.as_secs_f64() / d.as_secs_f64(),
                    _ => 0.0,
                }
                .clamp(0.0, 1.0);
                let filled = (fraction * WIDTH as f64) as usize;
                // Completed requests only: a run where everything fails
                // must not show a healthy rate.
                let rate = done.saturating_sub(failed) as f64 / elapsed.as_secs_f64().max(1e-3);
                let errors = if failed > 0 {
                    format!("\x1b[31m{failed} errors\x1b[0m")
                } else {
                    "0 errors".to_string()
                };
                let mut err = std::io::stderr().lock();
                let _ = write!(
                    err,
                    "\r[{}{}] {:>3.0}% {done} requests, {errors}, {rate:.0} ok/s ",
                    "=".repeat(filled),
                    " ".repeat(WIDTH - filled),
                    fraction * 100.0
                );
                let _ = err.flush();
                drop(err);
                if rx.recv_timeout(TICK) != Err(mpsc::RecvTimeoutError::Timeout) {
                    let _ = write!(std::io::stderr(), "\r{}\r", " ".repeat(WIDTH + 40));
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
