//! A PROXY protocol header (v1 line or v2 binary) as tern's listener
//! decodes it from a trusted source: any bytes give an address or a
//! refusal, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tern_proxy::fuzzing::proxy_header(data);
});
