//! One clap definition per subcommand, each in its own file.

pub mod bench;
pub mod bench_config;
pub mod bench_scale;
mod bench_values;
pub mod probe;
pub mod report;
pub mod serve;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, Command as ClapCommand, FromArgMatches, Parser, Subcommand};

/// tern: TLS front-end for HTTP, honest TLS benchmark, TLS diagnosis.
#[derive(Debug, Parser)]
#[command(
    name = "tern",
    version = crate::build_info::VERSION,
    about,
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Terminate TLS in front of HTTP backends.
    Serve(Box<serve::ServeArgs>),
    /// Generate load against one or more URLs and report with full disclosure.
    Bench(Box<AsGiven<bench::BenchArgs>>),
    /// Work with saved bench reports (merge, render).
    Report(report::ReportArgs),
    /// Look for TLS performance traps on an endpoint.
    Probe(probe::ProbeArgs),
    /// Measure this machine's TLS crypto.
    Speed(probe::SpeedArgs),
}

/// Options as the user gave them: clap shows each default in `--help` (read
/// from a named constant), but the value it fills in from that default is
/// cleared again, so an `Option` field is `None` when the option was not
/// given and the code that applies defaults (from the same constants) is
/// the only one that does. Switches keep their `false`.
#[derive(Debug)]
pub struct AsGiven<T>(pub T);

impl<T: Args> Args for AsGiven<T> {
    fn augment_args(cmd: ClapCommand) -> ClapCommand {
        T::augment_args(cmd)
    }

    fn augment_args_for_update(cmd: ClapCommand) -> ClapCommand {
        T::augment_args_for_update(cmd)
    }
}

impl<T: Args + FromArgMatches> FromArgMatches for AsGiven<T> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(&without_defaults::<T>(matches)).map(AsGiven)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

/// `matches` without the values clap filled in from the defaults `T`
/// declares (see [`AsGiven`]).
pub fn without_defaults<T: Args>(matches: &ArgMatches) -> ArgMatches {
    let declared = T::augment_args(ClapCommand::new("declared"));
    let mut matches = matches.clone();
    let defaulted: Vec<String> = matches
        .ids()
        .filter(|id| matches.value_source(id.as_str()) == Some(ValueSource::DefaultValue))
        .map(|id| id.to_string())
        .collect();
    for id in defaulted {
        let takes_values = declared
            .get_arguments()
            .any(|a| a.get_id() == id.as_str() && a.get_action().takes_values());
        // A switch (`--http3`) keeps its false: its field is a bool.
        if takes_values {
            let _ = matches.try_clear_id(&id);
        }
    }
    matches
}
