//! The configuration reference, generated from the option definitions so
//! that `tern serve --help`, the TOML keys and docs/config.md cannot drift
//! apart (a test compares the document with this output).

use clap::{Args, Command};

use super::options::AcmeOptions;
use super::{GlobalOptions, ListenerOptions};

/// Markdown tables of every option: TOML key, command-line flag, meaning.
pub fn reference_markdown() -> String {
    let mut out = String::new();
    out.push_str("### Top level\n\n");
    let top = GlobalOptions::augment_args(Command::new("tern"));
    let acme_ids: Vec<String> = AcmeOptions::augment_args(Command::new("tern"))
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .collect();
    let top = acme_ids
        .iter()
        .fold(top, |cmd, id| cmd.mut_arg(id, |a| a.hide(true)));
    table(&mut out, top, &[]);
    out.push_str("\n### `[acme]`\n\n");
    out.push_str("Used by certificates with `acme` names; see docs/acme.md.\n\n");
    table(
        &mut out,
        AcmeOptions::augment_args(Command::new("tern")),
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
    out.push_str("| `acme` | `--acme` | Instead of `cert` and `key`: DNS names to obtain one certificate for over ACME (see `[acme]`). |\n");
    out.push_str("| `key_types` | `--acme-key-types` | With `acme`: `\"ecdsa\"` (P-256), `\"rsa\"` (2048) or both, one certificate each. [default: ecdsa] |\n");
    out.push_str("\n### `[[listener.route]]`\n\n");
    out.push_str("| key | meaning |\n|---|---|\n");
    out.push_str("| `host` | Host name, exact (`api.example.com`) or one-label wildcard (`*.example.com`), matched against each request's Host (port removed), or the SNI when there is no Host. |\n");
    out.push_str("| `upstream` | Name of the `[[upstream]]` group those requests go to. |\n");
    out.push_str("| `allow` | Client networks (CIDR) served on this route; others get 403. [default: all not denied] |\n");
    out.push_str("| `deny` | Client networks (CIDR) answered 403 on this route. |\n");
    out.push_str("\n### `[listener.request_headers]`, `[listener.response_headers]`\n\n");
    out.push_str("Header rules for the request sent to the backend and the response sent to the client (also tern's own answers); see docs/edge-policy.md. Values may name `${client_ip}`, `${request_id}`, `${tls_version}` and `${sni}`. Forwarding, framing and hop-by-hop fields are tern's: a rule naming one is a config error.\n\n");
    out.push_str("| key | meaning |\n|---|---|\n");
    out.push_str(
        "| `set` | Table of fields set: any the peer sent under the name are replaced. |\n",
    );
    out.push_str("| `add` | Table of fields added next to any the peer sent. |\n");
    out.push_str("| `remove` | Names of fields removed. |\n");
    out.push_str("\n### `[[upstream]]`\n\n");
    out.push_str("| key | meaning |\n|---|---|\n");
    for (key, meaning) in UPSTREAM_KEYS {
        out.push_str(&format!("| `{key}` | {meaning} |\n"));
    }
    out
}

/// The keys of `[[upstream]]` (TOML only: a group has no flags).
const UPSTREAM_KEYS: [(&str, &str); 14] = [
    ("name", "Name listeners and routes refer to."),
    ("servers", "Servers: `\"HOST:PORT\"` or `{ addr = \"HOST:PORT\", weight = N }` (weight 1..=100, default 1)."),
    ("balance", "`\"round_robin\"` (smooth weighted) or `\"least_conn\"`. [default: round_robin]"),
    ("protocol", "`\"http1\"` (HTTP/1.1, pooled keepalive), `\"h2c\"` (HTTP/2 over cleartext TCP with prior knowledge) or `\"h2\"` (HTTP/2 over TLS, ALPN `h2`, TLS 1.2/1.3, certificate checked against `tls_ca`). HTTP/2 groups keep one multiplexed session per server and worker; their health checks speak the same protocol. [default: http1]"),
    ("tls_ca", "`protocol = \"h2\"` only, required: PEM bundle of the CA certificates the servers' certificates must chain to (relative to the config file; re-read on reload)."),
    ("tls_server_name", "`protocol = \"h2\"` only: DNS name (sent as SNI) or IP address the servers' certificates must carry. [default: the host of each server's `HOST:PORT`; an IP address is checked against the certificate's IP addresses]"),
    ("health_check_path", "HTTP path for active health checks (GET; 2xx/3xx is healthy). Off when absent."),
    ("health_check_interval", "Time between checks. [default: 2s]"),
    ("health_check_timeout", "Deadline of one check. [default: 1s]"),
    ("rise", "Consecutive successes that mark a server up. [default: 2]"),
    ("fall", "Consecutive failures that mark a server down. [default: 3]"),
    ("max_fails", "Connect failures in a row that eject a server passively. [default: 3]"),
    ("fail_timeout", "How long a passively ejected server is skipped. [default: 10s]"),
    ("(retries)", "A request whose connection failed before any byte was sent is retried on the next server; when every server is down tern answers 503 at once."),
];

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
