//! `tern.toml` as `tern serve --config` loads it: any text gives a
//! configuration or a one-line error naming the file (and, for TOML
//! syntax, the line), never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(message) = tern_proxy::fuzzing::config_toml(text) {
        assert!(!message.contains('\n'), "a multi-line error: {message}");
        assert!(
            message.contains("tern.toml"),
            "the error names no file: {message}"
        );
    }
});
