//! Edge policy of a listener: header rules (HSTS, set/add/remove), request
//! IDs, the request body limit, per-client limits and access lists.
//! docs/edge-policy.md names the attack each rule answers.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::time::Duration;

use serde::Deserialize;
use tern_http::rewrite::owned_by_tern;

use super::options::defaults;
use super::resolve::key_err;
use super::{KeyError, ListenerOptions, TrustedNet};

/// `set` / `add` / `remove` rules for request or response fields (TOML
/// `[listener.request_headers]`, `[listener.response_headers]`).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderRuleOptions {
    /// Fields set: any the peer sent under the name are replaced.
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// Fields added next to any the peer sent.
    #[serde(default)]
    pub add: BTreeMap<String, String>,
    /// Names of fields removed.
    #[serde(default)]
    pub remove: Vec<String>,
}

/// A listener's edge policy, validated.
#[derive(Debug, Clone, Default)]
pub struct EdgePolicy {
    /// Rules for the request sent to the backend.
    pub request_headers: HeaderRules,
    /// Rules for the response sent to the client (`hsts` included).
    pub response_headers: HeaderRules,
    /// Request IDs, unless off.
    pub request_id: Option<RequestIdSettings>,
    /// Largest request body forwarded, in bytes; `None`: unlimited.
    pub max_request_body: Option<u64>,
    /// Limits per client address.
    pub client: ClientLimits,
    /// The field a trusted proxy names the client with, when set.
    pub client_id: Option<ClientIdSettings>,
    /// Client networks let in (empty: all not denied).
    pub allow: Vec<TrustedNet>,
    /// Client networks turned away before the handshake.
    pub deny: Vec<TrustedNet>,
    /// Connections that end before a request leave an access-log line.
    pub log_rejected: bool,
}

impl EdgePolicy {
    /// True when `ip` may connect (deny wins over allow).
    pub fn admits(&self, ip: std::net::IpAddr) -> bool {
        admits(&self.allow, &self.deny, ip)
    }
}

/// True when `ip` is in `allow` (or `allow` is empty) and not in `deny`.
pub(crate) fn admits(allow: &[TrustedNet], deny: &[TrustedNet], ip: std::net::IpAddr) -> bool {
    let ip = canonical(ip);
    !deny.iter().any(|n| n.contains(&ip))
        && (allow.is_empty() || allow.iter().any(|n| n.contains(&ip)))
}

/// An IPv4 client seen on a dual-stack socket (`::ffff:a.b.c.d`) as IPv4,
/// so IPv4 lists and prefixes apply to it.
pub(crate) fn canonical(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
        v4 => v4,
    }
}

/// Field rules for one direction, applied in this order: fields named by
/// `drop` (removed, or replaced by a set) are not passed on; `add` fields
/// follow tern's own.
#[derive(Debug, Clone, Default)]
pub struct HeaderRules {
    /// Lowercase names whose received fields are dropped.
    pub drop: Vec<Box<str>>,
    /// Fields added, with values made per request.
    pub add: Vec<(Box<str>, Template)>,
}

impl HeaderRules {
    /// True when the rules change nothing.
    pub fn is_empty(&self) -> bool {
        self.drop.is_empty() && self.add.is_empty()
    }
}

/// A field value: literal text and variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(pub Vec<Part>);

/// A piece of a [`Template`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Text as written.
    Text(Box<str>),
    /// A value known per request.
    Var(Var),
}

/// The variables a header value may name, as `${name}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Var {
    /// `${client_ip}`: the client's address (PROXY-protocol address when
    /// the listener accepts PROXY headers).
    ClientIp,
    /// `${request_id}`: the request's ID (empty when request IDs are off).
    RequestId,
    /// `${tls_version}`: `TLSv1.3` or `TLSv1.2`.
    TlsVersion,
    /// `${sni}`: the server name the client asked for (empty without one).
    Sni,
}

/// The variables, by name (documented in docs/edge-policy.md).
pub const VARIABLES: [(&str, Var); 4] = [
    ("client_ip", Var::ClientIp),
    ("request_id", Var::RequestId),
    ("tls_version", Var::TlsVersion),
    ("sni", Var::Sni),
];

impl Template {
    /// Parses `text`; `${...}` names a variable.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            if start > 0 {
                parts.push(Part::Text(rest[..start].into()));
            }
            let after = &rest[start + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| format!("{text:?}: `${{` without a closing `}}`"))?;
            let name = &after[..end];
            let var = VARIABLES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
                .ok_or_else(|| {
                    let known: Vec<String> =
                        VARIABLES.iter().map(|(n, _)| format!("${{{n}}}")).collect();
                    format!("unknown variable ${{{name}}} (known: {})", known.join(", "))
                })?;
            parts.push(Part::Var(var));
            rest = &after[end + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.into()));
        }
        let literal: String = parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(&**t),
                Part::Var(_) => None,
            })
            .collect();
        if http::HeaderValue::from_str(&literal).is_err() {
            return Err(format!("{text:?} is not a valid field value"));
        }
        Ok(Template(parts))
    }

    /// True when the value changes from one request to the next (it
    /// names `${request_id}`); the other variables are the connection's.
    pub fn per_request(&self) -> bool {
        self.0.contains(&Part::Var(Var::RequestId))
    }

    /// The literal value, when the template names no variable.
    pub fn literal(&self) -> Option<&str> {
        match self.0.as_slice() {
            [] => Some(""),
            [Part::Text(t)] => Some(t),
            _ => None,
        }
    }
}

/// Who may name the client for `client_rate`, and in which field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdSettings {
    /// The field, lowercase.
    pub header: Box<str>,
    /// Client addresses whose field is believed.
    pub from: Vec<TrustedNet>,
}

impl ClientIdSettings {
    /// True when requests from `ip` may name their client.
    pub fn trusts(&self, ip: std::net::IpAddr) -> bool {
        let ip = canonical(ip);
        self.from.iter().any(|n| n.contains(&ip))
    }
}

/// How request IDs are made and carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestIdSettings {
    /// The field carrying the ID to the backend and back to the client,
    /// lowercase. Default `x-request-id`.
    pub header: Box<str>,
    /// How IDs are made.
    pub format: RequestIdFormat,
}

/// How request IDs are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestIdFormat {
    /// 128 random bits as 32 hex digits.
    Random,
    /// A UUIDv7 (time-ordered: sorts by arrival in logs).
    UuidV7,
}

/// Limits per client address (IPv6 grouped by prefix), counted in one
/// table for the whole process (`exchange::clients`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientLimits {
    /// Connections open at once per client; more are closed before the
    /// TLS handshake.
    pub max_connections: Option<NonZeroU32>,
    /// Requests per second per client (token bucket), with HTTP/2 and
    /// HTTP/3 streams counted as requests; more get 429.
    pub rate: Option<Rate>,
    /// Requests a client may send at once above its rate.
    pub burst: u32,
    /// Rate refusals in a row after which a connection is closed and its
    /// client shut out until its Retry-After has passed; 0: never.
    pub close_after: u32,
    /// IPv6 clients are counted by this prefix length (a host is usually
    /// given a /64). Default 64.
    pub ipv6_prefix: u8,
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits {
            max_connections: None,
            rate: None,
            burst: defaults::CLIENT_BURST,
            close_after: defaults::CLIENT_RATE_CLOSE_AFTER,
            ipv6_prefix: defaults::CLIENT_IPV6_PREFIX,
        }
    }
}

/// A request rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Requests allowed per `per`.
    pub count: u32,
    /// The period.
    pub per: Duration,
}

impl Rate {
    /// Parses `N/s`, `N/m` or `N/h`.
    pub fn parse(text: &str) -> Result<Rate, String> {
        let bad = || format!("{text:?} is not a rate (e.g. \"20/s\", \"600/m\", \"1000/h\")");
        let (n, unit) = text.trim().split_once('/').ok_or_else(bad)?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        let per = match unit.trim() {
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            _ => return Err(bad()),
        };
        if count == 0 {
            return Err(format!("{text:?}: a rate must allow at least one request"));
        }
        Ok(Rate { count, per })
    }
}

/// Resolves the edge-policy options of a listener.
pub(crate) fn resolve(o: &ListenerOptions) -> Result<EdgePolicy, KeyError> {
    let request_id = request_id(o)?;
    let mut request_headers = header_rules(&o.request_headers, "request_headers")?;
    let mut response_headers = header_rules(&o.response_headers, "response_headers")?;
    if let Some(id) = &request_id {
        for (rules, key) in [
            (&request_headers, "request_headers"),
            (&response_headers, "response_headers"),
        ] {
            if rules.drop.contains(&id.header) || rules.add.iter().any(|(n, _)| *n == id.header) {
                return Err(key_err(
                    key,
                    format!(
                        "{} carries the request ID (request_id_header); set request_id_header = \"off\" to manage it with rules",
                        id.header
                    ),
                ));
            }
        }
    }
    if let Some(value) = &o.hsts {
        let value = hsts(value)?;
        let name: Box<str> = "strict-transport-security".into();
        if response_headers.drop.contains(&name) {
            return Err(key_err(
                "hsts",
                "response_headers also names strict-transport-security: give it in one place",
            ));
        }
        response_headers.drop.push(name.clone());
        response_headers
            .add
            .push((name, Template(vec![Part::Text(value.into())])));
    }
    if let Some(id) = &request_id {
        // The client's ID never passes (a trusted proxy's is kept by
        // value), nor a backend's: tern's goes both ways.
        request_headers.drop.push(id.header.clone());
        response_headers.drop.push(id.header.clone());
    }
    let max_request_body = match &o.max_request_body {
        None => None,
        Some(text) if text == "off" || text == "unlimited" => None,
        Some(text) => Some(parse_size::parse_size(text).map_err(|e| {
            key_err(
                "max_request_body",
                format!("{text:?} is not a size (e.g. \"1MiB\", \"64k\", \"1000000\"): {e}"),
            )
        })?),
    };
    let client = ClientLimits {
        max_connections: match o.client_max_connections {
            None => None,
            Some(n) => Some(NonZeroU32::new(n).ok_or_else(|| {
                key_err(
                    "client_max_connections",
                    "must be at least 1 (omit it for no limit)",
                )
            })?),
        },
        rate: o
            .client_rate
            .as_deref()
            .map(Rate::parse)
            .transpose()
            .map_err(|e| key_err("client_rate", e))?,
        burst: o.client_burst.unwrap_or(defaults::CLIENT_BURST),
        close_after: o
            .client_rate_close_after
            .unwrap_or(defaults::CLIENT_RATE_CLOSE_AFTER),
        ipv6_prefix: match o.client_ipv6_prefix {
            None => defaults::CLIENT_IPV6_PREFIX,
            Some(n) if (1..=128).contains(&n) => n,
            Some(n) => {
                return Err(key_err(
                    "client_ipv6_prefix",
                    format!("{n}: must be 1 to 128"),
                ))
            }
        },
    };
    Ok(EdgePolicy {
        request_headers,
        response_headers,
        request_id,
        max_request_body,
        client,
        client_id: client_id(o)?,
        allow: nets(&o.allow, "allow")?,
        deny: nets(&o.deny, "deny")?,
        log_rejected: o.log_rejected.unwrap_or(defaults::LOG_REJECTED),
    })
}

/// Networks in CIDR form (or single addresses).
pub(crate) fn nets(list: &[String], key: &'static str) -> Result<Vec<TrustedNet>, KeyError> {
    list.iter()
        .map(|n| {
            n.parse::<TrustedNet>()
                .or_else(|_| n.parse::<std::net::IpAddr>().map(TrustedNet::from))
                .map(|net| net.trunc())
                .map_err(|_| {
                    key_err(
                        key,
                        format!("{n:?} is not a network (e.g. 192.0.2.0/24) or address"),
                    )
                })
        })
        .collect()
}

fn client_id(o: &ListenerOptions) -> Result<Option<ClientIdSettings>, KeyError> {
    let from = nets(&o.client_id_from, "client_id_from")?;
    match (&o.client_id_header, from.is_empty()) {
        (None, true) => Ok(None),
        (None, false) => Err(key_err(
            "client_id_from",
            "only applies with client_id_header",
        )),
        (Some(_), true) => Err(key_err(
            "client_id_header",
            "needs client_id_from: the proxies allowed to name the client (anyone else could pick their own bucket)",
        )),
        (Some(name), false) => {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(key_err(
                    "client_id_header",
                    format!("{name:?} is not a field name"),
                ));
            }
            Ok(Some(ClientIdSettings {
                header: name.to_ascii_lowercase().into(),
                from,
            }))
        }
    }
}

fn request_id(o: &ListenerOptions) -> Result<Option<RequestIdSettings>, KeyError> {
    let header = match o.request_id_header.as_deref() {
        Some("off") => {
            if o.request_id_format.is_some() {
                return Err(key_err(
                    "request_id_format",
                    "request IDs are off (request_id_header = \"off\")",
                ));
            }
            return Ok(None);
        }
        None => defaults::REQUEST_ID_HEADER.to_ascii_lowercase(),
        Some(name) => {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(key_err(
                    "request_id_header",
                    format!("{name:?} is not a field name"),
                ));
            }
            if let Some(why) = owned_by_tern(name) {
                return Err(key_err("request_id_header", format!("{name} {why}")));
            }
            name.to_ascii_lowercase()
        }
    };
    let format = match o
        .request_id_format
        .as_deref()
        .unwrap_or(defaults::REQUEST_ID_FORMAT)
    {
        "random" => RequestIdFormat::Random,
        "uuidv7" => RequestIdFormat::UuidV7,
        other => {
            return Err(key_err(
                "request_id_format",
                format!("unknown request ID format {other:?} (random, uuidv7)"),
            ))
        }
    };
    Ok(Some(RequestIdSettings {
        header: header.into(),
        format,
    }))
}

/// The value of `hsts`: checked to be what browsers accept (RFC 6797
/// section 6.1): a `max-age`, optionally `includeSubDomains` and `preload`.
fn hsts(value: &str) -> Result<String, KeyError> {
    let bad = |why: &str| {
        key_err(
            "hsts",
            format!("{value:?}: {why} (e.g. \"max-age=31536000; includeSubDomains\")"),
        )
    };
    let mut max_age = None;
    for directive in value.split(';').map(str::trim).filter(|d| !d.is_empty()) {
        let lower = directive.to_ascii_lowercase();
        if let Some(age) = lower.strip_prefix("max-age=") {
            let age: u64 = age
                .trim_matches('"')
                .parse()
                .map_err(|_| bad("max-age is not a number of seconds"))?;
            max_age = Some(age);
        } else if lower != "includesubdomains" && lower != "preload" {
            return Err(bad(&format!("unknown directive {directive:?}")));
        }
    }
    if max_age.is_none() {
        return Err(bad("max-age is required"));
    }
    Ok(value.trim().to_string())
}

fn header_rules(o: &HeaderRuleOptions, key: &'static str) -> Result<HeaderRules, KeyError> {
    let check = |name: &str| -> Result<Box<str>, KeyError> {
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(key_err(key, format!("{name:?} is not a field name")));
        }
        if let Some(why) = owned_by_tern(name) {
            return Err(key_err(
                key,
                format!("{name} {why}; header rules cannot change it"),
            ));
        }
        Ok(name.to_ascii_lowercase().into())
    };
    let mut rules = HeaderRules::default();
    for name in &o.remove {
        rules.drop.push(check(name)?);
    }
    for (name, value) in &o.set {
        let lower = check(name)?;
        if rules.drop.contains(&lower) {
            return Err(key_err(key, format!("{name} is both set and removed")));
        }
        rules.drop.push(lower.clone());
        let template = Template::parse(value).map_err(|e| key_err(key, e))?;
        rules.add.push((lower, template));
    }
    for (name, value) in &o.add {
        let lower = check(name)?;
        if rules.drop.contains(&lower) {
            return Err(key_err(
                key,
                format!("{name} is added and also set or removed: give one rule per field"),
            ));
        }
        let template = Template::parse(value).map_err(|e| key_err(key, e))?;
        rules.add.push((lower, template));
    }
    Ok(rules)
}

#[cfg(test)]
mod tests;
