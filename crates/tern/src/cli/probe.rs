//! `tern probe` and `tern speed` command lines: flags map onto
//! `tern_probe::ProbeOptions` and `tern_probe::speed::run`; nothing else.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

/// Exit status when the probe could not run at all.
const EXIT_CANNOT_PROBE: u8 = 2;

/// Arguments of `tern probe`.
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// HOST[:PORT] or https:// URL to probe (a TLS endpoint); the port
    /// defaults to 443.
    pub target: String,
    /// Server name to send in SNI (default: HOST when it is a name).
    #[arg(long)]
    pub sni: Option<String>,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Seconds to wait for each connect, read and write.
    #[arg(long, default_value_t = 5.0)]
    pub timeout: f64,
    /// Handshakes and requests timed per measurement (medians/minimums are
    /// reported); 1 to 20.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=20))]
    pub samples: u16,
    /// Seconds to watch an idle keepalive connection for the server's idle
    /// timeout (0 skips it); the probe lasts at least this long unless the
    /// server closes sooner.
    #[arg(long, default_value_t = 5.0)]
    pub idle_wait: f64,
}

/// Arguments of `tern speed`.
#[derive(Debug, clap::Args)]
pub struct SpeedArgs {
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Seconds spent measuring each figure.
    #[arg(long, default_value_t = 0.3)]
    pub seconds: f64,
    /// Skip the measurement with CPU features masked (OPENSSL_ia32cap).
    #[arg(long)]
    pub no_masked: bool,
    /// Internal: measure in this process and print the figures as JSON (the
    /// masked child run).
    #[arg(long, hide = true)]
    pub measure_only: bool,
}

/// Exit status 0: no finding; 1: at least one finding; 2: could not probe.
pub fn run(args: ProbeArgs) -> ExitCode {
    let Some(timeout) = seconds(args.timeout) else {
        eprintln!("tern probe: --timeout must be a positive number of seconds");
        return ExitCode::from(EXIT_CANNOT_PROBE);
    };
    let mut opts = tern_probe::ProbeOptions::new(args.target);
    opts.sni = args.sni;
    opts.timeout = timeout;
    opts.samples = usize::from(args.samples);
    opts.idle_wait = if args.idle_wait == 0.0 {
        Duration::ZERO
    } else {
        let Some(wait) = seconds(args.idle_wait) else {
            eprintln!("tern probe: --idle-wait must be 0 or a positive number of seconds");
            return ExitCode::from(EXIT_CANNOT_PROBE);
        };
        wait
    };
    match tern_probe::probe(&opts) {
        Ok(report) => {
            if args.json {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.to_text());
            }
            ExitCode::from(report.exit_code())
        }
        Err(e) => {
            eprintln!("tern probe: could not probe {}: {e}", opts.target);
            ExitCode::from(EXIT_CANNOT_PROBE)
        }
    }
}

pub fn run_speed(args: SpeedArgs) -> ExitCode {
    let Some(budget) = seconds(args.seconds) else {
        eprintln!("tern speed: --seconds must be a positive number");
        return ExitCode::from(2);
    };
    if args.measure_only {
        return match tern_probe::speed::measure(budget) {
            Ok(figures) => {
                println!("{}", figures.to_json());
                ExitCode::SUCCESS
            }
            Err(e) => fail_speed(&e),
        };
    }
    let child: Vec<OsString> = [
        "speed",
        "--measure-only",
        "--seconds",
        &args.seconds.to_string(),
    ]
    .map(OsString::from)
    .into();
    let child = (!args.no_masked).then_some(child.as_slice());
    let report = tern_probe::speed::run(budget, child).map(|mut report| {
        report.binary = Some(format!("tern {}", crate::build_info::VERSION));
        if crate::build_info::pgo_instrumented() {
            report.notes.push(
                "this tern is instrumented to train a PGO profile: the crypto figures (aws-lc's C \
                 and assembly) are not affected, but its own code is: never serve or measure \
                 with it"
                    .into(),
            );
        }
        report
    });
    match report {
        Ok(report) if args.json => {
            println!("{}", report.to_json());
            ExitCode::SUCCESS
        }
        Ok(report) => {
            print!("{}", report.to_text());
            ExitCode::SUCCESS
        }
        Err(e) => fail_speed(&e),
    }
}

fn fail_speed(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("tern speed: {e}");
    ExitCode::from(2)
}

fn seconds(s: f64) -> Option<Duration> {
    (s.is_finite() && s > 0.0 && s < 3600.0).then(|| Duration::from_secs_f64(s))
}
