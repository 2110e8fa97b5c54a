//! Polls a future of a connection's task (h3's accept, the worker's
//! shutdown signal) only when something it waits on has woken it.
//!
//! A connection's request streams run inside its task (a
//! `FuturesUnordered` beside `h3::server::Connection::accept`), so every
//! wake-up of any stream (its backend answered, quinn took its data) used
//! to poll accept again as well: h3 then polls the control stream, the
//! request-end channel and quinn's incoming streams, ~1,900 instructions
//! each time, ~5.7 times per request where one poll accepts it (callgrind,
//! bench/instructions.sh MODE=h3); the shutdown watch cost ~1,100 per
//! request the same way. The gate hands its future a waker of its own and
//! lets the next poll through only once that waker has fired.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// One gated future of a connection's task.
pub(super) struct WakeGate {
    wake: Arc<GateWake>,
    /// `wake` as a `Waker`, made once.
    waker: Waker,
}

struct GateWake {
    /// Something the future waits on woke it (or it has not been polled
    /// yet, or it returned and may have more ready).
    woken: AtomicBool,
    /// The connection task's waker, for whatever the future waits on.
    task: AtomicWaker,
}

impl Wake for GateWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl WakeGate {
    pub(super) fn new() -> WakeGate {
        let wake = Arc::new(GateWake {
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        let waker = Waker::from(wake.clone());
        WakeGate { wake, waker }
    }

    /// Polls `accept` (with the gate's waker) if it was woken since its
    /// last poll, else stays pending until it is. After a result, the next
    /// call polls again: more may be ready without a new wake-up.
    pub(super) fn poll<T>(
        &self,
        cx: &mut Context<'_>,
        accept: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        self.wake.task.register(cx.waker());
        if !self.wake.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let result = accept(&mut Context::from_waker(&self.waker));
        if result.is_ready() {
            self.open();
        }
        result
    }

    /// Lets the next poll through whatever woke the task (a GOAWAY sent:
    /// accept must see it).
    pub(super) fn open(&self) {
        self.wake.woken.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::task::Waker;

    #[test]
    fn accept_is_polled_first_then_only_after_its_waker_fired() {
        let gate = WakeGate::new();
        let polls = Cell::new(0);
        let stored: std::cell::RefCell<Option<Waker>> = Default::default();
        let mut cx = Context::from_waker(Waker::noop());
        let accept = |cx: &mut Context<'_>| -> Poll<()> {
            polls.set(polls.get() + 1);
            *stored.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        };
        assert!(gate.poll(&mut cx, accept).is_pending());
        assert!(gate.poll(&mut cx, accept).is_pending());
        assert_eq!(polls.get(), 1, "not woken: not polled again");
        stored.borrow().as_ref().map(Waker::wake_by_ref);
        assert!(gate.poll(&mut cx, accept).is_pending());
        assert_eq!(polls.get(), 2, "its waker fired: polled");
        gate.open();
        assert!(gate.poll(&mut cx, accept).is_pending());
        assert_eq!(polls.get(), 3, "opened: polled");
    }

    #[test]
    fn a_result_lets_the_next_poll_through() {
        let gate = WakeGate::new();
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(gate.poll(&mut cx, |_| Poll::Ready(1)), Poll::Ready(1));
        assert_eq!(gate.poll(&mut cx, |_| Poll::Ready(2)), Poll::Ready(2));
    }
}
