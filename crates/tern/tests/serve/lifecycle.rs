//! Connection and process lifecycle: graceful shutdown, connection limits,
//! timeouts, and isolation of misbehaving clients.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tern_testsupport::client::HttpConn;
use tern_testsupport::tern::{listening, rss_kib, tern_bin, wait_until, Served, TernProcess};
use tern_testsupport::tools::curl;

#[test]
fn sigterm_finishes_in_flight_request_and_exits_0() {
    let mut served = Served::start(&["--shutdown-timeout", "10s"]);
    let mut conn = served.connect();
    let in_flight = std::thread::spawn(move || conn.get("localhost", "/slow/1000"));
    wait_until(
        "the request to reach the backend",
        Duration::from_secs(5),
        || served.backend().requests() >= 1,
    );
    served.tern.terminate();
    // tern acknowledges the signal, then its accept loops stop and drop
    // the listening socket (read from /proc: a probe connection would
    // itself be new work).
    wait_until("the SIGTERM log line", Duration::from_secs(5), || {
        served.tern.stderr_text().contains("SIGTERM received")
    });
    wait_until(
        "the listener to close after SIGTERM",
        Duration::from_secs(5),
        || !listening(served.addr),
    );

    // While draining, tern accepts no new work.
    let late = HttpConn::connect(served.addr, "localhost", served.client.clone())
        .and_then(|mut c| c.get("localhost", "/echo"));
    assert!(
        late.is_err(),
        "a request after SIGTERM was served: {late:?}"
    );

    let response = in_flight
        .join()
        .expect("client thread")
        .expect("the in-flight request was lost on SIGTERM");
    assert_eq!(response.status, 200);
    assert_eq!(response.text(), "slow 1000\n");
    let status = served.tern.wait_exit(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "exit status {status:?}\n{}",
        served.tern.stderr_text()
    );
}

#[test]
fn sigint_on_idle_server_exits_0_promptly() {
    let mut served = Served::start(&[]);
    assert_eq!(served.get("/status/200").status, 200);
    served.tern.interrupt();
    let status = served.tern.wait_exit(Duration::from_secs(5));
    assert!(
        status.is_some_and(|s| s.success()),
        "exit status {status:?}"
    );
}

#[test]
fn max_connections_reached_gives_503() {
    let served = Served::start(&["--max-connections", "2"]);
    // The readiness probe's connection may still hold a slot for a moment;
    // wait until two connections at once are both served.
    let deadline = Instant::now() + Duration::from_secs(5);
    let (first, _second) = loop {
        let mut first = served.connect();
        let mut second = served.connect();
        let both = [&mut first, &mut second].into_iter().all(|conn| {
            conn.get("localhost", "/status/200")
                .is_ok_and(|r| r.status == 200)
        });
        if both {
            break (first, second);
        }
        drop((first, second));
        assert!(
            Instant::now() < deadline,
            "two connections were never served at once"
        );
        std::thread::sleep(Duration::from_millis(100));
    };

    let refused = HttpConn::connect(served.addr, "localhost", served.client.clone())
        .and_then(|mut third| third.get("localhost", "/status/200"));
    match refused {
        Ok(response) => assert_eq!(response.status, 503, "{}", response.text()),
        Err(e) => panic!("expected a 503 over the limit, the connection failed: {e}"),
    }

    drop(first);
    let mut recovered = None;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let attempt = HttpConn::connect(served.addr, "localhost", served.client.clone())
            .and_then(|mut conn| conn.get("localhost", "/status/200"));
        if let Ok(response) = attempt {
            if response.status == 200 {
                recovered = Some(response);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(recovered.is_some(), "a freed slot was never reused");
}

#[test]
fn silent_connection_is_closed_after_handshake_timeout() {
    let served = Served::start(&["--handshake-timeout", "1s"]);
    // The clock starts before tern's can (its starts at the accept): a
    // test thread held after connect on a loaded machine must not make
    // the close look early.
    let started = Instant::now();
    let mut tcp = TcpStream::connect(served.addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut buf = [0u8; 64];
    let closed = matches!(std::io::Read::read(&mut tcp, &mut buf), Ok(0) | Err(_));
    let waited = started.elapsed();
    assert!(closed, "tern sent bytes to a silent client");
    assert!(
        waited >= Duration::from_millis(800) && waited < Duration::from_secs(4),
        "closed after {waited:?}, handshake timeout is 1 s"
    );
}

#[test]
fn incomplete_head_is_dropped_after_header_timeout() {
    let served = Served::start(&["--header-timeout", "1s"]);
    let mut conn = served.connect();
    conn.send(b"GET /echo HTTP/1.1\r\nHost: loc")
        .expect("send part of a head");
    let started = Instant::now();
    assert!(
        conn.closed_within(Duration::from_secs(5)),
        "slow head kept open"
    );
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(served.backend().requests(), 0);
}

#[test]
fn idle_keepalive_connection_is_closed_after_idle_timeout() {
    let served = Served::start(&["--idle-timeout", "1s"]);
    let mut conn = served.connect();
    // Before the request, so before tern's idle clock starts (at its
    // response's end), as above.
    let started = Instant::now();
    assert_eq!(
        conn.get("localhost", "/status/200").expect("first").status,
        200
    );
    assert!(
        conn.closed_within(Duration::from_secs(5)),
        "idle connection kept open"
    );
    assert!(started.elapsed() >= Duration::from_millis(800));
}

#[test]
fn garbage_client_does_not_disturb_others() {
    let served = Arc::new(Served::start(&[]));
    let started = Instant::now();
    let garbage = {
        let addr = served.addr;
        std::thread::spawn(move || {
            for i in 0..30u8 {
                if let Ok(mut tcp) = TcpStream::connect(addr) {
                    let noise: Vec<u8> =
                        (0..2000).map(|j| (j as u8).wrapping_mul(31) ^ i).collect();
                    let _ = tcp.write_all(&noise);
                }
            }
        })
    };
    let bad_http = {
        let served = served.clone();
        std::thread::spawn(move || {
            for _ in 0..10 {
                if let Ok(mut conn) =
                    HttpConn::connect(served.addr, "localhost", served.client.clone())
                {
                    let _ = conn.send(b"\x16\x03\x01 not http at all\r\n\r\n");
                    let _ = conn.read_to_close();
                }
            }
        })
    };
    let clients: Vec<_> = (0..12)
        .map(|c| {
            let served = served.clone();
            std::thread::spawn(move || {
                let mut conn = HttpConn::connect(served.addr, "localhost", served.client.clone())
                    .map_err(|e| format!("client {c}: connect: {e}"))?;
                for r in 0..20 {
                    let response = conn
                        .get("localhost", &format!("/bytes/{}", 500 + c))
                        .map_err(|e| format!("client {c} request {r}: {e}"))?;
                    if response.status != 200 || response.body.len() != 500 + c {
                        return Err(format!("client {c} request {r}: {}", response.status));
                    }
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    let _ = garbage.join();
    let _ = bad_http.join();
    for client in clients {
        client
            .join()
            .expect("client thread")
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(served.backend().requests(), 12 * 20);
}

#[test]
fn no_arguments_serves_demo_origin_on_8443() {
    // The default address is fixed; skip rather than fight over it.
    if TcpListener::bind("127.0.0.1:8443").is_err() {
        eprintln!("skipped: 127.0.0.1:8443 is busy");
        return;
    }
    let addr = "127.0.0.1:8443".parse().expect("literal address");
    let _tern = TernProcess::start(tern_bin(), addr, ["serve"]);
    let out = curl(&[
        "-sS",
        "-k",
        "--resolve",
        "localhost:8443:127.0.0.1",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "https://localhost:8443/",
    ]);
    assert_eq!(out.stdout, "200", "{}", out.all());
}

#[test]
fn shutdown_timeout_bounds_a_slow_drain() {
    let mut served = Served::start(&["--shutdown-timeout", "1s"]);
    let mut conn = served.connect();
    let in_flight = std::thread::spawn(move || conn.get("localhost", "/slow/8000"));
    wait_until(
        "the request to reach the backend",
        Duration::from_secs(5),
        || served.backend().requests() >= 1,
    );
    let started = Instant::now();
    served.tern.terminate();
    let status = served.tern.wait_exit(Duration::from_secs(6));
    assert!(
        status.is_some(),
        "tern still running 6 s after SIGTERM with a 1 s shutdown timeout"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "exit took {:?}",
        started.elapsed()
    );
    let _ = in_flight.join();
}

#[test]
fn silent_and_stalled_clients_do_not_block_new_ones() {
    // One worker, and silent clients that it would have to wait 60 s for if
    // they could block it: a new client served well within that (15 s
    // leaves a loaded debug build room) was not queued behind them.
    let served = Served::start(&["--workers", "1", "--handshake-timeout", "60s"]);
    // Connections that never speak, or stop in the middle of a ClientHello.
    let mut idle = Vec::new();
    for i in 0..20 {
        let mut tcp = TcpStream::connect(served.addr).expect("connect");
        if i % 2 == 0 {
            let _ = tcp.write_all(&[0x16, 0x03, 0x01, 0x02]);
        }
        idle.push(tcp);
    }
    // A client that asks for a large body and never reads it.
    let mut hog = served.connect();
    hog.send(b"GET /bytes/8388608 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("send");
    // The hog's request is at the backend: its 8 MiB answer is now backing
    // up behind a client that does not read.
    wait_until(
        "the hog's request at the backend",
        Duration::from_secs(5),
        || served.backend().requests() >= 1,
    );

    let started = Instant::now();
    let response = served.get("/bytes/100");
    assert_eq!(response.status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "a new client waited {:?} behind stalled ones",
        started.elapsed()
    );
    drop(idle);
}

#[test]
fn client_not_reading_is_backpressured_not_buffered() {
    let served = Served::start(&[]);
    assert_eq!(served.get("/bytes/100").status, 200);
    let before = rss_kib(served.tern.pid()).unwrap_or(0);
    let mut hog = served.connect();
    // 64 MiB, streamed lazily by the backend; the client never reads it.
    hog.send(b"GET /chunked/67108864 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("send");
    // Measure once the stream has stopped: the backend makes its body only
    // as tern reads it, so no progress for a while means tern holds all it
    // is going to hold (or has read all 64 MiB, which the bound catches).
    let made = served
        .backend()
        .wait_chunked_stalled(Duration::from_millis(500), Duration::from_secs(20));
    eprintln!("the backend made {made} bytes before the stream stalled");
    let after = rss_kib(served.tern.pid()).unwrap_or(0);
    eprintln!("tern RSS {before} KiB -> {after} KiB");
    assert!(before > 0, "cannot read tern's RSS");
    assert!(
        after < before + 24 * 1024,
        "tern grew from {before} KiB to {after} KiB buffering for a client that does not read"
    );
}

#[test]
fn stalled_request_body_is_dropped_after_idle_timeout() {
    let served = Served::start(&["--idle-timeout", "1s"]);
    let mut conn = served.connect();
    conn.send(b"POST /sha HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\nonly ten b")
        .expect("send part of a body");
    let started = Instant::now();
    // tern may answer (408, or the backend's error) before closing; it must close.
    let _ = conn.read_response(false);
    assert!(
        conn.closed_within(Duration::from_secs(5)),
        "stalled body kept open"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn connection_slots_are_released_on_every_path() {
    let served = Served::builder()
        .args(&["--max-connections", "4"])
        .admin()
        .start();
    // Every way a connection can end, several times over the limit.
    for round in 0..6 {
        // Not TLS at all.
        if let Ok(mut tcp) = TcpStream::connect(served.addr) {
            let _ = tcp.write_all(b"GET / HTTP/1.1\r\n\r\n");
            let _ = std::io::Read::read(&mut tcp, &mut [0u8; 64]);
        }
        // Handshake refused (TLS 1.2 client with a cipher tern does not offer).
        let _ = tern_testsupport::tools::s_client(
            served.addr,
            &["-tls1_2", "-cipher", "DHE-RSA-AES128-GCM-SHA256"],
            b"",
        );
        // Rejected request (400, then closed).
        if let Ok(mut conn) = HttpConn::connect(served.addr, "localhost", served.client.clone()) {
            let _ = conn.send(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Bad : 1\r\n\r\n");
            let _ = conn.read_to_close();
        }
        // Normal request, client closes.
        let response = HttpConn::connect(served.addr, "localhost", served.client.clone())
            .and_then(|mut conn| conn.get("localhost", "/status/200"));
        assert!(
            response.is_ok_and(|r| r.status == 200),
            "round {round}: a slot leaked"
        );
    }
    // tern has closed its side of every connection above.
    wait_until(
        "no open connection in /metrics",
        Duration::from_secs(5),
        || served.scrape().get("tern_connections_open", &[]) == Some(0.0),
    );
    // All four slots are free again.
    let mut open: Vec<HttpConn> = (0..4)
        .map(|i| {
            HttpConn::connect(served.addr, "localhost", served.client.clone())
                .unwrap_or_else(|e| panic!("slot {i} is still taken: {e}"))
        })
        .collect();
    for (i, conn) in open.iter_mut().enumerate() {
        let response = conn.get("localhost", "/status/200");
        assert!(
            response.as_ref().is_ok_and(|r| r.status == 200),
            "slot {i}: {response:?}"
        );
    }
}

#[test]
fn sigterm_closes_idle_keepalive_connections_promptly() {
    // Default shutdown timeout (30 s): idle connections must not hold it up.
    let mut served = Served::start(&[]);
    let mut idle = served.connect();
    assert_eq!(
        idle.get("localhost", "/status/200").expect("get").status,
        200
    );
    let started = Instant::now();
    served.tern.terminate();
    let status = served.tern.wait_exit(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "exit status {status:?} after {:?}",
        started.elapsed()
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "an idle keepalive connection delayed shutdown by {:?}",
        started.elapsed()
    );
    assert!(idle.closed_within(Duration::from_secs(2)));
}
