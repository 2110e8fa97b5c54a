//! `tern report` command line: merge, render, print and compare the JSON
//! reports `tern bench --json` writes. Exit codes are `tern bench`'s (99
//! when a compared figure got worse beyond the tolerance).

use std::path::PathBuf;
use std::process::ExitCode;

use tern_bench::config::defaults;
use tern_bench::report::{html, text};
use tern_bench::Report;

use super::bench::{write_out, THRESHOLD_FAILED};
use super::bench_values::parse_share;

/// Arguments of `tern report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    #[command(subcommand)]
    pub action: ReportAction,
}

/// What `tern report` does.
#[derive(Debug, clap::Subcommand)]
pub enum ReportAction {
    /// Merge JSON reports of the same targets run from several load machines.
    Merge {
        /// JSON reports written by `tern bench --json`.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Output on stdout: text or json.
        #[arg(short = 'o', value_parser = ["text", "json"], default_value = defaults::OUTPUT)]
        output: String,
        /// Also write the merged JSON to FILE.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Also write an HTML report to FILE.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
    /// Render a JSON report as a self-contained HTML page.
    Html {
        /// JSON report.
        file: PathBuf,
        /// Output file (default: the input with .html).
        #[arg(short = 'o', long)]
        out: Option<PathBuf>,
    },
    /// Compare two JSON reports figure by figure: change, interval and
    /// verdict (better / worse / same); exit 99 when a figure got worse
    /// beyond the tolerance: a performance gate for CI.
    Diff {
        /// The reference run.
        base: PathBuf,
        /// The run to judge.
        new: PathBuf,
        /// Changes smaller than this are "same" (percent, or a fraction).
        #[arg(long, default_value = defaults::DIFF_TOLERANCE, value_parser = parse_share)]
        tolerance: f64,
        /// Output on stdout: text or json.
        #[arg(short = 'o', value_parser = ["text", "json"], default_value = defaults::OUTPUT)]
        output: String,
    },
    /// Print a JSON report as text.
    Text {
        /// JSON report.
        file: PathBuf,
    },
}

/// Runs `tern report`.
pub fn run(args: ReportArgs) -> ExitCode {
    let result = match args.action {
        ReportAction::Merge {
            files,
            output,
            json,
            html: html_path,
        } => files
            .iter()
            .map(|f| Report::read(&f.to_string_lossy()))
            .collect::<Result<Vec<_>, _>>()
            .and_then(Report::merge)
            .and_then(|merged| {
                let json_text = merged.to_json()?;
                let shown = if output == "json" {
                    json_text.clone()
                } else {
                    text::render(&merged)
                };
                let mut ok = write_out(None, &shown).is_ok();
                if let Some(p) = json {
                    ok &= write_out(Some(&p), &json_text).is_ok();
                }
                if let Some(p) = html_path {
                    ok &= write_out(Some(&p), &html::render(&merged)).is_ok();
                }
                Ok(ok)
            }),
        ReportAction::Html { file, out } => Report::read(&file.to_string_lossy()).map(|r| {
            let out = out.unwrap_or_else(|| file.with_extension("html"));
            write_out(Some(&out), &html::render(&r)).is_ok()
        }),
        ReportAction::Text { file } => Report::read(&file.to_string_lossy())
            .map(|r| write_out(None, &text::render(&r)).is_ok()),
        ReportAction::Diff {
            base,
            new,
            tolerance,
            output,
        } => {
            return match (
                Report::read(&base.to_string_lossy()),
                Report::read(&new.to_string_lossy()),
            ) {
                (Ok(b), Ok(n)) => {
                    let d = tern_bench::report::diff::Diff::new(&b, &n, tolerance);
                    let shown = if output == "json" {
                        d.to_json()
                    } else {
                        d.render()
                    };
                    if write_out(None, &shown).is_err() {
                        ExitCode::from(1)
                    } else if d.regressed() {
                        ExitCode::from(THRESHOLD_FAILED)
                    } else {
                        ExitCode::SUCCESS
                    }
                }
                (Err(e), _) | (_, Err(e)) => {
                    eprintln!("tern report: {e}");
                    ExitCode::from(1)
                }
            };
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("tern report: {e}");
            ExitCode::from(1)
        }
    }
}
