//! When each slot sends: at once (closed loop), at a fixed interval
//! (open loop), or as a load shape (`--stages`) says. A shape is one job:
//! its connections stay open from stage to stage, and each stage sets the
//! rate (open loop) or how many of them send (closed loop), so a stage
//! measures the server under that level, not the opening of new
//! connections.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Job;

/// A load shape as a job runs it.
#[derive(Debug)]
pub(super) struct Shape {
    /// Each stage's end, from the job's start.
    ends: Vec<Duration>,
    /// Each stage's level: requests per second (open loop) or connections
    /// that send (closed loop).
    levels: Vec<f64>,
}

impl Shape {
    pub(super) fn new(stages: &[crate::stages::Stage]) -> Shape {
        let mut end = Duration::ZERO;
        let ends = stages
            .iter()
            .map(|s| {
                end += s.duration;
                end
            })
            .collect();
        Shape {
            ends,
            levels: stages.iter().map(|s| s.level).collect(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.levels.len()
    }

    /// The stage `offset` (from the job's start) falls in; the last one
    /// past the end.
    pub(super) fn stage_at(&self, offset: Duration) -> usize {
        self.ends
            .iter()
            .position(|end| offset < *end)
            .unwrap_or(self.len().saturating_sub(1))
    }

    /// How long stage `k` is held.
    pub(super) fn duration(&self, k: usize) -> Duration {
        self.ends[k] - self.begins(k)
    }

    fn begins(&self, k: usize) -> Duration {
        match k {
            0 => Duration::ZERO,
            k => self.ends[k - 1],
        }
    }
}

/// The schedule of one slot (connection or stream).
pub(super) struct Pacer {
    how: How,
    /// End of a run that stops after a duration: a slot whose next send
    /// falls after it stops there, instead of sleeping to that send (at
    /// low rates a slot's interval is longer than the whole run).
    deadline: Option<Instant>,
}

enum How {
    /// Open loop: send times at a fixed interval.
    Fixed { next: Instant, interval: Duration },
    /// A load shape.
    Shaped {
        shape: Arc<Shape>,
        start: Instant,
        /// The stage the next send is in, and the sends of this slot
        /// already scheduled in it.
        stage: usize,
        sent: u64,
        /// Where the slot's sends sit within an interval (open loop):
        /// staggered across slots so the load is smooth.
        phase: f64,
        slots_total: usize,
        /// The connection the slot belongs to: in a closed loop, a stage
        /// of level L lets connections 0..L send.
        conn: usize,
        open: bool,
    },
}

impl Pacer {
    /// The schedule of slot `slot` (stream of connection `conn`); `None`
    /// in a closed loop without a shape: send at once.
    pub(super) fn new(job: &Job, slot: usize, conn: usize) -> Option<Pacer> {
        let start = job.budget.start();
        let deadline = job.budget.duration.map(|d| start + d);
        let phase = slot as f64 / job.slots_total as f64;
        let how = match (&job.shape, job.slot_interval) {
            (Some(shape), interval) => How::Shaped {
                shape: shape.clone(),
                start,
                stage: 0,
                sent: 0,
                phase,
                slots_total: job.slots_total,
                conn,
                open: interval.is_some(),
            },
            (None, Some(interval)) => How::Fixed {
                next: start + interval.mul_f64(phase),
                interval,
            },
            (None, None) => return None,
        };
        Some(Pacer { how, deadline })
    }

    /// The next send time (`None`: no more, past the shape's end).
    fn next(&mut self, now: Instant) -> Option<Instant> {
        match &mut self.how {
            How::Fixed { next, interval } => {
                let at = *next;
                *next += *interval;
                Some(at)
            }
            How::Shaped {
                shape,
                start,
                stage,
                sent,
                phase,
                slots_total,
                conn,
                open,
            } => loop {
                let k = *stage;
                if k >= shape.len() {
                    return None;
                }
                let (from, to) = (*start + shape.begins(k), *start + shape.ends[k]);
                let level = shape.levels[k];
                if *open && level > 0.0 {
                    let interval = Duration::from_secs_f64(*slots_total as f64 / level);
                    let at = from + interval.mul_f64(*phase + *sent as f64);
                    if at < to {
                        *sent += 1;
                        return Some(at);
                    }
                } else if !*open && *conn < level as usize && now < to {
                    return Some(now.max(from));
                }
                *stage += 1;
                *sent = 0;
            },
        }
    }
}

/// Waits for the next send time; returns the time latency counts from: the
/// scheduled time in open loop (even when we are late: that lateness is
/// the queueing the server caused), now in closed loop.
pub(super) async fn pace(pacer: &mut Option<Pacer>) -> Instant {
    let Some(p) = pacer else {
        return Instant::now();
    };
    let now = Instant::now();
    // Past the deadline (or the shape's end), the budget refuses the
    // ticket.
    let intended = p.next(now).or(p.deadline).unwrap_or(now);
    let wake = p.deadline.map_or(intended, |d| intended.min(d));
    if wake > now {
        tokio::time::sleep_until(wake.into()).await;
    }
    intended
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::Stage;

    fn shaped(
        stages: &[(u64, f64)],
        slot: usize,
        conn: usize,
        slots: usize,
        open: bool,
    ) -> (Pacer, Instant) {
        let start = Instant::now();
        let stages: Vec<Stage> = stages
            .iter()
            .map(|&(ms, level)| Stage {
                duration: Duration::from_millis(ms),
                level,
            })
            .collect();
        let pacer = Pacer {
            how: How::Shaped {
                shape: Arc::new(Shape::new(&stages)),
                start,
                stage: 0,
                sent: 0,
                phase: slot as f64 / slots as f64,
                slots_total: slots,
                conn,
                open,
            },
            deadline: None,
        };
        (pacer, start)
    }

    #[test]
    fn an_open_shape_sends_each_stage_at_its_rate_and_none_in_a_pause() {
        // Two slots; 1 s at 10/s, 1 s paused, 1 s at 40/s.
        let (mut p, start) = shaped(&[(1000, 10.0), (1000, 0.0), (1000, 40.0)], 1, 1, 2, true);
        let mut times = Vec::new();
        while let Some(at) = p.next(start) {
            times.push((at - start).as_millis());
        }
        let first: Vec<_> = times.iter().filter(|t| **t < 1000).collect();
        let paused = times.iter().filter(|t| (1000..2000).contains(*t)).count();
        let last = times.iter().filter(|t| **t >= 2000).count();
        // This slot's half of each rate, the second slot half an
        // interval later.
        assert_eq!(first.len(), 5, "{times:?}");
        assert_eq!(*first[0], 100, "{times:?}");
        assert_eq!(paused, 0, "{times:?}");
        assert_eq!(last, 20, "{times:?}");
    }

    #[test]
    fn a_closed_shape_lets_only_the_stage_s_connections_send() {
        // Connection 2 sends in the stage of 3 connections only.
        let (mut p, start) = shaped(&[(1000, 1.0), (1000, 3.0), (1000, 2.0)], 2, 2, 3, false);
        let at = p.next(start).expect("a send in stage 2");
        assert_eq!(at, start + Duration::from_millis(1000));
        let later = start + Duration::from_millis(1500);
        assert_eq!(p.next(later), Some(later));
        assert_eq!(p.next(start + Duration::from_millis(2100)), None);
    }
}
