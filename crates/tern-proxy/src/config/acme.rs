//! The ACME parts of the configuration: the `[acme]` table (which CA,
//! where state lives) and each listener's certificates by name.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use base64::Engine;
use tern_acme::{AcmeSettings, CertSpec, Challenge, Eab, KeyType};

use super::options::{defaults, AcmeOptions, ListenerOptions};
use super::resolve::{duration, key_err};
use super::KeyError;

/// What a listener's configuration asks of ACME.
pub(crate) struct ListenerAcme {
    pub certs: Vec<CertSpec>,
    /// The listener's default certificate is its first ACME one.
    pub first: bool,
    pub http_listen: Option<SocketAddr>,
}

/// The listener's ACME certificates (`acme` on the listener, then each
/// `[[listener.certificate]]` with `acme`) and its plain-HTTP listener.
pub(crate) fn listener_acme(o: &ListenerOptions) -> Result<ListenerAcme, KeyError> {
    let http_listen = match &o.http_listen {
        None => None,
        Some(text) => Some(
            text.parse::<SocketAddr>()
                .map_err(|_| key_err("http_listen", format!("{text:?} is not an ADDR:PORT")))?,
        ),
    };
    let challenge = if http_listen.is_some() {
        Challenge::Http01
    } else {
        Challenge::TlsAlpn01
    };
    let mut certs = Vec::new();
    if o.acme.is_empty() && !o.acme_key_types.is_empty() {
        return Err(key_err("acme_key_types", "needs acme names"));
    }
    if !o.acme.is_empty() {
        specs(
            &o.acme,
            &o.acme_key_types,
            challenge,
            "acme",
            "acme_key_types",
            &mut certs,
        )?;
    }
    let mut first_table_is_acme = None;
    for c in &o.certificate {
        let files = c.cert.is_some() || c.key.is_some();
        first_table_is_acme.get_or_insert(!c.acme.is_empty());
        match (files, c.acme.is_empty()) {
            (true, false) => {
                return Err(key_err(
                    "acme",
                    "a certificate has either cert and key files or acme names, not both",
                ))
            }
            (false, true) => {
                return Err(key_err(
                    "certificate",
                    "a [[listener.certificate]] needs cert and key, or acme names",
                ))
            }
            (true, true) => {
                if c.cert.is_none() || c.key.is_none() {
                    let missing = if c.cert.is_none() { "cert" } else { "key" };
                    return Err(key_err("certificate", format!("{missing} is missing")));
                }
                if !c.key_types.is_empty() {
                    return Err(key_err("key_types", "only applies with acme names"));
                }
            }
            (false, false) => {
                if c.ocsp.is_some() {
                    return Err(key_err(
                        "ocsp",
                        "ACME certificates get no stapled OCSP file (their CA's responder changes with each one)",
                    ));
                }
                specs(
                    &c.acme,
                    &c.key_types,
                    challenge,
                    "acme",
                    "key_types",
                    &mut certs,
                )?
            }
        }
    }
    if http_listen.is_some() && certs.is_empty() {
        // Redirects alone are useful too; nothing to check.
    }
    let first = o.cert.is_empty() && (!o.acme.is_empty() || first_table_is_acme == Some(true));
    Ok(ListenerAcme {
        certs,
        first,
        http_listen,
    })
}

fn specs(
    names: &[String],
    key_types: &[String],
    challenge: Challenge,
    names_key: &'static str,
    types_key: &'static str,
    out: &mut Vec<CertSpec>,
) -> Result<(), KeyError> {
    let mut checked = Vec::with_capacity(names.len());
    for name in names {
        let name = tern_acme::check_name(name).map_err(|e| key_err(names_key, e))?;
        if checked.contains(&name) {
            return Err(key_err(names_key, format!("{name:?} is named twice")));
        }
        checked.push(name);
    }
    if checked.is_empty() {
        return Err(key_err(names_key, "no names"));
    }
    let mut keys = Vec::new();
    let given = key_types.iter().map(String::as_str);
    let key_types: Vec<&str> = if key_types.is_empty() {
        defaults::ACME_KEY_TYPES.to_vec()
    } else {
        given.collect()
    };
    for t in key_types {
        let key = KeyType::parse(t)
            .ok_or_else(|| key_err(types_key, format!("unknown key type {t:?} (ecdsa, rsa)")))?;
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    for key in keys {
        out.push(CertSpec {
            names: checked.clone(),
            key,
            challenge,
        });
    }
    Ok(())
}

/// The `[acme]` table (and its flags) as settings; relative paths are
/// taken from `base`.
pub(crate) fn settings(a: &AcmeOptions, base: &Path) -> Result<AcmeSettings, KeyError> {
    let directory = match a.directory.as_deref().unwrap_or(defaults::ACME_DIRECTORY) {
        "letsencrypt" => tern_acme::LETS_ENCRYPT.to_string(),
        "letsencrypt-staging" => tern_acme::LETS_ENCRYPT_STAGING.to_string(),
        url if url.starts_with("https://") && url.len() > "https://".len() => url.to_string(),
        other => {
            return Err(key_err(
                "directory",
                format!("{other:?} is not an https:// URL (or letsencrypt, letsencrypt-staging)"),
            ))
        }
    };
    for c in &a.contact {
        if !c.starts_with("mailto:") || c.len() <= "mailto:".len() {
            return Err(key_err(
                "contact",
                format!("{c:?}: contacts are mailto: URIs, e.g. mailto:ops@example.com"),
            ));
        }
    }
    let state_dir = match &a.state_dir {
        Some(dir) => base.join(dir),
        None => default_state_dir(),
    };
    if state_dir.exists() && !state_dir.is_dir() {
        return Err(key_err(
            "state_dir",
            format!("{} exists and is not a directory", state_dir.display()),
        ));
    }
    let ca_root = match &a.ca_root {
        None => None,
        Some(file) => {
            let path = base.join(file);
            let pem = std::fs::read(&path)
                .map_err(|e| key_err("ca_root", format!("{}: cannot read: {e}", path.display())))?;
            if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                return Err(key_err(
                    "ca_root",
                    format!("{}: no PEM certificate in it", path.display()),
                ));
            }
            Some(path)
        }
    };
    let eab = match (&a.eab_kid, &a.eab_hmac_key) {
        (None, None) => None,
        (Some(kid), Some(key)) => {
            let hmac_key = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(key.trim_end_matches('='))
                .map_err(|_| key_err("eab_hmac_key", "not base64url (as the CA gives it)"))?;
            if hmac_key.is_empty() {
                return Err(key_err("eab_hmac_key", "empty"));
            }
            Some(Eab {
                kid: kid.clone(),
                hmac_key,
            })
        }
        // Reported at the key that is there (the missing one has no line).
        (Some(_), None) => {
            return Err(key_err(
                "eab_kid",
                "eab_hmac_key is missing (eab_kid is set)",
            ))
        }
        (None, Some(_)) => {
            return Err(key_err(
                "eab_hmac_key",
                "eab_kid is missing (eab_hmac_key is set)",
            ))
        }
    };
    let retry_base = duration(a.retry.as_deref(), "retry", defaults::ACME_RETRY)?;
    Ok(AcmeSettings {
        directory,
        contact: a.contact.clone(),
        state_dir,
        ca_root,
        eab,
        retry_base,
    })
}

fn default_state_dir() -> PathBuf {
    if let Some(data) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(data).join("tern/acme");
    }
    // Root (a system service) keeps state in /var/lib.
    let root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) if !root => PathBuf::from(home).join(".local/share/tern/acme"),
        _ => PathBuf::from("/var/lib/tern/acme"),
    }
}

/// Flag names of `[acme]` keys, for errors about command-line values.
pub(crate) fn flag_of(key: &str) -> String {
    format!("--acme-{}", key.replace('_', "-"))
}
