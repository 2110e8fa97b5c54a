//! The configuration reference, generated from the option declarations
//! (`options.rs`) so that `tern serve --help`, the TOML keys and
//! docs/config.md cannot drift apart (a test compares the document with
//! this output). Each table is one options struct; each row is one field,
//! with its doc comment and the default clap shows in `--help`.

use clap::{Arg, Args, Command};

use super::options::{defaults, AcmeOptions, CertificateOptions, RouteOptions, UpstreamOptions};
use super::{GlobalOptions, ListenerOptions};

/// Markdown tables of every option: TOML key, command-line flag, meaning.
pub fn reference_markdown() -> String {
    let mut out = String::new();
    out.push_str("### Top level\n\n");
    let acme_ids: Vec<String> = arguments::<AcmeOptions>()
        .map(|a| a.get_id().to_string())
        .collect();
    let top_rows = arguments::<GlobalOptions>()
        .filter(|a| !acme_ids.iter().any(|id| id == a.get_id().as_str()));
    table(&mut out, top_rows, Flags::Own, &[]);
    out.push_str("\n### `[acme]`\n\n");
    out.push_str("Used by certificates with `acme` names; see docs/acme.md.\n\n");
    table(&mut out, arguments::<AcmeOptions>(), Flags::Own, &[]);
    out.push_str("\n### `[[listener]]`\n\n");
    let tickets = format!(
        "Session tickets on or off (`--no-tickets` turns them off). [default: {}]",
        defaults::TICKETS
    );
    table(
        &mut out,
        arguments::<ListenerOptions>(),
        Flags::Own,
        &[("tickets", "—", &tickets)],
    );
    out.push_str("\n### `[[listener.certificate]]`\n\n");
    out.push_str(
        "More certificates of a listener, chosen by SNI. The flag column names the \
listener flag that says the same on the command line.\n\n",
    );
    table(&mut out, arguments::<CertificateOptions>(), Flags::Own, &[]);
    out.push_str("\n### `[[listener.route]]`\n\n");
    table(&mut out, arguments::<RouteOptions>(), Flags::None, &[]);
    out.push_str("\n### `[listener.request_headers]`, `[listener.response_headers]`\n\n");
    out.push_str("Header rules for the request sent to the backend and the response sent to the client (also tern's own answers); see docs/edge-policy.md. Values may name `${client_ip}`, `${request_id}`, `${tls_version}` and `${sni}`. Forwarding, framing and hop-by-hop fields are tern's: a rule naming one is a config error.\n\n");
    out.push_str("| key | meaning |\n|---|---|\n");
    out.push_str(
        "| `set` | Table of fields set: any the peer sent under the name are replaced. |\n",
    );
    out.push_str("| `add` | Table of fields added next to any the peer sent. |\n");
    out.push_str("| `remove` | Names of fields removed. |\n");
    out.push_str("\n### `[[upstream]]`\n\n");
    table(&mut out, arguments::<UpstreamOptions>(), Flags::None, &[]);
    out.push_str(
        "\nA request whose connection failed before any byte was sent is retried on the \
next server; when every server is down tern answers 503 at once.\n",
    );
    out
}

/// The arguments one options struct declares.
fn arguments<T: Args>() -> impl Iterator<Item = Arg> {
    T::augment_args(Command::new("tern"))
        .get_arguments()
        .cloned()
        .collect::<Vec<_>>()
        .into_iter()
}

/// Whether a table has a flag column.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flags {
    Own,
    None,
}

fn table(
    out: &mut String,
    args: impl Iterator<Item = Arg>,
    flags: Flags,
    extra: &[(&str, &str, &str)],
) {
    match flags {
        Flags::Own => out.push_str("| key | flag | meaning |\n|---|---|---|\n"),
        Flags::None => out.push_str("| key | meaning |\n|---|---|\n"),
    }
    for arg in args {
        let Some(long) = arg.get_long() else { continue };
        // `accept` is hidden from --help (a measuring knob) but is a key.
        if arg.is_hide_set() && long != "accept" {
            continue;
        }
        let key = match arg.get_id().as_str() {
            "no_tickets" => continue,
            id => id.to_string(),
        };
        let meaning = option_meaning(&arg);
        match flags {
            Flags::Own => out.push_str(&format!("| `{key}` | `--{long}` | {meaning} |\n")),
            Flags::None => out.push_str(&format!("| `{key}` | {meaning} |\n")),
        }
    }
    for (key, flag, help) in extra {
        out.push_str(&format!("| `{key}` | {flag} | {help} |\n"));
    }
}

/// The help text of an argument on one line, with its default as `--help`
/// shows it: a reference row. `tern bench`'s table uses it too.
pub fn option_meaning(arg: &Arg) -> String {
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string().replace('\n', " "))
        .unwrap_or_default();
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if defaults.is_empty() {
        help
    } else {
        format!("{help} [default: {}]", defaults.join(","))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn docs_config_md_carries_the_generated_reference() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/config.md"))
                .expect("docs/config.md");
        let generated = super::reference_markdown();
        assert!(
            doc.contains(&generated),
            "docs/config.md is out of date: paste the output of `tern serve --config-reference` between its markers"
        );
    }
}
