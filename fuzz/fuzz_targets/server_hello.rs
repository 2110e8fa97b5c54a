//! `tern probe`'s ServerHello parser: a server's reply to a hand-built
//! ClientHello is untrusted input; any bytes give a reply or an error.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tern_probe::wire::parse_server_hello(data);
    let _ = tern_probe::wire::read_server_reply(&mut &data[..]);
});
