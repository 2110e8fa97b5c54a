//! `tern bench` and `tern report` command lines.

use std::ffi::OsString;
use std::process::ExitCode;

/// Arguments of `tern bench` (to be filled in).
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Target URL.
    pub url: Vec<String>,
}

/// Arguments of `tern report` (to be filled in).
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    pub files: Vec<String>,
}

/// hey spells long flags with one dash (`-disable-keepalive`); clap wants two.
/// Rewrites the known ones so hey command lines work unchanged.
pub fn rewrite_hey_flags(args: impl Iterator<Item = OsString>) -> Vec<OsString> {
    args.collect()
}

pub fn run(_args: BenchArgs) -> ExitCode {
    eprintln!("tern bench: not implemented yet");
    ExitCode::from(2)
}

pub fn run_report(_args: ReportArgs) -> ExitCode {
    eprintln!("tern report: not implemented yet");
    ExitCode::from(2)
}
