//! `tern serve` command line: flags map onto `tern_proxy::config` options,
//! which are shared with the TOML file (one definition, one doc string).

use std::path::PathBuf;
use std::process::ExitCode;

use tern_proxy::config::{self, Config, GlobalOptions, ListenerOptions, LogFormat};

/// Arguments of `tern serve`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Durations are written like 10s, 500ms, 2m, 1h. \
With no options, tern listens on 127.0.0.1:8443 with a fresh self-signed \
certificate and answers from a built-in demo origin. The configuration file \
reference is docs/config.md.")]
pub struct ServeArgs {
    /// TOML configuration file (see docs/config.md). Listener options
    /// cannot be combined with it; process-wide ones override the file.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Validate the configuration (certificates included) and exit: 0 when
    /// valid, 1 with the error otherwise.
    #[arg(long)]
    pub check: bool,

    /// Take the listening sockets over from the tern running on
    /// `upgrade_socket` (a binary upgrade, docs/upgrade.md): once this one
    /// serves, the running one drains and exits. If this one fails to
    /// start, the running one keeps serving.
    #[arg(long, conflicts_with = "check")]
    pub upgrade: bool,

    /// Print the configuration reference (markdown) and exit.
    #[arg(long, hide = true)]
    pub config_reference: bool,

    #[command(flatten)]
    pub global: GlobalOptions,

    #[command(flatten)]
    pub listener: ListenerOptions,
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
            if let Some(flag) = listener_flag_given(&args.listener) {
                return Err(config::ConfigError::new(format!(
                    "--{flag} cannot be combined with --config: set it in the file's [[listener]] table"
                )));
            }
            config::load_file(path, &args.global)
        }
        None => config::from_options(&args.global, &args.listener),
    }
}

/// The first listener flag set on the command line, if any.
fn listener_flag_given(l: &ListenerOptions) -> Option<&'static str> {
    let strings = [
        ("listen", l.listen.is_some()),
        ("mode", l.mode.is_some()),
        ("backend", !l.backends.is_empty()),
        ("cert", !l.cert.is_empty()),
        ("key", !l.key.is_empty()),
        ("ocsp", !l.ocsp.is_empty()),
        ("tls-versions", !l.tls_versions.is_empty()),
        ("ciphers", !l.ciphers.is_empty()),
        ("groups", !l.groups.is_empty()),
        ("alpn", !l.alpn.is_empty()),
        ("session-cache", l.session_cache.is_some()),
        ("no-tickets", l.no_tickets),
        ("ticket-rotation", l.ticket_rotation.is_some()),
        ("ticket-keys-file", l.ticket_keys_file.is_some()),
        ("forwarded", !l.forwarded.is_empty()),
        ("proxy-protocol", l.proxy_protocol.is_some()),
        ("handshake-timeout", l.handshake_timeout.is_some()),
        ("header-timeout", l.header_timeout.is_some()),
        ("idle-timeout", l.idle_timeout.is_some()),
        (
            "backend-connect-timeout",
            l.backend_connect_timeout.is_some(),
        ),
        (
            "backend-response-timeout",
            l.backend_response_timeout.is_some(),
        ),
        ("max-connections", l.max_connections.is_some()),
        ("max-head-bytes", l.max_head_bytes.is_some()),
        ("backend-pool-size", l.backend_pool_size.is_some()),
    ];
    strings.iter().find(|(_, set)| *set).map(|(name, _)| *name)
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
