//! A backend that fails mid-response (killed, reset, a chunked body cut,
//! stalled): an HTTP/1.1 or HTTP/2 client gets a clean error status or a
//! response that ends as truncated (a close before the declared length, no
//! last chunk, RST_STREAM), never a complete-looking success; other clients
//! are served meanwhile, and the pool recovers (a failed backend connection
//! is never reused). The origin is bench/fault_origin.py, the same one
//! bench/backend-faults.sh measures nginx and haproxy with.

use std::time::{Duration, Instant};

use tern_testsupport::python_origin::PythonOrigin;
use tern_testsupport::tern::Served;

/// Faults after the response head: the client must see a truncation.
const MID_RESPONSE: [&str; 4] = ["/kill", "/reset", "/chunked-cut", "/stall"];

/// tern's backend read deadline here (the stall outlasts it).
const RESPONSE_TIMEOUT: &str = "2s";

fn in_front_of_faults() -> (PythonOrigin, Served) {
    let origin = PythonOrigin::faults(30);
    let served = Served::builder()
        .backend_addr(origin.addr())
        .args(&["--backend-response-timeout", RESPONSE_TIMEOUT])
        .start();
    (origin, served)
}

/// A fault path seen by an HTTP/1.1 client: Err (tern closed the
/// connection before the body was whole) or a 5xx, never a 200 read to its
/// end.
fn h1_outcome(served: &Served, path: &str) -> String {
    let mut conn = served.connect();
    conn.set_read_timeout(Duration::from_secs(10))
        .expect("timeout");
    match conn.get("localhost", path) {
        Ok(r) if r.status >= 500 => format!("status {}", r.status),
        Ok(r) => panic!(
            "{path}: a complete-looking {} with {} body bytes reached the client",
            r.status,
            r.body.len()
        ),
        Err(e) => {
            assert!(
                !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "{path}: tern left the client hanging: {e}"
            );
            format!("truncated ({e})")
        }
    }
}

#[test]
fn http1_client_sees_every_mid_response_fault_as_a_truncation() {
    let (_origin, served) = in_front_of_faults();
    let mut bystander = served.connect();
    for path in MID_RESPONSE {
        let started = Instant::now();
        let outcome = h1_outcome(&served, path);
        assert!(
            outcome.starts_with("truncated"),
            "{path}: after the head was sent the client must see a truncated response: {outcome}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "{path}: took {:?}",
            started.elapsed()
        );
        // Others unaffected, and the pool never hands out the broken
        // connection: the next requests are whole.
        for _ in 0..3 {
            let ok = bystander.get("localhost", "/ok").expect("bystander /ok");
            assert_eq!((ok.status, ok.body.len()), (200, 100), "after {path}");
        }
    }
}

#[test]
fn reset_before_the_head_is_a_502_and_the_next_request_is_served() {
    let (_origin, served) = in_front_of_faults();
    let outcome = h1_outcome(&served, "/reset-early");
    assert_eq!(outcome, "status 502");
    let ok = served.get("/ok");
    assert_eq!((ok.status, ok.body.len()), (200, 100));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_client_sees_every_mid_response_fault_as_a_stream_error() {
    let (_origin, served) = in_front_of_faults();
    let client = served.h2_client().await;
    for path in MID_RESPONSE {
        let started = Instant::now();
        match tokio::time::timeout(Duration::from_secs(10), client.get(path)).await {
            Err(_) => panic!("{path}: tern left the stream hanging"),
            Ok(Ok(r)) => assert!(
                r.status.as_u16() >= 500,
                "{path}: a complete-looking {} with {} body bytes reached the client",
                r.status,
                r.body.len()
            ),
            Ok(Err(e)) => assert!(
                e.is_reset() || e.is_remote(),
                "{path}: expected RST_STREAM from tern: {e}"
            ),
        }
        assert!(started.elapsed() < Duration::from_secs(6), "{path}");
        // The same connection (other streams) and the pool carry on.
        let ok = client.get("/ok").await.expect("/ok on the same connection");
        assert_eq!(
            (ok.status.as_u16(), ok.body.len()),
            (200, 100),
            "after {path}"
        );
    }
    let early = client.get("/reset-early").await.expect("a response");
    assert_eq!(early.status.as_u16(), 502);
}
