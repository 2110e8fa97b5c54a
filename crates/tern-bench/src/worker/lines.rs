//! The start and finish lines of a round whose connections are kept alive.
//!
//! Such a round measures requests, not connection set-up: every worker
//! first opens its connections (handshake done, HTTP/2 and HTTP/3 settings
//! exchanged), and only once every worker has does the caller read the
//! server's CPU and start the round's clock ([`Lines::wait_set_up`], then
//! [`Lines::start`]). At the other end, each worker stops at the finish
//! line with its connections still open, so the round's clock and the
//! server's CPU reading end before the connections are closed
//! ([`Lines::wait_finished`], then [`Lines::release`]).
//!
//! A worker arrives at a line when the last of its slots has (a slot whose
//! connection failed or timed out arrives all the same: the wait is bounded
//! by the set-up's timeout), and a worker that fails or is interrupted
//! arrives at every line it has not reached when its [`Passage`] is
//! dropped: nobody waits on a worker that is gone.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use tokio::sync::watch;

/// Both lines of one round, shared by the caller and its workers.
pub(crate) struct Lines {
    set_up: Countdown,
    finished: Countdown,
    /// Flips to true when the clock has started: slots start sending.
    go: watch::Sender<bool>,
    /// Flips to true once the round's end was read: slots close their
    /// connections.
    released: watch::Sender<bool>,
}

impl Lines {
    /// The lines of a round run by `workers` workers.
    pub(crate) fn new(workers: usize) -> Lines {
        Lines {
            set_up: Countdown::new(workers),
            finished: Countdown::new(workers),
            go: watch::Sender::new(false),
            released: watch::Sender::new(false),
        }
    }

    /// Blocks until every worker has set up its connections (or failed to).
    pub(crate) fn wait_set_up(&self) {
        self.set_up.wait();
    }

    /// Lets the slots send: their clock has started.
    pub(crate) fn start(&self) {
        self.go.send_replace(true);
    }

    /// Blocks until every worker has finished sending.
    pub(crate) fn wait_finished(&self) {
        self.finished.wait();
    }

    /// Lets the slots close their connections.
    pub(crate) fn release(&self) {
        self.released.send_replace(true);
    }
}

/// A count of workers still to arrive at a line.
struct Countdown {
    left: Mutex<usize>,
    zero: Condvar,
}

impl Countdown {
    fn new(n: usize) -> Countdown {
        Countdown {
            left: Mutex::new(n),
            zero: Condvar::new(),
        }
    }

    fn arrive(&self) {
        // A poisoned count is still a count: a panic elsewhere must not
        // keep the others waiting.
        let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
        *left = left.saturating_sub(1);
        if *left == 0 {
            self.zero.notify_all();
        }
    }

    fn wait(&self) {
        let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
        while *left > 0 {
            left = self.zero.wait(left).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// One worker's way past both lines: it arrives at a line when all its
/// slots have, and at every line it has not reached when dropped.
pub(crate) struct Passage {
    lines: Arc<Lines>,
    setting_up: Cell<usize>,
    sending: Cell<usize>,
    set_up: Cell<bool>,
    finished: Cell<bool>,
}

impl Passage {
    /// The passage of a worker with `slots` slots (connections).
    pub(crate) fn new(lines: Arc<Lines>, slots: usize) -> Passage {
        let p = Passage {
            lines,
            setting_up: Cell::new(slots),
            sending: Cell::new(slots),
            set_up: Cell::new(false),
            finished: Cell::new(false),
        };
        if slots == 0 {
            p.arrive_set_up();
            p.arrive_finished();
        }
        p
    }

    /// A slot's pass: the slot counts at each line through it, and at
    /// every line it has not reached when dropped (a slot that panicked).
    pub(super) fn slot(self: &Rc<Self>) -> SlotPass {
        SlotPass {
            passage: self.clone(),
            set_up: false,
            finished: false,
        }
    }

    fn count_set_up(&self) {
        let left = self.setting_up.get().saturating_sub(1);
        self.setting_up.set(left);
        if left == 0 {
            self.arrive_set_up();
        }
    }

    fn count_finished(&self) {
        let left = self.sending.get().saturating_sub(1);
        self.sending.set(left);
        if left == 0 {
            self.arrive_finished();
        }
    }

    fn arrive_set_up(&self) {
        if !self.set_up.replace(true) {
            self.lines.set_up.arrive();
        }
    }

    fn arrive_finished(&self) {
        if !self.finished.replace(true) {
            self.lines.finished.arrive();
        }
    }
}

/// One slot's way past both lines (see [`Passage::slot`]).
pub(super) struct SlotPass {
    passage: Rc<Passage>,
    set_up: bool,
    finished: bool,
}

impl SlotPass {
    /// The slot has set up its connection (or failed to); waits for the
    /// clock to start.
    pub(super) async fn set_up(&mut self) {
        if !std::mem::replace(&mut self.set_up, true) {
            self.passage.count_set_up();
        }
        let mut go = self.passage.lines.go.subscribe();
        // The sender lives as long as the lines, which outlive the round.
        let _ = go.wait_for(|g| *g).await;
    }

    /// The slot has sent its last request; waits until the round's end
    /// was read, before it closes its connection.
    pub(super) async fn finished(&mut self) {
        if !std::mem::replace(&mut self.finished, true) {
            self.passage.count_finished();
        }
        let mut released = self.passage.lines.released.subscribe();
        let _ = released.wait_for(|r| *r).await;
    }
}

impl Drop for SlotPass {
    fn drop(&mut self) {
        if !self.set_up {
            self.passage.count_set_up();
        }
        if !self.finished {
            self.passage.count_finished();
        }
    }
}

impl Drop for Passage {
    fn drop(&mut self) {
        self.arrive_set_up();
        self.arrive_finished();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_that_is_gone_holds_no_line() {
        let lines = Arc::new(Lines::new(2));
        let failed = Passage::new(lines.clone(), 3);
        drop(failed);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let ok = Rc::new(Passage::new(lines.clone(), 2));
        // A slot that panicked before either line still counts at both.
        drop(ok.slot());
        let caller = {
            let lines = lines.clone();
            std::thread::spawn(move || {
                lines.wait_set_up();
                lines.start();
                lines.wait_finished();
                lines.release();
            })
        };
        rt.block_on(async {
            let mut slot = ok.slot();
            slot.set_up().await;
            slot.finished().await;
        });
        caller.join().unwrap();
    }
}
