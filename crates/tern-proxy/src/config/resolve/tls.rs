//! A listener's TLS: version/suite/group policy, certificates (files,
//! ACME or the built-in self-signed one), ALPN, session resumption and
//! client certificates (mutual TLS).

use std::path::{Path, PathBuf};

use tern_tls::{
    CertFiles, ClientAuth, ClientAuthFiles, ClientAuthMode, LoadedCert, NamedClientAuth,
    ServerTlsSettings, TicketSource, TlsPolicy,
};

use super::super::acme::ListenerAcme;
use super::super::options::defaults;
use super::super::{KeyError, ListenerOptions, Mode};
use super::{duration, key_err};

/// The TLS half of a listener.
pub(super) struct ListenerTls {
    pub settings: ServerTlsSettings,
    /// OCSP staple files, watched for changes.
    pub ocsp_files: Vec<PathBuf>,
    pub acme: ListenerAcme,
}

/// TLS settings with certificates loaded; relative paths from `base`.
pub(super) fn listener_tls(
    o: &ListenerOptions,
    base: &Path,
    mode: Mode,
) -> Result<ListenerTls, KeyError> {
    let policy = TlsPolicy::from_names(&o.tls_versions, &o.ciphers, &o.groups).map_err(|e| {
        let key = if !o.ciphers.is_empty() && e.to_string().contains("cipher") {
            "ciphers"
        } else if !o.groups.is_empty() && e.to_string().contains("group") {
            "groups"
        } else {
            "tls_versions"
        };
        key_err(key, e.to_string())
    })?;
    let acme = super::super::acme::listener_acme(o)?;
    let certs = load_certs(o, base, &policy, !acme.certs.is_empty())?;
    let (client_auth, name_client_auth) = client_auth(o, base, &policy, &certs)?;
    let ocsp_files = o
        .ocsp
        .iter()
        .chain(o.certificate.iter().filter_map(|c| c.ocsp.as_ref()))
        .map(|p| base.join(p))
        .collect();
    let alpn = if o.alpn.is_empty() {
        match mode {
            // TCP mode passes bytes; offering h2 would promise a protocol the
            // backend may not speak. Its operators choose explicitly.
            Mode::Tcp { .. } => Vec::new(),
            Mode::Http => defaults::ALPN
                .iter()
                .map(|p| p.as_bytes().to_vec())
                .collect(),
        }
    } else {
        let mut out = Vec::new();
        for p in &o.alpn {
            match p.as_str() {
                "h2" | "http/1.1" => out.push(p.as_bytes().to_vec()),
                other
                    if matches!(mode, Mode::Tcp { .. })
                        && !other.is_empty()
                        && other.len() < 256 =>
                {
                    out.push(other.as_bytes().to_vec())
                }
                other => {
                    return Err(key_err(
                        "alpn",
                        format!("unknown ALPN protocol {other:?} (h2, http/1.1)"),
                    ))
                }
            }
        }
        out
    };
    let tickets_on = o.tickets.unwrap_or(defaults::TICKETS) && !o.no_tickets;
    let rotation = duration(
        o.ticket_rotation.as_deref(),
        "ticket_rotation",
        defaults::TICKET_ROTATION,
    )?;
    let tickets = match (&o.ticket_keys_file, tickets_on) {
        (_, false) => TicketSource::Disabled,
        (Some(path), true) => {
            let path = base.join(path);
            // Read now so a bad keys file fails --check and start-up.
            tern_tls::TicketKeys::from_file(&path, rotation)
                .map_err(|e| key_err("ticket_keys_file", e.to_string()))?;
            TicketSource::File(path)
        }
        (None, true) => TicketSource::Rotating(rotation),
    };
    let tls = ServerTlsSettings {
        certs,
        policy,
        alpn,
        session_cache_entries: o.session_cache.unwrap_or(defaults::SESSION_CACHE),
        tickets,
        tls13_tickets: 2,
        managed: Vec::new(),
        managed_first: acme.first,
        acme_tls_alpn: None,
        client_auth,
        name_client_auth,
        cert_compression: !o.no_cert_compression,
    };

    Ok(ListenerTls {
        settings: tls,
        ocsp_files,
        acme,
    })
}

/// The certificates from files (with `acme`: possibly none; without, the
/// built-in self-signed one when none are given).
fn load_certs(
    o: &ListenerOptions,
    base: &Path,
    policy: &TlsPolicy,
    acme: bool,
) -> Result<Vec<LoadedCert>, KeyError> {
    if o.cert.len() != o.key.len() {
        let key = if o.cert.len() > o.key.len() {
            "key"
        } else {
            "cert"
        };
        return Err(key_err(
            key,
            format!(
                "{} cert(s) but {} key(s): give one key per certificate",
                o.cert.len(),
                o.key.len()
            ),
        ));
    }
    if o.ocsp.len() > o.cert.len() {
        return Err(key_err("ocsp", "more OCSP staples than certificates"));
    }
    let mut files: Vec<(&'static str, CertFiles)> = Vec::new();
    for (i, (cert, key)) in o.cert.iter().zip(&o.key).enumerate() {
        files.push((
            "cert",
            CertFiles {
                cert: base.join(cert),
                key: base.join(key),
                ocsp: o.ocsp.get(i).map(|p| base.join(p)),
            },
        ));
    }
    for c in &o.certificate {
        // listener_acme checked that a table without acme has both.
        if let (Some(cert), Some(key)) = (&c.cert, &c.key) {
            files.push((
                "certificate",
                CertFiles {
                    cert: base.join(cert),
                    key: base.join(key),
                    ocsp: c.ocsp.as_ref().map(|p| base.join(p)),
                },
            ));
        }
    }
    let provider = policy.crypto_provider();
    if files.is_empty() && !acme {
        let (cert_pem, key_pem) =
            tern_tls::selfsigned::localhost().map_err(|e| key_err("cert", e.to_string()))?;
        let cert = tern_tls::certs::from_pem(
            cert_pem.as_bytes(),
            key_pem.as_bytes(),
            "built-in self-signed",
            &provider,
        )
        .map_err(|e| key_err("cert", e.to_string()))?;
        return Ok(vec![cert]);
    }
    files
        .into_iter()
        .map(|(key, f)| {
            tern_tls::certs::load(&f, &provider).map_err(|e| key_err(key, e.to_string()))
        })
        .collect()
}

/// The listener's client-certificate policy, and those of certificate
/// tables that set their own (inheriting what they leave out), loaded.
/// `certs` are as [`load_certs`] made them: `--cert` pairs first, then the
/// tables with files.
fn client_auth(
    o: &ListenerOptions,
    base: &Path,
    policy: &TlsPolicy,
    certs: &[LoadedCert],
) -> Result<(ClientAuth, Vec<NamedClientAuth>), KeyError> {
    let provider = policy.crypto_provider();
    let files = |mode: Option<&str>,
                 ca: &[String],
                 crl: &[String],
                 inherit: Option<&ClientAuthFiles>|
     -> Result<ClientAuthFiles, KeyError> {
        let text = match (mode, inherit) {
            (Some(text), _) => text,
            (None, Some(i)) => i.mode.as_str(),
            (None, None) => defaults::CLIENT_AUTH,
        };
        let mode = ClientAuthMode::parse(text).ok_or_else(|| {
            key_err(
                "client_auth",
                format!("unknown client_auth {text:?} (none, optional, required)"),
            )
        })?;
        let paths = |list: &[String], inherited: Option<&Vec<PathBuf>>| {
            if list.is_empty() {
                inherited.cloned().unwrap_or_default()
            } else {
                list.iter().map(|p| base.join(p)).collect()
            }
        };
        Ok(ClientAuthFiles {
            mode,
            ca: paths(ca, inherit.map(|i| &i.ca)),
            crl: paths(crl, inherit.map(|i| &i.crl)),
        })
    };
    let load = |f: &ClientAuthFiles| {
        ClientAuth::load(f, &provider).map_err(|e| {
            let key = match &e {
                tern_tls::TlsError::Read { what, .. } | tern_tls::TlsError::BadPem { what, .. } => {
                    *what
                }
                _ => "client_auth",
            };
            key_err(key, e.to_string())
        })
    };
    let listener_files = files(o.client_auth.as_deref(), &o.client_ca, &o.client_crl, None)?;
    let listener = load(&listener_files)?;
    let mut named = Vec::new();
    let mut with_files = o.cert.len();
    for c in &o.certificate {
        let index = if c.cert.is_some() && c.key.is_some() {
            with_files += 1;
            Some(with_files - 1)
        } else {
            None
        };
        if c.client_auth.is_none() && c.client_ca.is_empty() && c.client_crl.is_empty() {
            continue;
        }
        let f = files(
            c.client_auth.as_deref(),
            &c.client_ca,
            &c.client_crl,
            Some(&listener_files),
        )?;
        if f == listener_files {
            continue;
        }
        let names = match index.and_then(|i| certs.get(i)) {
            Some(cert) => cert.names.clone(),
            None => c.acme.iter().map(|n| n.to_ascii_lowercase()).collect(),
        };
        if names.is_empty() {
            return Err(key_err(
                "client_auth",
                "this certificate names no DNS name or address: a per-certificate client_auth applies to its names (SNI)",
            ));
        }
        named.push(NamedClientAuth {
            names,
            auth: load(&f)?,
        });
    }
    let asks = listener_files.mode != ClientAuthMode::None || !named.is_empty();
    if asks && o.quic_early_data.unwrap_or(defaults::QUIC_EARLY_DATA) {
        // Served from 0.5-RTT, requests would reach the backend before
        // the client's certificate is checked.
        return Err(key_err(
            "quic_early_data",
            "cannot be used with client_auth: requests would be forwarded before the client certificate is verified",
        ));
    }
    Ok((listener, named))
}
