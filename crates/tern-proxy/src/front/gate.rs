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
//!
//! [`Rewoken`] is the other way round: it keeps the wake-ups a connection's
//! future gives itself while polled (HTTP/3's and HTTP/2's) from sending
//! its task round tokio's scheduler again.

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

/// Polls a connection's future again within the same poll of its task
/// when it woke itself while being polled, instead of letting the task go
/// round tokio's scheduler for it.
///
/// Two wake-ups a request came from inside the connection's own poll:
/// `FuturesUnordered` wakes its task whenever it has polled every stream
/// once and each is pending (futures-rs #2333: it yields, with nothing
/// left to run), and a request stream that ends tells h3's connection on a
/// channel whose waker is the accept's. Each made tokio schedule the task
/// again and poll it from the top: four polls of the connection's task per
/// request, two of them for these (callgrind, bench/instructions.sh
/// MODE=h3). A wake-up from elsewhere (quinn's driver, a backend socket)
/// reaches the task as before.
pub(in crate::front) struct Rewoken<F> {
    fut: F,
    wake: Arc<SelfWake>,
    /// `wake` as a `Waker`, made once.
    waker: Waker,
}

/// Polls in one poll of the task at most; past them the task yields (a
/// future that keeps waking itself, tokio's budget spent).
const REPOLLS: usize = 4;

struct SelfWake {
    /// The future is being polled: a wake-up is only noted.
    polling: AtomicBool,
    woken: AtomicBool,
    /// The connection task's waker.
    task: AtomicWaker,
}

impl Wake for SelfWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // SeqCst here and in `poll`: a wake-up that finds `polling` set
        // has stored `woken` before the poll's end reads it (the two
        // stores and the two loads are in one total order), so none is
        // lost between the poll's end and the task's.
        self.woken.store(true, Ordering::SeqCst);
        if !self.polling.load(Ordering::SeqCst) {
            self.task.wake();
        }
    }
}

impl<F> Rewoken<F> {
    pub(in crate::front) fn new(fut: F) -> Rewoken<F> {
        let wake = Arc::new(SelfWake {
            polling: AtomicBool::new(false),
            woken: AtomicBool::new(false),
            task: AtomicWaker::new(),
        });
        let waker = Waker::from(wake.clone());
        Rewoken { fut, wake, waker }
    }
}

impl<F: std::future::Future + Unpin> std::future::Future for Rewoken<F> {
    type Output = F::Output;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        this.wake.task.register(cx.waker());
        for _ in 0..REPOLLS {
            // Cleared before `polling` is set: a wake-up in between
            // finds `polling` unset and wakes the task.
            this.wake.woken.store(false, Ordering::SeqCst);
            this.wake.polling.store(true, Ordering::SeqCst);
            let result =
                std::pin::Pin::new(&mut this.fut).poll(&mut Context::from_waker(&this.waker));
            this.wake.polling.store(false, Ordering::SeqCst);
            if result.is_ready() || !this.wake.woken.load(Ordering::SeqCst) {
                return result;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::future::Future;
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

    /// Pending until polled `ready_at` times; wakes itself at every poll
    /// before that, as `FuturesUnordered` does when it yields.
    struct SelfWaking {
        polls: usize,
        ready_at: usize,
    }

    impl std::future::Future for SelfWaking {
        type Output = usize;
        fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            self.polls += 1;
            if self.polls >= self.ready_at {
                return Poll::Ready(self.polls);
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    /// Counts the wake-ups of the task.
    struct Count(std::sync::atomic::AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_self_wake_is_polled_again_in_the_same_poll_and_never_reaches_the_task() {
        let count = Arc::new(Count(Default::default()));
        let task = Waker::from(count.clone());
        let mut f = Rewoken::new(SelfWaking {
            polls: 0,
            ready_at: 3,
        });
        let mut cx = Context::from_waker(&task);
        assert_eq!(std::pin::Pin::new(&mut f).poll(&mut cx), Poll::Ready(3));
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_future_that_keeps_waking_itself_yields_to_the_task_after_some_polls() {
        let count = Arc::new(Count(Default::default()));
        let task = Waker::from(count.clone());
        let mut f = Rewoken::new(SelfWaking {
            polls: 0,
            ready_at: usize::MAX,
        });
        let mut cx = Context::from_waker(&task);
        assert!(std::pin::Pin::new(&mut f).poll(&mut cx).is_pending());
        assert_eq!(f.fut.polls, REPOLLS);
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "the task was not woken");
    }

    #[test]
    fn a_wake_after_the_poll_reaches_the_task() {
        let count = Arc::new(Count(Default::default()));
        let task = Waker::from(count.clone());
        let stored: Arc<std::sync::Mutex<Option<Waker>>> = Default::default();
        let keep = stored.clone();
        let mut f = Rewoken::new(Box::pin(std::future::poll_fn(move |cx| {
            *keep.lock().expect("not poisoned") = Some(cx.waker().clone());
            Poll::<()>::Pending
        })));
        let mut cx = Context::from_waker(&task);
        assert!(std::pin::Pin::new(&mut f).poll(&mut cx).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        let waker = stored.lock().expect("not poisoned").take();
        std::thread::spawn(move || waker.map(Waker::wake))
            .join()
            .expect("the waking thread ran");
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }
}
