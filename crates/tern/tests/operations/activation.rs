//! systemd socket activation (issue 27): tern serves on the listening
//! socket it is given (`LISTEN_FDS`) instead of binding its own. Real
//! peers: `systemd-socket-activate` (Debian's systemd package, which needs
//! no PID-1 systemd) holding the socket, a rustls client, a hyper backend.

use tern_testsupport::backend::Backend;
use tern_testsupport::client::{self, HttpConn};
use tern_testsupport::reload::wait_stderr_lines;
use tern_testsupport::tern::{cert_args, free_addr, tern_bin, TernProcess};

use super::{ca_and_leaf, LOG_WAIT};

#[test]
fn socket_activation_serves_on_the_socket_systemd_passes() {
    let (ca, cert) = ca_and_leaf();
    let backend = Backend::start();
    let addr = free_addr();
    let listen = addr.to_string();
    let backend_addr = backend.addr().to_string();
    let mut args = vec![
        format!("--listen={listen}"),
        "--fdname=https".to_string(),
        tern_bin().display().to_string(),
        "serve".to_string(),
        "--listen".to_string(),
        listen.clone(),
        "--backend".to_string(),
        backend_addr,
        "--workers".to_string(),
        "2".to_string(),
    ];
    args.extend(cert_args(&cert));
    // systemd-socket-activate binds and listens, then starts tern when the
    // first connection arrives: that connection waits in the backlog.
    let activator = TernProcess::spawn(
        std::path::Path::new("/usr/bin/systemd-socket-activate"),
        args,
    );
    wait_stderr_lines(&activator, "Listening on", 1, LOG_WAIT)
        .unwrap_or_else(|stderr| panic!("systemd-socket-activate did not listen:\n{stderr}"));
    let config = client::client_config(ca.ca_pem());
    // The first connection starts tern; both are served by it. tern could
    // not have bound the address itself while the activator holds it.
    for i in 0..2 {
        let mut conn = HttpConn::connect(addr, "localhost", config.clone())
            .unwrap_or_else(|e| panic!("connection {i}: {e}\n{}", activator.stderr_text()));
        let response = conn.get("localhost", "/echo").expect("request");
        assert_eq!(response.status, 200, "{}", response.text());
    }
    let taken = wait_stderr_lines(&activator, "sockets from systemd", 1, LOG_WAIT)
        .unwrap_or_else(|stderr| panic!("tern did not say it took systemd's socket:\n{stderr}"));
    assert!(taken[0].contains("from systemd (https)"), "{taken:?}");
    assert!(
        backend.requests() >= 2,
        "the requests did not reach the backend"
    );
}
