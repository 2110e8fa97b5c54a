//! `tern bench`'s flags mapped onto a [`BenchConfig`]: only what the user
//! gave changes the defaults of `BenchConfig::new` (see [`BenchArgs`]).

use std::time::Duration;

use tern_bench::config::defaults;
use tern_bench::{
    BenchConfig, BenchError, ConnectionPlan, HttpVersion, LoadModel, ResumptionMode, StopCondition,
    Target, TlsOptions, TlsVersion,
};

use super::bench::BenchArgs;
use super::bench_values::parse_go_duration;

/// The run `tern bench` was asked for, or why the flags do not make one.
pub(super) fn config_from(a: &BenchArgs, command_line: String) -> Result<BenchConfig, BenchError> {
    let by_protocol = !a.compare_protocols.is_empty();
    if by_protocol && (a.urls.len() != 1 || a.compare) {
        return Err(BenchError::Config(
            "--compare-protocols takes one URL (and no --compare)".into(),
        ));
    }
    if a.urls.len() > 1 && !a.compare {
        return Err(BenchError::Config("several URLs need --compare".into()));
    }
    if a.compare && a.urls.len() < 2 {
        return Err(BenchError::Config(
            "--compare needs at least two URLs".into(),
        ));
    }
    let mut targets = a
        .urls
        .iter()
        .map(|u| Target::parse(u))
        .collect::<Result<Vec<_>, _>>()?;
    if by_protocol {
        targets = protocol_targets(&targets[0], &a.compare_protocols)?;
    }
    let mut c = BenchConfig::new(targets);
    c.command_line = command_line;
    let (mut method, mut streams) = (None, None);
    if let Some(m) = &a.method_or_streams {
        match m.parse::<usize>() {
            Ok(n) => streams = Some(n),
            Err(_) => method = Some(m.clone()),
        }
    }
    if let Some(m) = a.method.as_ref().or(method.as_ref()) {
        c.method = m.to_ascii_uppercase();
    }
    if let Some(n) = a.streams.or(streams) {
        c.streams_per_connection = n.max(1);
    }
    for h in &a.headers {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| BenchError::Config(format!("header {h:?} is not 'Name: value'")))?;
        c.headers
            .push((name.trim().to_string(), value.trim().to_string()));
    }
    if let Some(t) = &a.content_type {
        c.headers.push(("Content-Type".into(), t.clone()));
    }
    if let Some(accept) = &a.accept {
        c.headers.push(("Accept".into(), accept.clone()));
    }
    if let Some(auth) = &a.basic_auth {
        c.headers.push(tern_bench::http1::basic_auth(auth));
    }
    c.body = match (&a.body, &a.body_file) {
        (_, Some(path)) => std::fs::read(path).map_err(|source| BenchError::File {
            path: path.display().to_string(),
            source,
        })?,
        (Some(b), None) => b.clone().into_bytes(),
        (None, None) => Vec::new(),
    };
    c.host_header = a.host.clone();
    c.proxy = a.proxy.clone();
    c.accept_compression = !a.disable_compression;
    let resume = match a.resume.as_deref() {
        Some("session-ids") => ResumptionMode::SessionIds,
        Some(_) => ResumptionMode::Tickets,
        None => defaults::RESUME,
    };
    c.plan = match (a.plan.as_deref(), a.disable_keepalive) {
        (Some("resumed"), _) => ConnectionPlan::Resumed(resume),
        (Some("new"), _) | (None, true) => ConnectionPlan::NewConnection,
        (Some(_), true) => {
            return Err(BenchError::Config(
                "--plan keepalive contradicts -disable-keepalive".into(),
            ))
        }
        (Some(_), false) => ConnectionPlan::KeepAlive,
        (None, false) => c.plan,
    };
    let alpn_h3 = a.alpn.first().is_some_and(|p| p == "h3");
    c.http = if a.h3 || alpn_h3 {
        HttpVersion::Http3
    } else if a.h2 {
        HttpVersion::Http2
    } else {
        HttpVersion::Http1
    };
    if let Some(n) = a.concurrency {
        c.connections = n;
    }
    c.load = match (a.rate, a.qps) {
        (Some(r), _) => LoadModel::Open { rate: r },
        (None, Some(q)) => LoadModel::Open {
            rate: q * c.connections as f64,
        },
        (None, None) => LoadModel::Closed,
    };
    if let Some(n) = a.cpus {
        c.workers = n.max(1);
    }
    c.stop = match (&a.duration, a.requests) {
        (Some(z), _) => StopCondition::Duration(parse_go_duration(z)?),
        (None, Some(n)) => StopCondition::Requests(n),
        (None, None) => c.stop,
    };
    c.warmup = a
        .warmup
        .as_deref()
        .map(|w| {
            parse_go_duration(w).map_err(|_| {
                BenchError::Config(format!(
                    "--warmup {w:?}: expected a duration like 2s, 500ms"
                ))
            })
        })
        .transpose()?;
    if let Some(t) = a.timeout {
        c.timeout = (t > 0).then(|| Duration::from_secs(t));
    }
    let version = |v: &Option<String>| match v.as_deref() {
        Some("1.2") => Some(TlsVersion::Tls12),
        Some("1.3") => Some(TlsVersion::Tls13),
        _ => None,
    };
    c.tls = TlsOptions {
        min_version: version(&a.tls_min),
        max_version: version(&a.tls_max),
        ciphers: a.ciphers.clone(),
        groups: a.groups.clone(),
        alpn: (!a.alpn.is_empty()).then(|| a.alpn.clone()),
        // hey sends -host as the SNI too; a port is not part of a name.
        sni: a.sni.clone().or_else(|| {
            a.host.as_deref().map(|h| match h.rsplit_once(':') {
                Some((name, port)) if !name.contains(':') && port.parse::<u16>().is_ok() => {
                    name.to_string()
                }
                _ => h.to_string(),
            })
        }),
        ca_file: a.cacert.clone(),
        insecure: a.insecure,
        no_cert_compression: a.no_cert_compression,
    };
    if let Some(n) = a.rounds {
        c.rounds = n.max(1);
    }
    c.record_requests = a.output.as_deref() == Some("csv") || a.csv.is_some();
    c.progress = !a.no_progress && a.output.is_none();
    c.server_pids = a.server_pids.clone();
    super::bench_scale::apply(&a.scale, &mut c)?;
    Ok(c)
}

/// One target per protocol named in `list` (h1, h2, h3), each the URL of
/// `base` labelled with its protocol.
fn protocol_targets(base: &Target, list: &[String]) -> Result<Vec<Target>, BenchError> {
    let mut targets = Vec::with_capacity(list.len());
    for name in list {
        let http = match name.trim() {
            "h1" | "http/1.1" => HttpVersion::Http1,
            "h2" => HttpVersion::Http2,
            "h3" => HttpVersion::Http3,
            other => {
                return Err(BenchError::Config(format!(
                    "--compare-protocols: unknown protocol {other:?} (h1, h2, h3)"
                )))
            }
        };
        if targets.iter().any(|t: &Target| t.http == Some(http)) {
            return Err(BenchError::Config(format!(
                "--compare-protocols: {name} twice"
            )));
        }
        let mut t = base.clone();
        t.url = format!("{} [{}]", base.url, http.short());
        t.http = Some(http);
        targets.push(t);
    }
    if targets.len() < 2 {
        return Err(BenchError::Config(
            "--compare-protocols needs at least two protocols".into(),
        ));
    }
    Ok(targets)
}
