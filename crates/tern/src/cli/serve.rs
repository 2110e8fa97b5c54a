//! `tern serve` command line.

use std::process::ExitCode;

/// Arguments of `tern serve` (to be filled in).
#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

pub fn run(_args: ServeArgs) -> ExitCode {
    ExitCode::from(2)
}
