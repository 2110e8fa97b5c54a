//! Reading `tern.toml`, with errors that point at a line.

use std::collections::HashMap;
use std::path::Path;

use super::upstream::resolve_upstream;
use super::{
    resolve_global, resolve_listener, Config, ConfigError, GlobalOptions, KeyError, UpstreamConfig,
};

/// Reads and validates a TOML configuration file. Relative paths inside it
/// (certificates, keys) are taken from the file's directory.
///
/// Process-wide options set in `overrides` (from the command line) win over
/// the file's.
pub fn load_file(path: &Path, overrides: &GlobalOptions) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(format!("{}: cannot read: {e}", path.display())))?;
    parse(path, &text, overrides)
}

pub(crate) fn parse(
    path: &Path,
    text: &str,
    overrides: &GlobalOptions,
) -> Result<Config, ConfigError> {
    let mut global: GlobalOptions = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of_offset(text, s.start)).unwrap_or(1);
        // toml's message may span lines; keep the first, which says what.
        let message = e
            .message()
            .lines()
            .next()
            .unwrap_or("invalid TOML")
            .to_string();
        ConfigError::at(path, line, message)
    })?;
    if global.listener.is_empty() {
        return Err(ConfigError::at(
            path,
            1,
            "no [[listener]] table: nothing to serve",
        ));
    }
    // Command-line values replace the file's; an error in one of them is
    // reported against the flag, not a line of the file.
    let from_flags = |key: &str| match key {
        "workers" => overrides.workers.is_some(),
        "accept" => overrides.accept.is_some(),
        "log_format" => overrides.log_format.is_some(),
        "access_log" => overrides.access_log.is_some(),
        "shutdown_timeout" => overrides.shutdown_timeout.is_some(),
        "admin" => overrides.admin.is_some(),
        _ => false,
    };
    global.workers = overrides.workers.or(global.workers);
    global.accept = overrides.accept.clone().or(global.accept);
    global.log_format = overrides.log_format.clone().or(global.log_format);
    global.access_log = overrides.access_log.clone().or(global.access_log);
    global.shutdown_timeout = overrides
        .shutdown_timeout
        .clone()
        .or(global.shutdown_timeout);
    global.admin = overrides.admin.clone().or(global.admin);
    let acme_flags = &overrides.acme;
    let acme_from_flag = |key: &str| match key {
        "directory" => acme_flags.directory.is_some(),
        "contact" => !acme_flags.contact.is_empty(),
        "state_dir" => acme_flags.state_dir.is_some(),
        "ca_root" => acme_flags.ca_root.is_some(),
        "eab_kid" => acme_flags.eab_kid.is_some(),
        "eab_hmac_key" => acme_flags.eab_hmac_key.is_some(),
        "retry" => acme_flags.retry.is_some(),
        _ => false,
    };
    {
        let a = &mut global.acme;
        a.directory = acme_flags.directory.clone().or(a.directory.take());
        if !acme_flags.contact.is_empty() {
            a.contact = acme_flags.contact.clone();
        }
        a.state_dir = acme_flags.state_dir.clone().or(a.state_dir.take());
        a.ca_root = acme_flags.ca_root.clone().or(a.ca_root.take());
        a.eab_kid = acme_flags.eab_kid.clone().or(a.eab_kid.take());
        a.eab_hmac_key = acme_flags.eab_hmac_key.clone().or(a.eab_hmac_key.take());
        a.retry = acme_flags.retry.clone().or(a.retry.take());
    }

    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut upstreams: Vec<UpstreamConfig> = Vec::with_capacity(global.upstream.len());
    for (index, options) in global.upstream.iter().enumerate() {
        let group = resolve_upstream(options, base)
            .map_err(|e| located(path, text, Some(("upstream", index)), e))?;
        if upstreams.iter().any(|u| u.name == group.name) {
            let line = line_of_key(text, Some(("upstream", index)), "name");
            return Err(ConfigError::at(
                path,
                line,
                format!("upstream name {:?} is used twice", group.name),
            ));
        }
        upstreams.push(group);
    }
    let mut listeners = Vec::with_capacity(global.listener.len());
    for (index, options) in global.listener.iter().enumerate() {
        let listener = resolve_listener(options, base, &mut upstreams)
            .map_err(|e| located(path, text, Some(("listener", index)), e))?;
        listeners.push(listener);
    }
    for (i, a) in listeners.iter().enumerate() {
        if let Some(plain) = a.http_listen {
            let taken = listeners.iter().any(|b| b.listen == plain)
                || listeners[..i].iter().any(|b| b.http_listen == Some(plain));
            if taken {
                let line = line_of_key(text, Some(("listener", i)), "http_listen");
                return Err(ConfigError::at(
                    path,
                    line,
                    format!("http_listen address {plain} is used twice"),
                ));
            }
        }
        if listeners[..i].iter().any(|b| b.listen == a.listen) {
            let line = line_of_key(text, Some(("listener", i)), "listen");
            return Err(ConfigError::at(
                path,
                line,
                format!("listen address {} is used twice", a.listen),
            ));
        }
    }
    let mut config = resolve_global(&global, listeners, upstreams).map_err(|e| {
        if from_flags(e.key) {
            ConfigError::new(format!("--{}: {}", e.key.replace('_', "-"), e.message))
        } else {
            located(path, text, None, e)
        }
    })?;
    config.acme = super::resolve::acme_settings(&global, &config, base).map_err(|e| {
        if acme_from_flag(e.key) {
            ConfigError::new(format!("{}: {}", super::acme::flag_of(e.key), e.message))
        } else {
            located(path, text, Some(("acme", usize::MAX)), e)
        }
    })?;
    Ok(config)
}

fn located(path: &Path, text: &str, table: Option<(&str, usize)>, e: KeyError) -> ConfigError {
    ConfigError::at(path, line_of_key(text, table, e.key), e.message)
}

fn line_of_offset(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

/// The line where `key` is set: at top level (`table == None`) or within
/// the n-th `[[name]]` table (its `[[name.sub]]` sub-tables included).
/// Falls back to the table's header line, then line 1.
fn line_of_key(text: &str, table: Option<(&str, usize)>, key: &str) -> usize {
    // The section we are in: (array-table name, index), or a plain table.
    let mut current: Option<(String, usize)> = None;
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut header_line = 1;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.starts_with('[') {
            let name = line
                .trim_start_matches('[')
                .trim_end_matches(']')
                .trim()
                .to_string();
            let top = name.split('.').next().unwrap_or("").to_string();
            if line.starts_with("[[") && !name.contains('.') {
                let count = counts.entry(name.clone()).or_insert(0);
                let index = *count;
                *count += 1;
                if table == Some((name.as_str(), index)) {
                    header_line = n + 1;
                }
                current = Some((name, index));
            } else if current.as_ref().is_some_and(|(c, _)| *c == top) {
                // A sub-table of the current array element: same scope.
                // A key that is a table (`[listener.response_headers]`)
                // is found at its header.
                let here = current.as_ref().map(|(c, i)| (c.as_str(), *i));
                if here == table
                    && name.strip_prefix(&top).and_then(|r| r.strip_prefix('.')) == Some(key)
                {
                    return n + 1;
                }
            } else {
                current = Some((name, usize::MAX));
            }
            continue;
        }
        let in_scope = match (table, &current) {
            (None, None) => true,
            (Some((t, i)), Some((c, ci))) => t == c && i == *ci,
            _ => false,
        };
        if in_scope {
            if let Some(rest) = line.strip_prefix(key) {
                if rest.trim_start().starts_with('=') {
                    return n + 1;
                }
            }
        }
    }
    header_line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(Path::new("t.toml"), text, &GlobalOptions::default())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn syntax_and_unknown_keys_point_at_their_line() {
        assert!(
            err("workers = 1\n[[listener]]\nlisten = \"127.0.0.1:1\"\nbogus = 3\n")
                .starts_with("t.toml:4: unknown field `bogus`")
        );
        assert!(err("workers = = 1\n").starts_with("t.toml:1: "));
        assert_eq!(
            err("workers = 2\n"),
            "t.toml:1: no [[listener]] table: nothing to serve"
        );
    }

    #[test]
    fn semantic_errors_point_at_the_key_in_the_right_listener() {
        let text = "[[listener]]\nlisten = \"127.0.0.1:1\"\n\n[[listener]]\nlisten = \"127.0.0.1:2\"\nidle_timeout = \"x\"\n";
        assert!(
            err(text).starts_with("t.toml:6: \"x\" is not a duration"),
            "{}",
            err(text)
        );
        let text = "[[listener]]\nlisten = \"127.0.0.1:1\"\ntls_versions = [\"TLSv1.1\"]\n";
        let e = err(text);
        assert!(e.starts_with("t.toml:3: "), "{e}");
    }

    #[test]
    fn missing_cert_file_names_the_file() {
        let text = "[[listener]]\nlisten = \"127.0.0.1:1\"\ncert = \"/nonexistent/chain.pem\"\nkey = \"/nonexistent/key.pem\"\n";
        let e = err(text);
        assert!(e.starts_with("t.toml:3: "), "{e}");
        assert!(e.contains("/nonexistent/chain.pem"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
