//! What tern reads from a certificate for the access log, the Client-Cert
//! fields and the PROXY v2 SSL TLV (a client's identity; its own
//! certificate's algorithm names), from any bytes: a value or nothing,
//! never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tern_proxy::fuzzing::client_cert(data);
    let _ = tern_proxy::fuzzing::cert_algorithms(data);
});
