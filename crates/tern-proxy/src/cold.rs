//! Rare paths kept out of the hot functions' code.
//!
//! An `async fn` awaited inside another is compiled into its caller: its
//! poll code lands in the caller's state machine, between the arms every
//! request runs. A request's path through tern's large futures
//! (`exchange::run`, the HTTP/1.1 front end's loop, the backend request)
//! then spans many more instruction-cache lines than the code it runs: in
//! the default build (no profile to tell LLVM which arms are hot) these
//! functions took ~90 simulated I1 misses a request each for ~800
//! instructions (BENCHMARKS.md, "instruction-cache misses in the default
//! build"). [`cold`] wraps a rare future (an error answer, a refusal, a
//! retry) so that its poll is a separate function LLVM knows is unlikely
//! to run, and lays out away from the hot code; its state is boxed, so it
//! does not enlarge the caller's future either (one allocation, on the
//! rare path only).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A rare future, boxed and polled out of line (see the module's doc).
pub(crate) struct Cold<F>(Pin<Box<F>>);

impl<F: Future> Future for Cold<F> {
    type Output = F::Output;

    #[cold]
    #[inline(never)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.0.as_mut().poll(cx)
    }
}

/// `future`, polled out of the caller's code as a rare path.
#[cold]
#[inline(never)]
pub(crate) fn cold<F: Future>(future: F) -> Cold<F> {
    Cold(Box::pin(future))
}
