//! Timeouts for the request path that cost nothing when the wait is short:
//! the one watchdog `tern serve` (per connection) and `tern bench` (per
//! slot or stream) time their waits with.
//!
//! A keepalive request waits twice (for the client's next request, for the
//! backend's response) and writes twice. With `tokio::time::timeout` each of
//! those looks up the runtime handle, reads the clock and, when the wait is
//! real, inserts into and removes from the timer wheel: measurable next to a
//! request that costs ~25 µs in all. Here:
//!
//! - [`within`] arms no timer at all when the operation completes on its
//!   first poll (writes that fit the socket buffer, bytes already there);
//! - a [`Watchdog`] keeps one timer per connection and moves its deadline
//!   with a plain store: the timer fires at the deadline it was last armed
//!   with and re-arms itself if the deadline has moved later since, so a
//!   busy connection touches the timer wheel about once per timeout period
//!   instead of once per wait; and a wait of the same task while the timer
//!   holds its waker does not poll the timer again (the timer wakes that
//!   task when it fires, whichever wait it is in).
//!
//! - [`now`] is the time of the worker's current turn ([`Turns`]): the
//!   clock is read once per turn, not once per deadline or duration.
//!
//! Not for: work outside a tokio runtime (timers need its time driver).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::task::{Poll, Waker};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

mod clock;
pub use clock::{now, since, Turns};

/// Runs `fut` for at most `t`; `None` when the time ran out. The timer is
/// only armed when `fut` is not ready on its first poll.
pub async fn within<F: Future>(t: Duration, fut: F) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let first = poll_fn(|cx| match fut.as_mut().poll(cx) {
        Poll::Ready(v) => Poll::Ready(Some(v)),
        Poll::Pending => Poll::Ready(None),
    })
    .await;
    match first {
        Some(v) => Some(v),
        None => tokio::time::timeout(t, fut).await.ok(),
    }
}

/// One timer serving successive waits of a connection, each with its own
/// deadline.
#[derive(Debug)]
pub struct Watchdog {
    sleep: Pin<Box<Sleep>>,
    /// The deadline the timer is armed with.
    armed: Instant,
    /// The deadline of the current wait (never before `armed` unless the
    /// timer was re-armed for it).
    deadline: Instant,
    /// The waker the armed timer holds (set when it was polled, cleared
    /// when it is re-armed or fires): while the timer holds the waker of
    /// the task that waits and has not fired, polling it again would only
    /// register that waker again (about 120 instructions, twice per
    /// keepalive request).
    holds: Option<Waker>,
}

impl Watchdog {
    /// A watchdog whose first wait ends at `deadline`.
    pub fn new(deadline: Instant) -> Self {
        Watchdog {
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            armed: deadline,
            deadline,
            holds: None,
        }
    }

    /// The watchdog in `slot` set to `deadline`, made there if it is the
    /// first (a connection that never waits never makes one).
    pub fn set_in(slot: &mut Option<Watchdog>, deadline: Instant) -> &mut Watchdog {
        match slot {
            Some(w) => {
                w.set(deadline);
                w
            }
            None => slot.insert(Watchdog::new(deadline)),
        }
    }

    /// Sets the deadline of the next waits. Moving it later is a store;
    /// moving it earlier re-arms the timer.
    pub fn set(&mut self, deadline: Instant) {
        self.deadline = deadline;
        if deadline < self.armed {
            self.armed = deadline;
            self.holds = None;
            self.sleep.as_mut().reset(deadline);
        }
    }

    /// Runs `fut` until it completes (`Some`) or the deadline passes (`None`).
    pub async fn run<F: Future>(&mut self, fut: F) -> Option<F::Output> {
        let mut fut = pin!(fut);
        self.run_pinned(fut.as_mut()).await
    }

    /// [`Watchdog::run`] for a future the caller has pinned already (or
    /// that needs no pinning). A hand-written future ([`RunPinned`]), not
    /// an `async fn`: its poll goes into the caller's, where an `async
    /// fn`'s is a call of its own each time (stable Rust does not inline
    /// it, rust-lang/rust#129347), on every wait for a keepalive request.
    #[inline]
    pub fn run_pinned<F: Future + Unpin>(&mut self, fut: F) -> RunPinned<'_, F> {
        RunPinned { dog: self, fut }
    }

    /// Ready when the deadline has passed; else the timer will wake the
    /// task of `cx`. For a hand-written wait that polls its operation
    /// first and this after it, as [`Watchdog::run`] does (see
    /// tern-proxy's `IoBuf::poll_head`).
    // Forced: a plain `#[inline]` left it a call (callgrind), twice a
    // keepalive request.
    #[inline(always)]
    pub fn poll_expired(&mut self, cx: &mut std::task::Context<'_>) -> Poll<()> {
        // The timer has this task's waker and has not fired (once it
        // fires it is elapsed until re-armed): it will wake this task.
        if !self.sleep.is_elapsed() && self.holds.as_ref().is_some_and(|w| w.will_wake(cx.waker()))
        {
            return Poll::Pending;
        }
        loop {
            match self.sleep.as_mut().poll(cx) {
                Poll::Pending => {
                    if !self.holds.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        self.holds = Some(cx.waker().clone());
                    }
                    return Poll::Pending;
                }
                Poll::Ready(()) if self.armed >= self.deadline => {
                    self.holds = None;
                    return Poll::Ready(());
                }
                // Fired at an earlier deadline than the current one:
                // re-arm for the current one and keep waiting.
                Poll::Ready(()) => {
                    self.holds = None;
                    self.armed = self.deadline;
                    self.sleep.as_mut().reset(self.deadline);
                }
            }
        }
    }
}

/// The future of [`Watchdog::run_pinned`].
#[derive(Debug)]
pub struct RunPinned<'a, F> {
    dog: &'a mut Watchdog,
    fut: F,
}

impl<F: Future + Unpin> Future for RunPinned<'_, F> {
    type Output = Option<F::Output>;

    // Forced: its callers are `async` polls, which nothing inlines anyway.
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Poll::Ready(v) = Pin::new(&mut this.fut).poll(cx) {
            return Poll::Ready(Some(v));
        }
        this.dog.poll_expired(cx).map(|()| None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn watchdog_times_out_at_the_current_deadline_not_the_armed_one() {
        let start = Instant::now();
        let mut dog = Watchdog::new(start + Duration::from_secs(1));
        // Moved later without re-arming: the wait must last until 3 s.
        dog.set(start + Duration::from_secs(3));
        let r = dog.run(std::future::pending::<()>()).await;
        assert!(r.is_none());
        assert_eq!(Instant::now() - start, Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn watchdog_moved_earlier_fires_earlier() {
        let start = Instant::now();
        let mut dog = Watchdog::new(start + Duration::from_secs(10));
        dog.set(start + Duration::from_secs(2));
        assert!(dog.run(std::future::pending::<()>()).await.is_none());
        assert_eq!(Instant::now() - start, Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn watchdog_lets_a_finished_wait_through_and_serves_the_next() {
        let start = Instant::now();
        let mut dog = Watchdog::new(start + Duration::from_secs(5));
        let quick = dog.run(tokio::time::sleep(Duration::from_secs(1))).await;
        assert!(quick.is_some());
        dog.set(Instant::now() + Duration::from_secs(5));
        let slow = dog
            .run_pinned(pin!(tokio::time::sleep(Duration::from_secs(60))))
            .await;
        assert!(slow.is_none());
        assert_eq!(Instant::now() - start, Duration::from_secs(6));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_woken_by_its_own_work_still_ends_at_the_deadline() {
        let start = Instant::now();
        let mut dog = Watchdog::new(start + Duration::from_secs(2));
        // Woken every 100 ms by another timer of the same task, as a
        // connection by its socket: the watchdog's timer is not polled
        // again, and still ends the wait.
        let busy = async {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        assert!(dog.run_pinned(pin!(busy)).await.is_none());
        assert_eq!(Instant::now() - start, Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_watchdog_handed_to_another_task_wakes_that_task() {
        let start = Instant::now();
        let mut dog = Watchdog::new(start + Duration::from_secs(3));
        // The first task's wait ends first; its waker stays in the timer.
        let quick = tokio::spawn(async move {
            let done = dog.run(tokio::time::sleep(Duration::from_secs(1))).await;
            (done.is_some(), dog)
        });
        let (done, mut dog) = quick.await.unwrap();
        assert!(done);
        // Moved later: no re-arm. The second task must get the wake-up.
        dog.set(start + Duration::from_secs(4));
        let slow = tokio::spawn(async move { dog.run(std::future::pending::<()>()).await });
        let r = tokio::time::timeout(Duration::from_secs(60), slow).await;
        assert!(matches!(r, Ok(Ok(None))), "{r:?}");
        assert_eq!(Instant::now() - start, Duration::from_secs(4));
    }

    #[tokio::test(start_paused = true)]
    async fn within_needs_no_timer_for_ready_work_and_bounds_slow_work() {
        assert_eq!(within(Duration::from_secs(1), async { 7 }).await, Some(7));
        let start = Instant::now();
        let slow = within(Duration::from_secs(1), std::future::pending::<()>()).await;
        assert!(slow.is_none());
        assert_eq!(Instant::now() - start, Duration::from_secs(1));
    }
}
