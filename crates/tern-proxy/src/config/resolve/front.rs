//! Where a listener accepts and where its requests go: listen address,
//! mode, default upstream group, host routes, and PROXY-protocol sources.

use std::net::SocketAddr;

use super::super::options::defaults;
use super::super::upstream::{check_health_path, default_health, parse_balance, parse_server};
use super::super::{
    KeyError, ListenerOptions, Mode, ProxyProtocol, Route, TrustedNet, Upstream, UpstreamConfig,
};
use super::key_err;

/// The routing half of a listener.
pub(super) struct Front {
    pub listen: SocketAddr,
    pub mode: Mode,
    pub upstream: Upstream,
    pub routes: Vec<Route>,
}

/// Listen address, mode and routes; named upstream groups are looked up
/// in `upstreams`, a `backends` list becomes a new anonymous group there.
pub(super) fn front(
    o: &ListenerOptions,
    upstreams: &mut Vec<UpstreamConfig>,
) -> Result<Front, KeyError> {
    let listen_text = o.listen.as_deref().unwrap_or(defaults::LISTEN);
    let listen: SocketAddr = listen_text.parse().map_err(|_| {
        key_err(
            "listen",
            format!("{listen_text:?} is not an ADDR:PORT (e.g. 127.0.0.1:8443 or [::1]:8443)"),
        )
    })?;
    let mode = match o.mode.as_deref().unwrap_or(defaults::MODE) {
        "http" => {
            if o.proxy_protocol.is_some() {
                return Err(key_err("proxy_protocol", "only applies to mode = \"tcp\""));
            }
            Mode::Http
        }
        "tcp" => Mode::Tcp {
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
        other => {
            return Err(key_err(
                "mode",
                format!("unknown mode {other:?} (http, tcp)"),
            ))
        }
    };
    let mut backends = Vec::with_capacity(o.backends.len());
    for b in &o.backends {
        backends.push(parse_server(b, defaults::WEIGHT, "backends")?);
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
            let mut group = UpstreamConfig::simple(format!("listener-{listen}"), Vec::new());
            group.servers = backends;
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
            allow: crate::config::edge::nets(&r.allow, "allow")?,
            deny: crate::config::edge::nets(&r.deny, "deny")?,
        });
    }
    Ok(Front {
        listen,
        mode,
        upstream,
        routes,
    })
}

/// The networks allowed to send a PROXY header, when `accept_proxy` is on.
pub(super) fn accept_proxy(o: &ListenerOptions) -> Result<Option<Vec<TrustedNet>>, KeyError> {
    Ok(match (o.accept_proxy, o.trusted_proxies.is_empty()) {
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
    })
}
