//! `tern bench` and `tern report` command lines: flags mapped onto
//! `tern_bench::BenchConfig`, nothing more. hey's command lines work
//! unchanged (see `rewrite_hey_flags` and docs/bench.md for differences).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use tern_bench::config::defaults;
use tern_bench::report::{csv, html, text};
use tern_bench::BenchError;

use super::bench_config::config_from;
use super::bench_values::{at_least_one, positive_rate, whole_seconds};

/// Arguments of `tern bench`. Short flags and hey's single-dash long flags
/// (`-disable-keepalive`, `-h2`, `-host`, `-cpus`) are hey's.
///
/// Each option is declared once, here: its doc comment is the `--help`
/// text and its row in docs/bench.md (generated: `tern bench
/// --options-reference`, a test compares); its default is a constant in
/// `tern_bench::config::defaults`, shown by `--help` and applied by
/// `BenchConfig::new`. Parsed through [`super::AsGiven`], an option not
/// given is `None`, so `config_from` only changes what the user gave.
/// To add one: a field with a doc comment (never the default), an
/// `Option<T>` type, `default_value = defaults::X...` if it has one, and
/// its effect in `config_from`.
#[derive(Debug, clap::Args)]
#[command(after_help = "hey-compatible: tern bench -n 3000 -c 300 -m GET -disable-keepalive URL")]
pub struct BenchArgs {
    /// Target URL; with --compare, two or more.
    #[arg(required_unless_present = "options_reference", value_name = "URL")]
    pub urls: Vec<String>,
    /// Print the option reference (markdown, docs/bench.md) and exit.
    #[arg(long, hide = true)]
    pub options_reference: bool,
    /// Run the targets in interleaved rounds under the same plan and print
    /// the figures side by side.
    #[arg(long)]
    pub compare: bool,
    // A default that depends on the targets: shown in the help from both
    // constants, applied by BenchConfig::new.
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = at_least_one::<usize>,
          help = format!("Rounds the run is split into (-n and -z are divided among them); \
with several targets, each round runs them in turn. Each round's figures are kept: \
they give comparisons and `tern report diff` their intervals \
[default: {} when comparing, {} for one target]",
              defaults::COMPARE_ROUNDS, defaults::ROUNDS))]
    pub rounds: Option<usize>,
    /// Number of requests to run (per target).
    #[arg(short = 'n', value_name = "N", default_value = defaults::REQUESTS.to_string(),
          allow_negative_numbers = true, value_parser = at_least_one::<u64>)]
    pub requests: Option<u64>,
    /// Number of connections to run concurrently.
    #[arg(short = 'c', value_name = "N", default_value = defaults::CONNECTIONS.to_string(),
          allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub concurrency: Option<usize>,
    /// Rate limit per connection, requests per second (becomes an open loop
    /// at c × q in total; see docs/bench.md).
    #[arg(short = 'q', allow_negative_numbers = true, value_parser = positive_rate)]
    pub qps: Option<f64>,
    /// Duration to send requests (10s, 3m, 500ms); overrides -n.
    #[arg(short = 'z')]
    pub duration: Option<String>,
    /// HTTP method (hey), or, when a number, HTTP/2 streams per connection
    /// (h2load).
    #[arg(short = 'm', value_name = "METHOD|STREAMS")]
    pub method_or_streams: Option<String>,
    /// HTTP method.
    #[arg(long, default_value = defaults::METHOD)]
    pub method: Option<String>,
    /// HTTP/2 or HTTP/3 concurrent streams per connection.
    #[arg(long, value_name = "N", default_value = defaults::STREAMS.to_string(),
          allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub streams: Option<usize>,
    /// Custom HTTP header, repeatable: -H "Accept: text/html".
    #[arg(short = 'H', value_name = "HEADER")]
    pub headers: Vec<String>,
    /// HTTP request body.
    #[arg(short = 'd')]
    pub body: Option<String>,
    /// HTTP request body from file.
    #[arg(short = 'D')]
    pub body_file: Option<PathBuf>,
    /// Content-Type header.
    #[arg(short = 'T')]
    pub content_type: Option<String>,
    /// Accept header.
    #[arg(short = 'A')]
    pub accept: Option<String>,
    /// Basic authentication, user:password.
    #[arg(short = 'a')]
    pub basic_auth: Option<String>,
    /// HTTP proxy address as host:port (CONNECT tunnel).
    #[arg(short = 'x')]
    pub proxy: Option<String>,
    /// Host header.
    #[arg(long = "host")]
    pub host: Option<String>,
    /// Speak HTTP/2 (h2 via ALPN; prior knowledge on http://).
    #[arg(long = "h2")]
    pub h2: bool,
    /// Speak HTTP/3 over QUIC (https:// only, TLS 1.3; also --alpn h3).
    #[arg(long = "h3", conflicts_with = "h2")]
    pub h3: bool,
    /// Run the one URL once per protocol in the list (h1, h2, h3), as
    /// interleaved targets of a comparison: what each protocol costs the
    /// server, side by side.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub compare_protocols: Vec<String>,
    /// Timeout for each request in seconds; 0 for none.
    #[arg(short = 't', value_name = "SECONDS", default_value = defaults::TIMEOUT_S.to_string(),
          allow_negative_numbers = true, value_parser = whole_seconds)]
    pub timeout: Option<u64>,
    /// Do not send Accept-Encoding: gzip.
    #[arg(long)]
    pub disable_compression: bool,
    /// A new connection (full TLS handshake) per request.
    #[arg(long)]
    pub disable_keepalive: bool,
    /// Accepted for hey compatibility; redirects are never followed.
    #[arg(long)]
    pub disable_redirects: bool,
    /// Worker threads (one per core by default).
    #[arg(long, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub cpus: Option<usize>,
    /// Output on stdout: text, json, or csv (one line per request).
    #[arg(short = 'o', value_parser = ["text", "json", "csv"], default_value = defaults::OUTPUT)]
    pub output: Option<String>,
    /// Connection plan: keepalive, new (connection per request), resumed
    /// (connection per request resuming the TLS session).
    #[arg(long, value_parser = ["keepalive", "new", "resumed"], default_value = defaults::PLAN.name())]
    pub plan: Option<String>,
    /// Resumption mechanism for --plan resumed (TLS 1.2 only; TLS 1.3 uses tickets).
    #[arg(long, value_parser = ["tickets", "session-ids"], default_value = defaults::RESUME.name())]
    pub resume: Option<String>,
    /// Before measuring, send requests to each target for this long (2s,
    /// 500ms) and leave them out of every figure: the server's caches,
    /// allocator and CPU frequency settle first.
    #[arg(long, value_name = "DURATION")]
    pub warmup: Option<String>,
    /// Open loop at this total rate (requests/second); latency counts from
    /// the intended send time.
    #[arg(long, allow_negative_numbers = true, value_parser = positive_rate)]
    pub rate: Option<f64>,
    /// Lowest TLS version offered: 1.2 or 1.3.
    #[arg(long, value_parser = ["1.2", "1.3"], default_value = defaults::TLS_MIN.number())]
    pub tls_min: Option<String>,
    /// Highest TLS version offered: 1.2 or 1.3.
    #[arg(long, value_parser = ["1.2", "1.3"], default_value = defaults::TLS_MAX.number())]
    pub tls_max: Option<String>,
    /// Cipher suites offered, comma-separated IANA names.
    #[arg(long, value_delimiter = ',')]
    pub ciphers: Vec<String>,
    /// Key-exchange groups offered, comma-separated (X25519, secp256r1, X25519MLKEM768).
    #[arg(long, value_delimiter = ',')]
    pub groups: Vec<String>,
    /// ALPN protocols offered, comma-separated (default from the HTTP version).
    #[arg(long, value_delimiter = ',')]
    pub alpn: Vec<String>,
    /// Server name sent in SNI (default: the URL host).
    #[arg(long)]
    pub sni: Option<String>,
    /// CA certificates (PEM); the server chain is then verified.
    #[arg(long, value_name = "PEM")]
    pub cacert: Option<PathBuf>,
    /// Do not verify the certificate chain even with --cacert.
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// Do not offer certificate compression (RFC 8879: brotli and zlib, as
    /// browsers offer it); the report says on how many full handshakes the
    /// server used it.
    #[arg(long)]
    pub no_cert_compression: bool,
    /// Also write the JSON report (histograms included) to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write a self-contained HTML report to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Also write one CSV line per request to FILE.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// A gate on the result, repeatable: p99<50ms, p99.9<=1s, mean<5ms,
    /// errors<0.1%, rps>10000, server_cpu_per_request<20us. Checked for
    /// every target and printed as PASS/FAIL; exit status 99 when one fails.
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<tern_bench::threshold::Threshold>,
    /// No progress bar even on a terminal.
    #[arg(long)]
    pub no_progress: bool,
    /// Server process whose CPU time is reported per request, repeatable or
    /// comma-separated (nginx: master and workers). Default: the owners of
    /// the socket listening on a local target's port.
    #[arg(long = "server-pid", value_name = "PID", value_delimiter = ',')]
    pub server_pids: Vec<u32>,
    /// Request mix, load shapes, capacity search, several load machines.
    #[command(flatten)]
    pub scale: super::bench_scale::ScaleArgs,
}

/// hey's long flags with one dash, rewritten to clap's two dashes.
const HEY_LONG_FLAGS: [&str; 7] = [
    "-h2",
    "-h3",
    "-host",
    "-cpus",
    "-disable-compression",
    "-disable-keepalive",
    "-disable-redirects",
];

/// hey spells long flags with one dash (`-disable-keepalive`); clap wants two.
/// Rewrites the known ones so hey command lines work unchanged, only after
/// the `bench` subcommand and only for whole arguments (`-host=x` too).
pub fn rewrite_hey_flags(args: impl Iterator<Item = OsString>) -> Vec<OsString> {
    let mut in_bench = false;
    args.enumerate()
        .map(|(i, arg)| {
            if i == 1 {
                in_bench = arg == "bench";
                return arg;
            }
            if !in_bench {
                return arg;
            }
            let Some(s) = arg.to_str() else { return arg };
            let name = s.split_once('=').map_or(s, |(n, _)| n);
            if HEY_LONG_FLAGS.contains(&name) {
                OsString::from(format!("-{s}"))
            } else {
                arg
            }
        })
        .collect()
}

/// Exit status when a `--threshold` failed (k6 uses the same).
pub(super) const THRESHOLD_FAILED: u8 = 99;

/// Runs `tern bench`.
pub fn run(args: BenchArgs) -> ExitCode {
    if args.options_reference {
        return match write_out(None, &options_reference()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(()) => ExitCode::from(1),
        };
    }
    let command_line = std::env::args().collect::<Vec<_>>().join(" ");
    let config = match config_from(&args, command_line) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tern bench: {e}");
            return ExitCode::from(2);
        }
    };
    let mut report = match tern_bench::run(config) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tern bench: {e}");
            // A configuration refused before any load is a usage error.
            let usage = matches!(e, BenchError::Config(_) | BenchError::TlsConfig(_));
            return ExitCode::from(if usage { 2 } else { 1 });
        }
    };
    // The load tool's build is a condition of the run (a debug or
    // PGO-instrumented client caps its own rate).
    report.tool = format!("tern {}", crate::build_info::VERSION);
    if crate::build_info::pgo_instrumented() {
        report.warnings.push(
            "this tern bench is instrumented to train a PGO profile: its client runs slower \
             and may cap the rate it drives; measure with a release or PGO build"
                .into(),
        );
    }
    tern_bench::threshold::apply(&args.thresholds, &mut report);
    let json = match report.to_json() {
        Ok(j) => j,
        Err(e) => {
            eprintln!("tern bench: {e}");
            return ExitCode::from(1);
        }
    };
    let stdout = match args.output.as_deref() {
        Some("json") => json.clone(),
        Some("csv") => csv::render(&report.targets[0].stats),
        _ => text::render(&report),
    };
    let mut failed = write_out(None, &stdout).is_err();
    if let Some(path) = &args.json {
        failed |= write_out(Some(path), &json).is_err();
    }
    if let Some(path) = &args.html {
        failed |= write_out(Some(path), &html::render(&report)).is_err();
    }
    if let Some(path) = &args.csv {
        failed |= write_out(Some(path), &csv::render(&report.targets[0].stats)).is_err();
    }
    if report.every_request_failed() {
        eprintln!("tern bench: {}", text::failure_line(&report));
    }
    if report.interrupted {
        ExitCode::from(130)
    } else if report.every_request_failed() || failed {
        ExitCode::from(1)
    } else if report.thresholds.iter().any(|t| !t.pass) {
        ExitCode::from(THRESHOLD_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

/// Writes to a file, or stdout when `path` is `None`. A closed stdout
/// (`| head`) is not an error worth a message.
pub(super) fn write_out(path: Option<&PathBuf>, text: &str) -> Result<(), ()> {
    match path {
        None => {
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    eprintln!("tern: stdout: {e}");
                    Err(())
                }
                _ => Ok(()),
            }
        }
        Some(p) => std::fs::write(p, text).map_err(|e| eprintln!("tern: {}: {e}", p.display())),
    }
}

/// docs/bench.md's option table: one row per `tern bench` option, its
/// `--help` text and default, generated from [`BenchArgs`].
pub fn options_reference() -> String {
    use clap::Args as _;
    let cmd = BenchArgs::augment_args(clap::Command::new("bench"));
    let mut out = String::from("| option | meaning |\n|---|---|\n");
    for arg in cmd.get_arguments() {
        if arg.is_hide_set() || arg.is_positional() {
            continue;
        }
        let mut names: Vec<String> = arg
            .get_short()
            .map(|c| format!("-{c}"))
            .into_iter()
            .collect();
        names.extend(arg.get_long().map(|l| format!("--{l}")));
        let mut flag = names.join(", ");
        if arg.get_action().takes_values() {
            let value = match arg.get_value_names() {
                Some(v) => v.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" "),
                None => arg.get_id().as_str().to_ascii_uppercase(),
            };
            flag = format!("{flag} {value}");
        }
        let meaning = tern_proxy::config::option_meaning(arg);
        out.push_str(&format!(
            "| `{}` | {} |\n",
            flag.replace('|', "\\|"),
            meaning.replace('|', "\\|")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use tern_bench::{BenchConfig, ConnectionPlan};

    fn parse(line: &str) -> BenchArgs {
        let args = rewrite_hey_flags(line.split_whitespace().map(OsString::from));
        match crate::cli::Cli::parse_from(args).command {
            crate::cli::Command::Bench(b) => b.0,
            other => panic!("not bench: {other:?}"),
        }
    }

    /// `tern bench --help` as a user sees it.
    fn help() -> String {
        use clap::CommandFactory;
        let mut cli = crate::cli::Cli::command();
        let bench = cli.find_subcommand_mut("bench").expect("bench");
        bench.render_help().to_string()
    }

    #[test]
    fn help_shows_each_default_from_its_constant() {
        let help = help();
        // The row of each option in --help, with the default a constant gives.
        let shown = [
            ("-n <N>", defaults::REQUESTS.to_string()),
            ("-c <N>", defaults::CONNECTIONS.to_string()),
            ("-t <SECONDS>", defaults::TIMEOUT_S.to_string()),
            ("--method <METHOD>", defaults::METHOD.to_string()),
            ("--streams <N>", defaults::STREAMS.to_string()),
            (
                "--rounds <N>",
                format!(
                    "{} when comparing, {} for one target",
                    defaults::COMPARE_ROUNDS,
                    defaults::ROUNDS
                ),
            ),
            ("--plan <PLAN>", defaults::PLAN.name().to_string()),
            ("--resume <RESUME>", defaults::RESUME.name().to_string()),
            ("-o <OUTPUT>", defaults::OUTPUT.to_string()),
            (
                "--tls-min <TLS_MIN>",
                defaults::TLS_MIN.number().to_string(),
            ),
            (
                "--tls-max <TLS_MAX>",
                defaults::TLS_MAX.number().to_string(),
            ),
        ];
        for (flag, default) in shown {
            let row = help
                .lines()
                .find(|line| line.trim_start().starts_with(flag))
                .unwrap_or_else(|| panic!("{flag} not in --help:\n{help}"));
            assert!(
                row.contains(&format!("[default: {default}]")),
                "{flag} should show [default: {default}]:\n{row}"
            );
        }
    }

    #[test]
    fn defaults_shown_by_help_are_the_defaults_of_bench_config_new() {
        let a = parse("tern bench https://127.0.0.1/");
        // Filled-in defaults are cleared: only what the user gave is set.
        assert_eq!((a.requests, a.concurrency, a.timeout), (None, None, None));
        assert_eq!((a.plan.as_deref(), a.method.as_deref()), (None, None));
        let from_cli = config_from(&a, String::new()).unwrap();
        let mut from_code = BenchConfig::new(from_cli.targets.clone());
        from_code.progress = from_cli.progress;
        assert_eq!(format!("{from_cli:?}"), format!("{from_code:?}"));

        let given = parse(
            "tern bench -n 200 -c 50 -t 20 --method GET --streams 1 --plan keepalive \
             --resume tickets --tls-min 1.2 --tls-max 1.3 https://127.0.0.1/",
        );
        let mut from_flags = config_from(&given, String::new()).unwrap();
        from_flags.progress = from_cli.progress;
        from_flags.tls.min_version = None;
        from_flags.tls.max_version = None;
        assert_eq!(
            format!("{from_flags:?}"),
            format!("{from_code:?}"),
            "giving each default explicitly changes nothing"
        );

        let compare = parse("tern bench --compare https://127.0.0.1/ https://[::1]/");
        let c = config_from(&compare, String::new()).unwrap();
        assert_eq!(c.rounds, defaults::COMPARE_ROUNDS);
        assert_eq!(from_cli.rounds, defaults::ROUNDS);
        let one = parse("tern bench --rounds 4 https://127.0.0.1/");
        assert_eq!(config_from(&one, String::new()).unwrap().rounds, 4);
    }

    #[test]
    fn docs_bench_md_carries_the_generated_option_table() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/bench.md"))
                .expect("docs/bench.md");
        assert!(
            doc.contains(&options_reference()),
            "docs/bench.md is out of date: paste the output of `tern bench --options-reference` between its markers"
        );
    }

    #[test]
    fn hey_command_line_parses_unchanged() {
        let a = parse("tern bench -n 3000 -c 300 -m GET -disable-keepalive -h2 -host x.test -cpus 2 -o csv https://127.0.0.1:8443/");
        assert_eq!((a.requests, a.concurrency), (Some(3000), Some(300)));
        assert!(a.disable_keepalive && a.h2);
        assert_eq!(a.host.as_deref(), Some("x.test"));
        assert_eq!(a.cpus, Some(2));
        let c = config_from(&a, String::new()).unwrap();
        assert_eq!(
            c.tls.sni.as_deref(),
            Some("x.test"),
            "hey sends -host as SNI"
        );
        assert_eq!(c.plan, ConnectionPlan::NewConnection);
        assert_eq!(c.method, "GET");
        assert!(c.record_requests);
    }

    #[test]
    fn numeric_m_means_streams() {
        let a = parse("tern bench -h2 -m 10 https://127.0.0.1/");
        let c = config_from(&a, String::new()).unwrap();
        assert_eq!((c.method.as_str(), c.streams_per_connection), ("GET", 10));
    }

    #[test]
    fn rewrite_only_touches_bench_flags() {
        let out = rewrite_hey_flags(["tern", "serve", "-host"].map(OsString::from).into_iter());
        assert_eq!(out[2], "-host");
        let out = rewrite_hey_flags(
            ["tern", "bench", "-host=a", "-h"]
                .map(OsString::from)
                .into_iter(),
        );
        assert_eq!(
            (out[2].to_str(), out[3].to_str()),
            (Some("--host=a"), Some("-h"))
        );
    }
}
