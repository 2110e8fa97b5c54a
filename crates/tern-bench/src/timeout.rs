//! The request timeout of one slot (or stream), on the watchdog `tern serve`
//! uses too (`tern_deadline`): one timer per slot instead of a timer-wheel
//! entry per request, re-armed only when it fires. Deadlines only move
//! forward here, so moving one is a plain store; a stale timer fires early,
//! the watchdog sees the request in flight is not overdue yet and re-arms
//! for its deadline. At most one spurious wake-up per `limit`.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// A slot's request timeout: `None` waits for ever.
pub(crate) struct Watchdog {
    limit: Option<Duration>,
    /// Made on the first request (a slot that never sends needs none).
    dog: Option<tern_deadline::Watchdog>,
}

impl Watchdog {
    pub(crate) fn new(limit: Option<Duration>) -> Watchdog {
        Watchdog { limit, dog: None }
    }

    /// Runs `fut`, failing with `on_timeout()` once it has run `limit`.
    pub(crate) async fn run<T, E>(
        &mut self,
        fut: impl Future<Output = Result<T, E>>,
        on_timeout: impl FnOnce() -> E,
    ) -> Result<T, E> {
        let Some(limit) = self.limit else {
            return fut.await;
        };
        let dog = tern_deadline::Watchdog::set_in(&mut self.dog, Instant::now() + limit);
        dog.run(fut).await.unwrap_or_else(|| Err(on_timeout()))
    }
}
