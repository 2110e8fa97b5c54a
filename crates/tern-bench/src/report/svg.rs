//! Small inline SVG charts (line and bar), drawn by hand so the HTML report
//! needs no script and no network.

use std::fmt::Write;

/// Chart size in pixels.
const W: f64 = 720.0;
const H: f64 = 260.0;
/// Margins: left for the y labels, bottom for the x labels.
const ML: f64 = 60.0;
const MB: f64 = 36.0;
const MT: f64 = 24.0;
const MR: f64 = 16.0;

/// One data series.
pub struct Series<'a> {
    /// Legend label.
    pub label: &'a str,
    /// CSS colour.
    pub color: &'a str,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
    /// Draw dashed (errors next to the throughput of the same target).
    pub dashed: bool,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * mag >= v {
            return m * mag;
        }
    }
    10.0 * mag
}

struct Frame {
    x0: f64,
    x1: f64,
    ymax: f64,
    log_x: bool,
}

impl Frame {
    fn tx(&self, x: f64) -> f64 {
        let (a, b, x) = if self.log_x {
            (self.x0.log10(), self.x1.log10(), x.max(self.x0).log10())
        } else {
            (self.x0, self.x1, x)
        };
        let span = if b > a { b - a } else { 1.0 };
        ML + (x - a) / span * (W - ML - MR)
    }
    fn ty(&self, y: f64) -> f64 {
        H - MB - y / self.ymax * (H - MB - MT)
    }
}

fn frame_svg(out: &mut String, title: &str, x_label: &str, y_label: &str, f: &Frame) {
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img"><title>{t}</title><rect width="100%" height="100%" fill="#fff"/><text x="{cx}" y="16" text-anchor="middle" font-size="13" font-weight="bold">{t}</text>"##,
        t = escape(title),
        cx = W / 2.0
    );
    for i in 0..=4 {
        let y = f.ymax * i as f64 / 4.0;
        let py = f.ty(y);
        let _ = write!(
            out,
            r##"<line x1="{ML}" x2="{x2}" y1="{py:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{lx}" y="{ty:.1}" text-anchor="end" font-size="10">{y}</text>"##,
            x2 = W - MR,
            lx = ML - 4.0,
            ty = py + 3.0,
            y = trim(y)
        );
    }
    let ticks: Vec<f64> = if f.log_x {
        let mut v = Vec::new();
        let mut t = 10f64.powf(f.x0.log10().floor());
        while t <= f.x1 * 1.0001 {
            if t >= f.x0 {
                v.push(t);
            }
            t *= 10.0;
        }
        v
    } else {
        (0..=5)
            .map(|i| f.x0 + (f.x1 - f.x0) * i as f64 / 5.0)
            .collect()
    };
    for x in ticks {
        let px = f.tx(x);
        let _ = write!(
            out,
            r#"<text x="{px:.1}" y="{y}" text-anchor="middle" font-size="10">{l}</text>"#,
            y = H - MB + 14.0,
            l = trim(x)
        );
    }
    let _ = write!(
        out,
        r##"<line x1="{ML}" x2="{ML}" y1="{MT}" y2="{b}" stroke="#000"/><line x1="{ML}" x2="{r}" y1="{b}" y2="{b}" stroke="#000"/><text x="{cx}" y="{ly}" text-anchor="middle" font-size="11">{xl}</text><text x="12" y="{cy}" text-anchor="middle" font-size="11" transform="rotate(-90 12 {cy})">{yl}</text>"##,
        b = H - MB,
        r = W - MR,
        cx = (W + ML) / 2.0,
        ly = H - 4.0,
        cy = (H - MB + MT) / 2.0,
        xl = escape(x_label),
        yl = escape(y_label)
    );
}

fn legend(out: &mut String, series: &[Series<'_>]) {
    for (i, s) in series.iter().enumerate() {
        let y = MT + 6.0 + 14.0 * i as f64;
        let _ = write!(
            out,
            r#"<rect x="{x}" y="{y}" width="10" height="10" fill="{c}"/><text x="{tx}" y="{ty}" font-size="10">{l}</text>"#,
            x = W - MR - 180.0,
            c = escape(s.color),
            tx = W - MR - 165.0,
            ty = y + 9.0,
            l = escape(s.label)
        );
    }
}

fn trim(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// A line chart; `log_x` for latency-by-percentile style axes.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series<'_>],
    log_x: bool,
) -> String {
    let all = || series.iter().flat_map(|s| s.points.iter());
    let x0 = all().map(|p| p.0).fold(f64::MAX, f64::min);
    let x1 = all().map(|p| p.0).fold(f64::MIN, f64::max);
    let (x0, x1) = if x0 <= x1 { (x0, x1) } else { (0.0, 1.0) };
    let x0 = if log_x { x0.max(1e-3) } else { x0 };
    lines(title, x_label, y_label, series, (x0, x1), log_x)
}

/// A line chart over time from 0 to `end` seconds; a NaN point breaks a
/// line (a target's rounds, apart).
pub fn time_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series<'_>],
    end: f64,
) -> String {
    lines(title, x_label, y_label, series, (0.0, end), false)
}

fn lines(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series<'_>],
    (x0, x1): (f64, f64),
    log_x: bool,
) -> String {
    let all = || {
        series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| !p.1.is_nan())
    };
    let f = Frame {
        x0,
        x1: if x1 > x0 { x1 } else { x0 + 1.0 },
        ymax: nice_max(all().map(|p| p.1).fold(0.0, f64::max)),
        log_x,
    };
    let mut out = String::new();
    frame_svg(&mut out, title, x_label, y_label, &f);
    for s in series {
        for part in s.points.split(|p| p.0.is_nan() || p.1.is_nan()) {
            if part.is_empty() {
                continue;
            }
            let pts: Vec<String> = part
                .iter()
                .map(|(x, y)| format!("{:.1},{:.1}", f.tx(*x), f.ty(*y)))
                .collect();
            let _ = write!(
                out,
                r#"<polyline fill="none" stroke="{}" stroke-width="1.8"{} points="{}"/>"#,
                escape(s.color),
                if s.dashed {
                    r#" stroke-dasharray="6 4""#
                } else {
                    ""
                },
                pts.join(" ")
            );
        }
        // Markers keep short series (a one-second run) visible.
        if s.points.len() <= 60 {
            for (x, y) in s.points.iter().filter(|p| !p.1.is_nan()) {
                let _ = write!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{}"/>"#,
                    f.tx(*x),
                    f.ty(*y),
                    escape(s.color)
                );
            }
        }
    }
    legend(&mut out, series);
    out.push_str("</svg>");
    out
}

/// A bar chart of one series over integer x positions (seconds).
pub fn bar_chart(title: &str, x_label: &str, y_label: &str, series: &[Series<'_>]) -> String {
    let n = series
        .iter()
        .map(|s| s.points.len())
        .max()
        .unwrap_or(0)
        .max(1);
    let f = Frame {
        x0: 0.0,
        x1: n as f64,
        ymax: nice_max(
            series
                .iter()
                .flat_map(|s| s.points.iter())
                .map(|p| p.1)
                .fold(0.0, f64::max),
        ),
        log_x: false,
    };
    let mut out = String::new();
    frame_svg(&mut out, title, x_label, y_label, &f);
    let slot = (W - ML - MR) / n as f64;
    let bw = slot / series.len().max(1) as f64 * 0.9;
    for (k, s) in series.iter().enumerate() {
        for (x, y) in &s.points {
            let px = f.tx(*x) + bw * k as f64;
            let py = f.ty(*y);
            let _ = write!(
                out,
                r#"<rect x="{px:.1}" y="{py:.1}" width="{bw:.1}" height="{h:.1}" fill="{c}"/>"#,
                h = (H - MB - py).max(0.0),
                c = escape(s.color)
            );
        }
    }
    legend(&mut out, series);
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_closed_svg_with_escaped_labels() {
        let s = [Series {
            label: "a<b",
            color: "#c00",
            points: vec![(1.0, 2.0), (2.0, 5.0)],
            dashed: false,
        }];
        for svg in [
            line_chart("t", "x", "y", &s, true),
            bar_chart("t", "x", "y", &s),
        ] {
            assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
            assert!(svg.contains("a&lt;b") && !svg.contains("a<b"));
        }
    }
}
