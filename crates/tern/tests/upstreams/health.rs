//! Active health checks: `fall` failures mark a server down (no request
//! reaches it), `rise` successes mark it up again.

use std::time::Duration;

use tern_testsupport::backend::Backend;
use tern_testsupport::raw_backend::RawBackend;

use crate::{echo_answers, servers, start_front};

const TRANSITION_WAIT: Duration = Duration::from_secs(5);

/// Checked every 100 ms. The servers these tests stop or make answer 500
/// fail their checks at once; the timeout is far above the stall a loaded
/// machine can put on a live server's check (which would mark it down).
fn checked_group(addrs: &[std::net::SocketAddr]) -> String {
    format!(
        "[[upstream]]\nname = \"app\"\n{}\nhealth_check_path = \"/echo\"\n\
         health_check_interval = \"100ms\"\nhealth_check_timeout = \"5s\"\n\
         rise = 2\nfall = 2\n",
        servers(addrs)
    )
}

#[test]
fn stopped_backend_is_marked_down_and_up_again_when_it_returns() {
    let a = Backend::start();
    let b = Backend::start();
    let b_addr = b.addr();
    let front = start_front(2, &checked_group(&[a.addr(), b_addr]), "app", "");
    let both = echo_answers(&front, 8, 2);
    assert_eq!(both.len(), 2, "both backends serve while healthy: {both:?}");

    drop(b);
    front.wait_log(&["backend down", &b_addr.to_string()], TRANSITION_WAIT);
    let counts = echo_answers(&front, 20, 4);
    assert_eq!(
        counts.get(&a.addr().to_string()).copied(),
        Some(20),
        "{counts:?}"
    );
    assert!(
        !front
            .tern
            .stderr_text()
            .contains(&format!("connect to {b_addr}")),
        "a request was sent to the server marked down:\n{}",
        front.tern.stderr_text()
    );

    let b = Backend::start_on(b_addr);
    front.wait_log(&["backend up", &b_addr.to_string()], TRANSITION_WAIT);
    let counts = echo_answers(&front, 20, 4);
    let to_b = counts.get(&b.addr().to_string()).copied().unwrap_or(0);
    assert!(
        to_b >= 8,
        "the returned backend got {to_b} of 20: {counts:?}"
    );
}

#[test]
fn backend_answering_500_to_the_check_gets_no_requests() {
    let good = Backend::start();
    let bad = RawBackend::start(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n");
    let front = start_front(2, &checked_group(&[good.addr(), bad.addr()]), "app", "");
    front.wait_log(
        &["backend down", &bad.addr().to_string(), "status 500"],
        TRANSITION_WAIT,
    );
    let counts = echo_answers(&front, 20, 4);
    assert_eq!(
        counts.get(&good.addr().to_string()).copied(),
        Some(20),
        "{counts:?}"
    );

    let reads: Vec<String> = bad
        .first_reads()
        .iter()
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .collect();
    assert!(reads.len() >= 2, "fall = 2 needs two checks: {reads:?}");
    for read in &reads {
        assert!(read.starts_with("GET /echo HTTP/1.1\r\n"), "{read}");
        assert!(
            read.contains(&format!("Host: {}\r\n", bad.addr())),
            "{read}"
        );
        assert!(read.contains("Connection: close\r\n"), "{read}");
    }
}
