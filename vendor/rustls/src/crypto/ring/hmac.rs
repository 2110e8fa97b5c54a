#![allow(clippy::duplicate_mod)]

use alloc::boxed::Box;

use super::ring_like;
use crate::crypto;

pub(crate) static HMAC_SHA256: Hmac = Hmac(&ring_like::hmac::HMAC_SHA256);
pub(crate) static HMAC_SHA384: Hmac = Hmac(&ring_like::hmac::HMAC_SHA384);
#[allow(dead_code)] // Only used for TLS 1.2 prf test, and aws-lc-rs HPKE suites.
pub(crate) static HMAC_SHA512: Hmac = Hmac(&ring_like::hmac::HMAC_SHA512);

pub(crate) struct Hmac(&'static ring_like::hmac::Algorithm);

impl crypto::hmac::Hmac for Hmac {
    fn with_key(&self, key: &[u8]) -> Box<dyn crypto::hmac::Key> {
        // tern patch: the key lives in a kept box (`Slot`).
        Box::new(Key(Slot::new(ring_like::hmac::Key::new(
            *self.0, key,
        ))))
    }

    fn hash_output_len(&self) -> usize {
        self.0.digest_algorithm().output_len()
    }

    fn fips(&self) -> bool {
        super::fips()
    }
}

struct Key(Slot);

impl crypto::hmac::Key for Key {
    fn sign_concat(&self, first: &[u8], middle: &[&[u8]], last: &[u8]) -> crypto::hmac::Tag {
        let mut ctx = ring_like::hmac::Context::with_key(self.0.key());
        ctx.update(first);
        for d in middle {
            ctx.update(d);
        }
        ctx.update(last);
        crypto::hmac::Tag::new(ctx.sign().as_ref())
    }

    fn tag_len(&self) -> usize {
        self.0
            .key()
            .algorithm()
            .digest_algorithm()
            .output_len()
    }
}

/// tern patch: the box of one HMAC key, taken from the boxes this thread
/// keeps when there is one, and kept (emptied: the key is dropped, and with
/// it wiped, at once) when the key is dropped.
///
/// aws-lc-rs's key holds a whole `HMAC_CTX` (1,232 bytes), more than
/// glibc's per-thread cache serves (up to 1,032): each of the ~20 keys a
/// QUIC handshake makes (an HKDF expander each) and drops went through
/// malloc's slow path, where an allocation of that size first merges every
/// freed small chunk (`malloc_consolidate`). Measured in tern (callgrind
/// and heaptrack, `tern bench --h3 --plan new`): 22 allocations of 1,232
/// bytes per new QUIC connection.
struct Slot(Option<Box<Option<ring_like::hmac::Key>>>);

impl Slot {
    fn new(key: ring_like::hmac::Key) -> Self {
        Self(Some(match spare::take() {
            Some(mut slot) => {
                *slot = Some(key);
                slot
            }
            None => Box::new(Some(key)),
        }))
    }

    fn key(&self) -> &ring_like::hmac::Key {
        match self.0.as_deref() {
            Some(Some(key)) => key,
            // `new` fills the slot and only `drop` empties it.
            _ => unreachable!("an HMAC key slot is empty before it is dropped"),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(mut slot) = self.0.take() {
            *slot = None;
            spare::give(slot);
        }
    }
}

#[cfg(feature = "std")]
mod spare {
    use alloc::boxed::Box;
    use alloc::vec::Vec;
    use core::cell::RefCell;

    use super::ring_like;

    /// Boxes kept per thread: more than the keys of a few handshakes
    /// made at once, 80 KB at most.
    const KEPT: usize = 64;

    type Empty = Box<Option<ring_like::hmac::Key>>;

    std::thread_local! {
        static SPARE: RefCell<Vec<Empty>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) fn take() -> Option<Empty> {
        SPARE
            .try_with(|spare| spare.borrow_mut().pop())
            .ok()
            .flatten()
    }

    pub(super) fn give(slot: Empty) {
        let _ = SPARE.try_with(|spare| {
            let mut spare = spare.borrow_mut();
            if spare.len() < KEPT {
                spare.push(slot);
            }
        });
    }
}

#[cfg(not(feature = "std"))]
mod spare {
    use alloc::boxed::Box;

    use super::ring_like;

    pub(super) fn take() -> Option<Box<Option<ring_like::hmac::Key>>> {
        None
    }

    pub(super) fn give(_: Box<Option<ring_like::hmac::Key>>) {}
}
