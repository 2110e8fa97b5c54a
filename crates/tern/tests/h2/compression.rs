//! What tern's response heads cost on the wire: HPACK as a real client
//! (nghttp, from nghttp2) sees it, frame by frame.

use std::time::Duration;

use tern_testsupport::tern::Served;
use tern_testsupport::tools::run_tool;

use crate::skip_without;

/// Requests sent on one connection.
const REQUESTS: usize = 6;

/// The smallest response HEADERS frame nghttp received for `REQUESTS`
/// GETs of the same path on one connection to `served`, and the request IDs
/// it decoded from them.
fn smallest_response_head(served: &Served) -> (usize, Vec<String>) {
    let url = format!("https://{}/bytes/100", served.addr);
    let times = REQUESTS.to_string();
    // -y: the test CA is not in nghttp's trust store (nothing here is
    // about the certificate).
    let out = run_tool(
        "nghttp",
        ["-v", "-n", "-y", "--no-dep", "-m", &times, &url],
        b"",
        Duration::from_secs(30),
    );
    assert!(out.success(), "nghttp failed: {}", out.all());
    // `[  0.004] recv HEADERS frame <length=40, flags=0x04, stream_id=1>`
    let lengths: Vec<usize> = out
        .stdout
        .lines()
        .filter_map(|l| {
            l.split_once("recv HEADERS frame <length=")?
                .1
                .split_once(',')?
                .0
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(lengths.len(), REQUESTS, "{}", out.stdout);
    let ids = out
        .stdout
        .lines()
        .filter_map(|l| Some(l.split_once(") x-request-id: ")?.1.trim().to_string()))
        .collect();
    (lengths.into_iter().min().unwrap_or(0), ids)
}

/// Request IDs are never-indexed (each is new), but their name is in the
/// client's HPACK table after the first response: each later response
/// sends it as an index (2 bytes) instead of a literal (11 bytes).
#[test]
fn request_id_name_is_sent_indexed() {
    if skip_without(
        "nghttp",
        std::process::Command::new("nghttp")
            .arg("--version")
            .output()
            .is_ok(),
    ) {
        return;
    }
    let with_ids = Served::start(&[]);
    let (with, ids) = smallest_response_head(&with_ids);
    assert_eq!(
        ids.len(),
        REQUESTS,
        "one x-request-id per response: {ids:?}"
    );
    assert!(ids.iter().all(|id| id.len() == 32), "{ids:?}");
    let mut distinct = ids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), REQUESTS, "{ids:?}");
    let without_ids = Served::start(&["--request-id-header", "off"]);
    let (without, none) = smallest_response_head(&without_ids);
    assert!(none.is_empty(), "{none:?}");
    // The ID's field: name as an index (2 bytes) or as a literal (1 + 1 +
    // 12 bytes of "x-request-id"), then the value's length (1) and its 32
    // hex digits, plain (h2 patch 0005: a field sent without indexing is
    // not Huffman-coded).
    let id_field = with - without;
    assert_eq!(
        id_field, 35,
        "the request ID costs {id_field} bytes of a response head ({with} vs {without}): \
         a literal name takes 47"
    );
}
