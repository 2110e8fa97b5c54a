//! `tern bench --targets FILE`: any text gives a request mix whose
//! schedule is as long as its weights say, or a one-line error naming
//! the file and line, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern_bench::mix::{RequestMix, MAX_SCHEDULE};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match RequestMix::parse(text, "targets.toml") {
        Ok(mix) => {
            let schedule = mix.schedule();
            assert!(!schedule.is_empty() && schedule.len() as u64 <= MAX_SCHEDULE);
            assert!(schedule.iter().all(|&i| usize::from(i) < mix.entries.len()));
        }
        Err(e) => {
            let message = e.to_string();
            assert!(!message.contains('\n'), "a multi-line error: {message}");
            assert!(
                message.starts_with("targets.toml:"),
                "the error names no file: {message}"
            );
        }
    }
});
