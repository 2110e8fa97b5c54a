//! Reading `tern.toml`, with errors that point at a line.

use std::path::Path;

use super::{resolve_global, resolve_listener, Config, ConfigError, GlobalOptions, KeyError};

/// Reads and validates a TOML configuration file. Relative paths inside it
/// (certificates, keys) are taken from the file's directory.
///
/// Process-wide options set in `overrides` (from the command line) win over
/// the file's.
pub fn load_file(path: &Path, overrides: &GlobalOptions) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(format!("{}: cannot read: {e}", path.display())))?;
    let mut config = parse(path, &text)?;
    let merged = GlobalOptions {
        listener: Vec::new(),
        ..overrides.clone()
    };
    if merged.workers.is_some()
        || merged.log_format.is_some()
        || merged.access_log.is_some()
        || merged.shutdown_timeout.is_some()
        || merged.accept.is_some()
    {
        let base = toml::from_str::<GlobalOptions>(&text)
            .map_err(|e| ConfigError::new(e.message().to_string()))?;
        let combined = GlobalOptions {
            workers: merged.workers.or(base.workers),
            accept: merged.accept.or(base.accept),
            log_format: merged.log_format.or(base.log_format),
            access_log: merged.access_log.or(base.access_log),
            shutdown_timeout: merged.shutdown_timeout.or(base.shutdown_timeout),
            listener: Vec::new(),
        };
        let listeners = std::mem::take(&mut config.listeners);
        config = resolve_global(&combined, listeners).map_err(|e| {
            ConfigError::new(format!("--{}: {}", e.key.replace('_', "-"), e.message))
        })?;
    }
    Ok(config)
}

fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let global: GlobalOptions = toml::from_str(text).map_err(|e| {
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
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut listeners = Vec::with_capacity(global.listener.len());
    for (index, options) in global.listener.iter().enumerate() {
        let listener =
            resolve_listener(options, base).map_err(|e| located(path, text, Some(index), e))?;
        listeners.push(listener);
    }
    for (i, a) in listeners.iter().enumerate() {
        if listeners[..i].iter().any(|b| b.listen == a.listen) {
            let line = line_of_key(text, Some(i), "listen");
            return Err(ConfigError::at(
                path,
                line,
                format!("listen address {} is used twice", a.listen),
            ));
        }
    }
    resolve_global(&global, listeners).map_err(|e| located(path, text, None, e))
}

fn located(path: &Path, text: &str, listener: Option<usize>, e: KeyError) -> ConfigError {
    ConfigError::at(path, line_of_key(text, listener, e.key), e.message)
}

fn line_of_offset(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

/// The line where `key` is set: at top level (`listener == None`) or within
/// the n-th `[[listener]]` table (its `[[listener.certificate]]` sub-tables
/// included). Falls back to the table's header line, then line 1.
fn line_of_key(text: &str, listener: Option<usize>, key: &str) -> usize {
    let mut current: Option<usize> = None; // index of the listener we are in
    let mut seen = 0usize;
    let mut in_other_table = false;
    let mut header_line = 1;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.starts_with('[') {
            let header = line.trim_start_matches('[').trim_end_matches(']').trim();
            if line.starts_with("[[") && header == "listener" {
                current = Some(seen);
                seen += 1;
                in_other_table = false;
                if current == listener {
                    header_line = n + 1;
                }
            } else if header.starts_with("listener.") {
                in_other_table = false;
            } else {
                in_other_table = true;
                current = None;
            }
            continue;
        }
        let in_scope = match listener {
            None => current.is_none() && !in_other_table && seen == 0,
            Some(_) => current == listener && !in_other_table,
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
        parse(Path::new("t.toml"), text).unwrap_err().to_string()
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
