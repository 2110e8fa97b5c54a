//! Turning options into validated settings (shared by flags and file).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tern_http::rewrite::ForwardedFields;
use tern_tls::{CertFiles, LoadedCert, ServerTlsSettings, TicketSource, TlsPolicy};

use super::upstream::{check_health_path, default_health, parse_balance, resolve_addr};
use super::{
    AcceptMode, AccessLogTarget, Config, ConfigError, GlobalOptions, H2Limits, H3Settings,
    KeyError, Limits, ListenerConfig, ListenerOptions, LogFormat, Mode, ProxyProtocol, Route,
    RunAs, TrustedNet, Upstream, UpstreamConfig, DEFAULT_LISTEN,
};

pub(crate) fn key_err(key: &'static str, message: impl Into<String>) -> KeyError {
    KeyError {
        key,
        message: message.into(),
    }
}

/// Resolves command-line options (no file) into a configuration.
pub fn from_options(
    global: &GlobalOptions,
    listener: &ListenerOptions,
) -> Result<Config, ConfigError> {
    let flag_err =
        |e: KeyError| ConfigError::new(format!("--{}: {}", e.key.replace('_', "-"), e.message));
    let base = Path::new(".");
    let mut upstreams = Vec::new();
    let resolved = resolve_listener(listener, base, &mut upstreams).map_err(flag_err)?;
    let mut config = resolve_global(global, vec![resolved], upstreams).map_err(flag_err)?;
    config.acme = acme_settings(global, &config, base)
        .map_err(|e| ConfigError::new(format!("{}: {}", super::acme::flag_of(e.key), e.message)))?;
    Ok(config)
}

/// The `[acme]` settings when some listener orders certificates (checked
/// even when none does, so a typo is not silently ignored), and checks
/// across listeners.
pub(crate) fn acme_settings(
    g: &GlobalOptions,
    config: &Config,
    base: &Path,
) -> Result<Option<tern_acme::AcmeSettings>, KeyError> {
    let settings = super::acme::settings(&g.acme, base)?;
    let used = config.listeners.iter().any(|l| !l.acme.is_empty());
    Ok(used.then_some(settings))
}

/// Resolves the top-level options around already-resolved listeners and
/// upstream groups.
pub(crate) fn resolve_global(
    g: &GlobalOptions,
    listeners: Vec<ListenerConfig>,
    upstreams: Vec<UpstreamConfig>,
) -> Result<Config, KeyError> {
    let workers = match g.workers {
        Some(0) => return Err(key_err("workers", "must be at least 1")),
        Some(n) => n,
        None => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
    };
    let accept = match g.accept.as_deref() {
        None | Some("reuseport") => AcceptMode::ReusePort,
        Some("shared") => AcceptMode::Shared,
        Some(other) => {
            return Err(key_err(
                "accept",
                format!("unknown accept mode {other:?} (reuseport, shared)"),
            ))
        }
    };
    let log_format = match g.log_format.as_deref() {
        None | Some("text") => LogFormat::Text,
        Some("json") => LogFormat::Json,
        Some(other) => {
            return Err(key_err(
                "log_format",
                format!("unknown log format {other:?} (text, json)"),
            ))
        }
    };
    let access_log = match g.access_log.as_deref() {
        None | Some("-") => AccessLogTarget::Stdout,
        Some("off") => AccessLogTarget::Off,
        Some(path) => AccessLogTarget::File(PathBuf::from(path)),
    };
    let shutdown_timeout = duration(
        g.shutdown_timeout.as_deref(),
        "shutdown_timeout",
        Duration::from_secs(30),
    )?;
    let admin = match &g.admin {
        None => None,
        Some(text) => {
            let addr: SocketAddr = text
                .parse()
                .map_err(|_| key_err("admin", format!("{text:?} is not an ADDR:PORT")))?;
            if !addr.ip().is_loopback() {
                return Err(key_err(
                    "admin",
                    format!("{addr} is not a loopback address: the admin listener has no authentication"),
                ));
            }
            Some(addr)
        }
    };
    let upgrade_socket = g.upgrade_socket.as_deref().map(PathBuf::from);
    let run_as = run_as(g.user.as_deref(), g.group.as_deref())?;
    Ok(Config {
        acme: None,
        upgrade_socket,
        run_as,
        admin,
        upstreams,
        workers,
        accept,
        log_format,
        access_log,
        shutdown_timeout,
        listeners,
    })
}

/// Looks `user` and `group` up in the system's databases.
fn run_as(user: Option<&str>, group: Option<&str>) -> Result<Option<RunAs>, KeyError> {
    use nix::unistd::{Group, User};
    let Some(name) = user else {
        return match group {
            Some(_) => Err(key_err("group", "needs `user` as well")),
            None => Ok(None),
        };
    };
    let found = User::from_name(name)
        .map_err(|e| key_err("user", format!("looking up user {name:?}: {e}")))?
        .ok_or_else(|| key_err("user", format!("no user named {name:?}")))?;
    let (group, gid) = match group {
        Some(g) => {
            let entry = Group::from_name(g)
                .map_err(|e| key_err("group", format!("looking up group {g:?}: {e}")))?
                .ok_or_else(|| key_err("group", format!("no group named {g:?}")))?;
            (entry.name, entry.gid.as_raw())
        }
        None => {
            let gid = found.gid;
            let name = Group::from_gid(gid)
                .ok()
                .flatten()
                .map_or_else(|| gid.to_string(), |g| g.name);
            (name, gid.as_raw())
        }
    };
    Ok(Some(RunAs {
        user: found.name,
        uid: found.uid.as_raw(),
        group,
        gid,
    }))
}

/// Resolves one listener; relative paths are taken from `base` (the
/// config file's directory).
/// Resolves one listener; relative paths are taken from `base` (the
/// config file's directory). Named upstream groups are looked up in
/// `upstreams`; a `backends` list becomes a new anonymous group there.
pub(crate) fn resolve_listener(
    o: &ListenerOptions,
    base: &Path,
    upstreams: &mut Vec<UpstreamConfig>,
) -> Result<ListenerConfig, KeyError> {
    let listen_text = o.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
    let listen: SocketAddr = listen_text.parse().map_err(|_| {
        key_err(
            "listen",
            format!("{listen_text:?} is not an ADDR:PORT (e.g. 127.0.0.1:8443 or [::1]:8443)"),
        )
    })?;
    let mode = match o.mode.as_deref() {
        None | Some("http") => {
            if o.proxy_protocol.is_some() {
                return Err(key_err("proxy_protocol", "only applies to mode = \"tcp\""));
            }
            Mode::Http
        }
        Some("tcp") => Mode::Tcp {
            proxy_protocol: match o.proxy_protocol.as_deref() {
                None | Some("off") => None,
                Some("v1") => Some(ProxyProtocol::V1),
                Some("v2") => Some(ProxyProtocol::V2),
                Some(other) => {
                    return Err(key_err(
                        "proxy_protocol",
                        format!("unknown PROXY protocol version {other:?} (v1, v2)"),
                    ))
                }
            },
        },
        Some(other) => {
            return Err(key_err(
                "mode",
                format!("unknown mode {other:?} (http, tcp)"),
            ))
        }
    };
    let mut backends = Vec::with_capacity(o.backends.len());
    for b in &o.backends {
        backends.push(resolve_addr(b, "backends")?);
    }
    let find = |name: &str, key: &'static str, upstreams: &[UpstreamConfig]| {
        upstreams
            .iter()
            .position(|u| u.name == name)
            .ok_or_else(|| key_err(key, format!("no [[upstream]] named {name:?}")))
    };
    let upstream = match (&o.upstream, backends.is_empty()) {
        (Some(_), false) => {
            return Err(key_err(
                "upstream",
                "give either upstream or backends, not both",
            ))
        }
        (Some(name), true) => Upstream::Group(find(name, "upstream", upstreams)?),
        (None, false) => {
            let mut group = UpstreamConfig::simple(format!("listener-{listen}"), backends);
            group.balance = parse_balance(o.balance.as_deref(), "balance")?;
            if let Some(path) = &o.health_check {
                check_health_path(path, "health_check")?;
                group.health = Some(default_health(path.clone()));
            }
            upstreams.push(group);
            Upstream::Group(upstreams.len() - 1)
        }
        (None, true) => {
            if matches!(mode, Mode::Tcp { .. }) {
                return Err(key_err("backends", "tcp mode needs at least one backend"));
            }
            Upstream::Demo
        }
    };
    if o.upstream.is_some() && (o.balance.is_some() || o.health_check.is_some()) {
        let key = if o.balance.is_some() {
            "balance"
        } else {
            "health_check"
        };
        return Err(key_err(
            key,
            "applies to the backends list; set it in the [[upstream]] table instead",
        ));
    }
    let mut routes = Vec::with_capacity(o.route.len());
    for r in &o.route {
        let host = r.host.to_ascii_lowercase();
        let valid = !host.is_empty()
            && host
                .trim_start_matches("*.")
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
        if !valid {
            return Err(key_err(
                "host",
                format!("route host {:?} is not a host name or *.domain", r.host),
            ));
        }
        routes.push(Route {
            host,
            upstream: find(&r.upstream, "upstream", upstreams)?,
        });
    }
    let accept_proxy = match (o.accept_proxy, o.trusted_proxies.is_empty()) {
        (false, true) => None,
        (false, false) => {
            return Err(key_err(
                "trusted_proxies",
                "only applies with accept_proxy = true",
            ))
        }
        (true, true) => {
            return Err(key_err(
                "accept_proxy",
                "needs trusted_proxies: the source networks allowed to send PROXY headers",
            ))
        }
        (true, false) => {
            let mut nets: Vec<TrustedNet> = Vec::with_capacity(o.trusted_proxies.len());
            for n in &o.trusted_proxies {
                let net = n
                    .parse::<TrustedNet>()
                    .or_else(|_| n.parse::<std::net::IpAddr>().map(TrustedNet::from))
                    .map_err(|_| {
                        key_err(
                            "trusted_proxies",
                            format!("{n:?} is not a network (e.g. 10.0.0.0/8) or address"),
                        )
                    })?;
                nets.push(net);
            }
            Some(nets)
        }
    };
    let hd = H2Limits::default();
    let h2 = H2Limits {
        max_concurrent_streams: nonzero_u32(
            o.h2_max_concurrent_streams,
            "h2_max_concurrent_streams",
            hd.max_concurrent_streams,
        )?,
        max_header_list_size: nonzero_u32(
            o.h2_max_header_list_size,
            "h2_max_header_list_size",
            hd.max_header_list_size,
        )?,
        header_table_size: o.h2_header_table_size.unwrap_or(hd.header_table_size),
        max_resets_per_second: nonzero_u32(
            o.h2_max_resets_per_second,
            "h2_max_resets_per_second",
            hd.max_resets_per_second,
        )?,
        max_send_buffer: hd.max_send_buffer,
    };

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
    let acme = super::acme::listener_acme(o)?;
    let certs = load_certs(o, base, &policy, !acme.certs.is_empty())?;
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
            Mode::Http => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
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
    let tickets_on = o.tickets.unwrap_or(true) && !o.no_tickets;
    let rotation = duration(
        o.ticket_rotation.as_deref(),
        "ticket_rotation",
        Duration::from_secs(12 * 3600),
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
        session_cache_entries: o.session_cache.unwrap_or(20_480),
        tickets,
        tls13_tickets: 2,
        managed: Vec::new(),
        managed_first: acme.first,
        acme_tls_alpn: None,
    };

    let forwarded = forwarded_fields(&o.forwarded)?;
    let d = Limits::default();
    let limits = Limits {
        handshake_timeout: duration(
            o.handshake_timeout.as_deref(),
            "handshake_timeout",
            d.handshake_timeout,
        )?,
        header_timeout: duration(
            o.header_timeout.as_deref(),
            "header_timeout",
            d.header_timeout,
        )?,
        idle_timeout: duration(o.idle_timeout.as_deref(), "idle_timeout", d.idle_timeout)?,
        backend_connect_timeout: duration(
            o.backend_connect_timeout.as_deref(),
            "backend_connect_timeout",
            d.backend_connect_timeout,
        )?,
        backend_response_timeout: duration(
            o.backend_response_timeout.as_deref(),
            "backend_response_timeout",
            d.backend_response_timeout,
        )?,
        max_connections: positive(o.max_connections, "max_connections", d.max_connections)?,
        max_head_bytes: match o.max_head_bytes {
            Some(n) if n < 1024 => return Err(key_err("max_head_bytes", "must be at least 1024")),
            Some(n) => n,
            None => d.max_head_bytes,
        },
        backend_pool_size: o.backend_pool_size.unwrap_or(d.backend_pool_size),
    };
    let h3 = h3_settings(o, listen.port(), mode, &tls)?;
    Ok(ListenerConfig {
        listen,
        mode,
        upstream,
        routes,
        accept_proxy,
        h2,
        h3,
        ocsp_files,
        tls,
        forwarded,
        limits,
        acme: acme.certs,
        http_listen: acme.http_listen,
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

fn forwarded_fields(names: &[String]) -> Result<ForwardedFields, KeyError> {
    if names.is_empty() {
        return Ok(ForwardedFields::default());
    }
    let mut f = ForwardedFields {
        x_forwarded_for: false,
        x_forwarded_proto: false,
        forwarded: false,
    };
    for n in names {
        match n.to_ascii_lowercase().as_str() {
            "x-forwarded-for" => f.x_forwarded_for = true,
            "x-forwarded-proto" => f.x_forwarded_proto = true,
            "forwarded" => f.forwarded = true,
            "none" => {}
            other => {
                return Err(key_err(
                    "forwarded",
                    format!("unknown forwarding field {other:?} (x-forwarded-for, x-forwarded-proto, forwarded, none)"),
                ))
            }
        }
    }
    Ok(f)
}

pub(crate) fn duration(
    text: Option<&str>,
    key: &'static str,
    default: Duration,
) -> Result<Duration, KeyError> {
    match text {
        None => Ok(default),
        Some(t) => {
            let d = humantime::parse_duration(t).map_err(|e| {
                key_err(
                    key,
                    format!("{t:?} is not a duration (e.g. 10s, 500ms, 2m): {e}"),
                )
            })?;
            if d.is_zero() {
                return Err(key_err(key, "must be longer than zero"));
            }
            Ok(d)
        }
    }
}

/// HTTP/3 settings, when `http3` is on; the other `h3_*` keys without it
/// are an error (a setting that silently does nothing is a trap).
fn h3_settings(
    o: &ListenerOptions,
    port: u16,
    mode: Mode,
    tls: &ServerTlsSettings,
) -> Result<Option<H3Settings>, KeyError> {
    if !o.http3 {
        for (set, key) in [
            (o.h3_max_streams.is_some(), "h3_max_streams"),
            (o.quic_retry_above.is_some(), "quic_retry_above"),
            (o.alt_svc_max_age.is_some(), "alt_svc_max_age"),
            (o.quic_gso.is_some(), "quic_gso"),
            (o.quic_early_data.is_some(), "quic_early_data"),
        ] {
            if set {
                return Err(key_err(key, "has no effect without http3 = true"));
            }
        }
        return Ok(None);
    }
    if matches!(mode, Mode::Tcp { .. }) {
        return Err(key_err("http3", "HTTP/3 needs mode = \"http\""));
    }
    if let Some(problem) = tls.policy.quic_problem() {
        return Err(key_err("http3", problem));
    }
    let d = H3Settings::new(port);
    Ok(Some(H3Settings {
        max_streams: nonzero_u32(o.h3_max_streams, "h3_max_streams", d.max_streams)?,
        retry_above: o.quic_retry_above.unwrap_or(d.retry_above),
        alt_svc: match o.alt_svc_max_age {
            Some(0) => None,
            Some(age) => Some(super::alt_svc(port, age)),
            None => d.alt_svc,
        },
        gso: o.quic_gso.unwrap_or(d.gso),
        early_data: o.quic_early_data.unwrap_or(d.early_data),
    }))
}

fn nonzero_u32(v: Option<u32>, key: &'static str, default: u32) -> Result<u32, KeyError> {
    match v {
        Some(0) => Err(key_err(key, "must be at least 1")),
        Some(n) => Ok(n),
        None => Ok(default),
    }
}

fn positive(v: Option<usize>, key: &'static str, default: usize) -> Result<usize, KeyError> {
    match v {
        Some(0) => Err(key_err(key, "must be at least 1")),
        Some(n) => Ok(n),
        None => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_make_a_demo_listener_with_a_self_signed_cert() {
        let cfg = from_options(&GlobalOptions::default(), &ListenerOptions::default()).unwrap();
        let l = &cfg.listeners[0];
        assert_eq!(l.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(l.upstream, Upstream::Demo);
        assert_eq!(l.tls.certs.len(), 1);
        assert_eq!(l.limits.max_head_bytes, 64 * 1024);
        assert!(cfg.workers >= 1);
    }

    #[test]
    fn bad_values_name_their_flag() {
        let o = ListenerOptions {
            idle_timeout: Some("soon".into()),
            ..Default::default()
        };
        let e = from_options(&GlobalOptions::default(), &o)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--idle-timeout: \"soon\" is not a duration"),
            "{e}"
        );
        let o = ListenerOptions {
            ciphers: vec!["TLS_DHE_RSA_WITH_AES_128_GCM_SHA256".into()],
            ..Default::default()
        };
        let e = from_options(&GlobalOptions::default(), &o)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--ciphers: "), "{e}");
        assert!(e.contains("DHE"), "{e}");
    }
}
