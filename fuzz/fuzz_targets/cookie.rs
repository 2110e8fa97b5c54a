//! The `Cookie` field parser behind `hash_key = "cookie:NAME"` and
//! `balance = "sticky_cookie"`, from any bytes: the bytes before the first
//! NUL name the cookie, the rest is the field. A value that is a
//! slice of the field, or nothing; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tern_proxy::fuzzing::cookie(data);
});
