//! Where a listener accepts and where its requests go: listen address,
//! mode, default upstream group, host routes, and PROXY-protocol sources.

use std::net::SocketAddr;

use super::super::options::defaults;
use super::super::options::{ServerOptions, UpstreamOptions};
use super::super::upstream::{check_health_path, default_health, parse_balance, resolve_group};
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
    base: &std::path::Path,
    upstreams: &mut Vec<UpstreamConfig>,
) -> Result<Front, KeyError> {
    let listen = listen_addr(o.listen.as_deref().unwrap_or(defaults::LISTEN))?;
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
    let find = |name: &str, key: &'static str, upstreams: &[UpstreamConfig]| {
        upstreams
            .iter()
            .position(|u| u.name == name)
            .ok_or_else(|| key_err(key, format!("no [[upstream]] named {name:?}")))
    };
    let upstream = match (&o.upstream, o.backends.is_empty()) {
        (Some(_), false) => {
            return Err(key_err(
                "upstream",
                "give either upstream or backends, not both",
            ))
        }
        (Some(name), true) => Upstream::Group(find(name, "upstream", upstreams)?),
        (None, false) => {
            // The backends list is a group with every other setting at its
            // default, written the same ways (HOST:PORT, unix:, URLs).
            let options = UpstreamOptions {
                name: format!("listener-{listen}"),
                servers: o
                    .backends
                    .iter()
                    .cloned()
                    .map(ServerOptions::Addr)
                    .collect(),
                tls_ca: o.backend_tls_ca.clone(),
                tls_client_cert: o.backend_tls_client_cert.clone(),
                tls_client_key: o.backend_tls_client_key.clone(),
                ..UpstreamOptions::default()
            };
            let mut group = resolve_group(&options, base, "backends").map_err(|e| {
                // The group's keys are the listener's backend_* options.
                let key = match e.key {
                    "tls_ca" => "backend_tls_ca",
                    "tls_client_cert" => "backend_tls_client_cert",
                    "tls_client_key" => "backend_tls_client_key",
                    _ => "backends",
                };
                key_err(key, e.message)
            })?;
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
    let backends_only = [
        ("balance", o.balance.is_some()),
        ("health_check", o.health_check.is_some()),
        ("backend_tls_ca", o.backend_tls_ca.is_some()),
        (
            "backend_tls_client_cert",
            o.backend_tls_client_cert.is_some(),
        ),
        ("backend_tls_client_key", o.backend_tls_client_key.is_some()),
    ];
    if let Some((key, _)) = backends_only.iter().find(|(_, set)| *set) {
        if o.upstream.is_some() {
            return Err(key_err(
                key,
                "applies to the backends list; set it in the [[upstream]] table instead",
            ));
        }
        // (balance and health_check were always let pass with the demo
        // origin; a CA or client certificate for it would be a mistake.)
        if o.backends.is_empty() && key.starts_with("backend_tls") {
            return Err(key_err(key, "applies to the backends list: give --backend"));
        }
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

/// A listen address: `ADDR:PORT`, `[V6]:PORT`, or `:PORT` for every
/// IPv4 address (`0.0.0.0`), as `listen 443` in nginx and `bind :443` in
/// haproxy mean (IPv6 too takes a listener on `[::]:PORT`).
fn listen_addr(text: &str) -> Result<SocketAddr, KeyError> {
    let bad = |why: &str| {
        key_err(
            "listen",
            format!(
                "{text:?} {why} (ADDR:PORT, e.g. 127.0.0.1:8443, [::1]:8443, or :8443 for \
                 every address)"
            ),
        )
    };
    if let Some(port) = text.strip_prefix(':') {
        let port: u16 = port
            .parse()
            .map_err(|_| bad("has no port number in 0..=65535 after the colon"))?;
        return Ok(SocketAddr::from(([0, 0, 0, 0], port)));
    }
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    if text.contains("://") {
        return Err(bad("is a URL; a listener takes an address"));
    }
    if text.parse::<u16>().is_ok() {
        return Err(bad("is a port alone; write :PORT for every address"));
    }
    Err(bad("is not an IP address and port"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_as_nginx_and_haproxy_write_them() {
        let ok = |t: &str| listen_addr(t).map(|a| a.to_string()).map_err(|e| e.message);
        assert_eq!(ok(":443"), Ok("0.0.0.0:443".into()));
        assert_eq!(ok("127.0.0.1:8443"), Ok("127.0.0.1:8443".into()));
        assert_eq!(ok("[::]:443"), Ok("[::]:443".into()));
        for (text, why) in [
            (":", "no port number"),
            (":https", "no port number"),
            (":70000", "no port number"),
            ("443", "a port alone"),
            ("https://0.0.0.0:443", "a URL"),
            ("localhost:443", "not an IP address"),
        ] {
            let e = ok(text).expect_err(text);
            assert!(
                e.contains(why) && e.contains(":8443 for every address"),
                "{text}: {e}"
            );
        }
    }
}
