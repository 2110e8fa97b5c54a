//! `tern serve` command line: flags map onto `tern_proxy::config` options,
//! which are shared with the TOML file (one definition, one doc string).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::Args as _;
use tern_proxy::config::{self, Config, GlobalOptions, ListenerOptions, LogFormat};

/// Arguments of `tern serve`: the flags as clap declares them, with the
/// values clap filled in from defaults cleared (so `None` means "not
/// given", as in the TOML file), and the listener flags that were given.
#[derive(Debug)]
pub struct ServeArgs {
    /// TOML configuration file.
    pub config: Option<PathBuf>,
    /// Validate and exit.
    pub check: bool,
    /// Take the listening sockets over from a running tern (binary upgrade).
    pub upgrade: bool,
    /// Print the configuration reference and exit.
    pub config_reference: bool,
    /// Process-wide options.
    pub global: GlobalOptions,
    /// The command line's listener.
    pub listener: ListenerOptions,
    /// Long names of the listener flags given on the command line, in
    /// declaration order (refused with --config).
    pub listener_flags_given: Vec<String>,
}

/// The flags of `tern serve` as declared.
#[derive(Debug, clap::Args)]
#[command(after_help = format!("Durations are written like 10s, 500ms, 2m, 1h. \
With no options, tern listens on {} with a fresh self-signed \
certificate and answers from a built-in demo origin. The configuration file \
reference is docs/config.md.", config::defaults::LISTEN))]
struct ServeFlags {
    /// TOML configuration file (see docs/config.md). Listener options
    /// cannot be combined with it; process-wide ones override the file.
    #[arg(long, short = 'c', value_name = "FILE")]
    config: Option<PathBuf>,

    /// Validate the configuration (certificates included) and exit: 0 when
    /// valid, 1 with the error otherwise.
    #[arg(long)]
    check: bool,

    /// Take the listening sockets over from the tern running on
    /// `upgrade_socket` (a binary upgrade, docs/upgrade.md): once this one
    /// serves, the running one drains and exits. If this one fails to
    /// start, the running one keeps serving.
    #[arg(long, conflicts_with = "check")]
    upgrade: bool,

    /// Print the configuration reference (markdown) and exit.
    #[arg(long, hide = true)]
    config_reference: bool,

    #[command(flatten)]
    global: GlobalOptions,

    #[command(flatten)]
    listener: ListenerOptions,
}

impl clap::Args for ServeArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        ServeFlags::augment_args(cmd)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        ServeFlags::augment_args_for_update(cmd)
    }
}

impl clap::FromArgMatches for ServeArgs {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let given = |id: &str| {
            matches!(
                matches.value_source(id),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        };
        let listener_flags_given = listener_arguments()
            .filter(|a| given(a.get_id().as_str()))
            .filter_map(|a| a.get_long().map(str::to_string))
            .collect();
        // Defaults are shown by --help and applied by config::resolve from
        // the same constants; here "absent" must stay absent.
        let matches = super::without_defaults::<ServeFlags>(matches);
        let flags = ServeFlags::from_arg_matches(&matches)?;
        Ok(ServeArgs {
            config: flags.config,
            check: flags.check,
            upgrade: flags.upgrade,
            config_reference: flags.config_reference,
            global: flags.global,
            listener: flags.listener,
            listener_flags_given,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

/// The flags [`ListenerOptions`] declares: what `--config` refuses.
pub fn listener_arguments() -> impl Iterator<Item = clap::Arg> {
    ListenerOptions::augment_args(clap::Command::new("listener"))
        .get_arguments()
        .cloned()
        .collect::<Vec<_>>()
        .into_iter()
}

/// Runs `tern serve`.
pub fn run(args: ServeArgs) -> ExitCode {
    if args.config_reference {
        print!("{}", config::reference_markdown());
        return ExitCode::SUCCESS;
    }
    let config = match load(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tern: error: {e}");
            return ExitCode::from(1);
        }
    };
    if args.check {
        match &args.config {
            Some(path) => println!("{}: ok", path.display()),
            None => println!("command-line configuration: ok"),
        }
        return ExitCode::SUCCESS;
    }
    init_tracing(config.log_format);
    tracing::info!("tern {}", crate::build_info::VERSION);
    if crate::build_info::pgo_instrumented() {
        tracing::warn!(
            "this binary is instrumented to train a PGO profile (bench/pgo-build.sh): it runs \
             slower and writes its profile at exit; serve with a release or PGO build"
        );
    }
    // SIGHUP re-reads the same sources: the file, or the command line's
    // certificate, key and ticket files.
    let reload: tern_proxy::Reloader = match args.config.clone() {
        Some(path) => {
            let global = args.global.clone();
            Box::new(move || config::load_file(&path, &global))
        }
        None => {
            let (global, listener) = (args.global.clone(), args.listener.clone());
            Box::new(move || config::from_options(&global, &listener))
        }
    };
    let start = if args.upgrade {
        tern_proxy::Start::Upgrade
    } else {
        tern_proxy::Start::Fresh
    };
    match tern_proxy::run(config, Some(reload), start) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tern: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn load(args: &ServeArgs) -> Result<Config, config::ConfigError> {
    match &args.config {
        Some(path) => {
            if let Some(flag) = args.listener_flags_given.first() {
                return Err(config::ConfigError::new(format!(
                    "--{flag} cannot be combined with --config: set it in the file's [[listener]] table"
                )));
            }
            config::load_file(path, &args.global)
        }
        None => config::from_options(&args.global, &args.listener),
    }
}

fn init_tracing(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    // rustls logs each misbehaving client at warn (one line per scanner
    // connection, or per hey request with its "IP:port" server name):
    // handshake failures are counted in tern_tls_handshake_failures_total
    // instead. RUST_LOG=rustls=warn brings them back.
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,rustls=error"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => builder.with_target(false).init(),
        LogFormat::Json => builder.json().init(),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::{Cli, Command};
    use super::ServeArgs;

    fn serve(args: &[&str]) -> ServeArgs {
        let argv = ["tern", "serve"].iter().chain(args);
        match Cli::try_parse_from(argv).expect("parses").command {
            Command::Serve(args) => *args,
            other => panic!("not serve: {other:?}"),
        }
    }

    #[test]
    fn defaults_shown_by_help_reach_resolution_as_absent() {
        let args = serve(&[]);
        assert_eq!(args.listener.h3_max_streams, None);
        assert_eq!(args.listener.listen, None);
        assert!(args.listener.alpn.is_empty());
        assert_eq!(args.global.log_format, None);
        assert!(args.listener_flags_given.is_empty());
    }

    #[test]
    fn help_shows_the_tls_defaults_the_code_applies() {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        let help = cli
            .find_subcommand_mut("serve")
            .expect("serve")
            .render_help()
            .to_string();
        let policy = tern_tls::TlsPolicy::default_fast();
        for (flag, names) in [
            ("--tls-versions", policy.version_names()),
            ("--ciphers", policy.suite_names()),
            ("--groups", policy.group_names()),
        ] {
            // The entry: its line and the text lines below it.
            let row: String = help
                .lines()
                .skip_while(|l| !l.trim_start().starts_with(flag))
                .enumerate()
                .take_while(|(i, l)| *i == 0 || !l.trim_start().starts_with('-'))
                .map(|(_, l)| l.trim())
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                row.contains(&format!("[default: {}]", names.join(" "))),
                "{flag}: {row}"
            );
        }
    }

    #[test]
    fn given_listener_flags_are_named_in_declaration_order() {
        let args = serve(&["--http3", "--listen", "127.0.0.1:1", "--workers", "2"]);
        assert_eq!(args.listener_flags_given, ["listen", "http3"]);
        assert_eq!(args.listener.listen.as_deref(), Some("127.0.0.1:1"));
        assert_eq!(args.global.workers, Some(2));
    }
}
