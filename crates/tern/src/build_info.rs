//! How this binary was built (see build.rs): `tern --version` shows it,
//! `tern serve` logs it at start, `tern bench` reports and `tern speed`
//! state it, so a figure says which build it was taken with.

/// `0.1.0 (release build, PGO, opt-level 3, rustc 1.95.0)`; a build with
/// `-Cllvm-args=-inline-threshold=N` says `, inline threshold N` after the
/// opt-level.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("TERN_BUILD"), ")");

/// Built with `-Cprofile-generate`: counters on every branch of tern's
/// Rust code, for training a PGO profile, never for serving or measuring.
///
/// The mode is read through `black_box` so the comparison is not folded:
/// folded, it is a branch in the instrumented build and none in the
/// optimised one, and rustc then discards the profile of every function
/// that calls this (`cli::serve::run`, `cli::bench::run`, `main`: "hash
/// mismatch ... count discarded" in bench/pgo-build.sh's output).
pub fn pgo_instrumented() -> bool {
    std::hint::black_box(env!("TERN_BUILD_PGO")) == "generate"
}

/// The build script itself, for its flag parser's tests.
#[cfg(test)]
#[allow(dead_code)]
#[path = "../build.rs"]
mod build_script;

#[cfg(test)]
mod tests {
    use super::build_script::{inline_thresholds, pgo_mode};

    #[test]
    fn pgo_mode_reads_both_spellings_of_the_codegen_flag() {
        assert_eq!(pgo_mode(""), "none");
        assert_eq!(pgo_mode("-Copt-level=3"), "none");
        assert_eq!(pgo_mode("-Cprofile-use=/t/tern.profdata"), "use");
        assert_eq!(pgo_mode("-C\x1fprofile-use=/t/tern.profdata"), "use");
        assert_eq!(pgo_mode("-C\x1fprofile-generate=/t/raw"), "generate");
        assert_eq!(pgo_mode("--cfg\x1fx\x1f-Cprofile-generate"), "generate");
        // A value that merely mentions the words is not the flag.
        assert_eq!(pgo_mode("--cfg\x1fprofile-use"), "none");
        // Instrumenting wins: such a binary is slow whatever else it uses.
        assert_eq!(
            pgo_mode("-Cprofile-use=/p\x1f-Cprofile-generate=/r"),
            "generate"
        );
    }

    #[test]
    fn inline_thresholds_are_read_from_llvm_args() {
        assert_eq!(inline_thresholds(""), "");
        assert_eq!(inline_thresholds("-Copt-level=3"), "");
        assert_eq!(
            inline_thresholds("-Cllvm-args=-inline-threshold=500"),
            ", inline threshold 500"
        );
        assert_eq!(
            inline_thresholds("-C\x1fllvm-args=-inline-threshold=500 -inlinehint-threshold=900"),
            ", inline threshold 500, inline hint threshold 900"
        );
        // Another LLVM option, or the words outside llvm-args, say nothing.
        assert_eq!(
            inline_thresholds("-Cllvm-args=-pgo-warn-missing-function"),
            ""
        );
        assert_eq!(inline_thresholds("--cfg\x1finline-threshold=5"), "");
    }

    #[test]
    fn the_version_names_the_build() {
        let kind = if cfg!(debug_assertions) {
            "debug build"
        } else {
            "release build"
        };
        assert!(super::VERSION.contains(kind), "{}", super::VERSION);
        assert!(super::VERSION.contains(", rustc 1."), "{}", super::VERSION);
        assert!(!super::pgo_instrumented());
    }
}
