//! What an operator's header rules do to one message on its way through:
//! fields dropped from what the peer sent, and fields tern adds after its
//! own. Every head writer (HTTP/1.1 and HTTP/2, either direction) takes a
//! [`FieldEdits`], so a rule has the same effect whatever protocols the
//! client and the backend speak.
//!
//! Rules never touch the fields tern owns: the forwarding fields (their
//! truth is tern's promise to the backend), the framing fields (a rule that
//! changed Content-Length would smuggle requests) and the hop-by-hop ones.
//! [`owned_by_tern`] says why a name is refused, for the config error.

use bytes::Bytes;

use crate::head::FieldKind;

/// Edits to one message's fields. Empty (the default) changes nothing and
/// costs nothing.
#[derive(Debug, Default, Clone)]
pub struct FieldEdits<'a> {
    /// Lowercase names whose fields, as the peer sent them, are dropped
    /// (removed, or replaced by a `set`).
    pub drop: &'a [Box<str>],
    /// Fields added after tern's own, in order.
    pub add: Vec<(&'a str, FieldValue<'a>)>,
}

/// The value of a field a rule adds.
#[derive(Debug, Clone)]
pub enum FieldValue<'a> {
    /// A literal from the configuration: the same on every message.
    Config(&'a [u8]),
    /// Made for this message (a request ID, an expanded variable,
    /// Retry-After): it never repeats, and every head that carries it
    /// (the request up, the response down, the log) shares one copy.
    Made(Bytes),
}

impl FieldValue<'_> {
    /// The value's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            FieldValue::Config(b) => b,
            FieldValue::Made(b) => b,
        }
    }
}

impl FieldEdits<'_> {
    /// No edits.
    pub const NONE: FieldEdits<'static> = FieldEdits {
        drop: &[],
        add: Vec::new(),
    };

    /// The set of the lengths of the names dropped (one bit per length,
    /// see `head::length_bit`): a name whose length is not in it is not
    /// dropped, and need not be compared.
    pub fn dropped_lengths(&self) -> u64 {
        self.drop
            .iter()
            .fold(0, |set, name| set | crate::head::length_bit(name.len()))
    }

    /// True when a field called `name` (any case), as the peer sent it,
    /// goes no further.
    pub fn drops(&self, name: &str) -> bool {
        self.drops_bytes(name.as_bytes())
    }

    /// [`FieldEdits::drops`] for a name as received.
    pub fn drops_bytes(&self, name: &[u8]) -> bool {
        self.drop
            .iter()
            .any(|d| d.as_bytes().eq_ignore_ascii_case(name))
    }

    /// The fields to add, as (name, value).
    pub fn added(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.add.iter().map(|(n, v)| (*n, v.as_bytes()))
    }
}

/// Why a header rule may not name `name`, or `None` when it may.
pub fn owned_by_tern(name: &str) -> Option<&'static str> {
    match FieldKind::of(name) {
        FieldKind::ClientForwarding => Some(
            "is a forwarding field: tern always removes the client's and adds its own \
             (see the `forwarded` option)",
        ),
        FieldKind::ContentLength | FieldKind::TransferEncoding => {
            Some("frames the message body: tern sets it from the body it forwards")
        }
        FieldKind::Host => Some("routes the request: tern forwards the client's"),
        FieldKind::Connection | FieldKind::Upgrade | FieldKind::HopByHop => {
            Some("is hop-by-hop: tern manages it for each connection")
        }
        FieldKind::Expect => Some("is answered by tern itself (100-continue)"),
        FieldKind::Other => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarding_and_framing_fields_are_refused() {
        for name in [
            "X-Forwarded-For",
            "x_forwarded_for",
            "Forwarded",
            "Content-Length",
            "transfer-encoding",
            "Connection",
            "TE",
            "Host",
        ] {
            assert!(owned_by_tern(name).is_some(), "{name}");
        }
        for name in ["X-Frame-Options", "Server", "Strict-Transport-Security"] {
            assert!(owned_by_tern(name).is_none(), "{name}");
        }
    }

    #[test]
    fn drops_ignore_case() {
        let drop: Vec<Box<str>> = vec!["server".into()];
        let edits = FieldEdits {
            drop: &drop,
            add: Vec::new(),
        };
        assert!(edits.drops("Server"));
        assert!(!edits.drops("Server-Timing"));
    }
}
