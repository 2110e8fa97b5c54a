use crate::config::BackendAddr;
use std::time::Duration;

use tern_testsupport::prometheus::{parse, Scrape};
use tern_tls::Negotiated;

use super::{HandshakeFailure, Metrics};

fn scrape(m: &Metrics, health: &[(String, BackendAddr, bool)]) -> Scrape {
    let text = m.render(health, &[]);
    parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn tls13(resumed: bool) -> Negotiated {
    Negotiated {
        version: "TLSv1.3",
        cipher: "TLS_AES_128_GCM_SHA256".into(),
        group: "X25519".into(),
        resumed,
        ..Negotiated::default()
    }
}

#[test]
fn upstream_names_are_escaped_in_label_values() {
    let m = Metrics::default();
    let server = BackendAddr::Tcp("[::1]:8080".parse().expect("address"));
    let name = "odd \"name\" with \\ and\nnewline";
    m.backend_response(name, server, Duration::from_millis(3));
    let text = m.render(&[(name.to_string(), server, false)], &[]);
    assert!(
        text.contains(
            "tern_backend_up{upstream=\"odd \\\"name\\\" with \\\\ and\\nnewline\",server=\"[::1]:8080\"} 0\n"
        ),
        "{text}"
    );
    // And a strict reader gets the original name back.
    let scrape = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let labels = [("upstream", name), ("server", "[::1]:8080")];
    assert_eq!(scrape.get("tern_backend_up", &labels), Some(0.0));
    assert_eq!(
        scrape.get("tern_backend_response_duration_seconds_count", &labels),
        Some(1.0)
    );
    assert_eq!(
        scrape.get(
            "tern_backend_response_duration_seconds_bucket",
            &[labels[0], labels[1], ("le", "0.0025")]
        ),
        Some(0.0)
    );
    assert_eq!(
        scrape.get(
            "tern_backend_response_duration_seconds_bucket",
            &[labels[0], labels[1], ("le", "0.005")]
        ),
        Some(1.0)
    );
}

#[test]
fn handshakes_are_counted_by_version_cipher_group_and_resumption() {
    let m = Metrics::default();
    m.handshake(&tls13(false), Duration::from_micros(800));
    m.handshake(&tls13(true), Duration::from_micros(150));
    m.handshake(&tls13(true), Duration::from_micros(150));
    let resumed_tls12 = Negotiated {
        version: "TLSv1.2",
        cipher: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".into(),
        group: "".into(),
        resumed: true,
        ..Negotiated::default()
    };
    m.handshake(&resumed_tls12, Duration::from_micros(100));
    let strange = Negotiated {
        version: "TLSv1.4",
        cipher: "TLS_NEW".into(),
        group: "X448".into(),
        ..Negotiated::default()
    };
    m.handshake(&strange, Duration::from_micros(100));
    m.handshake_failed(HandshakeFailure::NotTls);

    let s = scrape(&m, &[]);
    let full = |resumed| {
        [
            ("version", "TLSv1.3"),
            ("cipher", "TLS_AES_128_GCM_SHA256"),
            ("group", "X25519"),
            ("resumed", resumed),
        ]
    };
    assert_eq!(
        s.get("tern_tls_handshakes_total", &full("false")),
        Some(1.0)
    );
    assert_eq!(s.get("tern_tls_handshakes_total", &full("true")), Some(2.0));
    let tls12 = [
        ("version", "TLSv1.2"),
        ("cipher", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
        ("group", "none"),
        ("resumed", "true"),
    ];
    assert_eq!(s.get("tern_tls_handshakes_total", &tls12), Some(1.0));
    let other = [
        ("version", "other"),
        ("cipher", "other"),
        ("group", "other"),
        ("resumed", "false"),
    ];
    assert_eq!(s.get("tern_tls_handshakes_total", &other), Some(1.0));
    assert_eq!(s.sum("tern_tls_handshakes_total", &[]), 5.0);
    assert_eq!(
        s.get(
            "tern_tls_handshake_failures_total",
            &[("reason", "not_tls")]
        ),
        Some(1.0)
    );
    assert_eq!(s.sum("tern_tls_handshake_failures_total", &[]), 1.0);
    let count = "tern_tls_handshake_duration_seconds_count";
    assert_eq!(s.get(count, &[("resumed", "false")]), Some(2.0));
    assert_eq!(s.get(count, &[("resumed", "true")]), Some(3.0));
    let sum = "tern_tls_handshake_duration_seconds_sum";
    assert_eq!(s.get(sum, &[("resumed", "true")]), Some(0.0004));
}

#[test]
fn requests_are_counted_by_protocol_and_code_or_class() {
    let m = Metrics::default();
    m.request(200, 100, 1000, "http/1.1");
    m.request(200, 100, 1000, "http/1.1");
    m.request(404, 50, 20, "http/1.1");
    m.request(418, 1, 2, "h2");
    m.request(999, 0, 0, "spdy/3");
    let s = scrape(&m, &[]);
    let req = |protocol, code| {
        s.get(
            "tern_http_requests_total",
            &[("protocol", protocol), ("code", code)],
        )
    };
    assert_eq!(req("http/1.1", "200"), Some(2.0));
    assert_eq!(req("http/1.1", "404"), Some(1.0));
    assert_eq!(req("h2", "4xx"), Some(1.0));
    assert_eq!(req("other", "other"), Some(1.0));
    assert_eq!(s.sum("tern_http_requests_total", &[]), 5.0);
    let bytes = |name, protocol| s.get(name, &[("protocol", protocol)]);
    assert_eq!(
        bytes("tern_http_received_bytes_total", "http/1.1"),
        Some(250.0)
    );
    assert_eq!(
        bytes("tern_http_sent_bytes_total", "http/1.1"),
        Some(2020.0)
    );
    assert_eq!(bytes("tern_http_sent_bytes_total", "h2"), Some(2.0));
}

#[test]
fn connection_and_reload_counters() {
    let m = Metrics::default();
    for _ in 0..3 {
        m.connection_opened();
    }
    m.connection_closed();
    let s = scrape(&m, &[]);
    assert_eq!(s.get("tern_connections_open", &[]), Some(2.0));
    assert_eq!(s.get("tern_connections_total", &[]), Some(3.0));
    assert_eq!(s.get("tern_connections_refused_total", &[]), Some(0.0));
    m.connection_refused();
    m.reload(true);
    m.reload(false);
    m.reload(false);
    let s = scrape(&m, &[]);
    assert_eq!(s.get("tern_connections_refused_total", &[]), Some(1.0));
    assert_eq!(s.get("tern_connections_total", &[]), Some(3.0));
    let reloads = |result| s.get("tern_config_reloads_total", &[("result", result)]);
    assert_eq!(reloads("applied"), Some(1.0));
    assert_eq!(reloads("refused"), Some(2.0));
    let started = s.get("process_start_time_seconds", &[]).unwrap_or(0.0);
    assert!(started > 1.7e9, "start time {started}");
}

#[test]
fn every_family_is_announced_even_before_any_traffic() {
    let s = scrape(&Metrics::default(), &[]);
    for family in [
        "tern_connections_open",
        "tern_connections_total",
        "tern_tls_handshakes_total",
        "tern_tls_handshake_failures_total",
        "tern_tls_handshake_duration_seconds",
        "tern_http_requests_total",
        "tern_http_received_bytes_total",
        "tern_http_sent_bytes_total",
        "tern_backend_response_duration_seconds",
        "tern_backend_up",
        "tern_connections_refused_total",
        "tern_config_reloads_total",
        "process_start_time_seconds",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_max_fds",
    ] {
        assert!(s.families.contains_key(family), "{family} missing");
    }
}

#[test]
fn backend_latency_series_are_per_upstream_and_server() {
    let m = Metrics::default();
    let a = BackendAddr::Tcp("127.0.0.1:1".parse().expect("address"));
    let b = BackendAddr::Tcp("127.0.0.1:2".parse().expect("address"));
    m.backend_response("api", a, Duration::from_millis(1));
    m.backend_response("api", a, Duration::from_millis(1));
    m.backend_response("api", b, Duration::from_secs(100));
    m.backend_response("web", a, Duration::from_millis(1));
    let s = scrape(&m, &[("api".into(), a, true), ("api".into(), b, false)]);
    let count = "tern_backend_response_duration_seconds_count";
    assert_eq!(
        s.get(count, &[("upstream", "api"), ("server", "127.0.0.1:1")]),
        Some(2.0)
    );
    assert_eq!(
        s.get(count, &[("upstream", "api"), ("server", "127.0.0.1:2")]),
        Some(1.0)
    );
    assert_eq!(
        s.get(count, &[("upstream", "web"), ("server", "127.0.0.1:1")]),
        Some(1.0)
    );
    let slow = [("upstream", "api"), ("server", "127.0.0.1:2"), ("le", "60")];
    assert_eq!(
        s.get("tern_backend_response_duration_seconds_bucket", &slow),
        Some(0.0)
    );
    let up = |server| {
        s.get(
            "tern_backend_up",
            &[("upstream", "api"), ("server", server)],
        )
    };
    assert_eq!(up("127.0.0.1:1"), Some(1.0));
    assert_eq!(up("127.0.0.1:2"), Some(0.0));
}

#[test]
fn handshake_failures_are_classified_from_the_acceptor_error() {
    use rustls::{AlertDescription, Error, InvalidMessage, PeerIncompatible};
    use std::io::{Error as IoError, ErrorKind};
    let tls = |e: Error| IoError::new(ErrorKind::InvalidData, e);
    let cases = [
        (
            tls(Error::InvalidMessage(InvalidMessage::InvalidContentType)),
            HandshakeFailure::NotTls,
        ),
        (
            tls(Error::PeerIncompatible(
                PeerIncompatible::SupportedVersionsExtensionRequired,
            )),
            HandshakeFailure::Incompatible,
        ),
        (
            tls(Error::AlertReceived(AlertDescription::UnknownCA)),
            HandshakeFailure::ClientAlert,
        ),
        (tls(Error::DecryptError), HandshakeFailure::ProtocolError),
        (
            IoError::new(ErrorKind::UnexpectedEof, "tls handshake eof"),
            HandshakeFailure::Closed,
        ),
        (IoError::other("something"), HandshakeFailure::Other),
    ];
    for (error, expected) in cases {
        assert_eq!(HandshakeFailure::of(&error), expected, "{error}");
    }
}
