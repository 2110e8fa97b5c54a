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
    // One slow request keeps one backend busy for a while: 6 s, so ten
    // new connections and as many admin reads fit inside it on a loaded
    // machine (tern's shutdown at the test's end waits for it).
    let slow = super::slow_request(&front, 6000);
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
        // tern takes the request off the server's in-flight count before
        // the last piece of the response goes to the client, so a client
        // that has its response finds no tie (one in flight on each
        // server) that least_conn could break either way: the next
        // request, on another worker as well, sees the idle server idle.
        assert_eq!(
            listed(&front, &idle_addr)["in_flight"],
            0,
            "the quick request still counts in flight after its response reached the client"
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

/// The request leaves least_conn's count when the backend's response has
/// ended, not when the client has read it all: an HTTP/2 client that
/// grants one byte less window than the body holds tern's last write to
/// it (and so, before, the release after it), yet the admin listener
/// shows nothing in flight once tern has the whole backend response.
#[test]
fn a_response_the_backend_finished_is_not_in_flight_while_the_client_reads_it() {
    use tern_testsupport::h2client::{h2_client_config, request, H2Client};
    const BODY: u32 = 100_000;
    let a = Backend::start();
    let upstreams = format!(
        "[[upstream]]\nname = \"app\"\nbalance = \"least_conn\"\n{}\n",
        servers(&[a.addr()])
    );
    let front = start_with_admin("", &upstreams);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (client, response) = rt.block_on(async {
        let mut builder = h2::client::Builder::new();
        builder
            .initial_window_size(BODY - 1)
            .initial_connection_window_size(BODY - 1);
        let client =
            H2Client::connect_with(front.addr, h2_client_config(front.ca().ca_pem()), &builder)
                .await
                .expect("h2 connect");
        let (response, mut stream) = client
            .open(request("GET", &format!("/bytes/{BODY}")))
            .await
            .expect("request");
        stream
            .send_data(bytes::Bytes::new(), true)
            .expect("end of request");
        let response = response.await.expect("response head");
        (client, response)
    });
    assert_eq!(response.status(), 200);
    let addr = a.addr().to_string();
    wait_until(
        "the finished backend response to leave the in-flight count",
        Duration::from_secs(10),
        || listed(&front, &addr)["in_flight"] == 0,
    );
    // The premise: the client never read (nor granted window for) the
    // last byte, so tern's last write to it is still waiting.
    let mut body = response.into_body();
    let read = rt.block_on(async {
        let mut n = 0;
        while let Some(Ok(chunk)) = body.data().await {
            n += chunk.len();
            if n >= (BODY - 1) as usize {
                break;
            }
        }
        n
    });
    assert_eq!(
        read,
        (BODY - 1) as usize,
        "the window let the whole body through"
    );
    drop(client);
}
