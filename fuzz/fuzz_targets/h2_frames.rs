//! Any bytes after the HTTP/2 connection preface, against tern's real
//! HTTP/2 front end in memory (requests reach a loopback backend): the
//! connection ends once the client has gone, never with a panic, and what
//! tern wrote is whole frames, SETTINGS first.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let out = tern_proxy::fuzzing::h2_session(data);
    let mut rest = &out[..];
    let mut first = true;
    while !rest.is_empty() {
        assert!(rest.len() >= 9, "tern wrote a partial frame header: {rest:?}");
        let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
        if first {
            assert_eq!(rest[3], 4, "tern's first frame is not SETTINGS");
            first = false;
        }
        assert!(rest.len() >= 9 + len, "tern wrote a partial frame");
        rest = &rest[9 + len..];
    }
});
