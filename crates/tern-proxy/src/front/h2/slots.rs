//! The streams of one HTTP/2 connection: each stream's future in a slot a
//! later stream of the connection reuses, polled when its waker fired.
//!
//! What `FuturesUnordered` did, without its per-future node: that node (an
//! `Arc` holding the future, its links and its waker) was allocated for
//! every stream and freed after it, and every wake-up went through its
//! lock-free queue: push, release, wakes and the node's drop came to about
//! 1,030 instructions per request (callgrind, bench/instructions.sh
//! MODE=h2). Here a slot's waker is made once and serves every stream the
//! slot holds; a wake-up queues the slot's index (once, until it is
//! polled) under a lock no other thread takes in practice (the streams'
//! wakers fire on the worker's thread).
//!
//! A waker of a stream that has ended may still fire (h2 or a socket
//! kept a clone): the slot it names is then polled for nothing, or is
//! empty and skipped; a future may always be polled spuriously.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;
use futures_util::Stream;

/// Slots a set keeps when its last stream ends (a connection that fell
/// idle keeps no more than this for its next burst).
const KEEP_IDLE: usize = 16;

/// Polls at most in one call beyond one per stream, then the task yields:
/// streams woken again and again do not hold the worker.
const EXTRA_POLLS: usize = 16;

/// Streams that woke themselves while polled (tokio's budget spent, a
/// yield) before the task yields, as `FuturesUnordered` does: polled again
/// within the same task poll, they would be pending again.
const SELF_WAKES: usize = 2;

/// The futures of one task, each polled when woken.
pub(super) struct Slots<F> {
    slots: Vec<Slot<F>>,
    /// Indices of empty slots.
    free: Vec<usize>,
    shared: Arc<Shared>,
    /// Indices taken from `shared.ready`, not polled yet.
    local: Vec<usize>,
    len: usize,
}

struct Slot<F> {
    fut: Option<F>,
    wake: Arc<SlotWake>,
    /// `wake` as a `Waker`, made once.
    waker: Waker,
}

struct Shared {
    /// Indices of slots woken since they were last polled.
    ready: Mutex<Vec<usize>>,
    /// The task polling the set.
    task: AtomicWaker,
}

struct SlotWake {
    index: usize,
    /// Its index is in `ready` or `local`: not queued again.
    queued: AtomicBool,
    shared: Arc<Shared>,
}

impl Wake for SlotWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Already queued: whoever queued it woke the task, or the set is
        // polling and will reach it.
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        // A panic while an index was pushed leaves the list whole.
        self.shared
            .ready
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(self.index);
        self.shared.task.wake();
    }
}

impl<F> Slots<F> {
    pub(super) fn new() -> Slots<F> {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
            shared: Arc::new(Shared {
                ready: Mutex::new(Vec::new()),
                task: AtomicWaker::new(),
            }),
            local: Vec::new(),
            len: 0,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `fut`, to be polled at the next poll of the set.
    pub(super) fn push(&mut self, fut: F) {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index = self.slots.len();
                let wake = Arc::new(SlotWake {
                    index,
                    queued: AtomicBool::new(false),
                    shared: self.shared.clone(),
                });
                let waker = Waker::from(wake.clone());
                self.slots.push(Slot {
                    fut: None,
                    wake,
                    waker,
                });
                index
            }
        };
        self.slots[index].fut = Some(fut);
        self.len += 1;
        self.slots[index].waker.wake_by_ref();
    }
}

impl<F: Future + Unpin> Stream for Slots<F> {
    type Item = F::Output;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        let this = self.get_mut();
        if this.len == 0 {
            return Poll::Ready(None);
        }
        this.shared.task.register(cx.waker());
        let mut polls = 0;
        let mut self_wakes = 0;
        loop {
            let Some(index) = this.local.pop() else {
                std::mem::swap(
                    &mut this.local,
                    &mut *this
                        .shared
                        .ready
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner),
                );
                if this.local.is_empty() {
                    return Poll::Pending;
                }
                // Oldest first (pop takes from the end).
                this.local.reverse();
                continue;
            };
            let Some(slot) = this.slots.get_mut(index) else {
                // A slot dropped while the set was idle (a stale waker).
                continue;
            };
            // Before the poll: a wake-up during it queues the slot again.
            slot.wake.queued.store(false, Ordering::Release);
            let Some(fut) = slot.fut.as_mut() else {
                continue;
            };
            let done = Pin::new(fut).poll(&mut Context::from_waker(&slot.waker));
            if let Poll::Ready(out) = done {
                slot.fut = None;
                this.len -= 1;
                this.free.push(index);
                if this.len == 0 {
                    this.trim();
                }
                return Poll::Ready(Some(out));
            }
            polls += 1;
            if slot.wake.queued.load(Ordering::Acquire) {
                self_wakes += 1;
            }
            if self_wakes >= SELF_WAKES || polls >= this.len + EXTRA_POLLS {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
        }
    }
}

impl<F> Slots<F> {
    /// All streams ended: keeps [`KEEP_IDLE`] slots.
    fn trim(&mut self) {
        if self.slots.len() > KEEP_IDLE {
            self.slots.truncate(KEEP_IDLE);
        }
        self.free.clear();
        self.free.extend((0..self.slots.len()).rev());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// Pending until told to finish; keeps the waker of its last poll.
    #[derive(Default)]
    struct Gate {
        done: bool,
        waker: Option<Waker>,
        polls: usize,
    }

    struct Waits(Rc<RefCell<Gate>>, usize);

    impl Future for Waits {
        type Output = usize;
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            let mut g = self.0.borrow_mut();
            g.polls += 1;
            if g.done {
                return Poll::Ready(self.1);
            }
            g.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    /// Counts the task's wake-ups.
    struct Count(std::sync::atomic::AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn finish(gate: &Rc<RefCell<Gate>>) {
        gate.borrow_mut().done = true;
        let waker = gate.borrow_mut().waker.take();
        waker.expect("polled once").wake();
    }

    #[test]
    fn a_future_is_polled_once_pushed_and_then_only_when_woken() {
        let count = Arc::new(Count(Default::default()));
        let task = Waker::from(count.clone());
        let mut cx = Context::from_waker(&task);
        let mut set = Slots::new();
        let gates: Vec<_> = (0..3)
            .map(|_| Rc::new(RefCell::new(Gate::default())))
            .collect();
        for (i, g) in gates.iter().enumerate() {
            set.push(Waits(g.clone(), i));
        }
        assert!(set.poll_next_unpin(&mut cx).is_pending());
        assert!(gates.iter().all(|g| g.borrow().polls == 1));
        assert!(set.poll_next_unpin(&mut cx).is_pending());
        assert!(
            gates.iter().all(|g| g.borrow().polls == 1),
            "not woken: not polled"
        );
        let woken = count.0.load(Ordering::SeqCst);
        finish(&gates[1]);
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            woken + 1,
            "the task was woken"
        );
        assert_eq!(set.poll_next_unpin(&mut cx), Poll::Ready(Some(1)));
        assert_eq!(gates[0].borrow().polls, 1);
        finish(&gates[0]);
        finish(&gates[2]);
        let mut out = vec![];
        while let Poll::Ready(Some(i)) = set.poll_next_unpin(&mut cx) {
            out.push(i);
        }
        out.sort();
        assert_eq!(out, [0, 2]);
        assert!(set.is_empty());
        assert_eq!(set.poll_next_unpin(&mut cx), Poll::Ready(None));
    }

    #[test]
    fn slots_are_reused_and_a_stale_waker_polls_nothing_it_should_not() {
        let mut cx = Context::from_waker(Waker::noop());
        let mut set = Slots::new();
        let first = Rc::new(RefCell::new(Gate::default()));
        set.push(Waits(first.clone(), 1));
        assert!(set.poll_next_unpin(&mut cx).is_pending());
        let stale = first.borrow().waker.clone().expect("polled");
        finish(&first);
        assert_eq!(set.poll_next_unpin(&mut cx), Poll::Ready(Some(1)));
        // The next future takes the same slot (no new one).
        let second = Rc::new(RefCell::new(Gate::default()));
        set.push(Waits(second.clone(), 2));
        assert_eq!(set.slots.len(), 1);
        assert!(set.poll_next_unpin(&mut cx).is_pending());
        // The first future's waker polls the second spuriously: harmless.
        stale.wake();
        assert!(set.poll_next_unpin(&mut cx).is_pending());
        assert_eq!(second.borrow().polls, 2);
        finish(&second);
        assert_eq!(set.poll_next_unpin(&mut cx), Poll::Ready(Some(2)));
    }

    #[test]
    fn an_idle_set_keeps_few_slots_and_a_waker_of_a_dropped_one_is_ignored() {
        let mut cx = Context::from_waker(Waker::noop());
        let mut set = Slots::new();
        let gates: Vec<_> = (0..KEEP_IDLE + 4)
            .map(|_| Rc::new(RefCell::new(Gate::default())))
            .collect();
        for (i, g) in gates.iter().enumerate() {
            set.push(Waits(g.clone(), i));
        }
        assert!(set.poll_next_unpin(&mut cx).is_pending());
        let last = gates
            .last()
            .expect("some")
            .borrow()
            .waker
            .clone()
            .expect("polled");
        for g in &gates {
            finish(g);
        }
        let mut n = 0;
        while let Poll::Ready(Some(_)) = set.poll_next_unpin(&mut cx) {
            n += 1;
        }
        assert_eq!(n, gates.len());
        assert_eq!(set.slots.len(), KEEP_IDLE);
        last.wake();
        let g = Rc::new(RefCell::new(Gate::default()));
        set.push(Waits(g.clone(), 7));
        assert!(set.poll_next_unpin(&mut cx).is_pending());
        finish(&g);
        assert_eq!(set.poll_next_unpin(&mut cx), Poll::Ready(Some(7)));
    }

    /// Wakes itself at every poll, never ready.
    struct Spins(Rc<std::cell::Cell<usize>>);

    impl Future for Spins {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.0.set(self.0.get() + 1);
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    #[test]
    fn a_future_that_keeps_waking_itself_makes_the_set_yield() {
        let count = Arc::new(Count(Default::default()));
        let task = Waker::from(count.clone());
        let mut cx = Context::from_waker(&task);
        let mut set = Slots::new();
        let polls = Rc::new(std::cell::Cell::new(0));
        set.push(Spins(polls.clone()));
        assert!(set.poll_next_unpin(&mut cx).is_pending());
        assert_eq!(
            polls.get(),
            SELF_WAKES,
            "polled again only while it may help"
        );
        // Woken by its own wake-up (once: the waker is taken) and by the
        // yield, so the task comes back to it.
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert!(set.poll_next_unpin(&mut cx).is_pending());
        assert_eq!(polls.get(), 2 * SELF_WAKES);
    }
}
