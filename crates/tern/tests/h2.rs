//! Integration tests of `tern serve` over HTTP/2: the real binary with ALPN
//! h2, real backends, and real clients over loopback — the `h2` crate, a raw
//! frame writer for the attacks a library will not commit, h2spec for
//! conformance and headless Chromium for a browser's view.
//!
//! Modules by concern:
//! - `relay`: what a well-behaved client sends reaches the backend as
//!   HTTP/1.1 and comes back intact
//! - `limits`: the SETTINGS tern advertises are the configured ones, and
//!   enforced
//! - `attacks`: rapid reset, CONTINUATION flood and slow readers cost the
//!   attacker its connection, not other clients their service
//! - `conformance`: h2spec, every case
//! - `browser`: Chromium loads a 50+ resource page over one h2 connection
//! - `compression`: what response heads cost on the wire (nghttp's view)
//! - `websocket`: WebSockets over extended CONNECT (Chromium) and over
//!   HTTP/1.1 (Python `websockets`), to a real WebSocket backend

use std::time::Duration;

#[path = "h2/attacks.rs"]
mod attacks;
#[path = "h2/browser.rs"]
mod browser;
#[path = "h2/compression.rs"]
mod compression;
#[path = "h2/conformance.rs"]
mod conformance;
#[path = "h2/limits.rs"]
mod limits;
#[path = "h2/relay.rs"]
mod relay;
#[path = "h2/websocket.rs"]
mod websocket;

/// How long tests wait for an access-log line to appear.
pub const LOG_WAIT: Duration = Duration::from_secs(5);

/// True when running in CI, where missing tools are failures, not skips.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Skips (returns true after printing why) or, in CI, fails when `tool` is
/// missing.
pub fn skip_without(tool: &str, found: bool) -> bool {
    if found {
        return false;
    }
    assert!(
        !in_ci(),
        "{tool} is required in CI (CI=true) but was not found"
    );
    eprintln!("SKIPPED: {tool} is not installed (set CI=true to make this a failure)");
    true
}

/// Runs futures concurrently on the current task and returns their outputs
/// in order (a small `join_all`, rather than a dependency for one helper).
pub async fn join_all<F: std::future::Future>(
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = (0..pinned.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in pinned.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(out) => *output = Some(out),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}
