//! Work held to the end of the worker's turn: a future that resolves once
//! the tasks ready now have run.
//!
//! An HTTP/2 stream's request goes to its backend after every client frame
//! of the turn has been read (issue 26): the backend (nginx on the same
//! core, in the bench's strict layout) is woken by the first request a
//! turn writes to it, and a woken backend may take the core from the
//! worker at once, mid-turn. Held to the turn's end, the writes leave
//! together when the worker has nothing else at hand.
//!
//! The worker runs [`run`] as one of its tasks. A waiter puts its waker in
//! a per-thread list and wakes the runner, which the `LocalSet` queues
//! behind every task already woken (its queue is first in, first out);
//! when the runner runs, it wakes the waiters, which run next. Without a
//! runner on the thread (tests, a task outside a worker), a waiter goes on
//! at once.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::task::{Poll, Waker};

/// The thread's runner and waiters.
struct TurnEnd {
    /// Times the runner released its waiters: a waiter that registered
    /// before a release is released.
    releases: Cell<u64>,
    waiters: RefCell<Vec<Waker>>,
    /// The runner task's waker, while it waits for waiters.
    runner: RefCell<Option<Waker>>,
    /// Whether a runner runs on this thread.
    present: Cell<bool>,
}

thread_local! {
    static TURN_END: TurnEnd = const {
        TurnEnd {
            releases: Cell::new(0),
            waiters: RefCell::new(Vec::new()),
            runner: RefCell::new(None),
            present: Cell::new(false),
        }
    };
}

/// Resolves after the tasks that were ready when it was first polled have
/// run (at once without a runner on this thread).
pub(crate) async fn turn_end() {
    let mut registered: Option<u64> = None;
    poll_fn(|cx| {
        TURN_END.with(|t| match registered {
            Some(at) if t.releases.get() != at => Poll::Ready(()),
            // Polled again before the release: the waker in the list is
            // this task's already (a stream's slot keeps one waker).
            Some(_) => Poll::Pending,
            None if !t.present.get() => Poll::Ready(()),
            None => {
                registered = Some(t.releases.get());
                t.waiters.borrow_mut().push(cx.waker().clone());
                if let Some(runner) = t.runner.borrow_mut().take() {
                    runner.wake();
                }
                Poll::Pending
            }
        })
    })
    .await
}

/// The worker's runner: releases the waiters each time it is woken. Runs
/// until the worker ends.
pub(crate) async fn run() {
    let _present = Present::mark();
    // Kept between releases: the list's capacity is reused.
    let mut woken: Vec<Waker> = Vec::new();
    poll_fn(|cx| {
        TURN_END.with(|t| {
            std::mem::swap(&mut *t.waiters.borrow_mut(), &mut woken);
            if !woken.is_empty() {
                t.releases.set(t.releases.get().wrapping_add(1));
            }
            *t.runner.borrow_mut() = Some(cx.waker().clone());
        });
        // Woken outside the thread-local's borrow: a waker may schedule
        // its task, which touches nothing here.
        for w in woken.drain(..) {
            w.wake();
        }
        Poll::<()>::Pending
    })
    .await
}

/// Marks the thread as having a runner while it lives.
struct Present;

impl Present {
    fn mark() -> Self {
        TURN_END.with(|t| t.present.set(true));
        Present
    }
}

impl Drop for Present {
    fn drop(&mut self) {
        TURN_END.with(|t| {
            t.present.set(false);
            t.runner.borrow_mut().take();
            // Waiters left go on: nothing will release them otherwise.
            t.releases.set(t.releases.get().wrapping_add(1));
            for w in t.waiters.borrow_mut().drain(..) {
                w.wake();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[tokio::test]
    async fn without_a_runner_a_waiter_goes_on_at_once() {
        let waited = tokio::time::timeout(std::time::Duration::from_secs(1), turn_end()).await;
        assert!(waited.is_ok());
    }

    #[tokio::test]
    async fn a_waiter_goes_on_after_the_tasks_already_woken() {
        let local = tokio::task::LocalSet::new();
        let order = Rc::new(RefCell::new(Vec::new()));
        local
            .run_until({
                let order = order.clone();
                async move {
                    let runner = tokio::task::spawn_local(run());
                    // The runner registers itself.
                    tokio::task::yield_now().await;
                    let waiter = tokio::task::spawn_local({
                        let order = order.clone();
                        async move {
                            order.borrow_mut().push("waiter starts");
                            turn_end().await;
                            order.borrow_mut().push("waiter goes on");
                        }
                    });
                    let other = tokio::task::spawn_local({
                        let order = order.clone();
                        async move { order.borrow_mut().push("other task") }
                    });
                    waiter.await.unwrap();
                    other.await.unwrap();
                    runner.abort();
                }
            })
            .await;
        assert_eq!(
            *order.borrow(),
            ["waiter starts", "other task", "waiter goes on"]
        );
    }
}
