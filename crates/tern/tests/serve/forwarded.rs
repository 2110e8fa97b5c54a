//! Forwarded headers: the client's claims are removed, tern's truth is added.

use tern_testsupport::backend::echoed_header;
use tern_testsupport::tern::{free_addr_v6, Served};

const FORGED: &str = "GET /echo HTTP/1.1\r\n\
Host: localhost\r\n\
X-Forwarded-For: 6.6.6.6\r\n\
X-Forwarded-Proto: http\r\n\
X-Forwarded-Host: evil.example\r\n\
X-Forwarded-Port: 1\r\n\
X-Real-IP: 6.6.6.6\r\n\
Forwarded: for=6.6.6.6;proto=http;host=evil.example\r\n\
x-forwarded-for: 7.7.7.7\r\n\
\r\n";

fn forged_echo(served: &Served) -> serde_json::Value {
    let (response, _conn) = served.raw(FORGED.as_bytes());
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()
}

#[test]
fn forged_x_forwarded_for_is_replaced() {
    let served = Served::start(&[]);
    let echo = forged_echo(&served);
    assert_eq!(
        echoed_header(&echo, "x-forwarded-for"),
        ["127.0.0.1"],
        "{echo}"
    );
}

#[test]
fn forged_x_forwarded_proto_is_replaced_with_https() {
    let served = Served::start(&[]);
    let echo = forged_echo(&served);
    assert_eq!(
        echoed_header(&echo, "x-forwarded-proto"),
        ["https"],
        "{echo}"
    );
}

/// The `name=value` pairs of a Forwarded field value, split on `;` and `,`
/// outside quoted-strings, with quoted-strings unquoted and `\\x` escapes
/// resolved (RFC 7239: `host=localhost` and `host="localhost"` are the same).
fn forwarded_pairs(value: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut chars = value.chars();
    let mut finish = |current: &mut String| {
        if let Some((name, value)) = current.split_once('=') {
            pairs.push((name.trim().to_ascii_lowercase(), value.to_string()));
        }
        current.clear();
    };
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' if quoted => current.extend(chars.next()),
            ';' | ',' if !quoted => finish(&mut current),
            _ => current.push(c),
        }
    }
    finish(&mut current);
    pairs
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn forged_forwarded_is_replaced() {
    let served = Served::start(&[]);
    let echo = forged_echo(&served);
    let forwarded = echoed_header(&echo, "forwarded");
    assert_eq!(forwarded.len(), 1, "{echo}");
    assert_eq!(
        forwarded_pairs(&forwarded[0]),
        pairs(&[
            ("for", "127.0.0.1"),
            ("proto", "https"),
            ("host", "localhost")
        ]),
        "{echo}"
    );
}

#[test]
fn forged_host_port_and_real_ip_headers_are_removed() {
    let served = Served::start(&[]);
    let echo = forged_echo(&served);
    for name in ["x-forwarded-host", "x-forwarded-port", "x-real-ip"] {
        assert!(
            echoed_header(&echo, name).is_empty(),
            "{name} reached the backend: {echo}"
        );
    }
    // The Host header itself is the client's to choose and must pass through.
    assert_eq!(echoed_header(&echo, "host"), ["localhost"], "{echo}");
}

#[test]
fn forwarded_flag_limits_added_headers_but_still_strips_forged_ones() {
    let served = Served::start(&["--forwarded", "x-forwarded-for"]);
    let echo = forged_echo(&served);
    assert_eq!(
        echoed_header(&echo, "x-forwarded-for"),
        ["127.0.0.1"],
        "{echo}"
    );
    assert!(
        echoed_header(&echo, "x-forwarded-proto").is_empty(),
        "{echo}"
    );
    assert!(echoed_header(&echo, "forwarded").is_empty(), "{echo}");
}

#[test]
fn forwarded_quotes_and_brackets_ipv6_client() {
    let Some(addr) = free_addr_v6() else {
        eprintln!("skipped: no IPv6 loopback on this machine");
        return;
    };
    let served = Served::builder()
        .cert_names(&["localhost", "::1"])
        .listen(addr)
        .start();
    let mut conn = served.connect();
    let response = conn.get("localhost", "/echo").expect("response over ::1");
    let echo = response.json();
    assert_eq!(echoed_header(&echo, "x-forwarded-for"), ["::1"], "{echo}");
    let forwarded = echoed_header(&echo, "forwarded");
    assert_eq!(forwarded.len(), 1, "{echo}");
    // RFC 7239 section 6: an IPv6 node is bracketed, and must be quoted.
    assert!(forwarded[0].starts_with("for=\"[::1]\";"), "{echo}");
    assert_eq!(
        forwarded_pairs(&forwarded[0]),
        pairs(&[("for", "[::1]"), ("proto", "https"), ("host", "localhost")]),
        "{echo}"
    );
}

#[test]
fn forwarded_none_adds_nothing_and_still_strips() {
    let served = Served::start(&["--forwarded", "none"]);
    let echo = forged_echo(&served);
    for name in [
        "x-forwarded-for",
        "x-forwarded-proto",
        "forwarded",
        "x-real-ip",
    ] {
        assert!(echoed_header(&echo, name).is_empty(), "{name}: {echo}");
    }
}

#[test]
fn forwarded_host_with_port_is_quoted() {
    let served = Served::start(&[]);
    let (response, _conn) = served.raw(b"GET /echo HTTP/1.1\r\nHost: localhost:8443\r\n\r\n");
    let echo = response.json();
    let forwarded = echoed_header(&echo, "forwarded");
    assert_eq!(forwarded.len(), 1, "{echo}");
    // ':' is not a token character, so RFC 7239 requires a quoted-string.
    assert!(forwarded[0].contains("host=\"localhost:8443\""), "{echo}");
    assert_eq!(
        forwarded_pairs(&forwarded[0]),
        pairs(&[
            ("for", "127.0.0.1"),
            ("proto", "https"),
            ("host", "localhost:8443")
        ]),
        "{echo}"
    );
}

#[test]
fn host_cannot_inject_forwarded_parameters() {
    let served = Served::start(&[]);
    let (response, _conn) =
        served.raw(b"GET /echo HTTP/1.1\r\nHost: a\";for=6.6.6.6;by=\"x\r\n\r\n");
    if response.status == 400 {
        return; // Refusing an invalid Host is the simplest safe answer.
    }
    let echo = response.json();
    let forwarded = echoed_header(&echo, "forwarded");
    assert_eq!(forwarded.len(), 1, "{echo}");
    let fors: Vec<String> = forwarded_pairs(&forwarded[0])
        .into_iter()
        .filter(|(name, _)| name == "for")
        .map(|(_, value)| value)
        .collect();
    assert_eq!(
        fors,
        ["127.0.0.1"],
        "the Host header injected a for=: {echo}"
    );
}

#[test]
fn underscore_spellings_of_forwarding_headers_are_removed() {
    // CGI-style backends read X_Forwarded_For as X-Forwarded-For.
    let served = Served::start(&[]);
    let (response, _conn) = served.raw(
        b"GET /echo HTTP/1.1\r\nHost: localhost\r\nX_Forwarded_For: 6.6.6.6\r\nX-Real_IP: 6.6.6.6\r\nX_Custom: kept\r\n\r\n",
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let echo = response.json();
    let text = echo.to_string();
    assert!(
        !text.contains("6.6.6.6"),
        "a forged forwarding field reached the backend: {text}"
    );
    assert_eq!(echoed_header(&echo, "x_custom"), ["kept"], "{echo}");
}
