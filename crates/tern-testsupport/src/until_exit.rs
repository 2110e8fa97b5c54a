//! Values that live until the test binary exits, then are dropped: for
//! fixtures shared by many tests through a `static`, which Rust never
//! drops. A [`TernProcess`](crate::tern::TernProcess) kept in a plain
//! static would outlive the test run; kept in an [`UntilExit`] it is
//! killed when the test harness exits, passing or failing (libtest
//! returns from `main` or calls `exit`, and both run `atexit` handlers).
//!
//! A test binary killed by a signal runs no handler; nothing can help that.

use std::sync::{Arc, Mutex, Once};

type Cleanup = Box<dyn FnOnce() + Send>;

/// Cleanups to run at exit, in registration order.
static CLEANUPS: Mutex<Vec<Cleanup>> = Mutex::new(Vec::new());
static REGISTER: Once = Once::new();

/// A value dropped when the process exits (or never, if it is killed).
pub struct UntilExit<T> {
    slot: Arc<Mutex<Option<T>>>,
}

impl<T: Send + 'static> UntilExit<T> {
    /// Takes `value`, to be dropped at exit.
    pub fn new(value: T) -> UntilExit<T> {
        let slot = Arc::new(Mutex::new(Some(value)));
        let at_exit = slot.clone();
        on_exit(Box::new(move || {
            // Never block the exit on a lock some stuck thread holds.
            if let Ok(mut value) = at_exit.try_lock() {
                drop(value.take());
            }
        }));
        UntilExit { slot }
    }

    /// Runs `f` on the value; `None` once it has been dropped (at exit).
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        let guard = self
            .slot
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        guard.as_ref().map(f)
    }
}

fn on_exit(cleanup: Cleanup) {
    REGISTER.call_once(|| {
        // SAFETY: atexit(3) stores a function pointer; `run_cleanups` is an
        // `extern "C" fn()` with no arguments, as atexit requires, and it
        // never unwinds (see there).
        let rc = unsafe { libc::atexit(run_cleanups) };
        assert_eq!(
            rc, 0,
            "atexit failed: shared fixtures would outlive the tests"
        );
    });
    CLEANUPS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(cleanup);
}

extern "C" fn run_cleanups() {
    let cleanups = match CLEANUPS.try_lock() {
        Ok(mut list) => std::mem::take(&mut *list),
        Err(_) => return,
    };
    for cleanup in cleanups {
        // Unwinding out of an `extern "C"` function aborts: contain panics.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(cleanup));
    }
}
