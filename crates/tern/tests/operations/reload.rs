//! Hot reload on SIGHUP (issue 3, item 10): under a steady stream of
//! requests nothing fails; new certificates, backends and listeners take
//! effect; a broken configuration is refused and the old one keeps serving.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tern_testsupport::backend::Backend;
use tern_testsupport::certs::KeyKind;
use tern_testsupport::client::{self, HttpConn};
use tern_testsupport::reload::{hangup, stderr_lines, wait_stderr_lines};
use tern_testsupport::rustls::ClientConfig;
use tern_testsupport::tern::{eventually, free_addr, tern_bin, TernProcess};

use super::{ca_and_leaf, config_toml, listener_toml, write_atomically, LOG_WAIT};

/// Requests sent on one connection before the load client opens a new one:
/// the stream mixes new connections (handshakes during reloads) with
/// keepalive reuse (connections that straddle reloads).
const REQUESTS_PER_CONNECTION: usize = 4;

/// Successful requests the load must make before the first reload and
/// after each one, so every generation serves part of the stream. (The
/// test used to sleep 150-200 ms instead, which a loaded machine could
/// fill with no request at all.)
const REQUESTS_BETWEEN_RELOADS: usize = 20;

/// tern-proxy's DRAIN_IDLE_GRACE: how long a draining process waits for
/// the next request on an idle keepalive connection before closing it.
const SERVER_IDLE_GRACE: Duration = Duration::from_millis(500);

/// A client thread sending requests until told to stop, counting successes
/// and keeping a description of every failure.
pub(super) struct SteadyLoad {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failures: Arc<Mutex<Vec<String>>>,
    threads: Vec<JoinHandle<()>>,
}

impl SteadyLoad {
    pub(super) fn start(addr: SocketAddr, config: Arc<ClientConfig>) -> SteadyLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicUsize::new(0));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        // Short connections, REQUESTS_PER_CONNECTION requests each.
        {
            let (stop, ok, failures, config) =
                (stop.clone(), ok.clone(), failures.clone(), config.clone());
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let mut conn = match HttpConn::connect(addr, "localhost", config.clone()) {
                        Ok(c) => c,
                        Err(e) => {
                            record(&failures, format!("connect: {e}"));
                            continue;
                        }
                    };
                    let mut idle_since = None;
                    for _ in 0..REQUESTS_PER_CONNECTION {
                        if one_request(&mut conn, idle_since, &ok, &failures) != Reply::KeepAlive {
                            break;
                        }
                        idle_since = Some(Instant::now());
                    }
                }
            }));
        }
        // One keepalive connection held open across every reload.
        {
            let (stop, ok, failures) = (stop.clone(), ok.clone(), failures.clone());
            threads.push(std::thread::spawn(move || {
                let mut conn = match HttpConn::connect(addr, "localhost", config.clone()) {
                    Ok(c) => c,
                    Err(e) => return record(&failures, format!("long connection: {e}")),
                };
                let mut idle_since = None;
                while !stop.load(Ordering::SeqCst) {
                    match one_request(&mut conn, idle_since, &ok, &failures) {
                        Reply::KeepAlive => idle_since = Some(Instant::now()),
                        Reply::Failed => return,
                        // The server said so (a binary upgrade drains
                        // this process): a new connection, as a client does.
                        Reply::Close | Reply::ClosedIdle => {
                            match HttpConn::connect(addr, "localhost", config.clone()) {
                                Ok(c) => conn = c,
                                Err(e) => return record(&failures, format!("reconnect: {e}")),
                            }
                            idle_since = None;
                        }
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }));
        }
        SteadyLoad {
            stop,
            ok,
            failures,
            threads,
        }
    }

    /// Waits until `n` more requests have succeeded than when called, so
    /// the load has really run (on the current generation); panics with
    /// the failures so far after `LOG_WAIT`.
    pub(super) fn wait_for_more(&self, n: usize) {
        let target = self.ok.load(Ordering::SeqCst) + n;
        assert!(
            eventually(LOG_WAIT, || self.ok.load(Ordering::SeqCst) >= target),
            "the load did not complete {n} more requests within {LOG_WAIT:?}; failures: {:?}",
            self.failures.lock().map(|f| f.clone()).unwrap_or_default()
        );
    }

    /// Stops the clients; returns (successful requests, failures).
    pub(super) fn finish(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            t.join().expect("load thread panicked");
        }
        let failures = self.failures.lock().map(|f| f.clone()).unwrap_or_default();
        (self.ok.load(Ordering::SeqCst), failures)
    }
}

/// How a request of the load went.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    /// 200; the connection stays open.
    KeepAlive,
    /// 200 with `Connection: close`.
    Close,
    /// Closed, without a byte of response, after the connection had sat
    /// idle at least SERVER_IDLE_GRACE: a draining process may close it
    /// then, and a client sends the request again on a new connection
    /// (RFC 9112 section 9.3.1; browsers and curl do). Not a failure.
    ClosedIdle,
    /// Anything else (recorded as a failure).
    Failed,
}

/// One GET on `conn`, idle since `idle_since` (None: a new connection).
fn one_request(
    conn: &mut HttpConn,
    idle_since: Option<Instant>,
    ok: &AtomicUsize,
    failures: &Mutex<Vec<String>>,
) -> Reply {
    // Measured before the request leaves: the server's grace began at its
    // last response, before this client had it.
    let idled_out = idle_since.is_some_and(|t| t.elapsed() >= SERVER_IDLE_GRACE);
    match conn.get("localhost", "/echo") {
        Ok(r) if r.status == 200 => {
            ok.fetch_add(1, Ordering::SeqCst);
            let close = r
                .header("connection")
                .is_some_and(|v| v.eq_ignore_ascii_case("close"));
            if close {
                Reply::Close
            } else {
                Reply::KeepAlive
            }
        }
        Ok(r) => {
            record(failures, format!("status {}: {}", r.status, r.text()));
            Reply::Failed
        }
        // Only after the grace: a close sooner, or of a request the
        // server had begun to answer, is a failure still.
        Err(e) if idled_out && client::closed_before_response(&e) => Reply::ClosedIdle,
        Err(e) => {
            record(failures, format!("request: {e}"));
            Reply::Failed
        }
    }
}

fn record(failures: &Mutex<Vec<String>>, what: String) {
    if let Ok(mut f) = failures.lock() {
        f.push(what);
    }
}

/// Sends SIGHUP and waits for the `reloaded` line number `count`.
fn reload_and_wait(tern: &mut TernProcess, count: usize) {
    hangup(tern);
    if let Err(stderr) = wait_stderr_lines(tern, "reloaded", count, LOG_WAIT) {
        panic!("reload {count} was not applied:\n{stderr}");
    }
}

#[test]
fn ten_reloads_under_load_fail_no_request() {
    let (mut ca, cert_a) = ca_and_leaf();
    let cert_b = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let backends = [Backend::start(), Backend::start(), Backend::start()];
    let [b1, b2, b3] = [0, 1, 2].map(|i| backends[i].addr());
    let addr = free_addr();
    let path = ca.dir().join("tern.toml");
    write_atomically(&path, &config_toml(&[listener_toml(addr, &[b1], &cert_a)]));
    let path_text = path.display().to_string();
    let mut tern = TernProcess::start(tern_bin(), addr, ["serve", "--config", &path_text]);
    let client = client::client_config(ca.ca_pem());
    let load = SteadyLoad::start(addr, client.clone());
    load.wait_for_more(REQUESTS_BETWEEN_RELOADS);

    // (backends, certificate) after each of the 10 reloads.
    let plan: [(&[SocketAddr], bool); 10] = [
        (&[b1, b2], false),
        (&[b2], false),
        (&[b2, b3], false),
        (&[b3], false),
        (&[b3], true),
        (&[b1], true),
        (&[b1, b2, b3], true),
        (&[b2], true),
        (&[b1], true),
        (&[b1, b2], true),
    ];
    for (i, (servers, new_cert)) in plan.iter().enumerate() {
        let cert = if *new_cert { &cert_b } else { &cert_a };
        write_atomically(&path, &config_toml(&[listener_toml(addr, servers, cert)]));
        let b3_before = backends[2].requests();
        reload_and_wait(&mut tern, i + 1);
        if i == 2 {
            // b3 was in no earlier generation: only the reload can send it work.
            assert_eq!(b3_before, 0, "b3 got requests before it was configured");
            assert!(
                eventually(LOG_WAIT, || backends[2].requests() > 0),
                "no request reached the backend added by reload 3"
            );
        }
        if i == 4 {
            // A fresh client config: the shared one holds tickets, and a
            // resumed session reports the certificate of its first handshake.
            let fresh = client::client_config(ca.ca_pem());
            let conn = HttpConn::connect(addr, "localhost", fresh)
                .unwrap_or_else(|e| panic!("connect after the certificate reload: {e}"));
            let presented = conn
                .tls()
                .peer_certificates()
                .and_then(|chain| chain.first())
                .map(|leaf| leaf.as_ref().to_vec());
            assert_eq!(
                presented.as_deref(),
                Some(cert_b.leaf_der.as_slice()),
                "a new connection after the reload still gets the old certificate"
            );
        }
        load.wait_for_more(REQUESTS_BETWEEN_RELOADS);
    }
    let (ok, failures) = load.finish();

    assert!(
        failures.is_empty(),
        "{} of {} requests failed across 10 reloads: {:?}\n{}",
        failures.len(),
        ok + failures.len(),
        failures,
        tern.stderr_text()
    );
    assert!(
        ok >= 50,
        "only {ok} requests completed: the load did not run"
    );
    eprintln!("{ok} requests, none failed, across 10 reloads");
    assert!(stderr_lines(&tern, "reload refused").is_empty());
}

#[test]
fn broken_reload_is_refused_and_the_old_config_keeps_serving() {
    let (ca, cert) = ca_and_leaf();
    let backend = Backend::start();
    let addr = free_addr();
    let path = ca.dir().join("tern.toml");
    let good = config_toml(&[listener_toml(addr, &[backend.addr()], &cert)]);
    write_atomically(&path, &good);
    let path_text = path.display().to_string();
    let mut tern = TernProcess::start(tern_bin(), addr, ["serve", "--config", &path_text]);
    let client = client::client_config(ca.ca_pem());
    let get = |tern: &TernProcess| {
        client::get(addr, "localhost", client.clone(), "/echo")
            .unwrap_or_else(|e| panic!("GET after a refused reload: {e}\n{}", tern.stderr_text()))
    };
    let mut kept_alive = HttpConn::connect(addr, "localhost", client.clone()).expect("connect");
    assert_eq!(
        kept_alive.get("localhost", "/echo").expect("GET").status,
        200
    );

    let missing = ca.dir().join("no-such-cert.pem");
    let broken = [
        (
            "syntax error",
            "workers = 2\n[[listener]\nlisten = \"oops\n".to_string(),
            None,
        ),
        (
            "missing certificate",
            good.replace(
                &cert.chain.display().to_string(),
                &missing.display().to_string(),
            ),
            Some(missing.display().to_string()),
        ),
    ];
    for (n, (what, text, must_name)) in broken.iter().enumerate() {
        write_atomically(&path, text);
        hangup(&mut tern);
        let lines = wait_stderr_lines(&tern, "reload refused", n + 1, LOG_WAIT)
            .unwrap_or_else(|stderr| panic!("{what}: no `reload refused` line:\n{stderr}"));
        let line = &lines[n];
        assert!(
            line.contains("ERROR"),
            "{what}: the refusal is not an error line: {line}"
        );
        if let Some(name) = must_name {
            assert!(
                line.contains(name.as_str()),
                "{what}: {line} does not name {name}"
            );
        }
        assert_eq!(get(&tern).status, 200, "{what}: a new connection fails");
        assert_eq!(
            kept_alive
                .get("localhost", "/echo")
                .expect("GET on the old connection")
                .status,
            200,
            "{what}: an established connection fails"
        );
        assert!(
            stderr_lines(&tern, "reloaded").is_empty(),
            "{what}: applied"
        );
    }

    write_atomically(&path, &good);
    reload_and_wait(&mut tern, 1);
    assert_eq!(get(&tern).status, 200);
    assert!(tern.try_status().is_none(), "tern exited");
}

#[test]
fn reload_adds_and_removes_a_listener() {
    let (ca, cert) = ca_and_leaf();
    let backend = Backend::start();
    let (first, second) = (free_addr(), free_addr());
    let path = ca.dir().join("tern.toml");
    let one = config_toml(&[listener_toml(first, &[backend.addr()], &cert)]);
    let two = config_toml(&[
        listener_toml(first, &[backend.addr()], &cert),
        listener_toml(second, &[backend.addr()], &cert),
    ]);
    write_atomically(&path, &one);
    let path_text = path.display().to_string();
    let mut tern = TernProcess::start(tern_bin(), first, ["serve", "--config", &path_text]);
    let client = client::client_config(ca.ca_pem());
    assert!(
        TcpStream::connect(second).is_err(),
        "{second} accepts before it is configured"
    );

    write_atomically(&path, &two);
    reload_and_wait(&mut tern, 1);
    wait_stderr_lines(&tern, &format!("listening on {second}"), 1, LOG_WAIT)
        .unwrap_or_else(|stderr| panic!("the new listener was not announced:\n{stderr}"));
    let response = client::get(second, "localhost", client.clone(), "/echo")
        .unwrap_or_else(|e| panic!("GET on the added listener: {e}\n{}", tern.stderr_text()));
    assert_eq!(response.status, 200);
    // A connection made on the second listener before it is removed.
    let mut established = HttpConn::connect(second, "localhost", client.clone()).expect("connect");

    write_atomically(&path, &one);
    reload_and_wait(&mut tern, 2);
    assert!(
        eventually(LOG_WAIT, || TcpStream::connect(second).is_err()),
        "{second} still accepts after its listener was removed"
    );
    assert_eq!(
        established
            .get("localhost", "/echo")
            .expect("GET on a connection of the removed listener")
            .status,
        200,
        "an established connection was dropped with its listener"
    );
    let response = client::get(first, "localhost", client, "/echo").expect("GET on the kept one");
    assert_eq!(response.status, 200);
}

#[test]
fn certificate_renewed_in_place_is_served_after_sighup() {
    // certbot / cert-manager style: same paths, new contents, then SIGHUP.
    // Without --config, SIGHUP re-reads the command line's files.
    let (mut ca, old) = ca_and_leaf();
    let renewed = ca.leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let chain = ca.dir().join("live.chain.pem");
    let key = ca.dir().join("live.key.pem");
    std::fs::copy(&old.chain, &chain).expect("install the chain");
    std::fs::copy(&old.key, &key).expect("install the key");
    let backend = Backend::start();
    let addr = free_addr();
    let args = [
        "serve".to_string(),
        "--listen".into(),
        addr.to_string(),
        "--backend".into(),
        backend.addr().to_string(),
        "--cert".into(),
        chain.display().to_string(),
        "--key".into(),
        key.display().to_string(),
    ];
    let mut tern = TernProcess::start(tern_bin(), addr, args);
    let leaf_seen = || {
        // A fresh client each time: a resumed session reports its first certificate.
        let conn = HttpConn::connect(addr, "localhost", client::client_config(ca.ca_pem()))
            .unwrap_or_else(|e| panic!("connect: {e}"));
        conn.tls()
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|leaf| leaf.as_ref().to_vec())
    };
    assert_eq!(leaf_seen().as_deref(), Some(old.leaf_der.as_slice()));

    // Key first, then chain, each by rename: a reload between the two would
    // see a mismatched pair and be refused, never half-applied.
    for (from, to) in [(&renewed.key, &key), (&renewed.chain, &chain)] {
        let tmp = to.with_extension("new");
        std::fs::copy(from, &tmp).expect("copy the renewed file");
        std::fs::rename(&tmp, to).expect("rename into place");
    }
    reload_and_wait(&mut tern, 1);
    assert_eq!(
        leaf_seen().as_deref(),
        Some(renewed.leaf_der.as_slice()),
        "the renewed certificate is not served after SIGHUP"
    );
}

#[test]
fn reloaded_limits_apply_to_new_connections_only() {
    let (ca, cert) = ca_and_leaf();
    let backend = Backend::start();
    let addr = free_addr();
    let path = ca.dir().join("tern.toml");
    let listener = listener_toml(addr, &[backend.addr()], &cert);
    write_atomically(&path, &config_toml(std::slice::from_ref(&listener)));
    let path_text = path.display().to_string();
    let mut tern = TernProcess::start(tern_bin(), addr, ["serve", "--config", &path_text]);
    let client = client::client_config(ca.ca_pem());
    let request = format!(
        "GET /echo HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n",
        "a".repeat(3000)
    );
    let send = |conn: &mut HttpConn| {
        conn.send(request.as_bytes()).expect("send");
        conn.read_response(false).expect("response").status
    };
    let mut before = HttpConn::connect(addr, "localhost", client.clone()).expect("connect");
    assert_eq!(send(&mut before), 200);

    let limited = listener + "max_head_bytes = 2048\n";
    write_atomically(&path, &config_toml(&[limited]));
    reload_and_wait(&mut tern, 1);
    let mut after = HttpConn::connect(addr, "localhost", client).expect("connect");
    assert_eq!(send(&mut after), 431, "the new limit is not applied");
    assert_eq!(
        send(&mut before),
        200,
        "a connection from before the reload got the new limit"
    );
}

#[test]
fn request_in_flight_during_reload_completes_on_its_backend() {
    let (ca, cert) = ca_and_leaf();
    let (old_backend, new_backend) = (Backend::start(), Backend::start());
    let addr = free_addr();
    let path = ca.dir().join("tern.toml");
    write_atomically(
        &path,
        &config_toml(&[listener_toml(addr, &[old_backend.addr()], &cert)]),
    );
    let path_text = path.display().to_string();
    let mut tern = TernProcess::start(tern_bin(), addr, ["serve", "--config", &path_text]);
    let client = client::client_config(ca.ca_pem());

    let slow_client = client.clone();
    let slow = std::thread::spawn(move || {
        let mut conn = HttpConn::connect(addr, "localhost", slow_client)?;
        conn.get("localhost", "/slow/1500")
    });
    assert!(
        eventually(LOG_WAIT, || old_backend.requests() == 1),
        "the slow request did not reach the backend"
    );
    write_atomically(
        &path,
        &config_toml(&[listener_toml(addr, &[new_backend.addr()], &cert)]),
    );
    reload_and_wait(&mut tern, 1);
    let response = client::get(addr, "localhost", client, "/echo").expect("GET after reload");
    assert_eq!(response.json()["backend"], new_backend.addr().to_string());

    let slow = slow
        .join()
        .expect("slow client thread")
        .unwrap_or_else(|e| panic!("the in-flight request failed: {e}\n{}", tern.stderr_text()));
    assert_eq!(slow.status, 200);
    assert_eq!(slow.text(), "slow 1500\n");
}

#[test]
fn sighup_right_after_listening_reloads() {
    // An operator's `systemctl reload` (or a certificate-renewal hook) can
    // come at any moment after start; it must never kill tern.
    let (ca, cert) = ca_and_leaf();
    let backend = Backend::start();
    for attempt in 0..3 {
        let addr = free_addr();
        let path = ca.dir().join(format!("early-{attempt}.toml"));
        write_atomically(
            &path,
            &config_toml(&[listener_toml(addr, &[backend.addr()], &cert)]),
        );
        let path_text = path.display().to_string();
        let mut tern = TernProcess::start(tern_bin(), addr, ["serve", "--config", &path_text]);
        hangup(&mut tern);
        let applied = wait_stderr_lines(&tern, "reloaded", 1, LOG_WAIT);
        assert!(
            tern.try_status().is_none(),
            "attempt {attempt}: SIGHUP just after `listening on` killed tern ({:?})\n{}",
            tern.try_status(),
            tern.stderr_text()
        );
        if let Err(stderr) = applied {
            panic!("attempt {attempt}: the early SIGHUP was not applied:\n{stderr}");
        }
    }
}
