//! The HTTP/3 scripts of `bench/` in a short form: against the peers,
//! datagrams per request, and a new QUIC connection against a new TCP+TLS
//! one (issue 26's figures).

use super::{installed, run_script, table_rows};
use tern_testsupport::tools::ToolOutput;

/// `script` in one run of one round with `env` (nginx is the backend of
/// them all), once it ran to a successful end; `None` where nginx or
/// taskset is missing.
fn one_round(script: &str, env: &[(&str, &str)]) -> Option<ToolOutput> {
    if !installed("nginx") || !installed("taskset") {
        return None;
    }
    let mut all = vec![("RUNS", "1"), ("ROUNDS", "1")];
    all.extend_from_slice(env);
    let out = run_script(script, &all);
    assert!(out.success(), "{}", out.all());
    Some(out)
}

/// HTTP/3 against the peers, tern alone in its short form (Debian's nginx
/// and haproxy have no QUIC; the script leaves a server without it out and
/// says so): the run ends with its figure and no request failed.
#[test]
fn h3_peers_script_short_form() {
    let Some(out) = one_round(
        "h3-peers.sh",
        &[("DURATION", "1"), ("C", "2"), ("SERVERS", "tern nginx")],
    ) else {
        return;
    };
    let last = out.stdout.lines().last().unwrap_or("");
    assert!(
        last.starts_with("HTTP/3 server CPU per request (medians of runs): /100: tern "),
        "{}",
        out.all()
    );
    let rows = table_rows(&out, "| 1 |");
    // tern over h3 and h2, for 100 B and 1 MiB; nginx only if it has QUIC.
    assert!(rows.len() >= 4, "{}", out.all());
    for cells in rows {
        // | run | response | protocol | server | requests | failed | ...
        assert_eq!(cells[6], "0", "failed requests: {cells:?}");
        assert!(cells[11].starts_with(cells[3]), "negotiated: {cells:?}");
    }
}

/// bench/h3-datagrams.sh, tern alone in a short form, with eight streams
/// at once (a MAX_STREAMS update every second request): the client's QUIC
/// counters give datagrams per request each way, at least one (a request,
/// an answer) and far from 1.5, what updates sent in datagrams of their
/// own (and the client's ACKs of them) cost before quinn-proto patch 0014.
#[test]
fn h3_datagrams_script_counts_datagrams_each_way() {
    if !installed("nginx") || !installed("taskset") {
        return;
    }
    let out = run_script(
        "h3-datagrams.sh",
        &[
            ("N", "300"),
            ("C", "1"),
            ("SERVERS", "tern"),
            ("STRACE", "0"),
            ("SRV_TERN_ARGS", "--h3-max-streams 8"),
        ],
    );
    assert!(out.success(), "{}", out.all());
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with("tern "))
        .unwrap_or_else(|| panic!("no row for tern:\n{}", out.all()));
    let cells: Vec<&str> = row.split_whitespace().collect();
    for (way, cell) in [("to tern", cells[1]), ("from tern", cells[2])] {
        let per_request: f64 = cell.parse().unwrap_or(0.0);
        assert!(
            (1.0..1.25).contains(&per_request),
            "{per_request} datagrams {way} per request:\n{}",
            out.all()
        );
    }
}

/// bench/h3.sh with a new connection per request (issue 26's QUIC against
/// TCP+TLS figure) in a short form: every protocol's requests succeed, each
/// on its own handshake, and the run ends with HTTP/3 as a multiple of
/// HTTP/2 and of HTTP/1.1.
#[test]
fn h3_script_new_connection_short_form() {
    let Some(out) = one_round("h3.sh", &[("DURATION", "1"), ("C", "2"), ("PLANS", "new")]) else {
        return;
    };
    let rows = table_rows(&out, "| 1 | new 100 |");
    assert_eq!(rows.len(), 3, "one row per protocol: {}", out.all());
    for cells in rows {
        // | run | plan, response | protocol | requests | failed | ... | handshakes (resumed) |
        let requests: u64 = cells[4].parse().unwrap_or(0);
        assert!(requests > 0, "no request: {cells:?}");
        assert_eq!(cells[5], "0", "failed requests: {cells:?}");
        let handshakes: u64 = cells[11]
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        // A request cut off by the end of the run may have had its
        // handshake (at most one per connection slot, C).
        assert!(
            (requests..=requests + 2).contains(&handshakes),
            "a handshake per request: {cells:?}"
        );
    }
    for name in [
        "HTTP/2: new 100: ",
        "HTTP/1.1 (for the new plan: a new TCP+TLS connection): new 100: ",
    ] {
        assert!(
            out.stdout.contains(&format!(
                "tern HTTP/3 server CPU per request as a multiple of {name}"
            )),
            "{name}: {}",
            out.all()
        );
    }
}

/// bench/h3.sh with `RATE`: every protocol runs open loop at the one rate
/// (so QUIC and TCP+TLS are measured at the same load), and the heading
/// says so.
#[test]
fn h3_script_at_one_rate_runs_every_protocol_at_it() {
    let Some(out) = one_round(
        "h3.sh",
        &[
            ("DURATION", "2"),
            ("C", "4"),
            ("RATE", "10"),
            ("PLANS", "new"),
        ],
    ) else {
        return;
    };
    assert!(
        out.stdout.contains("--rate 10 (open loop)"),
        "the heading names the rate: {}",
        out.all()
    );
    let rows = table_rows(&out, "| 1 | new 100 |");
    assert_eq!(rows.len(), 3, "one row per protocol: {}", out.all());
    for cells in rows {
        // 10 a second for 2 s: 20 requests; closed loop, 4 connections
        // would have made hundreds.
        let requests: u64 = cells[4].parse().unwrap_or(0);
        assert!((12..=24).contains(&requests), "not at the rate: {cells:?}");
        assert_eq!(cells[5], "0", "failed requests: {cells:?}");
    }
}

/// bench/h3-clients.sh in a short form: a new QUIC connection per request
/// from tern bench and from quic-go (an implementation nobody at tern
/// wrote: a socket of its own per connection, and one socket per slot)
/// against tern serve, beside tern bench's TCP+TLS. Every client's
/// connections all succeed (the script stops on one that fails), and each
/// gets a row with tern's CPU per connection, the QUIC ones as a multiple
/// of TCP+TLS's.
#[test]
fn h3_clients_script_runs_tern_bench_and_quic_go() {
    if !installed("go") {
        return;
    }
    let Some(out) = one_round("h3-clients.sh", &[("N", "100"), ("WARM", "5"), ("C", "2")]) else {
        return;
    };
    for client in ["h1", "tern", "quic-go-own", "quic-go-shared"] {
        let rows = table_rows(&out, &format!("| {client} |"));
        assert_eq!(rows.len(), 1, "{client}: {}", out.all());
        // | client | µs per connection | rounds | connections/s | per round | median multiple |
        let cells = &rows[0];
        let us: f64 = cells[2].parse().unwrap_or(0.0);
        assert!(us > 0.0, "{client}: no CPU per connection: {cells:?}");
        if client != "h1" {
            let multiple: f64 = cells[6].parse().unwrap_or(0.0);
            assert!(multiple > 0.0, "{client}: no multiple of h1: {cells:?}");
        }
    }
}
