//! A shared ticket-key file: any text gives keys or an error naming the
//! line, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = tern_tls::tickets::parse_key_file_text(text);
});
