//! HTTP/3 address validation: past `quic_retry_above` QUIC handshakes
//! under way on a worker, new clients get a stateless Retry first (one
//! more round trip) and come back with a token. Real clients (aioquic)
//! and a first flight whose handshake never ends, as a spoofed Initial's.

use std::time::Duration;

use tern_testsupport::tern::{wait_until, Served};
use tern_testsupport::tools::run_tool;

use crate::clients::{program, CLIENT_TIMEOUT};
use crate::h3::{answers, h3_client, h3_client_args, python_with_aioquic, H3Run};

/// tern on one worker with `--quic-retry-above threshold` and more flags.
fn served_with_threshold(threshold: &str, more: &[&str]) -> Served {
    let mut args = vec!["--http3", "--quic-retry-above", threshold, "--workers", "1"];
    args.extend_from_slice(more);
    Served::builder().args(&args).admin().start()
}

/// `connections` aioquic clients of one request each, all at once or one
/// after another; checks each was answered 200.
fn clients_served(python: &str, served: &Served, connections: usize, one_by_one: bool) {
    let run = H3Run {
        connections,
        ..H3Run::default()
    };
    let mut command = std::process::Command::new(python);
    command.args(h3_client_args(served, &run));
    if one_by_one {
        command.env("SEQUENTIAL", "1");
    }
    let out = tern_testsupport::tools::run_command(command, b"", CLIENT_TIMEOUT);
    let lines = answers(&out);
    assert_eq!(lines.len(), connections, "{}", out.all());
    assert!(lines.iter().all(|l| l["status"] == 200), "{lines:?}");
}

fn retries(served: &Served) -> f64 {
    served.scrape().sum("tern_quic_retries_total", &[])
}

#[test]
fn new_connections_past_the_retry_threshold_prove_their_address() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    // 0: every new connection gets a Retry first; aioquic answers it.
    let served = Served::builder()
        .args(&["--http3", "--quic-retry-above", "0"])
        .admin()
        .start();
    let lines = answers(&h3_client(&python, &served, &H3Run::default()));
    assert_eq!(lines[0]["status"], 200);
    let scrape = served.scrape();
    assert!(
        scrape.sum("tern_quic_retries_total", &[]) >= 1.0,
        "no Retry counted"
    );
    assert!(
        scrape.sum(
            "tern_http_requests_total",
            &[("protocol", "h3"), ("code", "200")]
        ) >= 1.0,
        "h3 requests are counted under protocol=\"h3\""
    );
}

#[test]
fn a_burst_of_new_connections_gets_retries_and_every_client_is_served() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    // Thirty clients at once against a threshold of five handshakes under
    // way: the first five handshake at once, the ones arriving while five
    // are under way prove their address first (one more round trip), and
    // all are served.
    let served = served_with_threshold("5", &[]);
    clients_served(&python, &served, 30, false);
    let retries = retries(&served);
    assert!(retries >= 1.0, "no Retry in a burst of 30 connections");
    assert!(
        retries <= 25.0,
        "{retries} Retries: the first five need none"
    );
}

#[test]
fn clients_whose_handshakes_end_get_no_retry_however_fast_they_come() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    // Twenty connections one after another, each handshake over before
    // the next begins: never more than the threshold of one under way,
    // so no Retry (a threshold of one new connection a second would have
    // sent nineteen).
    let served = served_with_threshold("1", &[]);
    clients_served(&python, &served, 20, true);
    assert_eq!(
        served.scrape().sum("tern_tls_handshakes_total", &[]),
        20.0,
        "twenty handshakes"
    );
    assert_eq!(retries(&served), 0.0);
}

/// Sends a QUIC first flight to `served` and nothing more: a handshake
/// that stays under way until handshake_timeout.
fn unfinished_handshake(python: &str, served: &Served) {
    let port = served.addr.port().to_string();
    let script = program("quic_initial.py").display().to_string();
    let sent = run_tool(
        python,
        [script.as_str(), "127.0.0.1", port.as_str(), "localhost"],
        b"",
        CLIENT_TIMEOUT,
    );
    assert!(sent.success(), "{}", sent.all());
}

#[test]
fn a_handshake_that_never_ends_sends_the_next_client_through_a_retry() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    // handshake_timeout's default (10 s): the unfinished handshake is
    // still under way when the client comes.
    let served = served_with_threshold("1", &[]);
    unfinished_handshake(&python, &served);
    clients_served(&python, &served, 1, false);
    // One, or more when the client sent its Initial again before the
    // Retry reached it (aioquic does after 200 ms; tern answers each copy
    // statelessly, and the client takes the first).
    let retries = retries(&served);
    assert!(
        retries >= 1.0,
        "the client behind an unfinished handshake got no Retry"
    );
}

#[test]
fn a_handshake_that_timed_out_is_no_longer_under_way() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    let served = served_with_threshold("1", &["--handshake-timeout", "1s"]);
    unfinished_handshake(&python, &served);
    wait_until(
        "the unfinished handshake timed out",
        Duration::from_secs(20),
        || {
            served.scrape().sum(
                "tern_tls_handshake_failures_total",
                &[("reason", "timeout")],
            ) >= 1.0
        },
    );
    // None under way now: the next client goes straight to its handshake.
    clients_served(&python, &served, 1, false);
    assert_eq!(retries(&served), 0.0);
}
