//! Integration tests of `tern serve` backend groups: balancing (weights,
//! least connections), affinity (hash, sticky cookie), outlier detection
//! and slow start, retries and their budget, failover (retry on connect failure, passive
//! ejection, 503 when every server is down), active health checks,
//! routing by Host to several groups, HTTP/2 groups (h2c, and h2 over
//! TLS), and gRPC through both. Real tern processes configured by a TOML
//! file, real hyper backends (HTTP/1.1, h2c, HTTP/2 over TLS), grpc-go's
//! interop client and server, and plain TCP listeners on loopback.

use std::collections::HashMap;
use std::net::SocketAddr;

use tern_testsupport::tern::Served;

#[path = "upstreams/affinity.rs"]
mod affinity;
#[path = "upstreams/balance.rs"]
mod balance;
#[path = "upstreams/dns.rs"]
mod dns;
#[path = "upstreams/drain.rs"]
mod drain;
#[path = "upstreams/failover.rs"]
mod failover;
#[path = "upstreams/grpc.rs"]
mod grpc;
#[path = "upstreams/h2_tls.rs"]
mod h2_tls;
#[path = "upstreams/h2c.rs"]
mod h2c;
#[path = "upstreams/health.rs"]
mod health;
#[path = "upstreams/outliers.rs"]
mod outliers;
#[path = "upstreams/pool.rs"]
mod pool;
#[path = "upstreams/routing.rs"]
mod routing;
#[path = "upstreams/transports.rs"]
mod transports;
#[path = "upstreams/websocket.rs"]
mod websocket;

/// tern started from a config file with `workers` workers, the
/// `[[upstream]]` tables in `upstreams`, and one listener forwarding to the
/// group `default`, followed by `listener_extra` (keys, then
/// `[[listener.route]]` tables). The certificate covers `localhost`,
/// `api.test` and `*.example.test`; the access log is off.
pub fn start_front(workers: usize, upstreams: &str, default: &str, listener_extra: &str) -> Served {
    Served::builder()
        .cert_names(&["localhost", "api.test", "*.example.test"])
        .no_backend()
        .config(|c| {
            format!(
                "workers = {workers}\naccess_log = \"off\"\n\n{upstreams}\n\
                 [[listener]]\nlisten = \"{addr}\"\nupstream = \"{default}\"\n\
                 cert = {chain:?}\nkey = {key:?}\n{listener_extra}\n",
                addr = c.listen,
                chain = c.chain(),
                key = c.key(),
            )
        })
        .start()
}

/// tern with the admin listener on, the top-level keys `globals`, the
/// `[[upstream]]` tables in `upstreams`, and one listener forwarding to
/// the group `app` (2 workers, access log off, certificate for localhost).
pub fn start_with_admin(globals: &str, upstreams: &str) -> Served {
    let (globals, upstreams) = (globals.to_string(), upstreams.to_string());
    Served::builder()
        .cert_names(&["localhost"])
        .no_backend()
        .admin()
        .config(move |c| {
            format!(
                "workers = 2\naccess_log = \"off\"\nadmin = \"{admin}\"\n{globals}\n\n{upstreams}\n\n\
                 [[listener]]\nlisten = \"{addr}\"\nupstream = \"app\"\ncert = {chain:?}\nkey = {key:?}\n",
                admin = c.admin(),
                addr = c.listen,
                chain = c.chain(),
                key = c.key(),
            )
        })
        .start()
}

/// The server `addr` of group `app` in the admin listener's `GET /servers`.
pub fn listed(front: &Served, addr: &str) -> tern_testsupport::serde_json::Value {
    let response = front.admin_get("/servers");
    assert_eq!(response.status, 200, "{}", response.body);
    let all: tern_testsupport::serde_json::Value =
        tern_testsupport::serde_json::from_str(&response.body)
            .unwrap_or_else(|e| panic!("GET /servers: {e}: {}", response.body));
    all["upstreams"][0]["servers"]
        .as_array()
        .and_then(|servers| servers.iter().find(|s| s["server"] == addr))
        .cloned()
        .unwrap_or_else(|| panic!("{addr} not listed: {all}"))
}

/// Sends `GET /slow/<ms>` on its own connection to `front` from another
/// thread; the thread returns the status.
pub fn slow_request(front: &Served, ms: u64) -> std::thread::JoinHandle<std::io::Result<u16>> {
    let mut conn = front.connect();
    std::thread::spawn(move || {
        conn.set_read_timeout(std::time::Duration::from_secs(20))?;
        conn.get("localhost", &format!("/slow/{ms}"))
            .map(|r| r.status)
    })
}

/// `servers = [...]` entries with weight 1 for `addrs`.
pub fn servers(addrs: &[SocketAddr]) -> String {
    let list: Vec<String> = addrs.iter().map(|a| format!("\"{a}\"")).collect();
    format!("servers = [{}]", list.join(", "))
}

/// Which backend (by the echo backend's `backend` field) answered each of
/// `n` GET /echo requests, sent `per_conn` per keepalive connection.
pub fn echo_answers(front: &Served, n: usize, per_conn: usize) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    let mut sent = 0;
    while sent < n {
        let mut conn = front.connect();
        for _ in 0..per_conn.min(n - sent) {
            let response = conn
                .get("localhost", "/echo")
                .unwrap_or_else(|e| panic!("GET /echo: {e}\n{}", front.tern.stderr_text()));
            assert_eq!(response.status, 200, "{}", response.text());
            let backend = response.json()["backend"]
                .as_str()
                .unwrap_or("")
                .to_string();
            *counts.entry(backend).or_insert(0) += 1;
            sent += 1;
        }
    }
    counts
}
