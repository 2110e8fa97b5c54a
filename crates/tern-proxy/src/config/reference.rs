//! The configuration reference, generated from the option definitions so
//! that `tern serve --help`, the TOML keys and docs/config.md cannot drift
//! apart (a test compares the document with this output).

use clap::{Args, Command};

use super::{GlobalOptions, ListenerOptions};

/// Markdown tables of every option: TOML key, command-line flag, meaning.
pub fn reference_markdown() -> String {
    let mut out = String::new();
    out.push_str("### Top level\n\n");
    table(
        &mut out,
        GlobalOptions::augment_args(Command::new("tern")),
        &[],
    );
    out.push_str("\n### `[[listener]]`\n\n");
    table(
        &mut out,
        ListenerOptions::augment_args(Command::new("tern")),
        &[(
            "tickets",
            "—",
            "Session tickets on or off (`--no-tickets` turns them off). [default: true]",
        )],
    );
    out.push_str("\n### `[[listener.certificate]]`\n\n");
    out.push_str("| key | flag | meaning |\n|---|---|---|\n");
    out.push_str("| `cert` | `--cert` | Certificate chain (PEM, leaf first). |\n");
    out.push_str("| `key` | `--key` | Private key (PEM: PKCS#8, SEC1 or PKCS#1). |\n");
    out.push_str("| `ocsp` | `--ocsp` | DER OCSP response to staple. |\n");
    out
}

fn table(out: &mut String, cmd: Command, extra: &[(&str, &str, &str)]) {
    out.push_str("| key | flag | meaning |\n|---|---|---|\n");
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if arg.is_hide_set() && long != "accept" {
            continue;
        }
        let key = match arg.get_id().as_str() {
            "no_tickets" => continue,
            id => id.to_string(),
        };
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string().replace('\n', " "))
            .unwrap_or_default();
        out.push_str(&format!("| `{key}` | `--{long}` | {help} |\n"));
    }
    for (key, flag, help) in extra {
        out.push_str(&format!("| `{key}` | {flag} | {help} |\n"));
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
