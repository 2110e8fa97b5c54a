//! One clap definition per subcommand, each in its own file.

pub mod bench;
pub mod bench_scale;
pub mod probe;
pub mod serve;

use clap::{Parser, Subcommand};

/// tern: TLS front-end for HTTP, honest TLS benchmark, TLS diagnosis.
#[derive(Debug, Parser)]
#[command(name = "tern", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Terminate TLS in front of HTTP backends.
    Serve(Box<serve::ServeArgs>),
    /// Generate load against one or more URLs and report with full disclosure.
    Bench(Box<bench::BenchArgs>),
    /// Work with saved bench reports (merge, render).
    Report(bench::ReportArgs),
    /// Look for TLS performance traps on an endpoint.
    Probe(probe::ProbeArgs),
    /// Measure this machine's TLS crypto.
    Speed(probe::SpeedArgs),
}
