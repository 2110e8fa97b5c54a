//! The PROXY v2 header tern writes to a tcp-mode backend, with its SSL TLV
//! (client certificate facts) built from arbitrary names: read back with
//! ppp, every sub-TLV must say what was written.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = tern_proxy::fuzzing::proxy_v2_ssl_roundtrip(data) {
        panic!("{e}");
    }
});
