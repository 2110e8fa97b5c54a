//! Spreading requests: weighted round robin and least connections.

use std::time::{Duration, Instant};

use tern_testsupport::backend::Backend;

use tern_testsupport::tern::wait_until;

use crate::{echo_answers, listed, servers, start_front, start_with_admin};

#[test]
fn weights_three_to_one_split_400_requests_three_to_one() {
    let heavy = Backend::start();
    let light = Backend::start();
    let upstreams = format!(
        "[[upstream]]\nname = \"app\"\nservers = [{{ addr = \"{}\", weight = 3 }}, \
         {{ addr = \"{}\", weight = 1 }}]\n",
        heavy.addr(),
        light.addr()
    );
    let front = start_front(2, &upstreams, "app", "");
    let counts = echo_answers(&front, 400, 20);
    let heavy_count = counts.get(&heavy.addr().to_string()).copied().unwrap_or(0);
    let light_count = counts.get(&light.addr().to_string()).copied().unwrap_or(0);
    assert_eq!(heavy_count + light_count, 400, "{counts:?}");
    // Smooth WRR is exact per worker over every 4 picks; two workers may
    // each be mid-cycle.
    assert!(
        (294..=306).contains(&heavy_count),
        "3:1 weights gave {heavy_count}:{light_count}"
    );
}

#[test]
fn equal_weights_alternate_on_one_connection() {
    let a = Backend::start();
    let b = Backend::start();
    let upstreams = format!(
        "[[upstream]]\nname = \"app\"\n{}\n",
        servers(&[a.addr(), b.addr()])
    );
    let front = start_front(1, &upstreams, "app", "");
    let mut conn = front.connect();
    let order: Vec<String> = (0..6)
        .map(|_| {
            let r = conn.get("localhost", "/echo").expect("GET /echo");
            r.json()["backend"].as_str().unwrap_or("").to_string()
        })
        .collect();
    for pair in order.windows(2) {
        assert_ne!(
            pair[0], pair[1],
            "round robin repeated a backend: {order:?}"
        );
    }
}

#[test]
fn least_conn_sends_new_requests_away_from_a_busy_backend() {
    let a = Backend::start();
    let b = Backend::start();
    let upstreams = format!(
        "[[upstream]]\nname = \"app\"\nbalance = \"least_conn\"\n{}\n",
        servers(&[a.addr(), b.addr()])
    );
    let front = start_with_admin("", &upstreams);
    // One slow request keeps one backend busy for a while.
    let slow = super::slow_request(&front, 3000);
    let deadline = Instant::now() + Duration::from_secs(5);
    while a.requests() + b.requests() == 0 {
        assert!(Instant::now() < deadline, "the slow request never arrived");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (busy, idle) = if a.requests() == 1 {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let started = Instant::now();
    let idle_addr = idle.addr().to_string();
    let mut counts = std::collections::HashMap::new();
    for _ in 0..10 {
        for (backend, n) in echo_answers(&front, 1, 1) {
            *counts.entry(backend).or_insert(0) += n;
        }
        // tern gives the backend connection back just after the client has
        // its response; a request on another worker before that would see a
        // tie (one in flight on each server), which least_conn may break
        // either way. Wait for the count, as a state.
        wait_until(
            "the quick request to leave the idle server",
            Duration::from_secs(10),
            || listed(&front, &idle_addr)["in_flight"] == 0,
        );
    }
    // The premise, as a state rather than a wall-clock bound: the slow
    // request was in flight for all ten quick ones.
    assert!(
        !slow.is_finished(),
        "the quick requests took {:?}: the slow one ended before the check",
        started.elapsed()
    );
    assert_eq!(
        counts.get(&idle.addr().to_string()).copied(),
        Some(10),
        "{counts:?}: every new request should go to the idle backend"
    );
    assert_eq!(
        busy.requests(),
        1,
        "only the slow request reached the busy backend"
    );
    assert_eq!(
        slow.join().expect("slow client").expect("slow response"),
        200
    );
}
