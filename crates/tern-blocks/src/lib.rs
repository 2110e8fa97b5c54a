//! Boxes for per-stream futures, reused within a worker thread: the one
//! place tern's request path uses `unsafe` (a block of bytes holds a
//! future of any type that fits it), kept out of `tern-proxy`, which
//! forbids unsafe code. Every `unsafe` block says why it is sound; the
//! tests check that each future is dropped once and its block reused.
//!
//! An HTTP/2 stream's future (the whole exchange) is about 2.9 KiB in a
//! release build: past glibc's per-thread cache (1,032 bytes), so boxing
//! one per request took malloc's slow path both ways (`_int_malloc`,
//! `_int_free`, `unlink_chunk`, and `malloc_consolidate` of the small
//! chunks each large request sweeps up). A finished stream's block goes
//! back to a per-thread list instead, and the next stream of any
//! connection of the worker is written into it. The list is bounded
//! ([`SPARE_MAX`] blocks of [`BLOCK`] bytes, 2 MiB per worker), so memory
//! does not follow the number of connections; a future larger than a block
//! gets a box of its own. The list has to cover how far the number of
//! streams in flight swings, not how many there are: with 48 blocks, 100
//! streams in flight (10 connections of 10) still missed it for one stream
//! in five, since a connection's streams end, and begin again, together.

use std::cell::RefCell;
use std::future::Future;
use std::mem::{align_of, size_of, MaybeUninit};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Bytes of one block: room for an HTTP/2 stream's future (2,896 bytes in a
/// release build of 11aa823) with some margin.
pub const BLOCK: usize = 4096;

/// Blocks kept per worker thread at most: the streams of 50 connections of
/// 10 streams each (h2load -c50 -m10), or four HTTP/2 maxima (128).
const SPARE_MAX: usize = 512;

/// One block's memory, aligned for any future tern makes (checked per type,
/// see [`fits`]).
#[repr(C, align(16))]
struct Block([MaybeUninit<u8>; BLOCK]);

thread_local! {
    static SPARE: RefCell<Vec<Box<Block>>> = const { RefCell::new(Vec::new()) };
}

/// Whether an `F` fits a block (size and alignment).
const fn fits<F>() -> bool {
    size_of::<F>() <= BLOCK && align_of::<F>() <= align_of::<Block>()
}

/// A future written into a block (reused when one is spare) or, when `F`
/// does not fit one, into a box of its own. Made only by [`boxed`]: its
/// insides are private, so no caller can pair a block with a type it
/// does not hold.
pub struct Pooled<F>(Inner<F>);

enum Inner<F> {
    /// Invariant: the block (taken only by `Drop`) holds an `F`, written
    /// by [`boxed`] and dropped only by `Drop`, never moved out.
    InBlock(Option<Box<Block>>, std::marker::PhantomData<F>),
    Own(Pin<Box<F>>),
}

/// `make()`'s future in a reused block when one is spare (else a new one),
/// written there rather than made on the stack and copied in.
// Box::write is Rust 1.87, past the workspace's declared 1.85; the
// dependencies already need 1.89 (as tern-proxy's boxed_in_place).
#[allow(clippy::incompatible_msrv)]
pub fn boxed<F: Future>(make: impl FnOnce() -> F) -> Pooled<F> {
    if !fits::<F>() {
        return Pooled(Inner::Own(Box::into_pin(Box::write(
            Box::new_uninit(),
            make(),
        ))));
    }
    let mut block = SPARE
        .try_with(|s| s.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_else(|| Box::new(Block([MaybeUninit::uninit(); BLOCK])));
    // SAFETY: `fits::<F>()` holds, so the block's start is aligned for an
    // `F` and an `F` lies within it; the block is not shared (just taken
    // from the spare list or made), so nothing else reads or writes it.
    unsafe { block.0.as_mut_ptr().cast::<F>().write(make()) };
    Pooled(Inner::InBlock(Some(block), std::marker::PhantomData))
}

// The `F` lives in the heap block, not in `Pooled`: moving a `Pooled`
// moves only the pointer (as `Box<F>` is Unpin whatever `F` is).
impl<F> Unpin for Pooled<F> {}

impl<F: Future> Future for Pooled<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        match &mut self.get_mut().0 {
            Inner::InBlock(block, _) => {
                let Some(block) = block else {
                    unreachable!("a pooled future's block is taken only when it is dropped")
                };
                // SAFETY: the block holds an initialized `F` (the type's
                // invariant) at its aligned start; it stays at this heap
                // address until `Drop` drops it in place, so it is never
                // moved while pinned.
                let f = unsafe { Pin::new_unchecked(&mut *block.0.as_mut_ptr().cast::<F>()) };
                f.poll(cx)
            }
            Inner::Own(f) => f.as_mut().poll(cx),
        }
    }
}

impl<F> Drop for Pooled<F> {
    fn drop(&mut self) {
        if let Inner::InBlock(slot, _) = &mut self.0 {
            let Some(mut block) = slot.take() else { return };
            // SAFETY: the block holds an initialized `F` (the invariant),
            // dropped here exactly once (the block was just taken) and in
            // place (Pin's drop guarantee); the block is reused only after.
            unsafe { std::ptr::drop_in_place(block.0.as_mut_ptr().cast::<F>()) };
            let _ = SPARE.try_with(|s| {
                let mut s = s.borrow_mut();
                if s.len() < SPARE_MAX {
                    s.push(block);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    /// Ready at its first poll; counts its drops.
    struct Counted(Rc<std::cell::Cell<u32>>, u64);

    impl Future for Counted {
        type Output = u64;
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u64> {
            Poll::Ready(self.1)
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }

    fn block_address<F>(p: &Pooled<F>) -> Option<usize> {
        match p {
            Pooled(Inner::InBlock(Some(b), _)) => Some(&**b as *const Block as usize),
            _ => None,
        }
    }

    #[test]
    fn a_finished_future_is_dropped_once_and_its_block_serves_the_next() {
        let drops = Rc::new(std::cell::Cell::new(0));
        let mut first = boxed(|| Counted(drops.clone(), 7));
        let address = block_address(&first).expect("a small future goes in a block");
        assert_eq!(futures_util::FutureExt::now_or_never(&mut first), Some(7));
        drop(first);
        assert_eq!(drops.get(), 1);
        let mut second = boxed(|| Counted(drops.clone(), 8));
        assert_eq!(
            block_address(&second),
            Some(address),
            "the spare block was not reused"
        );
        assert_eq!(futures_util::FutureExt::now_or_never(&mut second), Some(8));
        drop(second);
        assert_eq!(drops.get(), 2);
    }

    #[test]
    fn a_future_larger_than_a_block_gets_a_box_of_its_own() {
        let big = [1u8; BLOCK + 1];
        let mut f = boxed(|| async move { big.iter().map(|&b| u32::from(b)).sum::<u32>() });
        assert!(block_address(&f).is_none());
        assert_eq!(
            futures_util::FutureExt::now_or_never(&mut f),
            Some(BLOCK as u32 + 1)
        );
    }

    #[test]
    fn the_spare_list_stays_bounded() {
        let drops = Rc::new(std::cell::Cell::new(0));
        let many: Vec<_> = (0..SPARE_MAX + 10)
            .map(|i| boxed(|| Counted(drops.clone(), i as u64)))
            .collect();
        drop(many);
        assert_eq!(drops.get() as usize, SPARE_MAX + 10);
        assert!(SPARE.with(|s| s.borrow().len()) <= SPARE_MAX);
    }
}
