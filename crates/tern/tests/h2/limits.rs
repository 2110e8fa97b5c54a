//! The SETTINGS tern advertises are the configured limits, and tern holds
//! clients to them: extra streams are refused, oversized header lists never
//! reach the backend, a larger HPACK table than advertised is an error.

use std::time::Duration;

use tern_testsupport::h2frames::{
    self, code, flag, kind, setting, Ending, Frame, FrameReader, HeaderBlock,
};
use tern_testsupport::tern::Served;

/// How long a test waits for tern's answer on a stream.
const ANSWER_WAIT: Duration = Duration::from_secs(20);

/// HPACK for `:status: 200` (static table index 8, indexed field).
const STATUS_200: u8 = 0x88;

fn value_of(settings: &[(u16, u32)], id: u16) -> Option<u32> {
    settings
        .iter()
        .rev()
        .find(|(i, _)| *i == id)
        .map(|(_, v)| *v)
}

/// Reads frames on `stream` until its response HEADERS; panics on anything
/// else that ends the stream.
async fn response_headers(reader: &mut FrameReader, stream: u32) -> Frame {
    loop {
        let f = reader
            .next_on_stream(stream, ANSWER_WAIT)
            .await
            .unwrap_or_else(|e| panic!("no answer on stream {stream}: {e}"));
        match f.kind {
            kind::HEADERS => return f,
            kind::GOAWAY => panic!("GOAWAY {:?} instead of an answer on {stream}", f.goaway()),
            kind::RST_STREAM => panic!("stream {stream} reset: {:?}", f.rst_code()),
            _ => continue,
        }
    }
}

#[tokio::test]
async fn max_concurrent_streams_is_advertised_and_extra_streams_are_refused() {
    let served = Served::start(&["--h2-max-concurrent-streams", "4"]);
    let (settings, mut reader, mut writer) = served.h2_raw(&[]).await;
    assert_eq!(
        value_of(&settings, setting::MAX_CONCURRENT_STREAMS),
        Some(4),
        "SETTINGS {settings:?}"
    );
    // Five slow requests at once: the fifth exceeds the limit.
    let mut burst = Vec::new();
    for stream in [1, 3, 5, 7, 9] {
        burst.extend(HeaderBlock::request("GET", "/slow/3000").frames(stream, true));
    }
    writer.write(&burst).await.expect("send five requests");
    let refused = reader
        .next_on_stream(9, ANSWER_WAIT)
        .await
        .expect("an answer on stream 9 before the slow responses");
    assert_eq!(
        refused.rst_code(),
        Some(code::REFUSED_STREAM),
        "stream 9 got {refused:?}"
    );
    // The four admitted streams are served, in whatever order they finish.
    let mut waiting = vec![1, 3, 5, 7];
    let deadline = tokio::time::Instant::now() + ANSWER_WAIT;
    while !waiting.is_empty() {
        let f = reader
            .next_until(deadline)
            .await
            .unwrap_or_else(|e| panic!("no answers yet on streams {waiting:?}: {e}"))
            .unwrap_or_else(|| panic!("closed before answers on streams {waiting:?}"));
        assert_ne!(f.kind, kind::GOAWAY, "GOAWAY {:?}", f.goaway());
        assert_ne!(f.kind, kind::RST_STREAM, "stream {} reset", f.stream);
        if f.kind == kind::HEADERS {
            if let Some(at) = waiting.iter().position(|&s| s == f.stream) {
                waiting.remove(at);
                assert_eq!(f.payload.first(), Some(&STATUS_200), "stream {}", f.stream);
            }
        }
    }
}

#[tokio::test]
async fn max_header_list_size_is_advertised_and_larger_lists_are_refused() {
    let mut served = Served::start(&["--h2-max-header-list-size", "8192"]);
    let (settings, mut reader, mut writer) = served.h2_raw(&[]).await;
    assert_eq!(
        value_of(&settings, setting::MAX_HEADER_LIST_SIZE),
        Some(8192),
        "SETTINGS {settings:?}"
    );
    let mut oversized = HeaderBlock::request("GET", "/echo");
    oversized.field("x-big", &[b'a'; 20_000]);
    writer
        .write(&oversized.frames(1, true))
        .await
        .expect("send the oversized request");
    let answer = reader
        .next_on_stream(1, ANSWER_WAIT)
        .await
        .expect("an answer to the oversized request");
    let refused = match answer.kind {
        // 431 (h2 answers before resetting); anything but a 200.
        kind::HEADERS => answer.payload.first() != Some(&STATUS_200),
        kind::RST_STREAM | kind::GOAWAY => true,
        _ => false,
    };
    assert!(refused, "oversized header list was not refused: {answer:?}");

    // tern lives, and a fresh connection is served.
    served.assert_alive();
    let other = served.h2_client().await;
    let response = other
        .get("/bytes/100")
        .await
        .expect("GET on another connection");
    assert_eq!(response.body.len(), 100);
    assert_eq!(
        served.backend().requests(),
        1,
        "the oversized request reached the backend"
    );
}

#[tokio::test]
async fn header_table_size_is_advertised_as_configured_and_enforced() {
    let served = Served::start(&["--h2-header-table-size", "1024"]);
    let (settings, mut reader, mut writer) = served.h2_raw(&[]).await;
    assert_eq!(
        value_of(&settings, setting::HEADER_TABLE_SIZE),
        Some(1024),
        "SETTINGS {settings:?}"
    );
    // A size update to the advertised size is accepted.
    let mut within = HeaderBlock::new();
    within.table_size_update(1024);
    let request = HeaderBlock::request("GET", "/bytes/10");
    let mut block = within.bytes().to_vec();
    block.extend_from_slice(request.bytes());
    writer
        .write(&raw_headers(1, &block))
        .await
        .expect("send a request with a table size update");
    let headers = response_headers(&mut reader, 1).await;
    assert_eq!(headers.payload.first(), Some(&STATUS_200));

    // One byte above it is a connection error (RFC 7541 section 4.2), so
    // the configured size is enforced, not the protocol default of 4096.
    let mut above = HeaderBlock::new();
    above.table_size_update(1025);
    let mut block = above.bytes().to_vec();
    block.extend_from_slice(request.bytes());
    writer
        .write(&raw_headers(3, &block))
        .await
        .expect("send a request with an oversized table update");
    let ending = reader.ending(ANSWER_WAIT).await;
    // RFC 7541 says COMPRESSION_ERROR; the h2 crate reports HPACK errors as
    // PROTOCOL_ERROR. Either is a connection error that enforces the limit.
    assert!(
        matches!(
            ending,
            Ending::GoAway {
                code: code::COMPRESSION_ERROR | code::PROTOCOL_ERROR,
                last_stream: 1,
                ..
            }
        ),
        "expected GOAWAY(COMPRESSION_ERROR or PROTOCOL_ERROR) after stream 1, got {ending:?}"
    );
}

/// One HEADERS frame (END_HEADERS | END_STREAM) carrying `block` as is.
fn raw_headers(stream: u32, block: &[u8]) -> Vec<u8> {
    tern_testsupport::h2frames::frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        stream,
        block,
    )
}

#[tokio::test]
async fn a_small_body_sent_with_its_head_keeps_to_the_clients_window() {
    // tern hands a whole small body to h2 with its head in one call (h2
    // patch 0011): h2 must still send no more of it than the client's
    // window, here 10 bytes per stream until the client opens it.
    let served = Served::start(&[]);
    let (_, mut reader, mut writer) = served.h2_raw(&[(setting::INITIAL_WINDOW_SIZE, 10)]).await;
    writer
        .write(&HeaderBlock::request("GET", "/bytes/100").frames(1, true))
        .await
        .expect("send the request");
    let head = response_headers(&mut reader, 1).await;
    assert_eq!(head.payload.first(), Some(&STATUS_200));
    assert_eq!(head.flags & flag::END_STREAM, 0, "a body follows");
    let mut body = Vec::new();
    let mut opened = false;
    loop {
        let f = reader
            .next_on_stream(1, ANSWER_WAIT)
            .await
            .unwrap_or_else(|e| panic!("body cut at {} bytes: {e}", body.len()));
        assert_eq!(f.kind, kind::DATA, "{f:?}");
        body.extend_from_slice(&f.payload);
        if !opened {
            assert!(
                body.len() <= 10,
                "{} bytes sent into a 10-byte window",
                body.len()
            );
        }
        if f.flags & flag::END_STREAM != 0 {
            break;
        }
        if !opened && body.len() == 10 {
            // The window is spent: open it for the rest.
            let mut update = h2frames::frame(kind::WINDOW_UPDATE, 0, 1, &90u32.to_be_bytes());
            update.extend(h2frames::frame(
                kind::WINDOW_UPDATE,
                0,
                0,
                &90u32.to_be_bytes(),
            ));
            writer.write(&update).await.expect("send WINDOW_UPDATE");
            opened = true;
        }
    }
    assert!(opened, "the whole body came within a 10-byte window");
    assert_eq!(body, tern_testsupport::backend::pattern(100));
}
