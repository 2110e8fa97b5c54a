//! A request mix: the targets file (`--targets FILE`), a small TOML list
//! of requests with weights and per-response checks, and the schedule that
//! picks which request each send carries.
//!
//! ```toml
//! [[request]]
//! name = "home"                 # optional, for messages
//! method = "GET"                # default GET
//! path = "/"                    # required: sent to every target's host
//! weight = 8                    # default 1
//! headers = ["Accept: text/html"]
//! expect_status = [200]         # any other status counts as a failure
//! expect_body = "<title>"       # the body must contain these bytes
//!
//! [[request]]
//! method = "POST"
//! path = "/api/cart"
//! body_file = "cart.json"       # relative to the targets file
//! weight = 1
//! ```
//!
//! Paths, not URLs: the same mix runs against each target of a
//! comparison (and each protocol of `--compare-protocols`), so they are
//! compared on the same traffic. The requests are interleaved by smooth
//! weighted round robin over a run-wide counter, so any stretch of
//! `sum(weights)` requests carries each entry exactly `weight` times.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Most entries in one targets file.
pub const MAX_ENTRIES: usize = 1_000;
/// Highest weight of one entry; the schedule is `sum(weights)` long.
pub const MAX_WEIGHT: u32 = 10_000;
/// Longest schedule (sum of the weights over their common divisor).
pub const MAX_SCHEDULE: u64 = 100_000;
/// Largest request body read from a `body_file`.
pub const MAX_BODY_FILE: u64 = 16 * 1024 * 1024;
/// Longest `expect_body`.
pub const MAX_EXPECT_BODY: usize = 4096;

/// Why a targets file was refused: one line naming the file and line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MixError {
    /// The file or a body file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not valid, or an entry is wrong.
    #[error("{file}:{line}: {message}")]
    Invalid {
        /// The targets file.
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Checks made on every response to one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Check {
    /// Statuses accepted; empty accepts any.
    pub status: Vec<u16>,
    /// Bytes the body must contain.
    pub body_contains: Option<Vec<u8>>,
}

impl Check {
    /// True when nothing is checked.
    pub fn is_empty(&self) -> bool {
        self.status.is_empty() && self.body_contains.is_none()
    }

    /// Why a response fails the check, or `None` when it passes.
    /// `body_found` is whether the body contained `body_contains`.
    pub fn verdict(&self, status: u16, body_found: bool) -> Option<String> {
        if !self.status.is_empty() && !self.status.contains(&status) {
            let want: Vec<String> = self.status.iter().map(u16::to_string).collect();
            return Some(format!("status {status}, expected {}", want.join(" or ")));
        }
        match &self.body_contains {
            Some(needle) if !body_found => Some(format!(
                "body without {:?}",
                String::from_utf8_lossy(needle)
            )),
            _ => None,
        }
    }
}

/// One request of a mix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MixEntry {
    /// Name for messages: `name`, or `METHOD path`.
    pub name: String,
    /// Method, upper case.
    pub method: String,
    /// Path and query, starting with `/`.
    pub path: String,
    /// Headers, in order.
    pub headers: Vec<(String, String)>,
    /// Body (from `body` or `body_file`).
    pub body: Vec<u8>,
    /// Body file, resolved against the targets file's directory, until read.
    pub body_file: Option<PathBuf>,
    /// Relative weight, at least 1.
    pub weight: u32,
    /// Response checks.
    pub check: Check,
}

/// A parsed targets file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMix {
    /// Where it came from, for the disclosure.
    pub file: String,
    /// The requests.
    pub entries: Vec<MixEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    request: Vec<toml::Spanned<RawEntry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    name: Option<String>,
    method: Option<String>,
    path: Option<String>,
    weight: Option<i64>,
    #[serde(default)]
    headers: Vec<String>,
    body: Option<String>,
    body_file: Option<String>,
    expect_status: Option<StatusList>,
    expect_body: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StatusList {
    One(i64),
    Many(Vec<i64>),
}

impl RequestMix {
    /// Reads and parses `path`, and reads each entry's body file.
    pub fn load(path: &Path) -> Result<RequestMix, MixError> {
        let read_err = |p: &Path, source| MixError::Read {
            path: p.display().to_string(),
            source,
        };
        let text = std::fs::read_to_string(path).map_err(|e| read_err(path, e))?;
        let mut mix = RequestMix::parse(&text, &path.display().to_string())?;
        let dir = path.parent().unwrap_or(Path::new("."));
        for entry in &mut mix.entries {
            if let Some(rel) = entry.body_file.take() {
                let file = dir.join(rel);
                let f = std::fs::File::open(&file).map_err(|e| read_err(&file, e))?;
                let mut body = Vec::new();
                std::io::Read::read_to_end(
                    &mut std::io::Read::take(f, MAX_BODY_FILE + 1),
                    &mut body,
                )
                .map_err(|e| read_err(&file, e))?;
                if body.len() as u64 > MAX_BODY_FILE {
                    return Err(read_err(
                        &file,
                        std::io::Error::other(format!(
                            "larger than {} MiB",
                            MAX_BODY_FILE / 1024 / 1024
                        )),
                    ));
                }
                entry.body = body;
                entry.body_file = Some(file);
            }
        }
        Ok(mix)
    }

    /// Parses the text of a targets file called `file` (used in
    /// messages). Body files are named, not read: see [`RequestMix::load`].
    pub fn parse(text: &str, file: &str) -> Result<RequestMix, MixError> {
        let invalid = |line: usize, message: String| MixError::Invalid {
            file: file.to_string(),
            line,
            message,
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(1, |s| line_of_offset(text, s.start));
            // toml's message may span lines; the first says what.
            let first = e.message().lines().next().unwrap_or("invalid TOML");
            invalid(line, first.to_string())
        })?;
        if raw.request.is_empty() {
            return Err(invalid(1, "no [[request]] entry: nothing to send".into()));
        }
        if raw.request.len() > MAX_ENTRIES {
            return Err(invalid(
                1,
                format!("{} entries; at most {MAX_ENTRIES}", raw.request.len()),
            ));
        }
        let mut entries = Vec::with_capacity(raw.request.len());
        for spanned in raw.request {
            let line = line_of_offset(text, spanned.span().start);
            let entry = entry(spanned.into_inner()).map_err(|m| invalid(line, m))?;
            entries.push(entry);
        }
        let mix = RequestMix {
            file: file.to_string(),
            entries,
        };
        if mix.schedule_len() > MAX_SCHEDULE {
            return Err(invalid(
                1,
                format!(
                    "the weights add up to a schedule of {} requests; at most {MAX_SCHEDULE} (use smaller weights)",
                    mix.schedule_len()
                ),
            ));
        }
        Ok(mix)
    }

    /// One line for the disclosure: the file, then each entry with its
    /// weight and checks.
    pub fn describe(&self) -> String {
        let total: u64 = self.entries.iter().map(|e| u64::from(e.weight)).sum();
        let entries: Vec<String> = self
            .entries
            .iter()
            .map(|e| {
                let mut checks = Vec::new();
                if !e.check.status.is_empty() {
                    let s: Vec<String> = e.check.status.iter().map(u16::to_string).collect();
                    checks.push(format!("status {}", s.join("|")));
                }
                if let Some(b) = &e.check.body_contains {
                    checks.push(format!("body has {:?}", String::from_utf8_lossy(b)));
                }
                let checks = if checks.is_empty() {
                    String::new()
                } else {
                    format!(", check {}", checks.join(", "))
                };
                format!(
                    "{} {:.1}%{checks}",
                    e.name,
                    100.0 * f64::from(e.weight) / total as f64
                )
            })
            .collect();
        format!("{}: {}", self.file, entries.join("; "))
    }

    fn schedule_len(&self) -> u64 {
        let g = self
            .entries
            .iter()
            .fold(0u32, |g, e| gcd(g, e.weight))
            .max(1);
        self.entries.iter().map(|e| u64::from(e.weight / g)).sum()
    }

    /// The order entries are sent in, repeated: smooth weighted round
    /// robin (nginx's), so each entry is spread evenly over the cycle, and
    /// any whole cycle carries each entry exactly its weight (over the
    /// weights' common divisor) times.
    pub fn schedule(&self) -> Vec<u16> {
        let g = self
            .entries
            .iter()
            .fold(0u32, |g, e| gcd(g, e.weight))
            .max(1);
        let weights: Vec<i64> = self
            .entries
            .iter()
            .map(|e| i64::from(e.weight / g))
            .collect();
        let total: i64 = weights.iter().sum();
        let mut current = vec![0i64; weights.len()];
        let mut out = Vec::with_capacity(total as usize);
        for _ in 0..total {
            let mut best = 0;
            for (i, w) in weights.iter().enumerate() {
                current[i] += w;
                if current[i] > current[best] {
                    best = i;
                }
            }
            current[best] -= total;
            // MAX_ENTRIES fits in u16.
            out.push(best as u16);
        }
        out
    }
}

fn entry(raw: RawEntry) -> Result<MixEntry, String> {
    let path = raw
        .path
        .ok_or("a [[request]] needs path = \"/...\" (a path, sent to each target)")?;
    if !path.starts_with('/') {
        return Err(format!(
            "path {path:?} must start with '/' (paths, not URLs: the mix runs against each target)"
        ));
    }
    if let Some(bad) = path.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("path {path:?} contains {bad:?}"));
    }
    if path.contains('#') {
        return Err(format!("path {path:?}: fragments are not sent to servers"));
    }
    let method = raw
        .method
        .unwrap_or_else(|| "GET".into())
        .to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(is_token) {
        return Err(format!("method {method:?} is not an HTTP token"));
    }
    let weight = match raw.weight {
        None => 1,
        Some(w) if (1..=i64::from(MAX_WEIGHT)).contains(&w) => w as u32,
        Some(w) => return Err(format!("weight {w}: expected 1 to {MAX_WEIGHT}")),
    };
    let mut headers = Vec::with_capacity(raw.headers.len());
    for h in &raw.headers {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| format!("header {h:?} is not \"Name: value\""))?;
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() || !name.bytes().all(is_token) {
            return Err(format!("header name {name:?} is not an HTTP token"));
        }
        if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            return Err(format!("header {name}: value contains CR, LF or NUL"));
        }
        headers.push((name.to_string(), value.to_string()));
    }
    let (body, body_file) = match (raw.body, raw.body_file) {
        (Some(_), Some(_)) => return Err("body and body_file: give one".into()),
        (Some(b), None) => (b.into_bytes(), None),
        (None, Some(f)) if f.is_empty() => return Err("body_file is empty".into()),
        (None, Some(f)) => (Vec::new(), Some(PathBuf::from(f))),
        (None, None) => (Vec::new(), None),
    };
    let status = match raw.expect_status {
        None => Vec::new(),
        Some(StatusList::One(s)) => vec![status_code(s)?],
        Some(StatusList::Many(list)) if list.is_empty() => {
            return Err("expect_status = []: list at least one status".into())
        }
        Some(StatusList::Many(list)) => list
            .into_iter()
            .map(status_code)
            .collect::<Result<_, _>>()?,
    };
    let body_contains = match raw.expect_body {
        Some(b) if b.is_empty() => return Err("expect_body is empty".into()),
        Some(b) if b.len() > MAX_EXPECT_BODY => {
            return Err(format!("expect_body longer than {MAX_EXPECT_BODY} bytes"))
        }
        other => other.map(String::into_bytes),
    };
    Ok(MixEntry {
        name: raw.name.unwrap_or_else(|| format!("{method} {path}")),
        method,
        path,
        headers,
        body,
        body_file,
        weight,
        check: Check {
            status,
            body_contains,
        },
    })
}

fn status_code(s: i64) -> Result<u16, String> {
    u16::try_from(s)
        .ok()
        .filter(|s| (100..=599).contains(s))
        .ok_or_else(|| format!("expect_status {s}: not an HTTP status (100 to 599)"))
}

/// RFC 9110 token characters.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn line_of_offset(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Looks for a byte string in a body that arrives in pieces, keeping only
/// the last `needle.len() - 1` bytes between pieces (bounded memory).
#[derive(Debug, Clone)]
pub struct BodyFinder {
    finder: memchr::memmem::Finder<'static>,
    tail: Vec<u8>,
    found: bool,
}

impl BodyFinder {
    /// A finder for `needle` (not empty).
    pub fn new(needle: &[u8]) -> BodyFinder {
        BodyFinder {
            finder: memchr::memmem::Finder::new(needle).into_owned(),
            tail: Vec::with_capacity(needle.len()),
            found: false,
        }
    }

    /// Feeds the next piece of the body.
    pub fn feed(&mut self, piece: &[u8]) {
        if self.found || piece.is_empty() {
            return;
        }
        let keep = self.finder.needle().len().saturating_sub(1);
        if !self.tail.is_empty() {
            // A match across the boundary lies within tail + the first
            // keep bytes of the piece.
            let before = self.tail.len();
            self.tail.extend_from_slice(&piece[..piece.len().min(keep)]);
            if self.finder.find(&self.tail).is_some() {
                self.found = true;
                return;
            }
            self.tail.truncate(before);
        }
        if self.finder.find(piece).is_some() {
            self.found = true;
            return;
        }
        self.tail.extend_from_slice(piece);
        let excess = self.tail.len().saturating_sub(keep);
        self.tail.drain(..excess);
    }

    /// Whether the body so far contained the needle.
    pub fn found(&self) -> bool {
        self.found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[request]]
name = "home"
path = "/"
weight = 6
expect_status = 200

[[request]]
method = "post"
path = "/cart?x=1"
weight = 3
headers = ["Content-Type: application/json"]
body = "{}"
expect_status = [200, 201]
expect_body = "ok"

[[request]]
path = "/static/a.css"
"#;

    #[test]
    fn a_targets_file_parses_into_typed_entries() {
        let mix = RequestMix::parse(FILE, "mix.toml").unwrap();
        assert_eq!(mix.entries.len(), 3);
        let cart = &mix.entries[1];
        assert_eq!(cart.method, "POST");
        assert_eq!(cart.name, "POST /cart?x=1");
        assert_eq!(cart.headers[0].0, "Content-Type");
        assert_eq!(cart.body, b"{}");
        assert_eq!(cart.check.status, vec![200, 201]);
        assert_eq!(mix.entries[2].weight, 1);
        assert!(mix.entries[2].check.is_empty());
    }

    #[test]
    fn the_schedule_carries_each_entry_its_weight_spread_out() {
        let mix = RequestMix::parse(FILE, "mix.toml").unwrap();
        let s = mix.schedule();
        assert_eq!(s.len(), 10);
        for (i, want) in [(0u16, 6), (1, 3), (2, 1)] {
            assert_eq!(s.iter().filter(|&&e| e == i).count(), want);
        }
        // Smooth: the heavy entry never runs more than twice in a row here.
        assert!(!s.windows(3).any(|w| w.iter().all(|&e| e == 0)), "{s:?}");
    }

    #[test]
    fn bad_entries_name_the_file_and_line() {
        for (text, line, says) in [
            ("[[request]]\nweight = 2\n", 1, "needs path"),
            ("\n\n[[request]]\npath = \"x\"\n", 3, "must start with '/'"),
            ("[[request]]\npath = \"/\"\nweight = 0\n", 1, "weight 0"),
            (
                "[[request]]\npath = \"/\"\nexpect_status = 700\n",
                1,
                "not an HTTP status",
            ),
            (
                "[[request]]\npath = \"/\"\nheaders = [\"X\"]\n",
                1,
                "Name: value",
            ),
            ("[[request]]\npath = \"/\"\nbogus = 1\n", 3, "unknown field"),
            ("[[request]\n", 1, ""),
            ("", 1, "no [[request]]"),
        ] {
            let e = RequestMix::parse(text, "t.toml").unwrap_err().to_string();
            assert!(e.starts_with(&format!("t.toml:{line}: ")), "{text:?}: {e}");
            assert!(e.contains(says), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn checks_say_why_a_response_failed() {
        let c = Check {
            status: vec![200, 204],
            body_contains: Some(b"ok".to_vec()),
        };
        assert_eq!(c.verdict(200, true), None);
        assert_eq!(
            c.verdict(503, true).as_deref(),
            Some("status 503, expected 200 or 204")
        );
        assert_eq!(
            c.verdict(200, false).as_deref(),
            Some("body without \"ok\"")
        );
    }

    #[test]
    fn the_body_finder_sees_a_needle_split_across_pieces() {
        let mut f = BodyFinder::new(b"needle");
        for piece in [&b"xxxne"[..], b"e", b"dle yy"] {
            f.feed(piece);
        }
        assert!(f.found());
        let mut f = BodyFinder::new(b"needle");
        for piece in [&b"need"[..], b"l", b"x needl"] {
            f.feed(piece);
        }
        assert!(!f.found());
    }
}
