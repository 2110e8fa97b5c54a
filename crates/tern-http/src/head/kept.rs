//! The field lines a head writer passed on from a head, kept with the head
//! so that the same head written again is one copy.
//!
//! A head tern holds is read again without a parse when the next one
//! repeats it byte for byte (`parse::request_again`, `response_again`: a
//! client's requests, a backend's answers within the second of their
//! Date). Which of its lines go on then depends only on those bytes and
//! on the rules of the writer (the kinds it stops, the names the header
//! rules drop), so the lines written last time are the lines to write.
//! Choosing them again cost ~540 instructions for nginx's response head
//! per keepalive request (callgrind, `MODE=h1 bench/instructions.sh`: it
//! carries `Connection`, which stops, so its lines are looked at one by
//! one); taking the kept ones costs ~130 (the lock, the rules' names
//! compared, the copy). A head that carries no kind the writer stops is
//! copied whole after a glance at its names and keeps nothing
//! (`rewrite::copy_fields`).
//!
//! Every parse starts by emptying its head (`Fields::reset`), and a
//! refused one ends by it (`Fields::forget`): both forget the kept lines,
//! so lines are only ever reused for the very head they were taken from.

use std::sync::Mutex;

/// Lines kept from one head (see the module comment). A `Mutex`, not a
/// `RefCell`, so that a head stays `Sync`; it is never contended (a head
/// belongs to one exchange at a time), and a lock that is busy or was
/// poisoned only means the lines are chosen again.
#[derive(Default)]
pub(crate) struct KeptLines(Mutex<Kept>);

#[derive(Default)]
struct Kept {
    /// `lines` holds what was written for this head.
    valid: bool,
    /// The field kinds the writer stopped ([`super::FieldKind::bits`]).
    dropped: u16,
    /// The names the header rules dropped (compared by content: a
    /// listener's rules can be replaced by a reload).
    drop: Vec<Box<str>>,
    lines: Vec<u8>,
}

impl KeptLines {
    /// Forgets the lines: the head is about to change.
    pub(crate) fn clear(&mut self) {
        match self.0.get_mut() {
            Ok(kept) => kept.valid = false,
            Err(_) => *self = KeptLines::default(),
        }
    }

    /// Appends the lines kept for a writer that stops the kinds `dropped`
    /// and the names `drop`; false (nothing appended) when none are.
    pub(crate) fn put(&self, dropped: u16, drop: &[Box<str>], out: &mut Vec<u8>) -> bool {
        let Ok(kept) = self.0.try_lock() else {
            return false;
        };
        if !kept.valid || kept.dropped != dropped || kept.drop[..] != *drop {
            return false;
        }
        out.extend_from_slice(&kept.lines);
        true
    }

    /// Keeps `lines`, what a writer that stops the kinds `dropped` and the
    /// names `drop` passed on from the head.
    pub(crate) fn keep(&self, dropped: u16, drop: &[Box<str>], lines: &[u8]) {
        let Ok(mut kept) = self.0.try_lock() else {
            return;
        };
        if kept.drop[..] != *drop {
            kept.drop = drop.to_vec();
        }
        kept.dropped = dropped;
        kept.lines.clear();
        kept.lines.extend_from_slice(lines);
        kept.valid = true;
    }
}

/// A copy of a head starts without kept lines (they are chosen again at
/// its first write).
impl Clone for KeptLines {
    fn clone(&self) -> Self {
        KeptLines::default()
    }
}

impl std::fmt::Debug for KeptLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeptLines")
    }
}
