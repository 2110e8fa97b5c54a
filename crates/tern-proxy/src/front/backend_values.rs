//! The field values an HTTP/1.1 backend repeats from response to response
//! (Server, Content-Type, a Date for a second, the Last-Modified and ETag
//! of a file served again), kept per worker thread so that an HTTP/2 or
//! HTTP/3 response head can reuse them instead of making each again.

use h2::server::SharedFields;
use http::{HeaderName, HeaderValue};

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

/// Longest response head [`LastHead`] keeps (a longer one is carried
/// field by field every time).
const LONGEST_HEAD: usize = 2048;

/// Heads carried field by field, while the last one kept was never sent
/// again, before the next is kept in its place: a backend whose heads
/// never repeat costs a comparison per response and a copy per this many.
const HEAD_PATIENCE: u16 = 16;

/// The fields an HTTP/2 or HTTP/3 response carried for the last backend
/// head kept, and what they were made from: a head sent again byte for
/// byte (a static file's, within the second of its Date; a fixed API
/// answer), with the same framing and the same names dropped by the
/// rules, carries the same fields (HTTP/2: the one shared list, a
/// reference count; HTTP/3: each field cloned, a reference count each)
/// instead of compared and found again one by one.
#[derive(Debug)]
pub(crate) struct LastHead {
    /// The backend's head (`shared` None: nothing kept).
    raw: Vec<u8>,
    /// Content-Length was left out (a chunked or close-delimited body).
    no_length: bool,
    /// The names the rules dropped.
    drop: Vec<Box<str>>,
    /// The fields carried for `raw`, as one immutable list that every
    /// head sent again shares (a reference count, not a clone per field;
    /// h2 writes the same list again as the bytes it encoded to:
    /// `SendResponse::send_response_shared`).
    shared: Option<SharedFields>,
    /// The fields carried so far for the head being kept.
    carried: Vec<(HeaderName, HeaderValue)>,
    /// Whether `shared` served a head since it was kept.
    found: bool,
    /// Heads not kept since, while never found.
    misses: u16,
}

impl LastHead {
    pub(crate) const fn new() -> Self {
        LastHead {
            raw: Vec::new(),
            no_length: false,
            drop: Vec::new(),
            shared: None,
            carried: Vec::new(),
            found: false,
            misses: 0,
        }
    }

    /// The fields carried for `raw` the last time, if it was kept with the
    /// same framing and dropped names.
    pub(crate) fn find(
        &mut self,
        raw: &[u8],
        no_length: bool,
        drop: &[Box<str>],
    ) -> Option<&SharedFields> {
        let shared = self.shared.as_ref()?;
        if self.raw != raw || self.no_length != no_length || *self.drop != *drop {
            return None;
        }
        self.found = true;
        Some(shared)
    }

    /// Whether the head of `len` bytes, not found, is to be kept: the one
    /// kept was found again, or had its patience; empties what was kept
    /// (filled again by [`carry`](Self::carry) and [`keep`](Self::keep)).
    pub(crate) fn start(&mut self, len: usize) -> bool {
        if len > LONGEST_HEAD {
            return false;
        }
        if !self.found && self.misses < HEAD_PATIENCE && self.shared.is_some() {
            self.misses += 1;
            return false;
        }
        self.raw.clear();
        self.shared = None;
        self.carried.clear();
        true
    }

    /// Notes one field carried for the head being kept.
    pub(crate) fn carry(&mut self, name: &HeaderName, value: &HeaderValue) {
        if self.carried.len() < POSITIONS {
            self.carried.push((name.clone(), value.clone()));
        }
    }

    /// Keeps the fields carried since [`start`](Self::start) as those of
    /// `raw`, unless there were more than this keeps.
    pub(crate) fn keep(&mut self, raw: &[u8], no_length: bool, drop: &[Box<str>], fields: usize) {
        if fields != self.carried.len() {
            self.carried.clear();
            return;
        }
        // Moved, not cloned: once per head kept.
        self.shared = Some(std::mem::take(&mut self.carried).into());
        self.raw.extend_from_slice(raw);
        self.no_length = no_length;
        self.drop.clear();
        self.drop.extend_from_slice(drop);
        self.found = false;
        self.misses = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn carried(last: &mut LastHead, raw: &[u8], no_length: bool) -> Option<Vec<String>> {
        last.find(raw, no_length, &[]).map(|fields| {
            fields
                .iter()
                .map(|(n, v)| format!("{n}: {}", v.to_str().expect("text")))
                .collect()
        })
    }

    fn keep(last: &mut LastHead, raw: &[u8], fields: &[(&'static str, &'static str)]) -> bool {
        if !last.start(raw.len()) {
            return false;
        }
        for (n, v) in fields {
            last.carry(&HeaderName::from_static(n), &HeaderValue::from_static(v));
        }
        last.keep(raw, false, &[], fields.len());
        true
    }

    #[test]
    fn a_head_sent_again_carries_what_it_carried_with_the_same_framing_and_rules() {
        let mut last = LastHead::new();
        let head = b"HTTP/1.1 200 OK\r\nServer: nginx\r\n\r\n";
        assert_eq!(carried(&mut last, head, false), None);
        assert!(keep(&mut last, head, &[("server", "nginx")]));
        assert_eq!(
            carried(&mut last, head, false),
            Some(vec!["server: nginx".to_owned()])
        );
        assert_eq!(carried(&mut last, head, true), None, "another framing");
        assert!(last.find(head, false, &["server".into()]).is_none());
        assert_eq!(
            carried(
                &mut last,
                b"HTTP/1.1 200 OK\r\nServer: nginy\r\n\r\n",
                false
            ),
            None
        );
        // Found again: the next head not found is kept in its place.
        let other = b"HTTP/1.1 404 Not Found\r\n\r\n";
        assert!(keep(&mut last, other, &[]));
        assert_eq!(carried(&mut last, other, false), Some(vec![]));
        assert_eq!(carried(&mut last, head, false), None);
    }

    #[test]
    fn heads_that_never_repeat_are_kept_once_per_patience_and_long_ones_never() {
        let mut last = LastHead::new();
        assert!(keep(
            &mut last,
            b"HTTP/1.1 200 OK\r\nA: 0\r\n\r\n",
            &[("a", "0")]
        ));
        for _ in 0..HEAD_PATIENCE {
            assert!(!last.start(30), "kept before its patience");
        }
        assert!(last.start(30));
        assert!(!LastHead::new().start(LONGEST_HEAD + 1));
        // More fields than it keeps: nothing kept.
        let mut last = LastHead::new();
        assert!(last.start(30));
        for i in 0..=POSITIONS {
            last.carry(&HeaderName::from_static("a"), &HeaderValue::from(i));
        }
        last.keep(b"HTTP/1.1 200 OK\r\n\r\n", false, &[], POSITIONS + 1);
        assert!(last.find(b"HTTP/1.1 200 OK\r\n\r\n", false, &[]).is_none());
    }

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
