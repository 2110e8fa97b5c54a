//! The HTML report: one self-contained page (no script, no network) with
//! the warnings, the disclosure and the text figures, and inline SVG plots
//! of the latency distribution, completions per second, and throughput and
//! errors over time.

use std::fmt::Write;

use super::svg::{line_chart, time_chart, Series};
use super::{text, Report};

/// Colours of targets 1..n, in order.
const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// Reds and oranges for the error series, apart from the target colours.
const ERROR_COLORS: [&str; 3] = ["#c00000", "#e65c00", "#99004d"];

/// Renders `report` as one HTML page.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    out.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tern bench report</title>\
         <style>body{font-family:sans-serif;margin:2em}pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:12px}\
         .warn{background:#fee;border:2px solid #c00;padding:.5em 1em;font-weight:bold}svg{display:block;margin:1em 0;width:100%;height:auto}\
         .figures{display:grid;grid-template-columns:repeat(auto-fit,minmax(11em,1fr));gap:.5em}\
         .figure{background:#f3f6fa;padding:.6em 1em;border-radius:4px}.figure .value{display:block;font-size:1.8em;font-weight:bold}\
         .figure.bad{background:#fee;color:#c00}.thresholds{list-style:none;padding:0}.pass{color:#070}.fail{color:#c00;font-weight:bold}</style>\
         </head><body>\n<h1>tern bench report</h1>\n",
    );
    if report.every_request_failed() {
        let _ = writeln!(
            out,
            "<div class=\"warn\" id=\"failed\"><p>FAILED: {}</p></div>",
            escape(&text::failure_line(report))
        );
    }
    if !report.warnings.is_empty() {
        out.push_str("<div class=\"warn\" id=\"warnings\"><p>The figures below are not comparable as they stand:</p><ul>");
        for w in &report.warnings {
            let _ = write!(out, "<li>{}</li>", escape(w));
        }
        out.push_str("</ul></div>\n");
    }
    out.push_str(&headline(report));
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
    out.push_str("<h2>Over time</h2>\n");
    out.push_str(&time_charts(report));
    out.push_str("<h2>Disclosure and figures</h2>\n<pre id=\"report\">");
    out.push_str(&escape(&text::render(report)));
    out.push_str("</pre>\n</body></html>\n");
    out
}

/// The key figures of each target, full width, before anything else:
/// requests/s, p50, p99, errors, server CPU per request and the
/// thresholds' verdicts. Each value has an id (`t1-rps`, `t1-p50`, ...)
/// that the Chromium test reads back and compares with the JSON.
fn headline(report: &Report) -> String {
    let mut out = String::from("<section id=\"headline\">\n");
    for (i, t) in report.targets.iter().enumerate() {
        let n = i + 1;
        let s = &t.summary;
        let all = s.completed + s.failed;
        let share = if all > 0 {
            s.failed as f64 / all as f64 * 100.0
        } else {
            0.0
        };
        let cpu = t
            .server_cpu
            .as_ref()
            .map_or("unknown".to_string(), |c| c.headline_text());
        let _ = writeln!(
            out,
            "<div class=\"target\" id=\"t{n}\"><h2>[{n}] {}</h2><div class=\"figures\">",
            escape(&t.url)
        );
        let figures = [
            ("rps", format!("{:.1}", s.rps), "requests/s", false),
            (
                "p50",
                format!("{:.3} ms", s.percentile(50.0)),
                "p50 latency",
                false,
            ),
            (
                "p99",
                format!("{:.3} ms", s.percentile(99.0)),
                "p99 latency",
                false,
            ),
            (
                "errors",
                format!("{} ({share:.2}%)", s.failed),
                "errors",
                s.failed > 0,
            ),
            ("cpu", cpu, "server CPU per request", false),
        ];
        for (id, value, label, bad) in figures {
            let _ = writeln!(
                out,
                "<div class=\"figure{}\"><span class=\"value\" id=\"t{n}-{id}\">{}</span><span class=\"label\">{label}</span></div>",
                if bad { " bad" } else { "" },
                escape(&value)
            );
        }
        out.push_str("</div>\n");
        let checks: Vec<_> = report
            .thresholds
            .iter()
            .filter(|c| c.target == t.url)
            .collect();
        if !checks.is_empty() {
            let _ = write!(out, "<ul class=\"thresholds\" id=\"t{n}-thresholds\">");
            for c in checks {
                let value = c.value.map_or("unknown".to_string(), |v| format!("{v:.3}"));
                let (class, verdict) = if c.pass {
                    ("pass", "PASS")
                } else {
                    ("fail", "FAIL")
                };
                let _ = write!(
                    out,
                    "<li class=\"{class}\">{verdict} {}: {value}</li>",
                    escape(&c.threshold)
                );
            }
            out.push_str("</ul>\n");
        }
        out.push_str("</div>\n");
    }
    out.push_str("</section>\n");
    out
}

/// Completions and errors per second on the run's wall clock: each round
/// of each target where it ran (a gap where another target ran), partial
/// seconds at a round's end scaled to a rate instead of drawn as a dip,
/// errors in a chart of their own.
fn time_charts(report: &Report) -> String {
    let end = report
        .targets
        .iter()
        .flat_map(|t| t.timeline.iter())
        .map(|s| s.start_s + s.elapsed_s)
        .fold(0.0, f64::max);
    let rates = |t: &super::TargetReport, errors: bool| -> Vec<(f64, f64)> {
        let mut points = Vec::new();
        for span in &t.timeline {
            for (i, b) in span.series.iter().enumerate() {
                let covered = (span.elapsed_s - i as f64).clamp(1e-3, 1.0);
                // The sliver of a second a round ends in is too short to
                // give a rate; a round shorter than a second is its own
                // single point.
                if covered < 0.25 && i > 0 {
                    continue;
                }
                let n = if errors { b.errors } else { b.completed };
                points.push((span.start_s + i as f64 + covered / 2.0, n as f64 / covered));
            }
            points.push((f64::NAN, f64::NAN));
        }
        points
    };
    let requests: Vec<Series<'_>> = report
        .targets
        .iter()
        .enumerate()
        .map(|(i, t)| Series {
            label: &t.url,
            color: COLORS[i % COLORS.len()],
            points: rates(t, false),
            dashed: false,
        })
        .collect();
    let error_labels: Vec<String> = report
        .targets
        .iter()
        .map(|t| format!("errors {}", t.url))
        .collect();
    let errors: Vec<Series<'_>> = report
        .targets
        .iter()
        .zip(&error_labels)
        .enumerate()
        .map(|(i, (t, label))| Series {
            label,
            color: ERROR_COLORS[i % ERROR_COLORS.len()],
            points: rates(t, true),
            dashed: true,
        })
        .collect();
    let mut out = String::from("<div id=\"requests-over-time\">");
    out.push_str(&time_chart(
        "Completed requests per second",
        "seconds since the run started",
        "requests/s",
        &requests,
        end,
    ));
    out.push_str("</div>\n<div id=\"errors-over-time\">");
    out.push_str(&time_chart(
        "Failed requests per second",
        "seconds since the run started",
        "errors/s",
        &errors,
        end,
    ));
    out.push_str("</div>\n");
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
