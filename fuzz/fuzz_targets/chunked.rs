//! A chunked body, fed to the scanner in two pieces split at a place the
//! input chooses: the scanner must reach the same verdict (and decode the
//! same payload) as when fed whole, and never claim more payload than
//! bytes it was given. The trailer section it keeps is the same either
//! way, within its bound, and parsing it (as tern does to relay trailers)
//! never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern_http::chunked::ChunkedScanner;

fuzz_target!(|data: &[u8]| {
    let Some((&split, body)) = data.split_first() else {
        return;
    };
    let split = usize::from(split).min(body.len());

    let mut whole = ChunkedScanner::new();
    let mut whole_payload = Vec::new();
    let whole_result = whole.decode(body, &mut whole_payload);

    let mut parts = ChunkedScanner::new();
    let mut parts_payload = Vec::new();
    let first = parts.decode(&body[..split], &mut parts_payload);
    let parts_result = match first {
        Ok(scan) if !parts.is_done() => {
            let consumed = scan.consumed;
            assert!(consumed <= split);
            // What the first call did not consume comes again, as a reader
            // keeps unconsumed bytes.
            parts
                .decode(&body[consumed..], &mut parts_payload)
                .map(|s| s.consumed + consumed)
        }
        Ok(scan) => Ok(scan.consumed),
        Err(e) => Err(e),
    };
    match (&whole_result, &parts_result) {
        (Ok(w), Ok(_)) if whole.is_done() => {
            assert!(parts.is_done(), "whole body done, split body not");
            assert_eq!(whole_payload, parts_payload);
            assert!(w.consumed <= body.len());
            let trailers = whole.take_trailers();
            assert_eq!(trailers, parts.take_trailers());
            assert!(trailers.len() <= tern_http::trailers::MAX_TRAILERS);
            let _ = tern_http::trailers::parse_section(&trailers);
        }
        (Err(_), Ok(_)) if parts.is_done() => panic!("split body accepted, whole refused"),
        _ => {}
    }
    assert!(whole.payload_bytes() <= body.len() as u64);
    assert_eq!(whole.payload_bytes(), whole_payload.len() as u64);
});
