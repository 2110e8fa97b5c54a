//! Runtime control of backend servers on the admin listener: list every
//! server with its state and counts, and take one out of rotation
//! (drain, disable) or put it back (enable) without a reload.
//!
//! | request | answer |
//! |---------|--------|
//! | `GET /servers` | 200, JSON: every group and server (state, weight, counts) |
//! | `POST /servers/<upstream>/<server>/drain` | 200, JSON of the server: no new requests, those in flight finish |
//! | `POST /servers/<upstream>/<server>/disable` | the same, as `disabled` |
//! | `POST /servers/<upstream>/<server>/enable` | the same, back in rotation |
//! | an unknown group or server | 404 |
//! | another method on those paths | 405 |
//! | a POST with an `Origin` field | 403 |
//!
//! A change holds until the next reload (which starts every server
//! enabled) and follows the server across DNS re-resolution while its
//! address stays; each is logged. The admin listener has no
//! authentication: it listens on loopback only. A web page in a local
//! browser can still send it a POST (a form needs no CORS preflight), so a
//! POST carrying `Origin`, which browsers add and scripts do not, is
//! refused.

use serde_json::{json, Value};

use crate::control::oneshot::{Request, Response};
use crate::control::server::Current;
use crate::upstream::{AdminState, Server, UpstreamShared};

/// Answers `request` if its path is `/servers` or under it.
pub(super) fn respond(request: &Request, current: &Current) -> Option<Response> {
    let rest = request.path.strip_prefix("/servers")?;
    if rest.is_empty() || rest == "/" {
        if !request.is_get_or_head() {
            return Some(Response::only_get_and_head());
        }
        return Some(json_response(200, "OK", &list(current)));
    }
    let rest = rest.strip_prefix('/')?;
    if request.method != "POST" {
        let mut r = Response::text(405, "Method Not Allowed", "only POST\n");
        r.extra = "allow: POST\r\n".into();
        return Some(r);
    }
    if request.has_origin {
        return Some(Response::text(
            403,
            "Forbidden",
            "a request with an Origin field (from a web page) may not change servers\n",
        ));
    }
    Some(change(rest, current))
}

/// `<upstream>/<ip:port>/<action>`, applied.
fn change(rest: &str, current: &Current) -> Response {
    // Group names have no '/'; a server may (unix:/run/app.sock).
    let parsed = rest
        .split_once('/')
        .and_then(|(upstream, rest)| Some((upstream, rest.rsplit_once('/')?)));
    let Some((upstream, (server, action))) = parsed else {
        return not_found("expected POST /servers/<upstream>/<server>/<drain|disable|enable>");
    };
    let state = match action {
        "drain" => AdminState::Draining,
        "disable" => AdminState::Disabled,
        "enable" => AdminState::Enabled,
        _ => return not_found("the action is one of drain, disable, enable"),
    };
    let Some(group) = group(current, upstream) else {
        return not_found(&format!("no upstream named {upstream:?}"));
    };
    // As GET /servers shows it: IP:PORT, [IPv6]:PORT or unix:/path.
    let found = group
        .servers()
        .servers
        .iter()
        .find(|s| s.addr.to_string() == server)
        .cloned();
    let Some(server) = found else {
        return not_found(&format!("upstream {upstream:?} has no server {server}"));
    };
    let addr = server.addr;
    let before = server.set_admin(state);
    tracing::warn!(
        upstream = %group.config.name,
        server = %addr,
        "admin: server {} (was {}; {} requests in flight), until the next reload",
        state.as_str(),
        before.as_str(),
        server.in_flight()
    );
    json_response(200, "OK", &describe(&group, &server))
}

/// Every group of the running generation with its servers.
fn list(current: &Current) -> Value {
    let groups: Vec<Value> = upstreams(current)
        .iter()
        .map(|g| {
            let set = g.servers();
            let servers: Vec<Value> = set.servers.iter().map(|s| describe(g, s)).collect();
            json!({
                "name": g.config.name,
                "generation": set.generation,
                "servers": servers,
            })
        })
        .collect();
    json!({ "upstreams": groups })
}

/// One server as the API shows it.
fn describe(group: &UpstreamShared, s: &Server) -> Value {
    let from = group
        .config
        .servers
        .get(s.origin)
        .map(ToString::to_string)
        .unwrap_or_default();
    json!({
        "upstream": group.config.name,
        "server": s.addr.to_string(),
        "from": from,
        "weight": s.weight,
        "admin": s.admin().as_str(),
        "health": if s.is_up() { "up" } else { "down" },
        "ejected": s.is_ejected(),
        "live": s.is_live(),
        "in_flight": s.in_flight(),
        "requests": s.requests(),
    })
}

fn upstreams(current: &Current) -> Vec<std::sync::Arc<UpstreamShared>> {
    // Hold the lock only to take the generation, not while walking it.
    current
        .lock()
        .map(|g| g.upstreams.clone())
        .unwrap_or_default()
}

fn group(current: &Current, name: &str) -> Option<std::sync::Arc<UpstreamShared>> {
    upstreams(current)
        .into_iter()
        .find(|g| g.config.name == name)
}

fn not_found(why: &str) -> Response {
    Response::text(404, "Not Found", &format!("{why}\n"))
}

fn json_response(status: u16, reason: &'static str, value: &Value) -> Response {
    let mut body = serde_json::to_string_pretty(value).unwrap_or_default();
    body.push('\n');
    Response {
        status,
        reason,
        content_type: "application/json",
        extra: String::new(),
        body,
        head_only: false,
    }
}
