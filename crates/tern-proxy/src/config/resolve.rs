//! Turning options into validated settings (shared by flags and file):
//! the top level here, a listener by concern in `front` (listen, mode,
//! upstream, routes, PROXY sources), `tls`, `limits` and `http` (HTTP/2
//! and HTTP/3).

mod front;
mod http;
mod limits;
mod tls;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::options::defaults;
use super::{
    AcceptMode, AccessLogTarget, Config, ConfigError, GlobalOptions, KeyError, ListenerConfig,
    ListenerOptions, LogFormat, RunAs, UpstreamConfig,
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
    let flag_err = |e: KeyError| {
        // The one listener key whose flag is not its name: `--backend` is
        // repeated, `backends` is the list.
        let flag = match e.key {
            "backends" => "backend".to_string(),
            key => key.replace('_', "-"),
        };
        ConfigError::new(format!("--{flag}: {}", e.message))
    };
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
    let accept = match g.accept.as_deref().unwrap_or(defaults::ACCEPT) {
        "reuseport" => AcceptMode::ReusePort,
        "shared" => AcceptMode::Shared,
        other => {
            return Err(key_err(
                "accept",
                format!("unknown accept mode {other:?} (reuseport, shared)"),
            ))
        }
    };
    let log_format = match g.log_format.as_deref().unwrap_or(defaults::LOG_FORMAT) {
        "text" => LogFormat::Text,
        "json" => LogFormat::Json,
        other => {
            return Err(key_err(
                "log_format",
                format!("unknown log format {other:?} (text, json)"),
            ))
        }
    };
    let access_log = match g.access_log.as_deref().unwrap_or(defaults::ACCESS_LOG) {
        "-" => AccessLogTarget::Stdout,
        "off" => AccessLogTarget::Off,
        path => AccessLogTarget::File(PathBuf::from(path)),
    };
    let shutdown_timeout = duration(
        g.shutdown_timeout.as_deref(),
        "shutdown_timeout",
        defaults::SHUTDOWN_TIMEOUT,
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
/// config file's directory). Named upstream groups are looked up in
/// `upstreams`; a `backends` list becomes a new anonymous group there.
/// Each concern lives in its own module; errors come in this order.
pub(crate) fn resolve_listener(
    o: &ListenerOptions,
    base: &Path,
    upstreams: &mut Vec<UpstreamConfig>,
) -> Result<ListenerConfig, KeyError> {
    let front = front::front(o, base, upstreams)?;
    let accept_proxy = front::accept_proxy(o)?;
    let h2 = http::h2_limits(o)?;
    let tls = tls::listener_tls(o, base, front.mode)?;
    let forwarded = limits::forwarded_fields(&o.forwarded)?;
    let limits = limits::limits(o)?;
    let h3 = http::h3_settings(o, front.listen.port(), front.mode, &tls.settings)?;
    let edge = super::edge::resolve(o)?;
    Ok(ListenerConfig {
        listen: front.listen,
        mode: front.mode,
        upstream: front.upstream,
        routes: front.routes,
        accept_proxy,
        h2,
        h3,
        ocsp_files: tls.ocsp_files,
        tls: tls.settings,
        forwarded,
        limits,
        acme: tls.acme.certs,
        http_listen: tls.acme.http_listen,
        edge,
    })
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
    use clap::{Args, Command, FromArgMatches};

    use super::*;
    use crate::config::{Upstream, UpstreamOptions};

    /// Options as clap fills them in with every default of `--help`
    /// written out (as if each were given), plus `extra` flags.
    fn with_help_defaults<T: Args + FromArgMatches>(extra: &[&str]) -> T {
        let argv = ["t"].iter().chain(extra);
        let matches = T::augment_args(Command::new("t")).get_matches_from(argv);
        T::from_arg_matches(&matches).expect("options")
    }

    #[test]
    fn defaults_shown_by_help_are_the_defaults_resolution_applies() {
        let mut shown: ListenerOptions = with_help_defaults(&["--http3"]);
        // Key types without ACME names are refused (they would do nothing).
        shown.acme_key_types.clear();
        assert_eq!(shown.h2_max_concurrent_streams, Some(128), "clap filled it");
        let absent = ListenerOptions {
            http3: true,
            ..Default::default()
        };
        let mut upstreams = Vec::new();
        let a = resolve_listener(&shown, Path::new("."), &mut upstreams).unwrap();
        let b = resolve_listener(&absent, Path::new("."), &mut upstreams).unwrap();
        assert_eq!(a.listen, b.listen);
        assert_eq!(a.mode, b.mode);
        assert_eq!(a.h2, b.h2);
        assert_eq!(a.h3, b.h3);
        assert_eq!(format!("{:?}", a.limits), format!("{:?}", b.limits));
        assert_eq!(format!("{:?}", a.forwarded), format!("{:?}", b.forwarded));
        assert_eq!(format!("{:?}", a.edge), format!("{:?}", b.edge));
        assert_eq!(a.tls.alpn, b.tls.alpn);
        assert_eq!(a.tls.policy.describe(), b.tls.policy.describe());
        assert_eq!(a.tls.session_cache_entries, b.tls.session_cache_entries);
        assert_eq!(
            format!("{:?}", a.tls.tickets),
            format!("{:?}", b.tls.tickets)
        );

        let shown: GlobalOptions = with_help_defaults(&[]);
        let a = resolve_global(&shown, Vec::new(), Vec::new()).unwrap();
        let b = resolve_global(&GlobalOptions::default(), Vec::new(), Vec::new()).unwrap();
        assert_eq!(
            (a.accept, a.log_format, a.access_log, a.shutdown_timeout),
            (b.accept, b.log_format, b.access_log, b.shutdown_timeout)
        );

        // TLS on, so that its keys with defaults are not refused.
        let ca = tern_testsupport::certs::TestCa::new();
        let ca_file = ca.ca_file().display().to_string();
        let shown: UpstreamOptions = with_help_defaults(&[
            "--name",
            "u",
            "--servers",
            "127.0.0.1:1",
            "--health-check-path",
            "/",
            "--tls",
            "true",
            "--tls-ca",
            &ca_file,
        ]);
        let absent = UpstreamOptions {
            tls_sni: None,
            tls_alpn: Vec::new(),
            rise: None,
            fall: None,
            max_fails: None,
            fail_timeout: None,
            health_check_interval: None,
            health_check_timeout: None,
            balance: None,
            protocol: None,
            ..shown.clone()
        };
        let a = super::super::upstream::resolve_upstream(&shown, Path::new(".")).unwrap();
        let b = super::super::upstream::resolve_upstream(&absent, Path::new(".")).unwrap();
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }

    #[test]
    fn defaults_make_a_demo_listener_with_a_self_signed_cert() {
        let cfg = from_options(&GlobalOptions::default(), &ListenerOptions::default()).unwrap();
        let l = &cfg.listeners[0];
        assert_eq!(l.listen.to_string(), defaults::LISTEN);
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
