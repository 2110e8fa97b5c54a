//! `tern`: a TLS front-end for HTTP, an honest TLS benchmark and a diagnosis
//! tool in one binary. This file only parses the command line and hands the
//! typed result to the library crates; no behaviour lives here.

mod build_info;
mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::bench::rewrite_hey_flags(std::env::args_os());
    let cli = cli::Cli::parse_from(args);
    match cli.command {
        cli::Command::Serve(args) => cli::serve::run(*args),
        cli::Command::Bench(args) => cli::bench::run(args.0),
        cli::Command::Report(args) => cli::report::run(args),
        cli::Command::Probe(args) => cli::probe::run(args),
        cli::Command::Speed(args) => cli::probe::run_speed(args),
    }
}
