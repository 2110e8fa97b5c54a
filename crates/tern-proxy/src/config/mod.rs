//! Configuration of `tern serve`: options in (command line or TOML file),
//! typed settings out.
//!
//! Strings are parsed exactly once, here: downstream code sees a
//! `SocketAddr`, a `Duration`, a loaded certificate and a validated TLS
//! policy, never a string to re-check. Every error names where it came
//! from: `tern.toml:12: cert /etc/tern/a.pem: no such file`.

mod file;
mod options;
mod reference;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use file::load_file;
pub use options::{CertificateOptions, GlobalOptions, ListenerOptions};
pub use reference::reference_markdown;
use tern_http::rewrite::ForwardedFields;
use tern_tls::{CertFiles, LoadedCert, ServerTlsSettings, TicketSource, TlsPolicy};

/// Listen address when none is given.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8443";

/// A whole, validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Worker threads (one event loop each).
    pub workers: usize,
    /// How workers share the listening sockets.
    pub accept: AcceptMode,
    /// Log format for diagnostics and access log.
    pub log_format: LogFormat,
    /// Access-log destination.
    pub access_log: AccessLogTarget,
    /// Grace period for in-flight requests at shutdown.
    pub shutdown_timeout: Duration,
    /// The listeners.
    pub listeners: Vec<ListenerConfig>,
}

/// How worker threads accept connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptMode {
    /// One listening socket per worker (SO_REUSEPORT): the kernel balances
    /// connections and no two workers wake for the same one.
    ReusePort,
    /// One listening socket polled by every worker.
    Shared,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// `key=value` pairs.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where access-log lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLogTarget {
    /// Standard output.
    Stdout,
    /// Appended to a file.
    File(PathBuf),
    /// Not written.
    Off,
}

/// What a listener does after the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Proxy HTTP to the backends.
    Http,
    /// Pass bytes through, optionally after a PROXY protocol header.
    Tcp {
        /// PROXY protocol version sent first, if any.
        proxy_protocol: Option<ProxyProtocol>,
    },
}

/// PROXY protocol versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyProtocol {
    /// Text header.
    V1,
    /// Binary header (carries ALPN and SNI).
    V2,
}

/// Where a listener forwards: configured backends, or the built-in demo origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// Real backends, round robin.
    Backends(Vec<SocketAddr>),
    /// tern's built-in demo origin (when no backend is configured).
    Demo,
}

/// Bounds on time and memory. Each answers an attack or a failure that
/// would otherwise pin resources.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// TLS handshake deadline (slow or silent clients). Default 10 s.
    pub handshake_timeout: Duration,
    /// Request head deadline once it started (slowloris). Default 10 s.
    pub header_timeout: Duration,
    /// Idle keepalive and stalled-body deadline. Default 60 s.
    pub idle_timeout: Duration,
    /// Backend connect deadline. Default 5 s.
    pub backend_connect_timeout: Duration,
    /// Backend response-head deadline and per-read deadline. Default 60 s.
    pub backend_response_timeout: Duration,
    /// Open client connections across workers. Default 10000.
    pub max_connections: usize,
    /// Request head size bound (431 above). Default 64 KiB.
    pub max_head_bytes: usize,
    /// Idle backend connections kept per backend and worker. Default 64.
    pub backend_pool_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            handshake_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            backend_connect_timeout: Duration::from_secs(5),
            backend_response_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            max_head_bytes: tern_http::head::DEFAULT_MAX_HEAD_BYTES,
            backend_pool_size: 64,
        }
    }
}

/// One validated listener.
#[derive(Debug, Clone)]
pub struct ListenerConfig {
    /// Address to accept on.
    pub listen: SocketAddr,
    /// HTTP or TCP.
    pub mode: Mode,
    /// Where requests go.
    pub upstream: Upstream,
    /// TLS settings with certificates loaded and checked.
    pub tls: ServerTlsSettings,
    /// Forwarding fields tern adds.
    pub forwarded: ForwardedFields,
    /// Time and size bounds.
    pub limits: Limits,
}

/// A configuration error: where, and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}{message}")]
pub struct ConfigError {
    location: String,
    message: String,
}

impl ConfigError {
    /// An error with no file location (command-line options).
    pub fn new(message: impl Into<String>) -> Self {
        ConfigError {
            location: String::new(),
            message: message.into(),
        }
    }

    /// An error at `file:line`.
    pub fn at(file: &Path, line: usize, message: impl Into<String>) -> Self {
        ConfigError {
            location: format!("{}:{}: ", file.display(), line),
            message: message.into(),
        }
    }
}

/// An option that failed to resolve: which key, and why.
#[derive(Debug)]
pub(crate) struct KeyError {
    /// Config key (TOML spelling), for locating the line.
    pub key: &'static str,
    /// One-line reason.
    pub message: String,
}

fn key_err(key: &'static str, message: impl Into<String>) -> KeyError {
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
    let base = Path::new(".");
    let resolved = resolve_listener(listener, base)
        .map_err(|e| ConfigError::new(format!("--{}: {}", e.key.replace('_', "-"), e.message)))?;
    resolve_global(global, vec![resolved])
        .map_err(|e| ConfigError::new(format!("--{}: {}", e.key.replace('_', "-"), e.message)))
}

pub(crate) fn resolve_global(
    g: &GlobalOptions,
    listeners: Vec<ListenerConfig>,
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
    Ok(Config {
        workers,
        accept,
        log_format,
        access_log,
        shutdown_timeout,
        listeners,
    })
}

/// Resolves one listener; relative paths are taken from `base` (the
/// config file's directory).
pub(crate) fn resolve_listener(
    o: &ListenerOptions,
    base: &Path,
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
        let addr = b
            .to_socket_addrs()
            .map_err(|e| key_err("backends", format!("backend {b:?}: {e}")))?
            .next()
            .ok_or_else(|| key_err("backends", format!("backend {b:?} resolves to no address")))?;
        backends.push(addr);
    }
    let upstream = if backends.is_empty() {
        if matches!(mode, Mode::Tcp { .. }) {
            return Err(key_err("backends", "tcp mode needs at least one backend"));
        }
        Upstream::Demo
    } else {
        Upstream::Backends(backends)
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
    let certs = load_certs(o, base, &policy)?;
    let alpn = if o.alpn.is_empty() {
        vec![b"http/1.1".to_vec()]
    } else {
        let mut out = Vec::new();
        for p in &o.alpn {
            match p.as_str() {
                "http/1.1" => out.push(p.as_bytes().to_vec()),
                "h2" => {
                    return Err(key_err(
                        "alpn",
                        "h2 is not supported by this version of tern (use http/1.1)",
                    ))
                }
                other => {
                    return Err(key_err(
                        "alpn",
                        format!("unknown ALPN protocol {other:?} (http/1.1)"),
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
    Ok(ListenerConfig {
        listen,
        mode,
        upstream,
        tls,
        forwarded,
        limits,
    })
}

fn load_certs(
    o: &ListenerOptions,
    base: &Path,
    policy: &TlsPolicy,
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
        files.push((
            "certificate",
            CertFiles {
                cert: base.join(&c.cert),
                key: base.join(&c.key),
                ocsp: c.ocsp.as_ref().map(|p| base.join(p)),
            },
        ));
    }
    let provider = policy.crypto_provider();
    if files.is_empty() {
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

fn duration(
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
