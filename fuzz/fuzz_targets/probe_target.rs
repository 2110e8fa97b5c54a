//! `tern probe TARGET`: the target is command-line text, parsed partly by
//! hand (the port after http's authority, brackets, user info). Any text
//! gives a host and port or a one-line error, never a panic; a host and
//! port written back as HOST:PORT parse to themselves.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match tern_probe::parse_target(text) {
        Ok((host, port)) => {
            assert!(!host.is_empty(), "{text:?}: empty host");
            assert!(!host.contains(['@', '/', '[', ']']), "{text:?}: host {host:?}");
            let again = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            assert_eq!(
                tern_probe::parse_target(&again).ok(),
                Some((host.clone(), port)),
                "{text:?} gave {host:?} port {port}, which {again:?} does not give back"
            );
        }
        Err(e) => {
            let message = e.to_string();
            assert!(!message.contains('\n'), "a multi-line error: {message}");
        }
    }
});
