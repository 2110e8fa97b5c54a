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
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let pgo = pgo_mode(&flags);
    let inliner = inline_thresholds(&flags);
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
    println!("cargo:rustc-env=TERN_BUILD={kind}, opt-level {opt_level}{inliner}, rustc {rustc}");
    println!("cargo:rustc-env=TERN_BUILD_PGO={pgo}");
}

/// "use", "generate" or "none", from rustc's flags (`-Cprofile-use=F`,
/// or `-C` then `profile-use=F`; the same for `profile-generate`).
pub(crate) fn pgo_mode(encoded_flags: &str) -> &'static str {
    let mut mode = "none";
    for option in codegen_options(encoded_flags) {
        if option.starts_with("profile-generate") {
            mode = "generate";
        } else if option.starts_with("profile-use") && mode != "generate" {
            mode = "use";
        }
    }
    mode
}

/// The values of the `-C` options in CARGO_ENCODED_RUSTFLAGS (flags
/// separated by 0x1f), spelled `-Cname=value` or `-C` then `name=value`.
fn codegen_options(encoded_flags: &str) -> impl Iterator<Item = &str> {
    let mut codegen_next = false;
    encoded_flags.split('\x1f').filter_map(move |flag| {
        let option = match flag.strip_prefix("-C") {
            Some("") => {
                codegen_next = true;
                return None;
            }
            Some(rest) => Some(rest),
            None if codegen_next => Some(flag),
            None => None,
        };
        codegen_next = false;
        option
    })
}

/// The LLVM inline thresholds set in rustc's flags (`-Cllvm-args=
/// -inline-threshold=N`, `-inlinehint-threshold=N`), as ", inline
/// threshold N" for the description; empty when LLVM's own apply. The
/// same code inlined with another threshold runs another number of
/// instructions per request (BENCHMARKS.md, "The default build's
/// inliner"), so a figure must say which it was taken with.
pub(crate) fn inline_thresholds(encoded_flags: &str) -> String {
    let mut said = String::new();
    for option in codegen_options(encoded_flags) {
        let Some(args) = option.strip_prefix("llvm-args=") else {
            continue;
        };
        // rustc splits an llvm-args value at spaces.
        for arg in args.split_whitespace() {
            let arg = arg.trim_start_matches('-');
            if let Some(n) = arg.strip_prefix("inline-threshold=") {
                said.push_str(&format!(", inline threshold {n}"));
            } else if let Some(n) = arg.strip_prefix("inlinehint-threshold=") {
                said.push_str(&format!(", inline hint threshold {n}"));
            }
        }
    }
    said
}
