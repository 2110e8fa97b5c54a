//! PROXY protocol in (issue 3, item 8): an L4 balancer in front of tern
//! sends a v1 or v2 header; from a trusted network its address becomes the
//! client address (forwarding fields, access log); anything else is closed.

use std::net::SocketAddr;

use tern_testsupport::backend::Backend;
use tern_testsupport::client;
use tern_testsupport::proxy_protocol::{
    get_after_header, refused_after_header, v1_header, v2_header,
};
use tern_testsupport::rustls::ClientConfig;
use tern_testsupport::tern::{free_addr, TernProcess};

use super::{ca_and_leaf, cert_args, echoed_header, tern_bin, LOG_WAIT};

/// tern accepting PROXY headers from `trusted`, in front of an echo backend.
struct ProxiedTern {
    tern: TernProcess,
    addr: SocketAddr,
    client: std::sync::Arc<ClientConfig>,
    _backend: Backend,
    _ca: tern_testsupport::certs::TestCa,
}

impl ProxiedTern {
    fn start(trusted: &str) -> ProxiedTern {
        let (ca, cert) = ca_and_leaf();
        let backend = Backend::start();
        let addr = free_addr();
        let mut args: Vec<String> = [
            "serve",
            "--listen",
            &addr.to_string(),
            "--backend",
            &backend.addr().to_string(),
            "--accept-proxy",
            "--trusted-proxies",
            trusted,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(cert_args(&cert));
        ProxiedTern {
            tern: TernProcess::start(tern_bin(), addr, args),
            addr,
            client: client::client_config(ca.ca_pem()),
            _backend: backend,
            _ca: ca,
        }
    }

    /// GET /echo after `header`; the backend's JSON.
    fn echo_after(&self, header: &[u8]) -> serde_json::Value {
        let response =
            get_after_header(self.addr, header, "localhost", self.client.clone(), "/echo")
                .unwrap_or_else(|e| {
                    panic!("GET after a PROXY header: {e}\n{}", self.tern.stderr_text())
                });
        assert_eq!(response.status, 200, "{}", response.text());
        response.json()
    }

    fn refuses(&self, header: &[u8]) -> bool {
        refused_after_header(self.addr, header, "localhost", self.client.clone())
    }
}

/// The client named in the header reaches the backend and the access log.
fn header_client_is_the_client(header_for: fn(SocketAddr, SocketAddr) -> Vec<u8>, claimed: &str) {
    let served = ProxiedTern::start("127.0.0.0/8");
    let claimed: SocketAddr = claimed.parse().expect("literal address");
    let echo = served.echo_after(&header_for(claimed, served.addr));
    assert_eq!(
        echoed_header(&echo, "x-forwarded-for"),
        vec![claimed.ip().to_string()],
        "{echo}"
    );
    let lines = served
        .tern
        .wait_stdout_lines(&format!("client={claimed}"), 1, LOG_WAIT)
        .unwrap_or_else(|log| panic!("no access-log line with client={claimed}:\n{log}"));
    assert!(lines[0].contains("status=200"), "{}", lines[0]);
}

#[test]
fn proxy_v1_from_a_trusted_source_names_the_client() {
    header_client_is_the_client(v1_header, "203.0.113.9:5555");
}

#[test]
fn proxy_v2_from_a_trusted_source_names_the_client() {
    header_client_is_the_client(v2_header, "198.51.100.7:4444");
}

#[test]
fn proxy_v1_exact_bytes_from_the_issue() {
    let served = ProxiedTern::start("127.0.0.0/8");
    let echo = served.echo_after(b"PROXY TCP4 203.0.113.9 127.0.0.1 5555 443\r\n");
    assert_eq!(echoed_header(&echo, "x-forwarded-for"), vec!["203.0.113.9"]);
    let forwarded = echoed_header(&echo, "forwarded");
    assert!(
        forwarded.iter().any(|f| f.contains("for=203.0.113.9")),
        "{forwarded:?}"
    );
    served
        .tern
        .wait_stdout_lines("client=203.0.113.9:5555", 1, LOG_WAIT)
        .unwrap_or_else(|log| panic!("access log:\n{log}"));
}

#[test]
fn malformed_proxy_headers_are_closed() {
    let served = ProxiedTern::start("127.0.0.0/8");
    let cases: [(&str, &[u8]); 4] = [
        ("garbage v1", b"PROXY TCP4 not-an-address 127.0.0.1 1 2\r\n"),
        (
            "port out of range",
            b"PROXY TCP4 203.0.113.9 127.0.0.1 70000 443\r\n",
        ),
        (
            "bad v2 signature",
            b"\r\n\r\n\0\r\nQUIX\n\x21\x11\x00\x0c\xcb\x00\x71\x09\x7f\x00\x00\x01\x15\xb3\x01\xbb",
        ),
        ("no header, TLS at once", b""),
    ];
    for (what, header) in cases {
        assert!(served.refuses(header), "{what}: the connection was served");
    }
    // The listener still serves well-formed headers afterwards.
    let echo = served.echo_after(&v1_header(
        "203.0.113.10:1000".parse().expect("literal"),
        served.addr,
    ));
    assert_eq!(
        echoed_header(&echo, "x-forwarded-for"),
        vec!["203.0.113.10"]
    );
}

#[test]
fn proxy_header_from_an_untrusted_source_is_closed() {
    let served = ProxiedTern::start("10.0.0.0/8");
    let claimed: SocketAddr = "203.0.113.9:5555".parse().expect("literal");
    assert!(
        served.refuses(&v1_header(claimed, served.addr)),
        "a v1 header from 127.0.0.1 (not in 10.0.0.0/8) was accepted"
    );
    assert!(
        served.refuses(&v2_header(claimed, served.addr)),
        "a v2 header from 127.0.0.1 (not in 10.0.0.0/8) was accepted"
    );
    assert!(
        !served.tern.stdout_text().contains("203.0.113.9"),
        "the forged address reached the access log"
    );
}
