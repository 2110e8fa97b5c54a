//! The field values an HTTP/1.1 backend repeats from response to response
//! (Server, Content-Type, a Date for a second, the Last-Modified and ETag
//! of a file served again), kept per worker thread so that an HTTP/2 or
//! HTTP/3 response head can reuse them instead of making each again.

use http::HeaderValue;

/// Most positions [`BackendValues`] keeps a value for.
const POSITIONS: usize = 64;

/// Longest value kept (longer ones are made every time): with
/// [`POSITIONS`], at most 8 KiB of values per worker thread.
const LONGEST: usize = 128;

/// Misses of a value that was never found again before it is replaced
/// anyway (a position whose value changes with every response costs a
/// copy only once per this many responses).
const PATIENCE: u16 = 64;

/// The last value seen at each position among the fields a response
/// head carries. Making a `HeaderValue` checks every byte of it (and, for
/// a slice of the backend's head, copies the head once per response); one
/// found again is a comparison and a reference count.
#[derive(Debug)]
pub(crate) struct BackendValues {
    kept: Vec<Kept>,
}

#[derive(Debug)]
struct Kept {
    value: HeaderValue,
    /// Whether it was found again since it was kept.
    found: bool,
    /// Misses since it was kept, while never found.
    misses: u16,
}

impl BackendValues {
    pub(crate) const fn new() -> Self {
        BackendValues { kept: Vec::new() }
    }

    /// The value kept at `position` if its bytes are `bytes`.
    pub(crate) fn find(&mut self, position: usize, bytes: &[u8]) -> Option<HeaderValue> {
        let kept = self.kept.get_mut(position)?;
        if kept.value.as_bytes() != bytes {
            return None;
        }
        kept.found = true;
        Some(kept.value.clone())
    }

    /// Notes that `bytes` (not found by [`find`](Self::find)) is the value
    /// at `position` now: kept in place of the last one if that one was
    /// found again (a value that repeats, like a Date for its second),
    /// or had missed [`PATIENCE`] times; a value that never repeats is
    /// copied at most once per that many responses.
    pub(crate) fn missed(&mut self, position: usize, bytes: &[u8]) {
        if position > self.kept.len() || position >= POSITIONS || bytes.len() > LONGEST {
            return;
        }
        if let Some(kept) = self.kept.get_mut(position) {
            if !kept.found && kept.misses < PATIENCE {
                kept.misses += 1;
                return;
            }
        }
        // A value the caller could not make is not kept: nor is one that
        // a field may not carry.
        let Ok(value) = HeaderValue::from_bytes(bytes) else {
            return;
        };
        let kept = Kept {
            value,
            found: false,
            misses: 0,
        };
        if position == self.kept.len() {
            self.kept.push(kept);
        } else {
            self.kept[position] = kept;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_value_is_found_again_and_a_new_one_replaces_it() {
        let mut values = BackendValues::new();
        assert_eq!(values.find(0, b"nginx"), None);
        values.missed(0, b"nginx");
        assert_eq!(
            values.find(0, b"nginx").as_ref().map(HeaderValue::as_bytes),
            Some(&b"nginx"[..])
        );
        // Another position, another value.
        assert_eq!(values.find(1, b"nginx"), None);
        values.missed(1, b"Thu, 26 Nov 2026 08:00:00 GMT");
        assert!(values.find(1, b"Thu, 26 Nov 2026 08:00:00 GMT").is_some());
        // The next second's Date replaces the one that was found again.
        assert_eq!(values.find(1, b"Thu, 26 Nov 2026 08:00:01 GMT"), None);
        values.missed(1, b"Thu, 26 Nov 2026 08:00:01 GMT");
        assert!(values.find(1, b"Thu, 26 Nov 2026 08:00:01 GMT").is_some());
        assert!(values.find(1, b"Thu, 26 Nov 2026 08:00:00 GMT").is_none());
    }

    #[test]
    fn a_value_never_found_again_is_replaced_only_after_patience() {
        let mut values = BackendValues::new();
        values.missed(0, b"id-0");
        for i in 1..=PATIENCE {
            let id = format!("id-{i}");
            values.missed(0, id.as_bytes());
            // Still the first: the new ones were not copied.
            assert!(values.find(0, id.as_bytes()).is_none());
        }
        values.missed(0, b"id-last");
        assert!(values.find(0, b"id-last").is_some());
    }

    #[test]
    fn what_is_kept_is_bounded_and_valid() {
        let mut values = BackendValues::new();
        let long = vec![b'x'; LONGEST + 1];
        values.missed(0, &long);
        assert!(values.find(0, &long).is_none());
        // A value a field may not carry is never kept (nor found).
        values.missed(0, b"bad\r\nvalue");
        assert!(values.find(0, b"bad\r\nvalue").is_none());
        // Positions are filled in order, up to POSITIONS.
        values.missed(5, b"skipped");
        assert!(values.find(5, b"skipped").is_none());
        for position in 0..POSITIONS * 2 {
            values.missed(position, b"v");
        }
        assert_eq!(values.kept.len(), POSITIONS);
    }
}
