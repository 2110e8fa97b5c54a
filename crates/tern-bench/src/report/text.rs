//! The text report: warnings and disclosure first, then hey's summary,
//! histogram and latency distribution, phases, status codes and errors. In
//! compare mode, figures side by side with ratios to the first target.

use std::fmt::Write;

use super::{interval, Report, Summary, TargetReport, PERCENTILES};
use crate::config::{ConnectionPlan, HttpVersion, LoadModel};
use crate::env::Machine;

/// Bars of the response time histogram.
const HISTOGRAM_BARS: usize = 11;
/// Width of the longest bar.
const BAR_WIDTH: f64 = 40.0;

/// Renders the whole text report.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    if r.every_request_failed() {
        let _ = writeln!(out, "!!! FAILED: {}", failure_line(r));
        out.push('\n');
    }
    if !r.warnings.is_empty() {
        out.push_str("!!! WARNING: the figures below are not comparable as they stand !!!\n");
        for w in &r.warnings {
            let _ = writeln!(out, "!!! {w}");
        }
        out.push('\n');
    }
    if r.interrupted {
        out.push_str("(interrupted: figures cover the run until Ctrl-C)\n\n");
    }
    disclosure(&mut out, r);
    if r.targets.len() == 1 {
        single(&mut out, &r.targets[0], r);
    } else {
        compare(&mut out, r);
    }
    scale(&mut out, r);
    thresholds(&mut out, r);
    out
}

/// Load shapes and capacity searches, per target.
fn scale(out: &mut String, r: &Report) {
    for t in &r.targets {
        let lines: Vec<String> = match (&t.capacity, t.stages.is_empty()) {
            (Some(c), _) => crate::search::render(c),
            (None, false) => crate::stages::render(&t.stages),
            (None, true) => continue,
        };
        let what = if t.capacity.is_some() {
            "Capacity"
        } else {
            "Stages"
        };
        let _ = writeln!(out, "{what} ({}):", t.url);
        for l in lines {
            let _ = writeln!(out, "{l}");
        }
        out.push('\n');
    }
}

/// The gates, last: what a CI log shows at its end.
fn thresholds(out: &mut String, r: &Report) {
    if r.thresholds.is_empty() {
        return;
    }
    out.push_str("Thresholds:\n");
    let several = r.targets.len() > 1;
    for t in &r.thresholds {
        let value = match t.value {
            Some(v) if t.threshold.starts_with("errors") => format!("{:.3}%", v * 100.0),
            Some(v) => format!("{v:.3}"),
            None => "unknown".to_string(),
        };
        let target = if several {
            format!(" [{}]", t.target)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {}  {}{target}: {value}",
            if t.pass { "PASS" } else { "FAIL" },
            t.threshold
        );
    }
    out.push('\n');
}

/// What failed, in one line: the first thing a failed run's report says.
pub fn failure_line(r: &Report) -> String {
    let requests: u64 = r
        .targets
        .iter()
        .filter(|t| t.summary.completed == 0)
        .map(|t| t.summary.failed)
        .sum();
    match r.main_failure() {
        Some((kind, n)) => {
            format!("every request failed ({requests} requests; {n} x {kind})")
        }
        None => format!("every request failed ({requests} requests)"),
    }
}

/// The protocol part of the Plan line: one for the run, or one per target
/// in a protocol comparison.
fn http_names(r: &Report) -> String {
    let name = |h: HttpVersion| match h {
        HttpVersion::Http1 => "HTTP/1.1",
        HttpVersion::Http2 => "HTTP/2",
        HttpVersion::Http3 => "HTTP/3 over QUIC v1",
    };
    if r.targets.iter().all(|t| t.http.is_none()) {
        return name(r.plan.http).to_string();
    }
    r.targets
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{} [{}]", name(t.http.unwrap_or(r.plan.http)), i + 1))
        .collect::<Vec<_>>()
        .join(", ")
}

fn disclosure(out: &mut String, r: &Report) {
    let p = &r.plan;
    out.push_str("Disclosure:\n");
    let _ = writeln!(out, "  Tool:         {}", r.tool);
    for c in &r.command_lines {
        let _ = writeln!(out, "  Command:      {c}");
    }
    for t in &r.targets {
        let addrs: Vec<String> = t
            .addresses
            .iter()
            .map(|a| {
                let place = match (a.loopback, a.same_machine) {
                    (true, _) => "loopback, same machine",
                    (false, true) => "same machine",
                    (false, false) => "remote",
                };
                format!("{} ({place})", a.addr)
            })
            .collect();
        let _ = writeln!(out, "  Target:       {} -> {}", t.url, addrs.join(", "));
        let s = &t.summary;
        if r.plan.plain_http {
            continue;
        }
        if s.negotiated.is_empty() {
            let _ = writeln!(out, "    TLS:        no handshake completed");
        }
        for n in &s.negotiated {
            let share = 100.0 * n.count as f64 / s.handshakes.max(1) as f64;
            let g = &n.negotiated;
            let _ = writeln!(
                out,
                "    TLS:        {} {} group {} key {} ALPN {} ({share:.1}% of {} handshakes)",
                g.version, g.cipher, g.group, g.server_key, g.alpn, s.handshakes
            );
        }
        if let Some(q) = &s.quic {
            let _ = writeln!(
                out,
                "    QUIC:       v1, 0-RTT off, a UDP socket per connection (no client connection IDs); {} connections: {} datagrams sent, {} received, {} packets lost, {} congestion events, path MTU {}",
                q.connections,
                q.datagrams_sent,
                q.datagrams_received,
                q.packets_lost,
                q.congestion_events,
                q.max_path_mtu
            );
        }
        let _ = writeln!(
            out,
            "    Handshakes: {} on {} connections, {} resumed ({:.1}%), {:.0} bytes received per handshake, {:.1} TLS 1.3 tickets received per handshake",
            s.handshakes,
            s.connections,
            s.resumed,
            100.0 * s.resumed_fraction,
            s.handshake_bytes_mean,
            s.tickets_per_handshake
        );
        set_up(out, s);
        if t.http.unwrap_or(r.plan.http) != HttpVersion::Http3 {
            let full = s.handshakes - s.resumed;
            let compressed: u64 = s.cert_compressed.values().sum();
            let algs: Vec<String> = s
                .cert_compressed
                .iter()
                .map(|(alg, n)| format!("{alg} {n}"))
                .collect();
            let _ = writeln!(
                out,
                "    Cert compression: used on {compressed} of {full} full handshakes{}",
                if algs.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", algs.join(", "))
                }
            );
        }
    }
    let levels = |unit: &str| {
        let l: Vec<String> = p.stage_levels.iter().map(|l| format!("{l}")).collect();
        format!("{} {unit} by stage", l.join(", "))
    };
    let load = match p.load {
        LoadModel::Closed => "closed loop".to_string(),
        LoadModel::Open { .. } if !p.stage_levels.is_empty() => format!(
            "open loop at {} (latency from intended send time)",
            levels("req/s")
        ),
        LoadModel::Open { rate } => {
            format!("open loop at {rate:.0} req/s (latency from intended send time)")
        }
    };
    let connections = match p.load {
        LoadModel::Closed if !p.stage_levels.is_empty() => levels("connections"),
        _ => format!("{} connections", p.connections),
    };
    let plan = match p.connection_plan {
        ConnectionPlan::KeepAlive => "keepalive".to_string(),
        ConnectionPlan::NewConnection => "new connection per request".to_string(),
        ConnectionPlan::Resumed(_) => "new connection per request, resuming".to_string(),
    };
    let http = http_names(r);
    let tls = if p.plain_http {
        "no TLS (plain HTTP)".to_string()
    } else {
        format!("resumption asked: {}", p.resumption_asked)
    };
    let streams = match p.streams_per_connection {
        1 => "1 stream".to_string(),
        n => format!("{n} streams"),
    };
    let warmup = p
        .warmup
        .as_ref()
        .map(|w| format!("; after {w} of warm-up left out"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "  Plan:         {plan}; keepalive {}; {tls}; {http}; {connections} x {streams}; {load}; {} ({} round(s)){warmup}",
        if p.keepalive { "on" } else { "off" },
        p.stop,
        p.rounds
    );
    let _ = writeln!(out, "  Rounds hold:  {}", round_holds(p));
    if let Some(mix) = &p.request_mix {
        let _ = writeln!(out, "  Requests:     {mix}");
    }
    if !p.plain_http {
        let _ = writeln!(out, "  TLS offer:    {}; {}", p.tls_offer, p.verification);
    }
    let requests: u64 = r
        .targets
        .iter()
        .map(|t| t.summary.completed + t.summary.failed)
        .sum();
    for m in &r.machines {
        machine(out, m);
        if let Some(cpu) = m.client_cpu_s {
            let _ = writeln!(
                out,
                "  Client CPU:   {cpu:.2} s ({:.1} µs per request)",
                cpu * 1e6 / requests.max(1) as f64
            );
        }
    }
    for (i, t) in r.targets.iter().enumerate() {
        let Some(server) = &t.server_cpu else {
            continue;
        };
        let which = if r.targets.len() > 1 {
            format!("[{}] ", i + 1)
        } else {
            String::new()
        };
        let _ = writeln!(out, "  Server CPU:   {which}{}", server.describe());
    }
    out.push('\n');
}

/// What the figures of a round (its clock, its server CPU) hold.
fn round_holds(p: &crate::report::PlanInfo) -> String {
    if p.measured_after_set_up {
        let what = if p.plain_http {
            "TCP connect"
        } else {
            "handshake"
        };
        format!(
            "requests only: each round's {} connections were set up ({what}, HTTP/2 and HTTP/3 settings exchanged) before its clock and server CPU reading started, and closed after they ended",
            p.connections
        )
    } else if p.keepalive && !p.stage_levels.is_empty() {
        "requests, and each connection's set-up as its stage opens it".to_string()
    } else if p.keepalive {
        "requests, and each round's connection set-up (a report of an older version)".to_string()
    } else {
        "requests, each with its connection's set-up and close (a new connection per request)"
            .to_string()
    }
}

/// The target's connections set up before the rounds' clocks, when any were.
fn set_up(out: &mut String, s: &crate::report::Summary) {
    if s.connections_set_up == 0 && s.set_up_failed == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "    Set-up:     {} connections set up before the rounds' clocks, {} failed or timed out then; {} opened inside the rounds",
        s.connections_set_up,
        s.set_up_failed,
        s.connections.saturating_sub(s.connections_set_up)
    );
}

fn machine(out: &mut String, m: &Machine) {
    let load = |l: &Option<[f64; 3]>| match l {
        Some([a, b, c]) => format!("{a:.2} {b:.2} {c:.2}"),
        None => "unknown".to_string(),
    };
    let _ = writeln!(
        out,
        "  Machine:      {} ({}), {} cores used of {}; crypto: {} (AES-GCM {})",
        m.cpu_model,
        m.hostname,
        m.cores_used,
        m.cores_available,
        if m.cpu_features.is_empty() {
            "none".to_string()
        } else {
            m.cpu_features.join(" ")
        },
        if m.aes_gcm_accelerated {
            "in hardware"
        } else {
            "in software"
        }
    );
    let _ = writeln!(
        out,
        "  Load average: {} before, {} after",
        load(&m.load_before),
        load(&m.load_after)
    );
    let _ = writeln!(out, "  Firewall:     {}", m.firewall);
}

fn secs(ms: f64) -> String {
    format!("{:.4} secs", ms / 1000.0)
}

fn single(out: &mut String, t: &TargetReport, r: &Report) {
    let s = &t.summary;
    out.push_str("Summary:\n");
    let _ = writeln!(out, "  Total:\t{:.4} secs", s.elapsed_s);
    let _ = writeln!(out, "  Slowest:\t{}", secs(s.max_ms));
    let _ = writeln!(out, "  Fastest:\t{}", secs(s.min_ms));
    let _ = writeln!(out, "  Average:\t{}", secs(s.mean_ms));
    let _ = writeln!(out, "  Requests/sec:\t{:.4}", s.rps);
    // A load shape asks a rate per stage: the Stages table has each.
    if let (LoadModel::Open { rate }, true) = (r.plan.load, r.plan.stage_levels.is_empty()) {
        let _ = writeln!(out, "  Rate asked:\t{rate:.1}/s, achieved {:.1}/s", s.rps);
    }
    let _ = writeln!(out, "  Total data:\t{} bytes", s.body_bytes);
    let _ = writeln!(
        out,
        "  Size/request:\t{} bytes",
        s.body_bytes.checked_div(s.completed).unwrap_or(0)
    );
    out.push('\n');
    histogram(out, t);
    out.push_str("Latency distribution:\n");
    for p in PERCENTILES {
        let _ = writeln!(out, "  {p}% in {}", secs(s.percentile(p)));
    }
    out.push('\n');
    phases(out, s);
    status_and_errors(out, t);
}

fn histogram(out: &mut String, t: &TargetReport) {
    let h = &t.stats.total;
    if h.is_empty() {
        return;
    }
    out.push_str("Response time histogram:\n");
    let (lo, hi) = (h.min() as f64, h.max() as f64);
    let step = ((hi - lo) / (HISTOGRAM_BARS - 1) as f64).max(1.0);
    let mut counts = [0u64; HISTOGRAM_BARS];
    for v in h.iter_recorded() {
        let i =
            (((v.value_iterated_to() as f64 - lo) / step).round() as usize).min(HISTOGRAM_BARS - 1);
        counts[i] += v.count_since_last_iteration();
    }
    let max = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    for (i, c) in counts.iter().enumerate() {
        let mark = lo + step * i as f64;
        let bar = "■".repeat((*c as f64 / max * BAR_WIDTH).round() as usize);
        let _ = writeln!(out, "  {:.3} [{c}]\t|{bar}", mark / 1_000_000.0);
    }
    out.push('\n');
}

fn phases(out: &mut String, s: &Summary) {
    out.push_str("Details (count, mean, p50, p99, max):\n");
    for (name, label) in [
        ("dns", "DNS lookup"),
        ("connect", "TCP connect"),
        ("tls", "TLS handshake"),
        ("ttfb", "First byte"),
        ("body", "Body read"),
    ] {
        if let Some(p) = s.phases.get(name) {
            let _ = writeln!(
                out,
                "  {label:<14}\t{}\t{:.4} {:.4} {:.4} {:.4} secs",
                p.count,
                p.mean_ms / 1000.0,
                p.p50_ms / 1000.0,
                p.p99_ms / 1000.0,
                p.max_ms / 1000.0
            );
        }
    }
    out.push('\n');
}

fn status_and_errors(out: &mut String, t: &TargetReport) {
    out.push_str("Status code distribution:\n");
    for (code, n) in &t.stats.status {
        let _ = writeln!(out, "  [{code}]\t{n} responses");
    }
    out.push('\n');
    if !t.stats.errors.is_empty() {
        out.push_str("Error distribution:\n");
        for (kind, n) in &t.stats.errors {
            let _ = writeln!(out, "  [{n}]\t{kind}");
        }
        out.push('\n');
    }
}

/// A comparison row: label, overall figure, per-round figure (NaN: none).
type Row = (
    &'static str,
    fn(&Summary) -> f64,
    fn(&super::RoundFigures) -> f64,
);

fn compare(out: &mut String, r: &Report) {
    let base = &r.targets[0].summary;
    let ratio = |v: f64, b: f64| {
        if b > 0.0 {
            format!("{:.2}x", v / b)
        } else {
            "-".to_string()
        }
    };
    out.push_str(
        "Comparison (value; ratio to the first target with its 95% bootstrap interval over rounds, n.s. when it contains 1.0; spread across rounds):\n",
    );
    for (i, t) in r.targets.iter().enumerate() {
        let _ = writeln!(out, "  [{}] {}", i + 1, t.url);
    }
    let rows: [Row; 8] = [
        ("Requests/sec", |s| s.rps, |f| f.rps),
        ("Average ms", |s| s.mean_ms, |_| f64::NAN),
        ("p50 ms", |s| s.percentile(50.0), |f| f.p50_ms),
        ("p90 ms", |s| s.percentile(90.0), |_| f64::NAN),
        ("p99 ms", |s| s.percentile(99.0), |f| f.p99_ms),
        ("Slowest ms", |s| s.max_ms, |_| f64::NAN),
        (
            "TLS handshake p50 ms",
            |s| s.phases.get("tls").map_or(0.0, |p| p.p50_ms),
            |_| f64::NAN,
        ),
        ("Errors", |s| s.failed as f64, |f| f.errors as f64),
    ];
    let per_round = |t: &TargetReport, round: fn(&super::RoundFigures) -> f64| -> Vec<f64> {
        t.rounds.iter().map(round).filter(|x| !x.is_nan()).collect()
    };
    for (label, get, round) in rows {
        let _ = write!(out, "  {label:<22}");
        let base_rounds = per_round(&r.targets[0], round);
        for (i, t) in r.targets.iter().enumerate() {
            let v = get(&t.summary);
            let rounds = per_round(t, round);
            let sp = interval::spread(&rounds)
                .map(|s| format!(" ±{:.0}%", s * 100.0))
                .unwrap_or_default();
            let vs = match (i, interval::ratio(&base_rounds, &rounds)) {
                (0, _) => "base".to_string(),
                (_, Some(ci)) => ci.describe(),
                (_, None) => ratio(v, get(base)),
            };
            let _ = write!(out, "  {v:>10.3} ({vs}){sp}");
        }
        out.push('\n');
    }
    let _ = write!(out, "  {:<22}", "Resumed");
    for t in &r.targets {
        let _ = write!(
            out,
            "  {:>9.1}%{:<14}",
            100.0 * t.summary.resumed_fraction,
            ""
        );
    }
    out.push('\n');
    if r.targets.iter().any(|t| t.server_cpu.is_some()) {
        let per_request = |t: &TargetReport| t.server_cpu.as_ref().and_then(|s| s.us_per_request);
        let _ = write!(out, "  {:<22}", "Server CPU µs/request");
        for t in &r.targets {
            let few = if t.server_cpu.as_ref().is_some_and(|c| c.few_ticks()) {
                " (fewer than 100 ticks)"
            } else {
                ""
            };
            match (per_request(t), per_request(&r.targets[0])) {
                (Some(v), Some(b)) => {
                    let _ = write!(out, "  {v:>10.1} ({}){few}", ratio(v, b));
                }
                (Some(v), None) => {
                    let _ = write!(out, "  {v:>10.3} (-){:<6}", "");
                }
                (None, _) => {
                    let _ = write!(out, "  {:>10} (-){:<6}", "unknown", "");
                }
            }
        }
        out.push('\n');
    }
    out.push('\n');
    for t in &r.targets {
        let _ = writeln!(out, "{}:", t.url);
        status_and_errors(out, t);
    }
}
