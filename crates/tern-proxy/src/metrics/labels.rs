//! The closed label sets that let workers count into pre-sized arrays: a
//! label value becomes an index with a short scan, never an allocation.
//!
//! Each set ends with one catch-all slot ("other", or a status class), so an
//! unexpected value is still counted rather than dropped.

use tern_tls::TlsPolicy;

/// Label of the catch-all slot.
pub(crate) const OTHER: &str = "other";

/// Label of an empty value (nothing negotiated).
pub(crate) const NONE: &str = "none";

/// TLS versions tern can negotiate, as `tern_tls::Negotiated::version` names them.
const TLS_VERSIONS: &[&str] = &["TLSv1.3", "TLSv1.2"];

/// Protocols a request can arrive over, as the front ends name them.
pub(crate) const PROTOCOLS: &[&str] = &["http/1.1", "h2", "h3"];

/// Status codes counted under their own number; any other code is counted
/// under its class ("4xx"), or "other" outside 100..=599. Sorted.
const COMMON_CODES: &[u16] = &[
    100, 101, 103, 200, 201, 202, 204, 206, 301, 302, 303, 304, 307, 308, 400, 401, 403, 404, 405,
    408, 409, 410, 411, 412, 413, 414, 415, 416, 421, 422, 425, 429, 431, 451, 500, 501, 502, 503,
    504, 505,
];

const CLASSES: &[&str] = &["1xx", "2xx", "3xx", "4xx", "5xx"];

/// A closed set of label values plus the catch-all.
#[derive(Debug)]
pub(crate) struct LabelSet {
    values: Vec<&'static str>,
}

impl LabelSet {
    fn new(values: Vec<&'static str>) -> Self {
        LabelSet { values }
    }

    /// TLS versions tern can negotiate.
    pub fn tls_versions() -> Self {
        LabelSet::new(TLS_VERSIONS.to_vec())
    }

    /// Every cipher suite the TLS policy knows (the default policy enables
    /// all of them; a configured policy can only narrow it).
    pub fn cipher_suites() -> Self {
        LabelSet::new(TlsPolicy::default_fast().suite_names())
    }

    /// Every key-exchange group the TLS policy knows, and none (a resumed
    /// TLS 1.2 session does no key exchange).
    pub fn groups() -> Self {
        let mut groups = TlsPolicy::default_fast().group_names();
        groups.push("");
        LabelSet::new(groups)
    }

    /// Request protocols.
    pub fn protocols() -> Self {
        LabelSet::new(PROTOCOLS.to_vec())
    }

    /// Number of slots, the catch-all included.
    pub fn slots(&self) -> usize {
        self.values.len() + 1
    }

    /// The slot of `value`: its position, or the catch-all's.
    pub fn index(&self, value: &str) -> usize {
        self.values
            .iter()
            .position(|v| *v == value)
            .unwrap_or(self.values.len())
    }

    /// The label value of slot `index` ("none" for an empty value).
    pub fn name(&self, index: usize) -> &'static str {
        match self.values.get(index) {
            Some(&"") => NONE,
            Some(value) => value,
            None => OTHER,
        }
    }
}

/// Number of status slots: common codes, then classes, then "other".
pub(crate) const STATUS_SLOTS: usize = COMMON_CODES.len() + CLASSES.len() + 1;

/// The slot of status `code`.
pub(crate) fn status_index(code: u16) -> usize {
    match COMMON_CODES.binary_search(&code) {
        Ok(i) => i,
        Err(_) if (100..=599).contains(&code) => COMMON_CODES.len() + usize::from(code / 100 - 1),
        Err(_) => STATUS_SLOTS - 1,
    }
}

/// The `code` label of status slot `index`.
pub(crate) fn status_label(index: usize) -> StatusLabel {
    match COMMON_CODES.get(index) {
        Some(&code) => StatusLabel::Code(code),
        None => StatusLabel::Name(
            CLASSES
                .get(index - COMMON_CODES.len())
                .copied()
                .unwrap_or(OTHER),
        ),
    }
}

/// A status label: an exact code or a class name.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StatusLabel {
    /// "404"
    Code(u16),
    /// "4xx" or "other"
    Name(&'static str),
}

impl std::fmt::Display for StatusLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatusLabel::Code(code) => write!(f, "{code}"),
            StatusLabel::Name(name) => f.write_str(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_codes_are_sorted_for_binary_search() {
        assert!(COMMON_CODES.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn statuses_map_to_their_code_class_or_other() {
        let label = |code| status_label(status_index(code)).to_string();
        assert_eq!(label(404), "404");
        assert_eq!(label(200), "200");
        assert_eq!(label(418), "4xx");
        assert_eq!(label(599), "5xx");
        assert_eq!(label(199), "1xx");
        assert_eq!(label(99), "other");
        assert_eq!(label(600), "other");
        assert!(status_index(600) < STATUS_SLOTS);
    }

    #[test]
    fn unknown_label_values_go_to_the_catch_all() {
        let groups = LabelSet::groups();
        assert_eq!(groups.name(groups.index("X25519")), "X25519");
        assert_eq!(groups.name(groups.index("ffdhe2048")), OTHER);
        assert_eq!(groups.index("ffdhe2048"), groups.slots() - 1);
        assert_eq!(groups.name(groups.index("")), NONE);
        let suites = LabelSet::cipher_suites();
        assert!(suites.index("TLS_AES_128_GCM_SHA256") < suites.slots() - 1);
    }
}
