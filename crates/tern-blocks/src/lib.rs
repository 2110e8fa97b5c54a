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
//! does not follow the number of connections. The list has to cover how
//! far the number of streams in flight swings, not how many there are:
//! with 48 blocks, 100 streams in flight (10 connections of 10) still
//! missed it for one stream in five, since a connection's streams end,
//! and begin again, together.
//!
//! An HTTP/3 stream's future is larger (about 9.4 KiB: h3's request
//! resolver and stream halves are in it) and goes in a block of the
//! second size, [`LARGE_BLOCK`], from a list of its own ([`LARGE_SPARE_MAX`]
//! blocks, 2 MiB per worker). A future larger than that gets a box of its
//! own.

use std::cell::RefCell;
use std::future::Future;
use std::mem::{align_of, size_of, MaybeUninit};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::thread::LocalKey;

/// Bytes of one block: room for an HTTP/2 stream's future (2,896 bytes in a
/// release build of 11aa823) with some margin.
pub const BLOCK: usize = 4096;

/// Bytes of one large block: room for an HTTP/3 stream's future (9,384
/// bytes in a release build of fded522) with some margin.
pub const LARGE_BLOCK: usize = 16384;

/// Blocks kept per worker thread at most: the streams of 50 connections of
/// 10 streams each (h2load -c50 -m10), or four HTTP/2 maxima (128).
const SPARE_MAX: usize = 512;

/// Large blocks kept per worker thread at most (2 MiB, as the small ones):
/// a swing of 128 HTTP/3 streams in flight, more than one connection's
/// default credit (`h3_max_streams`, 100).
const LARGE_SPARE_MAX: usize = 128;

/// One block's memory, aligned for any future tern makes (checked per type,
/// see [`fits`]).
#[repr(C, align(16))]
struct Block<const N: usize>([MaybeUninit<u8>; N]);

thread_local! {
    static SPARE: RefCell<Vec<Box<Block<BLOCK>>>> = const { RefCell::new(Vec::new()) };
    static LARGE_SPARE: RefCell<Vec<Box<Block<LARGE_BLOCK>>>> = const { RefCell::new(Vec::new()) };
}

/// A block size with its per-thread spare list.
trait Size: Sized + 'static {
    /// Blocks the list keeps at most.
    const MAX: usize;
    fn spare() -> &'static LocalKey<RefCell<Vec<Box<Self>>>>;
}

impl Size for Block<BLOCK> {
    const MAX: usize = SPARE_MAX;
    fn spare() -> &'static LocalKey<RefCell<Vec<Box<Self>>>> {
        &SPARE
    }
}

impl Size for Block<LARGE_BLOCK> {
    const MAX: usize = LARGE_SPARE_MAX;
    fn spare() -> &'static LocalKey<RefCell<Vec<Box<Self>>>> {
        &LARGE_SPARE
    }
}

/// Whether an `F` fits a block of `N` bytes (size and alignment).
const fn fits<F, const N: usize>() -> bool {
    size_of::<F>() <= N && align_of::<F>() <= align_of::<Block<N>>()
}

/// A future written into a block (reused when one is spare) or, when `F`
/// does not fit one, into a box of its own. Made only by [`boxed`]: its
/// insides are private, so no caller can pair a block with a type it
/// does not hold.
pub struct Pooled<F>(Inner<F>);

enum Inner<F> {
    /// Invariant (both block variants): the block (taken only by `Drop`)
    /// holds an `F`, written by [`boxed`] and dropped only by `Drop`,
    /// never moved out.
    InBlock(Option<Box<Block<BLOCK>>>, std::marker::PhantomData<F>),
    InLarge(Option<Box<Block<LARGE_BLOCK>>>, std::marker::PhantomData<F>),
    Own(Pin<Box<F>>),
}

/// `make()`'s future in a reused block when one is spare (else a new one),
/// written there rather than made on the stack and copied in.
// Box::write is Rust 1.87, past the workspace's declared 1.85; the
// dependencies already need 1.89 (uuid, time need 1.88).
#[allow(clippy::incompatible_msrv)]
pub fn boxed<F: Future>(make: impl FnOnce() -> F) -> Pooled<F> {
    if fits::<F, BLOCK>() {
        Pooled(Inner::InBlock(
            Some(write_in(make)),
            std::marker::PhantomData,
        ))
    } else if fits::<F, LARGE_BLOCK>() {
        Pooled(Inner::InLarge(
            Some(write_in(make)),
            std::marker::PhantomData,
        ))
    } else {
        Pooled(Inner::Own(Box::into_pin(Box::write(
            Box::new_uninit(),
            make(),
        ))))
    }
}

/// A spare block of `N` bytes (else a new one) with `make()`'s future
/// written at its start. Called only when `fits::<F, N>()` holds.
fn write_in<F, const N: usize>(make: impl FnOnce() -> F) -> Box<Block<N>>
where
    Block<N>: Size,
{
    debug_assert!(fits::<F, N>());
    let mut block = Block::<N>::spare()
        .try_with(|s| s.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_else(|| Box::new(Block([MaybeUninit::uninit(); N])));
    // SAFETY: the callers check `fits::<F, N>()`, so the block's start is
    // aligned for an `F` and an `F` lies within it; the block is not
    // shared (just taken from the spare list or made), so nothing else
    // reads or writes it.
    unsafe { block.0.as_mut_ptr().cast::<F>().write(make()) };
    block
}

/// The `F` a block holds, pinned.
///
/// # Safety
/// The block holds an initialized `F` at its start, which stays there
/// until it is dropped in place.
unsafe fn pinned<F, const N: usize>(block: &mut Block<N>) -> Pin<&mut F> {
    // SAFETY: the caller's promise: an initialized `F` at the aligned
    // start, at this heap address until dropped in place, so never moved
    // while pinned.
    unsafe { Pin::new_unchecked(&mut *block.0.as_mut_ptr().cast::<F>()) }
}

/// Drops the `F` a block holds, in place, and keeps the block for reuse
/// if the list has room.
///
/// # Safety
/// The block holds an initialized `F` at its start, dropped by no one
/// else, before or after.
unsafe fn drop_and_keep<F, const N: usize>(mut block: Box<Block<N>>)
where
    Block<N>: Size,
{
    // SAFETY: the caller's promise: an initialized `F`, dropped here
    // exactly once and in place (Pin's drop guarantee); the block is
    // reused only after.
    unsafe { std::ptr::drop_in_place(block.0.as_mut_ptr().cast::<F>()) };
    let _ = Block::<N>::spare().try_with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < <Block<N> as Size>::MAX {
            s.push(block);
        }
    });
}

// The `F` lives in the heap block, not in `Pooled`: moving a `Pooled`
// moves only the pointer (as `Box<F>` is Unpin whatever `F` is).
impl<F> Unpin for Pooled<F> {}

impl<F: Future> Future for Pooled<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        const TAKEN: &str = "a pooled future's block is taken only when it is dropped";
        match &mut self.get_mut().0 {
            Inner::InBlock(block, _) => {
                let Some(block) = block else {
                    unreachable!("{TAKEN}")
                };
                // SAFETY: the block holds an initialized `F` (the type's
                // invariant) until `Drop` drops it in place.
                unsafe { pinned::<F, BLOCK>(block) }.poll(cx)
            }
            Inner::InLarge(block, _) => {
                let Some(block) = block else {
                    unreachable!("{TAKEN}")
                };
                // SAFETY: as above.
                unsafe { pinned::<F, LARGE_BLOCK>(block) }.poll(cx)
            }
            Inner::Own(f) => f.as_mut().poll(cx),
        }
    }
}

impl<F> Drop for Pooled<F> {
    fn drop(&mut self) {
        match &mut self.0 {
            Inner::InBlock(slot, _) => {
                if let Some(block) = slot.take() {
                    // SAFETY: the block holds an initialized `F` (the
                    // invariant); it was just taken, so this is its one drop.
                    unsafe { drop_and_keep::<F, BLOCK>(block) };
                }
            }
            Inner::InLarge(slot, _) => {
                if let Some(block) = slot.take() {
                    // SAFETY: as above.
                    unsafe { drop_and_keep::<F, LARGE_BLOCK>(block) };
                }
            }
            Inner::Own(_) => {}
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
            Pooled(Inner::InBlock(Some(b), _)) => Some(&**b as *const Block<BLOCK> as usize),
            _ => None,
        }
    }

    fn large_block_address<F>(p: &Pooled<F>) -> Option<usize> {
        match p {
            Pooled(Inner::InLarge(Some(b), _)) => Some(&**b as *const Block<LARGE_BLOCK> as usize),
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
    fn a_future_larger_than_a_block_goes_in_a_large_block_reused_after_it() {
        let drops = Rc::new(std::cell::Cell::new(0));
        let big = [1u8; BLOCK + 1];
        let counted = Counted(drops.clone(), 0);
        let mut f = boxed(move || async move {
            let _counted = counted;
            big.iter().map(|&b| u32::from(b)).sum::<u32>()
        });
        assert!(block_address(&f).is_none());
        let address = large_block_address(&f).expect("a larger future goes in a large block");
        assert_eq!(
            futures_util::FutureExt::now_or_never(&mut f),
            Some(BLOCK as u32 + 1)
        );
        drop(f);
        assert_eq!(drops.get(), 1);
        let next = boxed(move || async move { big.len() });
        assert_eq!(
            large_block_address(&next),
            Some(address),
            "the spare large block was not reused"
        );
    }

    #[test]
    fn a_future_larger_than_a_large_block_gets_a_box_of_its_own() {
        let big = [1u8; LARGE_BLOCK + 1];
        let mut f = boxed(|| async move { big.iter().map(|&b| u32::from(b)).sum::<u32>() });
        assert!(block_address(&f).is_none() && large_block_address(&f).is_none());
        assert_eq!(
            futures_util::FutureExt::now_or_never(&mut f),
            Some(LARGE_BLOCK as u32 + 1)
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
        let big = [0u8; BLOCK + 1];
        let many: Vec<_> = (0..LARGE_SPARE_MAX + 10)
            .map(|_| boxed(move || async move { big.len() }))
            .collect();
        drop(many);
        assert!(LARGE_SPARE.with(|s| s.borrow().len()) <= LARGE_SPARE_MAX);
    }
}
