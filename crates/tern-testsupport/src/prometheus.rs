//! A strict reader of the Prometheus text exposition format (0.0.4), so
//! tests can check that tern's /metrics output is well-formed and read the
//! numbers in it.
//!
//! Stricter than Prometheus itself where tern promises more: every sample
//! belongs to a family announced by `# HELP` and `# TYPE` first, no series
//! appears twice, and each histogram's buckets are cumulative and end with
//! `le="+Inf"` equal to its `_count`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

/// One `name{labels} value` line.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Series name, suffix included (`x_bucket`, `x_sum`, `x_count`).
    pub name: String,
    /// Label pairs, unescaped.
    pub labels: BTreeMap<String, String>,
    /// The value.
    pub value: f64,
}

/// A parsed exposition.
#[derive(Debug, Default)]
pub struct Scrape {
    /// Family name → (type, help).
    pub families: HashMap<String, (String, String)>,
    /// Samples in order.
    pub samples: Vec<Sample>,
}

impl Scrape {
    /// The value of the series `name` whose labels are exactly `labels`.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
    }

    /// The sum over every series `name` whose labels include `labels`
    /// (0 when there is none: an unused counter may be left out).
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
            .sum()
    }
}

/// Parses `text`; `Err` names the first offending line.
pub fn parse(text: &str) -> Result<Scrape, String> {
    let mut scrape = Scrape::default();
    let mut help: HashMap<String, String> = HashMap::new();
    let mut seen = HashSet::new();
    for (n, line) in text.lines().enumerate() {
        let fail = |why: &str| format!("line {}: {why}: {line:?}", n + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest
                .split_once(' ')
                .ok_or_else(|| fail("HELP without text"))?;
            check_name(name).map_err(|e| fail(&e))?;
            if help.insert(name.to_string(), text.to_string()).is_some() {
                return Err(fail("second HELP for the family"));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest
                .split_once(' ')
                .ok_or_else(|| fail("TYPE without type"))?;
            if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                return Err(fail("unknown type"));
            }
            let text = help.get(name).ok_or_else(|| fail("TYPE before HELP"))?;
            let family = (kind.to_string(), text.clone());
            if scrape.families.insert(name.to_string(), family).is_some() {
                return Err(fail("second TYPE for the family"));
            }
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let sample = parse_sample(line).map_err(|e| fail(&e))?;
        let family = family_of(&scrape.families, &sample.name)
            .ok_or_else(|| fail("sample of a family without HELP and TYPE"))?;
        if family.0 == "histogram" && sample.name.ends_with("_bucket") {
            if !sample.labels.contains_key("le") {
                return Err(fail("bucket without le"));
            }
        } else if sample.labels.contains_key("le") && family.0 != "histogram" {
            return Err(fail("le label outside a histogram"));
        }
        if !seen.insert((sample.name.clone(), sample.labels.clone())) {
            return Err(fail("duplicate series"));
        }
        scrape.samples.push(sample);
    }
    check_histograms(&scrape)?;
    Ok(scrape)
}

/// The (type, help) of the family `series` belongs to.
fn family_of<'a>(
    families: &'a HashMap<String, (String, String)>,
    series: &str,
) -> Option<&'a (String, String)> {
    if let Some(f) = families.get(series) {
        return Some(f);
    }
    ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
        let f = families.get(series.strip_suffix(suffix)?)?;
        (f.0 == "histogram" || f.0 == "summary").then_some(f)
    })
}

fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
        Ok(())
    } else {
        Err(format!("bad metric name {name:?}"))
    }
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(['{', ' '])
        .ok_or("no value after the series name")?;
    let name = &line[..name_end];
    check_name(name)?;
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(after) = rest.strip_prefix('{') {
        rest = parse_labels(after, &mut labels)?;
    }
    let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
    // A timestamp may follow; tern writes none.
    if value.contains(' ') {
        return Err("unexpected text after the value".into());
    }
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().map_err(|_| format!("bad value {v:?}"))?,
    };
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Parses `a="x",b="y"}` and returns what follows the brace.
fn parse_labels<'a>(
    mut s: &'a str,
    labels: &mut BTreeMap<String, String>,
) -> Result<&'a str, String> {
    loop {
        if let Some(rest) = s.strip_prefix('}') {
            return Ok(rest);
        }
        let eq = s.find('=').ok_or("label without =")?;
        let name = &s[..eq];
        check_name(name)?;
        if name.contains(':') {
            return Err(format!("bad label name {name:?}"));
        }
        let body = s[eq + 1..]
            .strip_prefix('"')
            .ok_or("label value not quoted")?;
        let mut value = String::new();
        let mut chars = body.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    _ => return Err("bad escape in a label value".into()),
                },
                Some((_, '\n')) => return Err("raw newline in a label value".into()),
                Some((_, c)) => value.push(c),
                None => return Err("unterminated label value".into()),
            }
        };
        if labels.insert(name.to_string(), value).is_some() {
            return Err(format!("label {name} twice"));
        }
        s = &body[end + 1..];
        s = s.strip_prefix(',').unwrap_or(s);
    }
}

/// Buckets never decrease, and `+Inf` is present and equals `_count`.
fn check_histograms(scrape: &Scrape) -> Result<(), String> {
    let mut last: HashMap<(String, BTreeMap<String, String>), (f64, f64)> = HashMap::new();
    for s in scrape
        .samples
        .iter()
        .filter(|s| s.name.ends_with("_bucket"))
    {
        let mut key_labels = s.labels.clone();
        let le = key_labels.remove("le").unwrap_or_default();
        let le: f64 = match le.as_str() {
            "+Inf" => f64::INFINITY,
            v => v
                .parse()
                .map_err(|_| format!("bad le {v:?} in {}", s.name))?,
        };
        let base = s.name.trim_end_matches("_bucket").to_string();
        let key = (base, key_labels);
        if let Some(&(prev_le, prev_count)) = last.get(&key) {
            if le <= prev_le || s.value < prev_count {
                return Err(format!("{} {:?}: buckets not cumulative", s.name, s.labels));
            }
        }
        last.insert(key, (le, s.value));
    }
    for ((base, labels), (le, count)) in &last {
        if *le != f64::INFINITY {
            return Err(format!("{base} {labels:?}: no +Inf bucket"));
        }
        let pairs: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let total = scrape.get(&format!("{base}_count"), &pairs);
        if total != Some(*count) {
            return Err(format!(
                "{base} {labels:?}: +Inf {count} != _count {total:?}"
            ));
        }
    }
    Ok(())
}

/// Prometheus's own linter (`promtool check metrics`, Debian package
/// `prometheus`) over `exposition`, when it is installed; panics with its
/// complaint. [`parse`] checks every exposition either way.
pub fn promtool_check(exposition: &str) {
    static PRESENT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let present = *PRESENT.get_or_init(|| {
        std::process::Command::new("promtool")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !present {
        return;
    }
    let out = crate::tools::run_tool(
        "promtool",
        ["check", "metrics"],
        exposition.as_bytes(),
        Duration::from_secs(20),
    );
    assert!(
        out.success(),
        "promtool check metrics: {}\n{exposition}",
        out.all()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_families_labels_and_escapes() {
        let text = "# HELP a_total Things.\n# TYPE a_total counter\n\
                    a_total{x=\"q\\\"\\\\\\n\",y=\"2\"} 3\n";
        let scrape = parse(text).expect("valid");
        assert_eq!(
            scrape.get("a_total", &[("x", "q\"\\\n"), ("y", "2")]),
            Some(3.0)
        );
    }

    #[test]
    fn refuses_samples_without_a_family_and_broken_histograms() {
        assert!(parse("a 1\n").is_err());
        let no_inf = "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\nh_sum 1\n";
        assert!(parse(no_inf).is_err());
        let dup = "# HELP g x\n# TYPE g gauge\ng 1\ng 2\n";
        assert!(parse(dup).is_err());
    }
}
