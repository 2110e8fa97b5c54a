//! Binary upgrade (issue 27): `tern serve --upgrade` takes the listening
//! sockets of the running tern over its upgrade socket; the old one
//! drains and exits only once the new one serves. Real peers: two tern
//! processes, a TLS client (rustls) under load and a hyper backend, on
//! loopback.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;

use tern_testsupport::backend::Backend;
use tern_testsupport::client::{self, HttpConn};
use tern_testsupport::reload::{stderr_lines, wait_stderr_lines};
use tern_testsupport::tern::{
    eventually, free_addr, run_to_exit, tern_bin, Finished, PlainResponse, TernProcess,
    READY_TIMEOUT,
};

use super::reload::SteadyLoad;
use super::{ca_and_leaf, config_toml, listener_toml, write_atomically, LOG_WAIT};

/// Successful requests between upgrades, so that every process serves
/// part of the load.
const REQUESTS_BETWEEN_UPGRADES: usize = 20;

/// A tern.toml with an upgrade socket and an admin listener in `dir`.
fn upgradable_config(dir: &Path, admin: SocketAddr, listener: String, workers: usize) -> String {
    format!(
        "upgrade_socket = \"{}\"\nadmin = \"{admin}\"\n{}",
        dir.join("upgrade.sock").display(),
        config_toml(&[listener]).replace("workers = 2", &format!("workers = {workers}"))
    )
}

/// Starts `tern serve --upgrade` and waits until it serves and the
/// running tern `old` has exited (cleanly) after draining.
fn upgrade(old: &mut TernProcess, config: &Path) -> TernProcess {
    let config = config.display().to_string();
    let mut new = TernProcess::spawn(tern_bin(), ["serve", "--config", &config, "--upgrade"]);
    let serving = eventually(READY_TIMEOUT, || {
        new.try_status().is_some() || !stderr_lines(&new, "upgrade: serving").is_empty()
    });
    assert!(
        serving && new.try_status().is_none(),
        "the new tern did not take over:\n--- new ---\n{}\n--- old ---\n{}",
        new.stderr_text(),
        old.stderr_text()
    );
    let status = old.wait_exit(READY_TIMEOUT);
    assert!(
        status.is_some_and(|s| s.success()),
        "the old tern did not drain and exit 0 ({status:?}):\n{}",
        old.stderr_text()
    );
    assert!(
        !stderr_lines(old, "the new binary serves; draining").is_empty(),
        "{}",
        old.stderr_text()
    );
    new
}

/// Runs `tern serve --config <config> --upgrade`, which must exit 1.
fn failed_upgrade(config: &str) -> Finished {
    let run = run_to_exit(
        tern_bin(),
        ["serve", "--config", config, "--upgrade"],
        READY_TIMEOUT,
    );
    assert_eq!(run.status.and_then(|s| s.code()), Some(1), "{}", run.stderr);
    run
}

fn admin_health(admin: SocketAddr) -> PlainResponse {
    let mut tcp = TcpStream::connect(admin).expect("connect to the admin listener");
    tcp.set_read_timeout(Some(LOG_WAIT)).expect("timeout");
    tcp.write_all(b"GET /health HTTP/1.1\r\nHost: admin\r\n\r\n")
        .expect("write");
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).expect("read");
    PlainResponse::parse(&raw)
}

#[test]
fn three_binary_upgrades_under_load_fail_no_request_and_refuse_no_connection() {
    let (ca, cert) = ca_and_leaf();
    let backend = Backend::start();
    let (addr, admin) = (free_addr(), free_addr());
    let path = ca.dir().join("tern.toml");
    let listener = listener_toml(addr, &[backend.addr()], &cert);
    write_atomically(&path, &upgradable_config(ca.dir(), admin, listener, 2));
    let path_text = path.display().to_string();
    let mut tern = TernProcess::start(tern_bin(), addr, ["serve", "--config", &path_text]);
    // New connections (four requests each) and a keepalive connection:
    // a refused or reset connection is a failure.
    let load = SteadyLoad::start(addr, client::client_config(ca.ca_pem()));
    load.wait_for_more(REQUESTS_BETWEEN_UPGRADES);
    for _ in 0..3 {
        let old_pid = tern.pid();
        tern = upgrade(&mut tern, &path);
        assert_ne!(tern.pid(), old_pid);
        let received = stderr_lines(&tern, "listening sockets received");
        assert!(
            received.iter().any(|l| l.contains("3 listening sockets")),
            "the new tern did not get both workers' sockets and the admin one: {received:?}"
        );
        load.wait_for_more(REQUESTS_BETWEEN_UPGRADES);
    }
    let (ok, failures) = load.finish();
    assert!(
        failures.is_empty(),
        "{} of {} requests failed across 3 upgrades: {failures:?}\n{}",
        failures.len(),
        ok + failures.len(),
        tern.stderr_text()
    );
    // The admin listener moved with the rest (the new tern could not have
    // bound it while the old one held it).
    assert_eq!(admin_health(admin).status, 200);
    eprintln!("{ok} requests, none failed, across 3 upgrades");
}

#[test]
fn upgrade_with_a_broken_config_leaves_the_running_tern_serving_and_says_why() {
    let (ca, cert) = ca_and_leaf();
    let backend = Backend::start();
    let (addr, admin) = (free_addr(), free_addr());
    let good = ca.dir().join("tern.toml");
    let listener = listener_toml(addr, &[backend.addr()], &cert);
    write_atomically(
        &good,
        &upgradable_config(ca.dir(), admin, listener.clone(), 2),
    );
    let good_text = good.display().to_string();
    let mut tern = TernProcess::start(tern_bin(), addr, ["serve", "--config", &good_text]);
    let client = client::client_config(ca.ca_pem());
    let serves = |what: &str| {
        let mut conn = HttpConn::connect(addr, "localhost", client.clone())
            .unwrap_or_else(|e| panic!("{what}: connect: {e}"));
        let status = conn.get("localhost", "/echo").map(|r| r.status);
        assert!(matches!(status, Ok(200)), "{what}: {status:?}");
    };

    // A file that does not parse: the new binary stops before it asks.
    let broken = ca.dir().join("broken.toml");
    let text = upgradable_config(ca.dir(), admin, listener.clone(), 2)
        .replace("backends = [", "backends = [[");
    write_atomically(&broken, &text);
    let broken_text = broken.display().to_string();
    let run = failed_upgrade(&broken_text);
    assert!(
        run.stderr.contains("broken.toml"),
        "the error does not name the file: {}",
        run.stderr
    );
    serves("after a broken file");

    // A file that loads but cannot take the sockets over (fewer workers
    // than the running tern has sockets): the new binary has connected,
    // so both say why.
    let fewer = ca.dir().join("fewer.toml");
    write_atomically(&fewer, &upgradable_config(ca.dir(), admin, listener, 1));
    let fewer_text = fewer.display().to_string();
    let run = failed_upgrade(&fewer_text);
    assert!(run.stderr.contains("workers = 1"), "{}", run.stderr);
    let said = wait_stderr_lines(&tern, "upgrade failed, still serving", 1, LOG_WAIT)
        .unwrap_or_else(|stderr| panic!("the running tern did not say why:\n{stderr}"));
    assert!(said[0].contains("workers = 1"), "{said:?}");
    assert!(tern.try_status().is_none(), "the running tern exited");
    serves("after a new binary that could not start");
    assert_eq!(admin_health(admin).status, 200);

    // The running tern still hands over to a good binary afterwards.
    let tern = upgrade(&mut tern, &good);
    serves("after the good upgrade");
    drop(tern);
}

#[test]
fn upgrade_without_a_running_tern_fails_naming_the_socket() {
    let (ca, cert) = ca_and_leaf();
    let path = ca.dir().join("tern.toml");
    let listener = listener_toml(free_addr(), &[free_addr()], &cert);
    write_atomically(
        &path,
        &upgradable_config(ca.dir(), free_addr(), listener, 1),
    );
    let path_text = path.display().to_string();
    let run = failed_upgrade(&path_text);
    assert!(
        run.stderr.contains("upgrade.sock") && run.stderr.contains("no running tern"),
        "{}",
        run.stderr
    );
}
