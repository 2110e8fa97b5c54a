//! Server names that are not DNS names. Go clients (hey among them) send
//! the URL's `IP:port` as the TLS server_name for an IP URL; nginx,
//! haproxy and hitch serve it with their default certificate, and so does
//! tern (a patched rustls, see vendor/README.md): such a name counts as no
//! name.

use std::time::Duration;

use tern_testsupport::tern::Served;
use tern_testsupport::tools::{run_tool, s_client};

use crate::clients::tool;
use crate::LOG_WAIT;

#[test]
fn ip_and_port_as_server_name_gets_the_default_certificate() {
    let served = Served::start(&[]);
    let name = served.addr.to_string();
    let request = b"GET /echo?sni=ip-port HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let out = s_client(served.addr, &["-servername", &name, "-ign_eof"], request);
    assert!(
        out.stdout.contains("HTTP/1.1 200"),
        "handshake with server_name {name:?} refused?\n{}",
        out.all()
    );
    // The default certificate (this one is for localhost), and logged as
    // a connection without a server name.
    assert!(
        out.all().contains("CN = localhost") || out.all().contains("CN=localhost"),
        "{}",
        out.all()
    );
    let lines = served
        .tern
        .wait_stdout_lines("path=/echo?sni=ip-port", 1, LOG_WAIT)
        .unwrap_or_else(|stdout| panic!("no access-log line; stdout:\n{stdout}"));
    assert!(lines[0].contains(" sni=- "), "{}", lines[0]);
}

#[test]
fn hey_with_an_ip_url_is_served() {
    let Some(hey) = tool(&["hey"], "hey (go install github.com/rakyll/hey@latest)") else {
        return;
    };
    let served = Served::start(&[]);
    let url = format!("https://{}/echo", served.addr);
    let out = run_tool(
        &hey,
        ["-n", "40", "-c", "4", "-disable-keepalive", url.as_str()],
        b"",
        Duration::from_secs(60),
    );
    assert!(out.success(), "{}", out.all());
    assert!(
        out.stdout.contains("[200]\t40 responses"),
        "hey sends SNI {:?}; every request must be a 200:\n{}",
        served.addr.to_string(),
        out.all()
    );
    assert!(!out.stdout.contains("Error distribution"), "{}", out.all());
}
