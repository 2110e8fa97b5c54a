//! `tern probe` and `tern speed` command lines.

use std::process::ExitCode;

/// Arguments of `tern probe` (to be filled in).
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// HOST:PORT to probe.
    pub target: String,
}

/// Arguments of `tern speed` (to be filled in).
#[derive(Debug, clap::Args)]
pub struct SpeedArgs {}

pub fn run(_args: ProbeArgs) -> ExitCode {
    eprintln!("tern probe: not implemented yet");
    ExitCode::from(2)
}

pub fn run_speed(_args: SpeedArgs) -> ExitCode {
    eprintln!("tern speed: not implemented yet");
    ExitCode::from(2)
}
