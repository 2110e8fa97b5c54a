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
    let given = given_options(overrides)?;
    let acme_given = match given.get("acme") {
        Some(toml::Value::Table(t)) => t.clone(),
        _ => toml::Table::new(),
    };
    global = overlay(global, &given)?;
    let from_flags = |key: &str| key != "acme" && given.contains_key(key);
    let acme_from_flag = |key: &str| acme_given.contains_key(key);

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

/// The options `overrides` sets, as a TOML table: unset ones (`None`,
/// empty lists, an empty `acme`) are left out.
fn given_options(overrides: &GlobalOptions) -> Result<toml::Table, ConfigError> {
    fn prune(table: &mut toml::Table) {
        table.retain(|_, value| match value {
            toml::Value::Array(items) => !items.is_empty(),
            toml::Value::Table(inner) => {
                prune(inner);
                !inner.is_empty()
            }
            _ => true,
        });
    }
    let mut table = toml::Table::try_from(overrides)
        .map_err(|e| ConfigError::new(format!("command-line options: {e}")))?;
    prune(&mut table);
    Ok(table)
}

/// The file's top-level options with `given` laid over them (`acme` key
/// by key); listeners and upstream groups stay the file's.
fn overlay(file: GlobalOptions, given: &toml::Table) -> Result<GlobalOptions, ConfigError> {
    let mut table = toml::Table::try_from(&file)
        .map_err(|e| ConfigError::new(format!("configuration: {e}")))?;
    for (key, value) in given {
        match (table.get_mut(key), value) {
            (Some(toml::Value::Table(mine)), toml::Value::Table(theirs)) => {
                mine.extend(theirs.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            _ => {
                table.insert(key.clone(), value.clone());
            }
        }
    }
    let merged: GlobalOptions = table
        .try_into()
        .map_err(|e| ConfigError::new(format!("command-line options: {e}")))?;
    Ok(GlobalOptions {
        upstream: file.upstream,
        listener: file.listener,
        ..merged
    })
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
    fn command_line_values_replace_the_files_key_by_key() {
        let text =
            "workers = 3\nlog_format = \"json\"\n[acme]\ndirectory = \"letsencrypt-staging\"\n\
                    contact = [\"mailto:a@example.com\"]\n[[listener]]\nlisten = \"127.0.0.1:1\"\n";
        let file: GlobalOptions = toml::from_str(text).unwrap();
        let overrides = GlobalOptions {
            workers: Some(2),
            acme: super::super::AcmeOptions {
                retry: Some("5m".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let given = given_options(&overrides).unwrap();
        assert_eq!(given.keys().collect::<Vec<_>>(), ["acme", "workers"]);
        let merged = overlay(file, &given).unwrap();
        assert_eq!(merged.workers, Some(2));
        assert_eq!(merged.log_format.as_deref(), Some("json"));
        assert_eq!(
            merged.acme.directory.as_deref(),
            Some("letsencrypt-staging")
        );
        assert_eq!(merged.acme.contact, ["mailto:a@example.com"]);
        assert_eq!(merged.acme.retry.as_deref(), Some("5m"));
        assert_eq!(merged.listener.len(), 1);
        let bad = GlobalOptions {
            workers: Some(0),
            ..Default::default()
        };
        let e = parse(Path::new("t.toml"), text, &bad)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--workers: must be at least 1");
    }

    #[test]
    fn top_level_options_take_values_so_given_ones_can_be_told() {
        use clap::Args;
        let cmd = GlobalOptions::augment_args(clap::Command::new("t"));
        for arg in cmd.get_arguments() {
            assert!(
                arg.get_action().takes_values(),
                "--{}: a top-level switch must be Option<bool>: a bare bool's false \
                 would override the file",
                arg.get_id()
            );
        }
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
