//! Writing the Prometheus text exposition format, version 0.0.4: `# HELP`
//! and `# TYPE` once per family, then one `name{labels} value` line per
//! series, label values escaped.

use std::fmt::Write;

use super::histogram::HistogramSnapshot;

/// The kind of a metric family, as `# TYPE` names it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// An exposition being written.
#[derive(Debug, Default)]
pub(crate) struct Exposition {
    out: String,
}

impl Exposition {
    /// Starts a family. `help` is fixed text from this crate (no newlines
    /// or backslashes, so it needs no escaping).
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        debug_assert!(!help.contains(['\\', '\n']));
        // Writing to a String cannot fail.
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.name());
    }

    /// One sample of an integer-valued series.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.series(name, labels, None);
        let _ = writeln!(self.out, " {value}");
    }

    /// One sample whose value is a duration or time, in seconds.
    pub fn sample_seconds(&mut self, name: &str, labels: &[(&str, &str)], micros: u64) {
        self.series(name, labels, None);
        self.out.push(' ');
        push_seconds(&mut self.out, micros);
        self.out.push('\n');
    }

    /// The `_bucket`, `_sum` and `_count` series of one histogram in seconds.
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        let bucket = format!("{name}_bucket");
        let mut le = String::with_capacity(16);
        for &(bound_us, count) in &h.cumulative {
            le.clear();
            push_seconds(&mut le, bound_us);
            self.series(&bucket, labels, Some(&le));
            let _ = writeln!(self.out, " {count}");
        }
        self.series(&bucket, labels, Some("+Inf"));
        let _ = writeln!(self.out, " {}", h.count);
        self.sample_seconds(&format!("{name}_sum"), labels, h.sum_us);
        self.sample(&format!("{name}_count"), labels, h.count);
    }

    /// The finished text.
    pub fn finish(self) -> String {
        self.out
    }

    /// `name{a="x",b="y",le="..."}` without the value.
    fn series(&mut self, name: &str, labels: &[(&str, &str)], le: Option<&str>) {
        self.out.push_str(name);
        if labels.is_empty() && le.is_none() {
            return;
        }
        self.out.push('{');
        let le = le.map(|v| ("le", v));
        for (i, (label, value)) in labels.iter().copied().chain(le).enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.out.push_str(label);
            self.out.push_str("=\"");
            push_escaped(&mut self.out, value);
            self.out.push('"');
        }
        self.out.push('}');
    }
}

/// Appends a label value escaped as the format requires: backslash, double
/// quote and line feed become `\\`, `\"` and `\n`. Upstream names come from
/// the operator's config, so they can hold any of these.
pub(crate) fn push_escaped(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Appends `micros` as decimal seconds without float rounding noise:
/// 2_500_000 → "2.5", 100 → "0.0001", 3_000_000 → "3".
pub(crate) fn push_seconds(out: &mut String, micros: u64) {
    let whole = micros / 1_000_000;
    let frac = micros % 1_000_000;
    let _ = write!(out, "{whole}");
    if frac != 0 {
        let digits = format!("{frac:06}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_backslash_quote_and_newline() {
        let mut e = Exposition::default();
        e.sample(
            "tern_x_total",
            &[("upstream", "a\\b\"c\nd"), ("server", "[::1]:80")],
            7,
        );
        assert_eq!(
            e.finish(),
            "tern_x_total{upstream=\"a\\\\b\\\"c\\nd\",server=\"[::1]:80\"} 7\n"
        );
    }

    #[test]
    fn families_have_help_and_type_and_unlabelled_series_no_braces() {
        let mut e = Exposition::default();
        e.family("tern_up", Kind::Gauge, "Always 1.");
        e.sample("tern_up", &[], 1);
        assert_eq!(
            e.finish(),
            "# HELP tern_up Always 1.\n# TYPE tern_up gauge\ntern_up 1\n"
        );
    }

    #[test]
    fn seconds_are_exact_decimals() {
        let s = |us| {
            let mut out = String::new();
            push_seconds(&mut out, us);
            out
        };
        assert_eq!(s(0), "0");
        assert_eq!(s(100), "0.0001");
        assert_eq!(s(2_500_000), "2.5");
        assert_eq!(s(10_000_000), "10");
        assert_eq!(s(1_234_567), "1.234567");
    }

    #[test]
    fn histograms_end_with_inf_sum_and_count() {
        let mut e = Exposition::default();
        let snapshot = HistogramSnapshot {
            cumulative: vec![(500, 1), (1_000_000, 2)],
            count: 3,
            sum_us: 2_000_300,
        };
        e.histogram("tern_h_seconds", &[("resumed", "true")], &snapshot);
        assert_eq!(
            e.finish(),
            "tern_h_seconds_bucket{resumed=\"true\",le=\"0.0005\"} 1\n\
             tern_h_seconds_bucket{resumed=\"true\",le=\"1\"} 2\n\
             tern_h_seconds_bucket{resumed=\"true\",le=\"+Inf\"} 3\n\
             tern_h_seconds_sum{resumed=\"true\"} 2.0003\n\
             tern_h_seconds_count{resumed=\"true\"} 3\n"
        );
    }
}
