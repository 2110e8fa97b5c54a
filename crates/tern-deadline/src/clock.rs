//! The time of the current worker turn: one clock read per turn instead of
//! one per use (nginx's `ngx_time_update` idea).
//!
//! A keepalive HTTP/1.1 request read the clock seven times in tern's own
//! code (its idle deadline, its start, the backend's send time and answer
//! time, the idle pool's put and take, the access-log total), each a vDSO
//! call and a `rdtsc`. The fronts, the exchange core and the pool now ask
//! [`now`], which reads the clock at most once per turn: a poll of the
//! future a worker runs under [`Turns`] (its `LocalSet`, which runs at most
//! a few dozen tasks per poll). The value is then up to one turn old: a
//! deadline made from it ends that much earlier, a duration measured with
//! it is off by at most a turn (the bytes that started it were ready when
//! the turn began). Outside a turn (another thread, a task the runtime runs
//! outside the worker's `LocalSet`, tests) [`now`] reads the clock.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

/// The clock state of this thread's turn.
#[derive(Clone, Copy)]
enum Turn {
    /// Not inside a [`Turns`] poll: every [`now`] reads the clock.
    Outside,
    /// Inside one, the clock not read yet.
    Unread,
    /// Inside one, read at this time.
    Read(Instant),
}

thread_local! {
    static TURN: Cell<Turn> = const { Cell::new(Turn::Outside) };
}

/// The time now: inside a [`Turns`] poll, the time of its first call in
/// that poll (a clock read the first time only); outside, a clock read.
/// A tokio `Instant`, so paused test time holds.
pub fn now() -> Instant {
    TURN.with(|turn| match turn.get() {
        Turn::Read(t) => t,
        Turn::Unread => {
            let t = Instant::now();
            turn.set(Turn::Read(t));
            t
        }
        Turn::Outside => Instant::now(),
    })
}

/// The time from `start` to [`now`] (zero if `start` is later: a time read
/// mid-turn against the turn's).
pub fn since(start: std::time::Instant) -> Duration {
    now().into_std().saturating_duration_since(start)
}

/// Runs a future whose every poll is a turn for [`now`]: the clock is read
/// at most once per poll, by the first caller.
#[derive(Debug)]
pub struct Turns<F> {
    inner: Pin<Box<F>>,
}

impl<F: Future> Turns<F> {
    /// `inner`, each of whose polls is a turn.
    pub fn new(inner: F) -> Self {
        Turns {
            inner: Box::pin(inner),
        }
    }
}

/// Puts back the turn state a poll found, even when the poll panics.
struct Restore(Turn);

impl Drop for Restore {
    fn drop(&mut self) {
        TURN.with(|turn| turn.set(self.0));
    }
}

impl<F: Future> Future for Turns<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _restore = Restore(TURN.with(|turn| turn.replace(Turn::Unread)));
        self.inner.as_mut().poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits, without yielding, until the clock has moved past `t`.
    fn clock_passes(t: Instant) {
        while Instant::now() <= t {
            std::hint::spin_loop();
        }
    }

    #[tokio::test]
    async fn a_turn_reads_the_clock_once_and_the_next_turn_reads_it_again() {
        let (first, again, next) = Turns::new(async {
            let first = now();
            clock_passes(first);
            let again = now();
            // Pending once: the next poll is a new turn.
            tokio::task::yield_now().await;
            (first, again, now())
        })
        .await;
        assert_eq!(first, again);
        assert!(next > first);
    }

    #[tokio::test(start_paused = true)]
    async fn outside_a_turn_every_call_reads_the_clock() {
        let before = now();
        tokio::time::advance(Duration::from_millis(5)).await;
        assert_eq!(now() - before, Duration::from_millis(5));
        // A finished turn leaves no cached time behind.
        let inside = Turns::new(async { now() }).await;
        tokio::time::advance(Duration::from_millis(5)).await;
        assert_eq!(now() - inside, Duration::from_millis(5));
    }
}
