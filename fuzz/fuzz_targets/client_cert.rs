//! What tern reads from a client certificate for the access log, the
//! Client-Cert fields and the PROXY v2 SSL TLV, from any bytes: an
//! identity or nothing, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tern_proxy::fuzzing::client_cert(data);
});
