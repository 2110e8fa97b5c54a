//! TLS policy flags narrow what is negotiated; shared ticket keys let one
//! instance resume another's sessions.

use std::path::Path;

use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::client::{self, HttpConn};
use tern_testsupport::rustls::{self, HandshakeKind};
use tern_testsupport::tempdir::TempDir;
use tern_testsupport::tern::Served;

#[test]
fn groups_flag_picks_the_key_exchange_group() {
    let served = Served::start(&["--groups", "secp256r1"]);
    let conn = served.connect();
    let group = conn
        .tls()
        .negotiated_key_exchange_group()
        .map(|g| format!("{:?}", g.name()));
    assert_eq!(group.as_deref(), Some("secp256r1"));
}

#[test]
fn default_group_for_a_classic_client_is_x25519() {
    // An X25519-only client, like OpenSSL 3.0 or a benchmark tool.
    let served = Served::start(&[]);
    let out = tern_testsupport::tools::s_client(
        served.addr,
        &[
            "-servername",
            "localhost",
            "-groups",
            "X25519:P-256",
            "-tls1_3",
        ],
        b"",
    );
    assert!(
        out.stdout.contains("Server Temp Key: X25519"),
        "{}",
        out.all()
    );
}

#[test]
fn ciphers_flag_picks_the_cipher_suite() {
    let served = Served::start(&["--ciphers", "TLS_CHACHA20_POLY1305_SHA256"]);
    let conn = served.connect();
    let suite = conn
        .tls()
        .negotiated_cipher_suite()
        .map(|s| format!("{:?}", s.suite()));
    assert_eq!(suite.as_deref(), Some("TLS13_CHACHA20_POLY1305_SHA256"));
}

fn write_keys(path: &Path, seed: u8) {
    let key: String = (0..48u8)
        .map(|i| format!("{:02x}", i.wrapping_mul(7) ^ seed))
        .collect();
    std::fs::write(path, format!("# test ticket key\n{key}\n")).expect("write keys file");
}

/// tern with a certificate of `ca` (which several instances share) and
/// the ticket keys in `keys`.
fn tern_with_keys(ca: &mut TestCa, keys: &Path) -> Served {
    let cert = ca.leaf(&["localhost"], KeyKind::EcdsaP256);
    let keys = keys.display().to_string();
    Served::builder()
        .shared_cert(ca, &cert)
        .args(&["--ticket-keys-file", &keys])
        .start()
}

fn handshake_kind(
    addr: std::net::SocketAddr,
    config: std::sync::Arc<rustls::ClientConfig>,
) -> Option<HandshakeKind> {
    let mut conn = HttpConn::connect(addr, "localhost", config).expect("connect");
    // A request makes sure the TLS 1.3 tickets have arrived before we leave.
    assert_eq!(
        conn.get("localhost", "/status/200").expect("get").status,
        200
    );
    conn.tls().handshake_kind()
}

#[test]
fn shared_ticket_keys_resume_across_instances() {
    let dir = TempDir::new("keys");
    let shared = dir.path().join("shared.keys");
    let other = dir.path().join("other.keys");
    write_keys(&shared, 1);
    write_keys(&other, 2);
    let mut ca = TestCa::new();
    let first = tern_with_keys(&mut ca, &shared);
    let second = tern_with_keys(&mut ca, &shared);
    let stranger = tern_with_keys(&mut ca, &other);

    // rustls caches sessions per server name, so all three see the same ticket.
    let config = client::client_config(ca.ca_pem());
    assert_eq!(
        handshake_kind(first.addr, config.clone()),
        Some(HandshakeKind::Full)
    );
    assert_eq!(
        handshake_kind(second.addr, config.clone()),
        Some(HandshakeKind::Resumed)
    );

    let config = client::client_config(ca.ca_pem());
    assert_eq!(
        handshake_kind(first.addr, config.clone()),
        Some(HandshakeKind::Full)
    );
    assert_ne!(
        handshake_kind(stranger.addr, config),
        Some(HandshakeKind::Resumed),
        "an instance with other keys resumed a session"
    );
}

#[test]
fn session_cache_and_tickets_off_means_no_resumption() {
    let served = Served::start(&["--no-tickets", "--session-cache", "0"]);
    let config = served.client.clone();
    assert_eq!(
        handshake_kind(served.addr, config.clone()),
        Some(HandshakeKind::Full)
    );
    assert_eq!(
        handshake_kind(served.addr, config),
        Some(HandshakeKind::Full)
    );
}
