//! The backend pool follows demand: with default settings, HTTP/2 clients
//! multiplexing many streams over few connections never cost a backend
//! connection per request (issue 26).

use std::time::Duration;

use tern_testsupport::tern::Served;
use tern_testsupport::tools::run_tool;

/// Requests h2load makes: many times the streams in flight, so a pool that
/// churns opens far more connections than the bound below.
const REQUESTS: usize = 4000;
/// h2load's connections and streams per connection: at most
/// `CLIENTS * STREAMS` requests are in flight at once.
const CLIENTS: usize = 50;
const STREAMS: usize = 10;

#[test]
fn multiplexed_h2_load_opens_no_more_backend_connections_than_streams_in_flight() {
    let served = Served::start(&[]);
    let url = format!("https://127.0.0.1:{}/bytes/100", served.addr.port());
    let (n, c, m) = (
        REQUESTS.to_string(),
        CLIENTS.to_string(),
        STREAMS.to_string(),
    );
    let out = run_tool(
        "h2load",
        ["-n", &n, "-c", &c, "-m", &m, &url],
        b"",
        Duration::from_secs(180),
    );
    assert!(out.success(), "{}", out.all());
    assert!(
        out.stdout.contains("Application protocol: h2"),
        "{}",
        out.all()
    );
    assert!(
        out.stdout
            .contains(&format!("{REQUESTS} succeeded, 0 failed")),
        "{}",
        out.all()
    );
    let opened = served.backend().connections();
    assert!(
        opened <= CLIENTS * STREAMS,
        "{opened} backend connections for {REQUESTS} requests, at most {} in flight",
        CLIENTS * STREAMS
    );
}
