//! The fleet ticket-key rotation of docs/fleet.md, done with SIGHUP on two
//! real instances sharing a keys file: no step makes a client lose
//! resumption, even with one instance reloading late, and deleting the old
//! key really ends resumption of tickets made with it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tern_testsupport::backend::Backend;
use tern_testsupport::certs::{CertFiles, TestCa};
use tern_testsupport::client::{self, HttpConn};
use tern_testsupport::rustls::{ClientConfig, HandshakeKind};
use tern_testsupport::tern::Served;
use tern_testsupport::tools::run_tool;

use super::ca_and_leaf;

/// A key line as docs/fleet.md says to make one: `openssl rand -hex 48`.
fn new_key_line() -> String {
    let out = run_tool(
        "openssl",
        ["rand", "-hex", "48"],
        b"",
        Duration::from_secs(10),
    );
    assert!(out.success(), "openssl rand: {}", out.all());
    let line = out.stdout.trim().to_string();
    assert_eq!(line.len(), 96, "{line}");
    line
}

fn write_keys(path: &Path, keys: &[&str]) {
    let tmp = path.with_extension("tmp");
    let text = format!("# tern ticket keys, newest first\n{}\n", keys.join("\n"));
    std::fs::write(&tmp, text).expect("write keys");
    std::fs::rename(&tmp, path).expect("rename keys into place");
}

/// One instance of the fleet: the shared certificate and keys file, in
/// front of the shared backend.
fn instance(ca: &TestCa, cert: &CertFiles, keys: &Path, backend: &Backend) -> Served {
    let keys = keys.display().to_string();
    Served::builder()
        .shared_cert(ca, cert)
        .backend_addr(backend.addr())
        .args(&["--ticket-keys-file", &keys])
        .start()
}

/// A new client (empty session store) that gets its tickets from `from`.
fn client_with_ticket_from(ca: &TestCa, from: &Served) -> Arc<ClientConfig> {
    let config = client::client_config(ca.ca_pem());
    assert_eq!(visit(&config, from), Some(HandshakeKind::Full));
    config
}

/// One connection with a request (so the TLS 1.3 tickets arrive); how the
/// handshake went.
fn visit(config: &Arc<ClientConfig>, to: &Served) -> Option<HandshakeKind> {
    let mut conn = HttpConn::connect(to.addr, "localhost", config.clone())
        .unwrap_or_else(|e| panic!("connect: {e}\n{}", to.tern.stderr_text()));
    let response = conn.get("localhost", "/echo").expect("GET");
    assert_eq!(response.status, 200);
    conn.tls().handshake_kind()
}

#[test]
fn fleet_ticket_key_rotation_by_reload_never_loses_resumption() {
    let (ca, cert) = ca_and_leaf();
    let backend = Backend::start();
    let keys = ca.dir().join("ticket-keys.txt");
    let (old, new) = (new_key_line(), new_key_line());
    write_keys(&keys, &[&old]);
    let mut one = instance(&ca, &cert, &keys, &backend);
    let mut two = instance(&ca, &cert, &keys, &backend);

    let before_rotation = client_with_ticket_from(&ca, &one);

    // Step 1: the new key goes at the end everywhere; nobody issues with it.
    write_keys(&keys, &[&old, &new]);
    one.reload();
    two.reload();
    assert_eq!(
        visit(&before_rotation, &two),
        Some(HandshakeKind::Resumed),
        "step 1 broke resumption of tickets made before the rotation"
    );

    // Step 2: the new key moves to the top, but instance two reloads late.
    write_keys(&keys, &[&new, &old]);
    one.reload();
    let under_new = client_with_ticket_from(&ca, &one);
    assert_eq!(
        visit(&under_new, &two),
        Some(HandshakeKind::Resumed),
        "a ticket under the new key did not resume on an instance that has not reloaded yet"
    );
    // Until it reloads, instance two still issues tickets under the old key.
    let under_old = client_with_ticket_from(&ca, &two);
    two.reload();
    let under_new_too = client_with_ticket_from(&ca, &two);

    // Step 3: the old key is deleted.
    write_keys(&keys, &[&new]);
    one.reload();
    two.reload();
    assert_eq!(
        visit(&under_new_too, &one),
        Some(HandshakeKind::Resumed),
        "tickets under the kept key stopped resuming"
    );
    assert_eq!(
        visit(&under_old, &one),
        Some(HandshakeKind::Full),
        "a ticket under the deleted key still resumes: old keys must stop working"
    );
}
