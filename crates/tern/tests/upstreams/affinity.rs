//! Affinity: `balance = "hash"` on a header, a cookie or the client
//! address, and `balance = "sticky_cookie"`, against real backends that
//! say which of them answered.

use std::collections::HashMap;
use std::net::SocketAddr;

use tern_testsupport::backend::Backend;
use tern_testsupport::client::{HttpConn, Response};
use tern_testsupport::tern::Served;

use crate::{servers, start_front};

/// `GET /echo` with the extra header lines `extra` on `conn`.
fn get_with(front: &Served, conn: &mut HttpConn, extra: &str) -> Response {
    get_from(front, conn, "localhost", extra)
}

/// `GET /echo` for `host` with the extra header lines `extra` on `conn`.
fn get_from(front: &Served, conn: &mut HttpConn, host: &str, extra: &str) -> Response {
    let request = format!("GET /echo HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n");
    conn.send(request.as_bytes())
        .and_then(|()| conn.read_response(false))
        .unwrap_or_else(|e| panic!("GET /echo: {e}\n{}", front.tern.stderr_text()))
}

/// The backend that answered.
fn backend_of(front: &Served, response: &Response) -> String {
    assert_eq!(
        response.status,
        200,
        "{}\n{}",
        response.text(),
        front.tern.stderr_text()
    );
    response.json()["backend"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The server of each of `users` `X-User` values, 50 requests per connection.
fn owners(front: &Served, users: usize) -> Vec<String> {
    let mut owners = Vec::with_capacity(users);
    for chunk in (0..users).collect::<Vec<_>>().chunks(50) {
        let mut conn = front.connect();
        for user in chunk {
            let r = get_with(front, &mut conn, &format!("X-User: user-{user}\r\n"));
            owners.push(backend_of(front, &r));
        }
    }
    owners
}

#[test]
fn hash_on_a_header_keeps_users_on_their_server_and_removing_one_of_four_moves_only_its_users() {
    let backends: Vec<Backend> = (0..4).map(|_| Backend::start()).collect();
    let addrs: Vec<SocketAddr> = backends.iter().map(Backend::addr).collect();
    let upstreams = format!(
        "[[upstream]]\nname = \"app\"\nbalance = \"hash\"\nhash_key = \"header:X-User\"\n{}\n",
        servers(&addrs)
    );
    let mut front = start_front(2, &upstreams, "app", "");
    const USERS: usize = 600;
    let first = owners(&front, USERS);
    let again = owners(&front, USERS);
    assert_eq!(first, again, "a user changed servers with nothing changed");
    for a in &addrs {
        let n = first.iter().filter(|o| **o == a.to_string()).count();
        assert!(n >= USERS / 8, "{a} owns only {n} of {USERS} users");
    }

    // The fourth server leaves the group (a reload without it).
    let gone = addrs[3].to_string();
    front.edit_config(|text| text.replace(&format!(", \"{gone}\""), ""));
    front.reload();
    let after = owners(&front, USERS);
    let moved: Vec<usize> = (0..USERS).filter(|&u| first[u] != after[u]).collect();
    assert!(
        moved.iter().all(|&u| first[u] == gone),
        "users of the servers that stayed moved too"
    );
    assert_eq!(
        moved.len(),
        first.iter().filter(|o| **o == gone).count(),
        "every user of the removed server moved"
    );
    assert!(
        moved.len() * 3 <= USERS,
        "{} of {USERS} users moved (more than a third)",
        moved.len()
    );
    eprintln!(
        "{} of {USERS} users ({:.1} %) moved when one of four servers left",
        moved.len(),
        moved.len() as f64 * 100.0 / USERS as f64
    );
}

#[test]
fn hash_on_a_cookie_or_the_client_address_keeps_each_on_one_server() {
    let backends: Vec<Backend> = (0..3).map(|_| Backend::start()).collect();
    let addrs: Vec<SocketAddr> = backends.iter().map(Backend::addr).collect();
    let upstreams = format!(
        "[[upstream]]\nname = \"by_cookie\"\nbalance = \"hash\"\nhash_key = \"cookie:session\"\n{list}\n\
         [[upstream]]\nname = \"by_ip\"\nbalance = \"hash\"\n{list}\n",
        list = servers(&addrs)
    );
    let routes = "[[listener.route]]\nhost = \"api.test\"\nupstream = \"by_ip\"\n";
    let front = start_front(2, &upstreams, "by_cookie", routes);

    let mut seen: HashMap<String, String> = HashMap::new();
    let mut conn = front.connect();
    for round in 0..3 {
        for s in 0..30 {
            let r = get_with(
                &front,
                &mut conn,
                &format!("Cookie: theme=dark; session=s{s}; lang=en\r\n"),
            );
            let owner = backend_of(&front, &r);
            let first = seen.entry(format!("s{s}")).or_insert_with(|| owner.clone());
            assert_eq!(*first, owner, "session s{s} moved in round {round}");
        }
    }
    let distinct: std::collections::HashSet<_> = seen.values().collect();
    assert!(distinct.len() > 1, "30 sessions all went to one server");

    // Clients from different loopback addresses: each stays on its server.
    let mut by_ip: HashMap<u8, String> = HashMap::new();
    for round in 0..2 {
        for last in 1..=12u8 {
            let source = std::net::IpAddr::from([127, 0, 0, last]);
            let mut conn =
                HttpConn::connect_from(source, front.addr, "api.test", front.client.clone())
                    .unwrap_or_else(|e| panic!("connect from {source}: {e}"));
            let r = get_from(&front, &mut conn, "api.test", "");
            let owner = backend_of(&front, &r);
            let first = by_ip.entry(last).or_insert_with(|| owner.clone());
            assert_eq!(*first, owner, "client {source} moved in round {round}");
        }
    }
    let distinct: std::collections::HashSet<_> = by_ip.values().collect();
    assert!(
        distinct.len() > 1,
        "12 client addresses all went to one server"
    );
}

/// The `tern_server` cookie a response sets, as a `Cookie` field's pair.
fn set_cookie(response: &Response) -> Option<String> {
    let value = response.header("set-cookie")?;
    assert!(
        value.contains("Secure") && value.contains("HttpOnly") && value.contains("Path=/"),
        "{value}"
    );
    value.split(';').next().map(str::to_string)
}

#[test]
fn sticky_cookie_names_a_server_opaquely_and_survives_a_reload() {
    let mut backends: Vec<Backend> = (0..3).map(|_| Backend::start()).collect();
    let addrs: Vec<SocketAddr> = backends.iter().map(Backend::addr).collect();
    let upstreams = format!(
        "[[upstream]]\nname = \"app\"\nbalance = \"sticky_cookie\"\n{}\n",
        servers(&addrs)
    );
    let mut front = start_front(2, &upstreams, "app", "");

    let mut conn = front.connect();
    let first = get_with(&front, &mut conn, "");
    let server = backend_of(&front, &first);
    let cookie = set_cookie(&first).expect("the first response sets the cookie");
    assert!(cookie.starts_with("tern_server="), "{cookie}");
    for a in &addrs {
        let port = a.port().to_string();
        assert!(
            !cookie.contains(&port),
            "the cookie shows the address: {cookie}"
        );
    }
    let with_cookie = format!("Cookie: {cookie}\r\n");
    for _ in 0..20 {
        let r = get_with(&front, &mut conn, &with_cookie);
        assert_eq!(
            backend_of(&front, &r),
            server,
            "the cookie was not followed"
        );
        assert_eq!(
            r.header("set-cookie"),
            None,
            "a cookie already right is set again"
        );
    }

    front.reload();
    let mut conn = front.connect();
    for _ in 0..10 {
        let r = get_with(&front, &mut conn, &with_cookie);
        assert_eq!(
            backend_of(&front, &r),
            server,
            "the cookie was not followed after a reload"
        );
    }

    // A forged value names no server: balanced as without one, and given a
    // real cookie.
    let forged = get_with(
        &front,
        &mut conn,
        "Cookie: tern_server=0123456789abcdef\r\n",
    );
    backend_of(&front, &forged);
    assert!(
        set_cookie(&forged).is_some(),
        "a forged cookie was not replaced"
    );

    // The server goes away: the request goes to another, which the new
    // cookie names.
    let index = addrs
        .iter()
        .position(|a| a.to_string() == server)
        .expect("one of ours");
    drop(backends.remove(index));
    let moved = get_with(&front, &mut conn, &with_cookie);
    let other = backend_of(&front, &moved);
    assert_ne!(other, server);
    let new_cookie = set_cookie(&moved).expect("a cookie naming the new server");
    assert_ne!(new_cookie, cookie);
    let r = get_with(&front, &mut conn, &format!("Cookie: {new_cookie}\r\n"));
    assert_eq!(backend_of(&front, &r), other);
}

#[test]
fn bounded_loads_spread_one_hot_key_over_several_servers() {
    let backends: Vec<Backend> = (0..4).map(|_| Backend::start()).collect();
    let addrs: Vec<SocketAddr> = backends.iter().map(Backend::addr).collect();
    let group = |name: &str, factor: u32| {
        format!(
            "[[upstream]]\nname = \"{name}\"\nbalance = \"hash\"\nhash_key = \"header:X-User\"\n\
             hash_balance_factor = {factor}\n{}\n",
            servers(&addrs)
        )
    };
    let upstreams = format!("{}{}", group("bounded", 125), group("exact", 0));
    let routes = "[[listener.route]]\nhost = \"api.test\"\nupstream = \"exact\"\n";
    let front = start_front(2, &upstreams, "bounded", routes);
    // Eight slow requests for one key at once, to each group.
    let hot = |host: &'static str| -> usize {
        let before: Vec<usize> = backends.iter().map(Backend::requests).collect();
        std::thread::scope(|s| {
            let clients: Vec<_> = (0..8)
                .map(|_| {
                    let mut conn = front.connect();
                    s.spawn(move || {
                        conn.send(
                            format!(
                                "GET /slow/1500 HTTP/1.1\r\nHost: {host}\r\nX-User: hot\r\n\r\n"
                            )
                            .as_bytes(),
                        )
                        .and_then(|()| conn.read_response(false))
                        .map(|r| r.status)
                    })
                })
                .collect();
            for c in clients {
                assert_eq!(c.join().expect("client").expect("response"), 200);
            }
        });
        backends
            .iter()
            .zip(&before)
            .filter(|(b, &n)| b.requests() > n)
            .count()
    };
    assert_eq!(
        hot("api.test"),
        1,
        "without a bound, one key stays on one server"
    );
    let spread = hot("localhost");
    assert!(
        spread >= 2,
        "with hash_balance_factor 125 the hot key stayed on {spread} server"
    );
}

#[test]
fn bad_affinity_outlier_and_retry_settings_name_their_line_and_exit_1() {
    let dir = tern_testsupport::tempdir::TempDir::new("affinity-config");
    let cases = [
        (
            "balance = \"hash\"\nhash_key = \"query:x\"",
            "tern.toml:5:",
            "client_ip, header:NAME or cookie:NAME",
        ),
        ("balance = \"sticky\"", "tern.toml:4:", "sticky_cookie"),
        (
            "hash_balance_factor = 90",
            "tern.toml:4:",
            "must be above 100",
        ),
        (
            "sticky_cookie = \"a b\"",
            "tern.toml:4:",
            "not a cookie name",
        ),
        ("consecutive_5xx = 0", "tern.toml:4:", "at least 1"),
        ("max_ejected_percent = 101", "tern.toml:4:", "at most 100"),
        ("slow_start = \"soon\"", "tern.toml:4:", "not a duration"),
        (
            "max_fail_timeout = \"1s\"",
            "tern.toml:4:",
            "at least fail_timeout",
        ),
        ("retry_on = [404]", "tern.toml:4:", "only 5xx"),
        ("retry_budget = 101", "tern.toml:4:", "at most 100"),
    ];
    for (group, line, why) in cases {
        let (code, stderr) = crate::h2_tls::check_config(dir.path(), group);
        assert_eq!(code, Some(1), "{group}: {stderr}");
        assert!(
            stderr.contains(line) && stderr.contains(why),
            "{group}: wanted {line} ... {why}, got: {stderr}"
        );
    }
}
