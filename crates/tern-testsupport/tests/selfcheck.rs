//! Checks the helpers themselves against real peers, so a failing tern test
//! points at tern and not at its test support.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tern_testsupport::backend::{pattern, sha256_hex, Backend};
use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::client::{
    client_config, client_config_with, count_response_records, first_flight, HttpConn,
};

fn plain_request(backend: &Backend, request: &[u8]) -> String {
    let mut tcp = TcpStream::connect(backend.addr()).expect("connect backend");
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    tcp.write_all(request).expect("write");
    let mut out = Vec::new();
    let _ = tcp.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn backend_echo_reports_headers_in_order() {
    let backend = Backend::start();
    let response = plain_request(
        &backend,
        b"GET /echo?q=1 HTTP/1.1\r\nHost: x\r\nX-B: 2\r\nX-A: 1\r\nConnection: close\r\n\r\n",
    );
    let body = &response[response.find("\r\n\r\n").expect("head end") + 4..];
    let json: serde_json::Value = serde_json::from_str(body).expect("json");
    assert_eq!(json["path"], "/echo?q=1");
    let names: Vec<&str> = json["headers"]
        .as_array()
        .expect("headers")
        .iter()
        .map(|h| h[0].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["host", "x-b", "x-a", "connection"]);
    assert_eq!(backend.connections(), 1);
}

#[test]
fn backend_chunked_and_sha_endpoints_work() {
    let backend = Backend::start();
    let response = plain_request(
        &backend,
        b"GET /chunked/40000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(
        response.contains("transfer-encoding: chunked"),
        "{response:.200}"
    );
    let body = pattern(10);
    let mut request =
        b"POST /sha HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 10\r\n\r\n"
            .to_vec();
    request.extend_from_slice(&body);
    let response = plain_request(&backend, &request);
    assert!(response.contains(&sha256_hex(&body)), "{response}");
}

fn server_config(ca: &mut TestCa) -> Arc<rustls::ServerConfig> {
    let files = ca.leaf(&["localhost"], KeyKind::EcdsaP256);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.chain)
        .expect("chain")
        .collect::<Result<_, _>>()
        .expect("certs");
    let key = PrivateKeyDer::from_pem_file(&files.key).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("server config");
    Arc::new(config)
}

fn tls_server(ca: &mut TestCa) -> std::net::SocketAddr {
    let config = server_config(ca);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let conn = rustls::ServerConnection::new(config.clone()).expect("conn");
            let mut tls = rustls::StreamOwned::new(conn, stream);
            let mut buf = [0u8; 4096];
            // One request in, one 100-byte response out in a single write.
            let _ = tls.read(&mut buf);
            let mut response = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n".to_vec();
            response.extend(pattern(100));
            let _ = tls.write_all(&response);
            let _ = tls.flush();
        }
    });
    addr
}

#[test]
fn client_reads_response_and_counts_records() {
    let mut ca = TestCa::new();
    let addr = tls_server(&mut ca);
    let config = client_config(ca.ca_pem());
    let mut conn = HttpConn::connect(addr, "localhost", config.clone()).expect("handshake");
    let response = conn.get("localhost", "/").expect("response");
    assert_eq!(response.status, 200);
    assert_eq!(response.body, pattern(100));

    let count = count_response_records(addr, "localhost", config, b"GET / HTTP/1.1\r\n\r\n")
        .expect("count");
    assert_eq!(count.data_records, 1);
    assert!(count.plaintext.ends_with(&pattern(100)));
}

#[test]
fn expired_leaf_chain_holds_leaf_and_ca() {
    let mut ca = TestCa::new();
    let files = ca.expired_leaf(&["localhost"], KeyKind::Rsa2048);
    let text = std::fs::read_to_string(&files.chain).expect("chain");
    assert_eq!(text.matches("BEGIN CERTIFICATE").count(), 2);
}

/// A server that writes its handshake flight in 200-byte pieces.
fn split_flight_server(ca: &mut TestCa) -> std::net::SocketAddr {
    let config = server_config(ca);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.set_nodelay(true);
            let mut conn = rustls::ServerConnection::new(config.clone()).expect("conn");
            while !conn.wants_write() {
                if conn.read_tls(&mut stream).unwrap_or(0) == 0 {
                    break;
                }
                let _ = conn.process_new_packets();
            }
            let mut flight = Vec::new();
            while conn.wants_write() {
                let _ = conn.write_tls(&mut flight);
            }
            for piece in flight.chunks(200) {
                let _ = stream.write_all(piece);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    });
    addr
}

#[test]
fn first_flight_tells_one_write_from_many() {
    let mut ca = TestCa::new();
    let whole = tls_server(&mut ca);
    let split = split_flight_server(&mut ca);
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let config = client_config_with(ca.ca_pem(), &[version], &[b"http/1.1"]);
        let one = first_flight(whole, "localhost", config.clone()).expect("whole");
        assert!(one.complete, "{version:?}: {one:?}");
        let many = first_flight(split, "localhost", config).expect("split");
        assert!(!many.complete, "{version:?}: {many:?}");
    }
}

#[test]
fn tcp_sockets_see_a_listener_and_both_ends_of_a_connection() {
    use tern_testsupport::tern::{listening, tcp_sockets, TcpSocket};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    assert!(listening(addr), "{addr} not seen listening");
    let client = std::net::TcpStream::connect(addr).expect("connect");
    let (_server, _) = listener.accept().expect("accept");
    let local = client.local_addr().expect("client addr");
    let sockets = tcp_sockets();
    assert!(sockets
        .iter()
        .any(|s| s.local == local && s.remote == addr && s.state == TcpSocket::ESTABLISHED));
    drop(listener);
    assert!(!listening(addr), "{addr} still listening after drop");
    if let Ok(v6) = std::net::TcpListener::bind("[::1]:0") {
        let addr = v6.local_addr().expect("addr");
        assert!(listening(addr), "{addr} not seen listening");
    }
}
