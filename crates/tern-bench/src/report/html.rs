//! The HTML report: one self-contained page (no script, no network) with
//! the warnings, the disclosure and the text figures, and inline SVG plots
//! of the latency distribution, completions per second, and throughput and
//! errors over time.

use std::fmt::Write;

use super::svg::{bar_chart, line_chart, Series};
use super::{text, Report};

/// Colours of targets 1..n, in order.
const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// Renders `report` as one HTML page.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    out.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tern bench report</title>\
         <style>body{font-family:sans-serif;margin:2em;max-width:1100px}pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:12px}\
         .warn{background:#fee;border:2px solid #c00;padding:.5em 1em;font-weight:bold}svg{display:block;margin:1em 0}</style>\
         </head><body>\n<h1>tern bench report</h1>\n",
    );
    if !report.warnings.is_empty() {
        out.push_str("<div class=\"warn\" id=\"warnings\"><p>The figures below are not comparable as they stand:</p><ul>");
        for w in &report.warnings {
            let _ = write!(out, "<li>{}</li>", escape(w));
        }
        out.push_str("</ul></div>\n");
    }
    for t in &report.targets {
        if let Some(server) = &t.server_cpu {
            let _ = writeln!(
                out,
                "<p class=\"server-cpu\">Server CPU for {}: {}</p>",
                escape(&t.url),
                escape(&server.describe())
            );
        }
    }
    out.push_str("<h2>Latency distribution</h2>\n");
    out.push_str(&latency_chart(report));
    out.push_str("<h2>Completions per second</h2>\n");
    let completions: Vec<Series<'_>> = report
        .targets
        .iter()
        .enumerate()
        .map(|(i, t)| Series {
            label: &t.url,
            color: COLORS[i % COLORS.len()],
            points: t
                .stats
                .series
                .iter()
                .enumerate()
                .map(|(s, b)| (s as f64, b.completed as f64))
                .collect(),
            dashed: false,
        })
        .collect();
    out.push_str(&bar_chart(
        "Completions per second",
        "seconds since start",
        "requests",
        &completions,
    ));
    out.push_str("<h2>Throughput and errors over time</h2>\n");
    let mut over_time = Vec::new();
    for (i, t) in report.targets.iter().enumerate() {
        over_time.push(Series {
            label: &t.url,
            color: COLORS[i % COLORS.len()],
            points: t
                .stats
                .series
                .iter()
                .enumerate()
                .map(|(s, b)| (s as f64, b.completed as f64))
                .collect(),
            dashed: false,
        });
    }
    let errors: Vec<(usize, Vec<(f64, f64)>)> = report
        .targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            (
                i,
                t.stats
                    .series
                    .iter()
                    .enumerate()
                    .map(|(s, b)| (s as f64, b.errors as f64))
                    .collect(),
            )
        })
        .collect();
    let error_labels: Vec<String> = report
        .targets
        .iter()
        .map(|t| format!("errors {}", t.url))
        .collect();
    for ((i, points), label) in errors.into_iter().zip(&error_labels) {
        over_time.push(Series {
            label,
            color: COLORS[i % COLORS.len()],
            points,
            dashed: true,
        });
    }
    out.push_str(&line_chart(
        "Requests and errors per second",
        "seconds since start",
        "per second",
        &over_time,
        false,
    ));
    out.push_str("<h2>Disclosure and figures</h2>\n<pre id=\"report\">");
    out.push_str(&escape(&text::render(report)));
    out.push_str("</pre>\n</body></html>\n");
    out
}

/// Latency by percentile on a log "nines" axis, as HdrHistogram plots do.
fn latency_chart(report: &Report) -> String {
    let series: Vec<Series<'_>> = report
        .targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let h = &t.stats.total;
            let points = (0..=40)
                .map(|k| {
                    // 0% .. 99.99%, evenly spaced in log(1/(1-q)).
                    let nines = k as f64 / 10.0;
                    let q = 1.0 - 10f64.powf(-nines);
                    (10f64.powf(nines), h.value_at_quantile(q) as f64 / 1000.0)
                })
                .collect();
            Series {
                label: &t.url,
                color: COLORS[i % COLORS.len()],
                points,
                dashed: false,
            }
        })
        .collect();
    line_chart(
        "Latency by percentile (x: 1/(1-q): 10 = p90, 100 = p99, 1000 = p99.9)",
        "1 / (1 - quantile)",
        "latency ms",
        &series,
        true,
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
