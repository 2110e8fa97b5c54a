//! Servers that answer but fail: outlier detection (`consecutive_5xx`)
//! with slow start, and retries on another server under the group's
//! retry budget. Real tern, real hyper backends (HTTP/1.1 and h2c) told
//! to answer 503 mid-run, the access log and /metrics.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tern_testsupport::backend::Backend;
use tern_testsupport::tern::{eventually, Served};

use crate::servers;

/// tern with 2 workers, an admin listener, the access log on stdout, the
/// `[[upstream]]` tables in `upstreams` and one listener for `localhost`
/// and `api.test` forwarding to the group `app`, then `listener_extra`.
fn start(upstreams: &str, listener_extra: &str) -> Served {
    Served::builder()
        .cert_names(&["localhost", "api.test"])
        .no_backend()
        .admin()
        .config(|c| {
            format!(
                "workers = 2\naccess_log = \"-\"\nadmin = \"{admin}\"\n\n{upstreams}\n\
                 [[listener]]\nlisten = \"{addr}\"\nupstream = \"app\"\n\
                 cert = {chain:?}\nkey = {key:?}\n{listener_extra}\n",
                admin = c.admin(),
                addr = c.listen,
                chain = c.chain(),
                key = c.key(),
            )
        })
        .start()
}

/// Statuses of `n` GET /echo for `host` on one keepalive connection, with
/// the backend that answered each 200.
fn statuses(front: &Served, host: &str, n: usize) -> Vec<(u16, String)> {
    let mut conn = front.connect();
    (0..n)
        .map(|_| {
            let r = conn
                .get(host, "/echo")
                .unwrap_or_else(|e| panic!("GET /echo: {e}\n{}", front.tern.stderr_text()));
            let backend = if r.status == 200 {
                r.json()["backend"].as_str().unwrap_or("").to_string()
            } else {
                String::new()
            };
            (r.status, backend)
        })
        .collect()
}

/// Access-log lines on stdout containing `needle`, once at least `lines`
/// request lines were written (the log is flushed every 100 ms).
fn log_lines(front: &Served, lines: usize, needle: &str) -> usize {
    let written = || front.tern.stdout_text().matches(" status=").count();
    assert!(
        eventually(Duration::from_secs(5), || written() >= lines),
        "{} access-log lines of {lines}",
        written()
    );
    front.tern.stdout_text().matches(needle).count()
}

#[test]
fn a_server_answering_503_is_ejected_then_ramps_back_up_slowly() {
    let backends: Vec<Backend> = (0..3).map(|_| Backend::start()).collect();
    let addrs: Vec<SocketAddr> = backends.iter().map(Backend::addr).collect();
    // No retries: what the clients see is what outlier detection alone does.
    let upstreams = format!(
        "[[upstream]]\nname = \"app\"\n{}\nconsecutive_5xx = 3\nfail_timeout = \"2s\"\n\
         slow_start = \"10s\"\nretry_budget = 0\n",
        servers(&addrs)
    );
    let front = start(&upstreams, "");
    let warm = statuses(&front, "localhost", 30);
    assert!(warm.iter().all(|(s, _)| *s == 200), "{warm:?}");

    // One of three starts answering 503 under a steady stream of requests.
    backends[0].fail_with(Some(503));
    let broke = Instant::now();
    let run = statuses(&front, "localhost", 60);
    let errors = run.iter().filter(|(s, _)| *s == 503).count();
    front.wait_log(
        &["ejected", &addrs[0].to_string(), "3 5xx"],
        Duration::from_secs(5),
    );
    if broke.elapsed() < Duration::from_secs(2) {
        // Still within the ejection: exactly the 3 responses that ejected it.
        assert_eq!(errors, 3, "{run:?}");
    }
    assert!(errors <= 6, "{errors} errors of 60: {run:?}");
    eprintln!(
        "{errors} of 60 requests (one client, keepalive) got the failing server's 503 \
         before it was ejected"
    );

    // It heals; once its ejection is over it comes back with a tenth of
    // its weight, ramping to all of it over slow_start.
    backends[0].fail_with(None);
    let back_from = backends[0].requests();
    let deadline = Instant::now() + Duration::from_secs(10);
    while backends[0].requests() == back_from {
        assert!(
            Instant::now() < deadline,
            "the healed server never came back"
        );
        statuses(&front, "localhost", 5);
    }
    // The ramp is 10 s of tern's clock and the test counts batches of
    // 30: on an idle machine a batch takes milliseconds, on a loaded one
    // (load average 25) about a second, and a 3 s ramp then fitted only
    // three batches, its first two already near a full share. A third
    // of the requests needs about 7 s of the ramp.
    let mut shares = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let batch = statuses(&front, "localhost", 30);
        assert!(batch.iter().all(|(s, _)| *s == 200), "{batch:?}");
        let mine = batch
            .iter()
            .filter(|(_, b)| *b == addrs[0].to_string())
            .count();
        shares.push(mine);
        if mine >= 8 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "its share never reached a third: {shares:?}"
        );
    }
    eprintln!("the returning server's requests per batch of 30: {shares:?}");
    assert!(shares.len() >= 3, "no ramp seen: {shares:?}");
    let early: usize = shares.iter().take(2).sum();
    assert!(
        early <= 10,
        "full share at once after coming back: {shares:?}"
    );
}

#[test]
fn a_single_failing_servers_503s_are_hidden_by_retries_on_http1_and_h2c_groups() {
    let h1: Vec<Backend> = (0..3).map(|_| Backend::start()).collect();
    let h2: Vec<Backend> = (0..3).map(|_| Backend::start_h2c()).collect();
    h1[0].fail_with(Some(503));
    h2[0].fail_with(Some(503));
    let h1_addrs: Vec<SocketAddr> = h1.iter().map(Backend::addr).collect();
    let h2_addrs: Vec<SocketAddr> = h2.iter().map(Backend::addr).collect();
    let upstreams = format!(
        "[[upstream]]\nname = \"app\"\n{}\nretry_budget = 50\n\n\
         [[upstream]]\nname = \"h2\"\nprotocol = \"h2c\"\n{}\nretry_budget = 50\n",
        servers(&h1_addrs),
        servers(&h2_addrs)
    );
    let front = start(
        &upstreams,
        "[[listener.route]]\nhost = \"api.test\"\nupstream = \"h2\"\n",
    );
    for host in ["localhost", "api.test"] {
        let run = statuses(&front, host, 60);
        let failed: Vec<_> = run.iter().filter(|(s, _)| *s != 200).collect();
        assert!(
            failed.is_empty(),
            "{host}: {failed:?}\n{}",
            front.tern.stderr_text()
        );
    }
    let tried = h1[0].requests() + h2[0].requests();
    assert!(
        h1[0].requests() > 0 && h2[0].requests() > 0,
        "the failing servers were never tried"
    );
    assert_eq!(log_lines(&front, 120, " retry=503"), tried);
    let scrape = front.scrape();
    for (group, backend) in [("app", &h1[0]), ("h2", &h2[0])] {
        let labels = [("upstream", group), ("reason", "status")];
        assert_eq!(
            scrape.get("tern_upstream_retries_total", &labels),
            Some(backend.requests() as f64),
            "{group}"
        );
    }
}

#[test]
fn with_every_server_failing_retries_stay_within_the_budget() {
    let backends: Vec<Backend> = (0..3).map(|_| Backend::start()).collect();
    for b in &backends {
        b.fail_with(Some(503));
    }
    let addrs: Vec<SocketAddr> = backends.iter().map(Backend::addr).collect();
    let upstreams = format!("[[upstream]]\nname = \"app\"\n{}\n", servers(&addrs));
    let front = start(&upstreams, "");
    const REQUESTS: usize = 200;
    let mut answered = 0;
    for _ in 0..4 {
        let run = statuses(&front, "localhost", REQUESTS / 4);
        assert!(run.iter().all(|(s, _)| *s == 503), "{run:?}");
        answered += run.len();
    }
    // A request's retries are counted once its response is out, before its
    // access-log line: with every line written, every count is in.
    let twice_retried = log_lines(&front, REQUESTS, "retry=503,");
    let scrape = front.scrape();
    let retries = scrape
        .get(
            "tern_upstream_retries_total",
            &[("upstream", "app"), ("reason", "status")],
        )
        .unwrap_or(0.0) as usize;
    let denied = scrape
        .get("tern_upstream_retries_denied_total", &[("upstream", "app")])
        .unwrap_or(0.0) as usize;
    let sent: usize = backends.iter().map(Backend::requests).sum();
    eprintln!(
        "{answered} requests, every server failing: {retries} retried, {denied} refused by \
         the budget, {sent} requests reached the servers"
    );
    // Each request wanted one retry: the budget (20 % of requests, and a
    // burst of 10 per worker, 2 workers) granted some and refused the rest.
    assert_eq!(retries + denied, REQUESTS);
    assert!(retries <= REQUESTS / 5 + 2 * 10, "{retries} retries");
    assert!(
        retries >= REQUESTS / 5,
        "{retries} retries: the budget was not spent"
    );
    assert_eq!(sent, REQUESTS + retries);
    assert_eq!(twice_retried, 0, "one retry at most");
    assert_eq!(log_lines(&front, REQUESTS, " retry=budget"), denied);
}
