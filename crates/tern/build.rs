//! Records how this binary was built, for `tern --version`, the start-up
//! log line, `tern bench` reports and `tern speed`: a figure taken with a
//! debug build, or with a binary instrumented to train a PGO profile, is
//! not a figure of tern, and a PGO build and a plain one differ by 11-26 %
//! of instructions per small request (BENCHMARKS.md). Nothing here changes
//! what the binary does.

use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let profile = env::var("PROFILE").unwrap_or_default();
    let opt_level = env::var("OPT_LEVEL").unwrap_or_default();
    let pgo = pgo_mode(&env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default());
    let rustc = env::var("RUSTC")
        .ok()
        .and_then(|rustc| Command::new(rustc).arg("-V").output().ok())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|v| v.split_whitespace().nth(1).map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned());

    let kind = match (profile.as_str(), pgo) {
        (_, "generate") => "PGO-instrumented build, for training a profile only",
        ("release", "use") => "release build, PGO",
        ("release", _) => "release build, no PGO",
        _ => "debug build, not for measuring",
    };
    println!("cargo:rustc-env=TERN_BUILD={kind}, opt-level {opt_level}, rustc {rustc}");
    println!("cargo:rustc-env=TERN_BUILD_PGO={pgo}");
}

/// "use", "generate" or "none", from rustc's flags (`-Cprofile-use=F`,
/// or `-C` then `profile-use=F`; the same for `profile-generate`).
pub(crate) fn pgo_mode(encoded_flags: &str) -> &'static str {
    let mut mode = "none";
    let mut codegen_next = false;
    for flag in encoded_flags.split('\x1f') {
        let option = match flag.strip_prefix("-C") {
            Some("") => {
                codegen_next = true;
                continue;
            }
            Some(rest) => rest,
            None if codegen_next => flag,
            None => "",
        };
        codegen_next = false;
        if option.starts_with("profile-generate") {
            mode = "generate";
        } else if option.starts_with("profile-use") && mode != "generate" {
            mode = "use";
        }
    }
    mode
}
