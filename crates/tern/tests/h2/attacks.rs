//! Clients that attack the HTTP/2 layer itself. Each must cost the attacker
//! its own connection and leave tern's memory and other clients' latency
//! within bounds. The bounds are loose enough for a loaded 2-core machine
//! running a debug build, and tight enough to fail if tern stalled or
//! buffered what the attacker sent.

use std::time::Duration;

use tern_testsupport::h2frames::{self, code, kind, rst_stream, setting, Ending, HeaderBlock};
use tern_testsupport::tern::{rss_kib, Served};
use tokio::time::Instant;

/// Percentile `p` (0..=100) of `samples` (sorted in place).
fn percentile(samples: &mut [Duration], p: usize) -> Duration {
    samples.sort();
    let i = (samples.len() * p / 100).min(samples.len().saturating_sub(1));
    samples[i]
}

/// Latencies of `count` sequential GET /bytes/100 on `client`, or until
/// `until` passes when given.
async fn latencies(
    client: &tern_testsupport::h2client::H2Client,
    count: usize,
    until: Option<Instant>,
) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(count.min(10_000));
    while samples.len() < count && until.is_none_or(|t| Instant::now() < t) {
        let started = Instant::now();
        let response = client.get("/bytes/100").await.expect("GET /bytes/100");
        assert_eq!(response.body.len(), 100);
        samples.push(started.elapsed());
    }
    samples
}

/// Samples tern's RSS every 10 ms until `stop` is set; returns the peak (KiB).
fn watch_rss(
    pid: u32,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut peak = 0;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            if let Some(rss) = rss_kib(pid) {
                peak = peak.max(rss);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        peak
    })
}

/// One rapid-reset connection: 1000 HEADERS+RST_STREAM pairs written as fast
/// as the socket takes them; returns how the connection ended.
async fn rapid_reset_once(served: &Served) -> Ending {
    let (_, mut reader, mut writer) = served.h2_raw(&[]).await;
    let mut flood = Vec::with_capacity(1000 * 64);
    let request = HeaderBlock::request("GET", "/bytes/100");
    for i in 0..1000u32 {
        let stream = 1 + 2 * i;
        flood.extend(request.frames(stream, true));
        flood.extend(rst_stream(stream, code::CANCEL));
    }
    // tern may close while this is in flight; the ending is what counts.
    let write = tokio::spawn(async move {
        for piece in flood.chunks(16 * 1024) {
            if writer.write(piece).await.is_err() {
                break;
            }
        }
        writer
    });
    let ending = reader.ending(Duration::from_secs(10)).await;
    write.abort();
    ending
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reset_gets_goaway_and_other_clients_keep_their_latency() {
    let served = Served::start(&[]);
    let good = served.h2_client().await;
    latencies(&good, 20, None).await;
    let mut baseline = latencies(&good, 200, None).await;
    let baseline_p99 = percentile(&mut baseline, 99);
    let baseline_p50 = percentile(&mut baseline, 50);

    let flood_for = Duration::from_secs(3);
    let until = Instant::now() + flood_for;
    let measure = latencies(&good, usize::MAX, Some(until));
    let flood = async {
        let mut endings = Vec::new();
        while Instant::now() < until {
            endings.push(rapid_reset_once(&served).await);
        }
        endings
    };
    let (mut during, endings) = tokio::join!(measure, flood);
    let during_p99 = percentile(&mut during, 99);
    let during_p50 = percentile(&mut during, 50);
    eprintln!(
        "rapid reset: {} flood connections; /bytes/100 p50/p99 baseline {baseline_p50:?}/{baseline_p99:?}, \
         during {during_p50:?}/{during_p99:?} ({} requests); backend saw {} requests",
        endings.len(),
        during.len(),
        served.backend().requests()
    );

    assert!(!endings.is_empty());
    for ending in &endings {
        assert!(
            matches!(
                ending,
                Ending::GoAway {
                    code: code::ENHANCE_YOUR_CALM,
                    closed: true,
                    ..
                }
            ),
            "a flooding connection ended with {ending:?}, not GOAWAY(ENHANCE_YOUR_CALM) and close"
        );
    }
    // A stalled tern shows as seconds; a busy 2-core machine running other
    // tests and this test's own handshakes as tens of milliseconds.
    let bound = baseline_p99 * 10 + Duration::from_millis(100);
    assert!(
        during_p99 < bound,
        "p99 latency during the flood {during_p99:?} exceeds {bound:?} (baseline p99 {baseline_p99:?})"
    );
    assert!(!good.is_closed(), "the well-behaved connection was closed");
    // Most flood streams never cost a backend request.
    let flood_streams = endings.len() * 1000;
    let reached = served
        .backend()
        .requests()
        .saturating_sub(220 + during.len());
    assert!(
        reached < flood_streams / 2,
        "{reached} of {flood_streams} reset streams reached the backend"
    );
}

/// Opens `count` streams to `/slow/10000`, waits until the backend holds
/// all of them (so tern has accepted each), then resets them all.
async fn reset_accepted_streams(
    served: &Served,
    writer: &mut h2frames::FrameWriter,
    first_stream: u32,
    count: u32,
) {
    let before = served.backend().requests();
    let mut opens = Vec::new();
    for i in 0..count {
        opens.extend(HeaderBlock::request("GET", "/slow/10000").frames(first_stream + 2 * i, true));
    }
    writer.write(&opens).await.expect("open the streams");
    let deadline = Instant::now() + Duration::from_secs(20);
    while served.backend().requests() < before + count as usize {
        assert!(
            Instant::now() < deadline,
            "the streams did not reach the backend"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut resets = Vec::new();
    for i in 0..count {
        resets.extend(rst_stream(first_stream + 2 * i, code::CANCEL));
    }
    writer.write(&resets).await.expect("reset the streams");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_of_accepted_streams_beyond_the_budget_get_goaway() {
    let served = Served::start(&["--h2-max-resets-per-second", "50"]);
    let (_, mut reader, mut writer) = served.h2_raw(&[]).await;
    reset_accepted_streams(&served, &mut writer, 1, 100).await;
    let ending = reader.ending(Duration::from_secs(10)).await;
    assert!(
        matches!(
            ending,
            Ending::GoAway {
                code: code::ENHANCE_YOUR_CALM,
                closed: true,
                ..
            }
        ),
        "100 resets against a budget of 50/s ended with {ending:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_within_the_budget_keep_the_connection() {
    let served = Served::start(&["--h2-max-resets-per-second", "50"]);
    let (_, mut reader, mut writer) = served.h2_raw(&[]).await;
    reset_accepted_streams(&served, &mut writer, 1, 40).await;
    // tern has seen every reset: each reset stream ends with its
    // access-log line. Then use the connection.
    served
        .tern
        .wait_stdout_lines("path=/slow/10000", 40, Duration::from_secs(10))
        .unwrap_or_else(|log| panic!("not every reset stream was logged:\n{log}"));
    writer
        .write(&HeaderBlock::request("GET", "/bytes/10").frames(81, true))
        .await
        .expect("a request after the resets");
    let answer = reader
        .next_on_stream(81, Duration::from_secs(10))
        .await
        .expect("an answer after 40 resets");
    assert_eq!(answer.kind, kind::HEADERS, "got {answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuation_flood_is_cut_off_at_the_header_list_limit() {
    let mut served = Served::start(&["--h2-max-header-list-size", "16384"]);
    let warm = served.h2_client().await;
    warm.get("/bytes/100").await.expect("warm-up request");
    let rss_before = served.rss_kib();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = watch_rss(served.tern.pid(), stop.clone());

    let (_, mut reader, mut writer) = served.h2_raw(&[]).await;
    // HEADERS without END_HEADERS, then CONTINUATION frames of valid literal
    // fields, never ending: 64 MiB at most.
    let mut fields = HeaderBlock::new();
    let mut n = 0;
    while fields.bytes().len() < 16 * 1024 - 64 {
        fields.field(&format!("x-flood-{n}"), &[b'a'; 100]);
        n += 1;
    }
    let continuation = h2frames::frame(kind::CONTINUATION, 0, 1, fields.bytes());
    let start = h2frames::frame(
        kind::HEADERS,
        h2frames::flag::END_STREAM,
        1,
        HeaderBlock::request("GET", "/echo").bytes(),
    );
    let cap: usize = 64 << 20;
    let write = tokio::spawn(async move {
        let mut sent = 0;
        if writer.write(&start).await.is_err() {
            return sent;
        }
        while sent < cap {
            if writer.write(&continuation).await.is_err() {
                break;
            }
            sent += continuation.len();
        }
        sent
    });
    let ending = reader.ending(Duration::from_secs(20)).await;
    let sent = tokio::time::timeout(Duration::from_secs(20), write)
        .await
        .expect("the flood writer stops once tern closes")
        .expect("flood writer task");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let peak = watcher.join().expect("RSS watcher");
    eprintln!(
        "continuation flood: {ending:?}; {sent} bytes written before the writer stopped; \
         tern RSS {rss_before} KiB before, peak {peak} KiB"
    );

    assert!(
        matches!(ending, Ending::GoAway { .. } | Ending::Closed),
        "the flooding connection is still open: {ending:?}"
    );
    assert!(sent < cap, "tern read all {cap} bytes of CONTINUATION");
    let grown = peak.saturating_sub(rss_before);
    assert!(
        grown < 8 * 1024,
        "tern's RSS grew by {grown} KiB during the flood"
    );
    served.assert_alive();
    let other = served.h2_client().await;
    let response = other.get("/bytes/100").await.expect("GET after the flood");
    assert_eq!(response.body.len(), 100);
    assert_eq!(
        served.backend().requests(),
        2,
        "the flooded request reached the backend"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_with_tiny_windows_do_not_grow_memory() {
    let mut served = Served::start(&[]);
    let good = served.h2_client().await;
    let big = good.get("/bytes/1048576").await.expect("warm-up 1 MiB");
    assert_eq!(big.body.len(), 1 << 20);
    let rss_before = served.rss_kib();

    // A window of one byte per stream and never a WINDOW_UPDATE: each
    // response can move one byte, while the backend has 64 MiB for each
    // (made chunk by chunk as its socket drains, so the test stays cheap).
    let (_, _reader, mut writer) = served.h2_raw(&[(setting::INITIAL_WINDOW_SIZE, 1)]).await;
    let streams = 50u32;
    let mut requests = Vec::new();
    for i in 0..streams {
        requests.extend(HeaderBlock::request("GET", "/chunked/67108864").frames(1 + 2 * i, true));
    }
    writer.write(&requests).await.expect("send 50 requests");
    let sent = Instant::now();
    // A generous bound: on a loaded 2-core host the debug-built backend,
    // making the first chunks of 50 bodies, took 20 s and more (on an idle
    // one, 7-13 s).
    let deadline = sent + Duration::from_secs(60);
    while served.backend().requests() < 1 + streams as usize {
        assert!(
            Instant::now() < deadline,
            "only {} backend requests",
            served.backend().requests()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let all_at_backend = sent.elapsed();
    // Let every backend connection fill whatever tern is willing to buffer:
    // the backend makes its bodies only as tern reads them, so once they
    // make no progress tern holds all it is going to.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = watch_rss(served.tern.pid(), stop.clone());
    let made = {
        let backend = served.backend();
        tokio::task::block_in_place(|| {
            backend.wait_chunked_stalled(Duration::from_millis(500), Duration::from_secs(20))
        })
    };

    // Other clients are served meanwhile.
    let other = served.h2_client().await;
    let response = other
        .get("/bytes/1048576")
        .await
        .expect("GET 1 MiB meanwhile");
    assert_eq!(response.body.len(), 1 << 20);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let peak = watcher.join().expect("RSS watcher");
    let grown = peak.saturating_sub(rss_before);
    eprintln!(
        "slow readers: {streams} streams of 64 MiB with a 1-byte window; tern RSS {rss_before} KiB before, peak {peak} KiB (+{grown} KiB); all at the backend after {all_at_backend:?}; the backend made {made} bytes before the streams stalled"
    );
    served.assert_alive();
    assert!(
        grown < 12 * 1024,
        "tern's RSS grew by {grown} KiB holding {streams} stalled streams"
    );
}

/// Floods one connection with `frame` (a control frame tern must answer)
/// without ever reading tern's answers, up to 32 MiB or until tern stops
/// taking them for two seconds; meanwhile a well-behaved client keeps
/// being served. Returns (bytes written, tern's RSS growth in KiB).
async fn unanswered_control_flood(served: &Served, frame: Vec<u8>) -> (usize, u64) {
    let good = served.h2_client().await;
    good.get("/bytes/100").await.expect("warm-up request");
    let rss_before = served.rss_kib();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = watch_rss(served.tern.pid(), stop.clone());
    let (_, reader, mut writer) = served.h2_raw(&[]).await;
    // 1000 frames per write: the attacker's cost per byte is small.
    let batch: Vec<u8> = frame
        .iter()
        .copied()
        .cycle()
        .take(frame.len() * 1000)
        .collect();
    let cap: usize = 32 << 20;
    let flood = tokio::spawn(async move {
        let mut sent = 0;
        while sent < cap {
            match tokio::time::timeout(Duration::from_secs(2), writer.write(&batch)).await {
                Ok(Ok(())) => sent += batch.len(),
                // Blocked (tern stopped reading: backpressure) or closed.
                _ => break,
            }
        }
        sent
    });
    // The well-behaved client, during the flood.
    let served_meanwhile = latencies(&good, 200, None).await;
    assert_eq!(served_meanwhile.len(), 200);
    let sent = tokio::time::timeout(Duration::from_secs(60), flood)
        .await
        .expect("the flood ends: written out, blocked or closed")
        .expect("flood task");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let peak = watcher.join().expect("RSS watcher");
    drop(reader);
    (sent, peak.saturating_sub(rss_before))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_flood_that_never_reads_is_backpressured_not_buffered() {
    let mut served = Served::start(&[]);
    let ping = h2frames::frame(kind::PING, 0, 0, &[7; 8]);
    let (sent, grown) = unanswered_control_flood(&served, ping).await;
    eprintln!("ping flood: {sent} bytes written; tern RSS grew {grown} KiB");
    // tern answers each PING with a PONG it cannot send to a client that
    // does not read: it must stop reading (or close), not queue PONGs.
    assert!(sent < 32 << 20, "tern took all 32 MiB of PINGs");
    assert!(grown < 8 * 1024, "tern's RSS grew by {grown} KiB");
    served.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_flood_that_never_reads_is_backpressured_not_buffered() {
    let mut served = Served::start(&[]);
    let settings = h2frames::settings(&[(setting::INITIAL_WINDOW_SIZE, 65_535)]);
    let (sent, grown) = unanswered_control_flood(&served, settings).await;
    eprintln!("settings flood: {sent} bytes written; tern RSS grew {grown} KiB");
    assert!(sent < 32 << 20, "tern took all 32 MiB of SETTINGS");
    assert!(grown < 8 * 1024, "tern's RSS grew by {grown} KiB");
    served.assert_alive();
}

/// A client that floods PINGs (or SETTINGS) and never reads holds no
/// stream, so the connection idles out: tern sends GOAWAY, which the client
/// never reads either, and closes the connection a second later instead of
/// waiting for it forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_flood_that_never_reads_is_closed_after_the_idle_timeout() {
    let served = Served::builder()
        .admin()
        .args(&["--idle-timeout", "2s"])
        .start();
    let idle_before = tokio::task::block_in_place(|| served.scrape_when_idle());
    assert_eq!(idle_before.get("tern_connections_open", &[]), Some(0.0));
    for frame in [
        h2frames::frame(kind::PING, 0, 0, &[7; 8]),
        h2frames::settings(&[(setting::INITIAL_WINDOW_SIZE, 65_535)]),
    ] {
        let started = Instant::now();
        let (_, reader, mut writer) = served.h2_raw(&[]).await;
        let batch = frame.repeat(1000);
        let flood = tokio::spawn(async move {
            // Until tern stops taking them (it stopped reading) or closes.
            while let Ok(Ok(())) =
                tokio::time::timeout(Duration::from_millis(500), writer.write(&batch)).await
            {
            }
            writer
        });
        let closed = tokio::task::block_in_place(|| {
            tern_testsupport::tern::eventually(Duration::from_secs(10), || {
                served.scrape().get("tern_connections_open", &[]) == Some(0.0)
            })
        });
        let took = started.elapsed();
        assert!(closed, "the flooding connection was still open after 10 s");
        assert!(
            took >= Duration::from_millis(1800) && took < Duration::from_secs(6),
            "closed after {took:?}; idle timeout 2 s, GOAWAY wait 1 s"
        );
        drop(flood.await);
        drop(reader);
    }
}
