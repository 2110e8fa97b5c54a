//! Runtime control on the admin listener: a server drained with
//! `POST /servers/<upstream>/<server>/drain` gets no new requests while
//! its running ones finish; `enable` puts it back; `GET /servers` shows
//! the states and counts; requests from web pages are refused.

use std::time::Duration;

use tern_testsupport::backend::Backend;
use tern_testsupport::serde_json::Value;
use tern_testsupport::tern::{wait_until, PlainResponse, Served};

use super::{echo_answers, listed, servers, slow_request, start_with_admin};

/// tern with the group `app` of `backends` and the admin listener.
fn start(backends: &[&Backend]) -> Served {
    let addrs: Vec<_> = backends.iter().map(|b| b.addr()).collect();
    start_with_admin(
        "",
        &format!("[[upstream]]\nname = \"app\"\n{}", servers(&addrs)),
    )
}

fn post(front: &Served, path: &str, extra: &str) -> PlainResponse {
    front.admin_raw(format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n").as_bytes())
}

fn json(response: &PlainResponse) -> Value {
    let text = &response.body;
    tern_testsupport::serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn a_drained_server_gets_no_new_requests_and_its_running_ones_finish() {
    let a = Backend::start();
    let b = Backend::start();
    let front = start(&[&a, &b]);
    // Long enough for 20 new connections and the admin calls below on a
    // loaded machine (the premise is checked before the join).
    let slow = slow_request(&front, 6000);
    wait_until(
        "the slow request at a backend",
        Duration::from_secs(10),
        || a.requests() + b.requests() == 1,
    );
    let (busy, idle) = if a.requests() == 1 {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let busy_addr = busy.addr().to_string();

    let drained = post(&front, &format!("/servers/app/{busy_addr}/drain"), "");
    assert_eq!(drained.status, 200, "{}", drained.body);
    let drained = json(&drained);
    assert_eq!(drained["admin"], "draining", "{drained}");
    assert_eq!(
        drained["in_flight"], 1,
        "the slow request is still running: {drained}"
    );
    front.wait_log(
        &["admin: server draining (was enabled", &busy_addr],
        Duration::from_secs(5),
    );

    let counts = echo_answers(&front, 20, 2);
    assert_eq!(
        counts.get(&idle.addr().to_string()).copied(),
        Some(20),
        "{counts:?}: no new request goes to the drained server"
    );
    assert!(
        !slow.is_finished(),
        "the premise: the slow request was running during the quick ones"
    );
    assert_eq!(
        slow.join().expect("no panic").expect("the slow response"),
        200,
        "the drained server's running request finishes"
    );
    assert_eq!(busy.requests(), 1);
    let shown = listed(&front, &busy_addr);
    assert_eq!(
        (
            &shown["admin"],
            &shown["live"],
            &shown["in_flight"],
            &shown["health"]
        ),
        (
            &Value::from("draining"),
            &Value::from(false),
            &Value::from(0),
            &Value::from("up")
        ),
        "{shown}"
    );
    assert_eq!(
        front.scrape().get(
            "tern_backend_up",
            &[("upstream", "app"), ("server", &busy_addr)]
        ),
        Some(0.0)
    );

    let enabled = post(&front, &format!("/servers/app/{busy_addr}/enable"), "");
    assert_eq!(json(&enabled)["admin"], "enabled", "{}", enabled.body);
    let counts = echo_answers(&front, 10, 1);
    assert!(counts.contains_key(&busy_addr), "enabled again: {counts:?}");
}

#[test]
fn server_changes_refuse_web_pages_unknown_servers_and_other_methods() {
    let a = Backend::start();
    let front = start(&[&a]);
    let path = format!("/servers/app/{}/disable", a.addr());
    let from_page = post(&front, &path, "Origin: http://evil.example\r\n");
    assert_eq!(from_page.status, 403, "{}", from_page.body);
    assert_eq!(listed(&front, &a.addr().to_string())["admin"], "enabled");
    assert_eq!(front.admin_get(&path).status, 405);
    assert_eq!(
        post(&front, "/servers/nope/127.0.0.1:1/drain", "").status,
        404
    );
    assert_eq!(
        post(&front, "/servers/app/127.0.0.1:1/drain", "").status,
        404
    );
    assert_eq!(
        post(&front, &format!("/servers/app/{}/pause", a.addr()), "").status,
        404
    );
    let disabled = post(&front, &path, "");
    assert_eq!(json(&disabled)["admin"], "disabled", "{}", disabled.body);
    assert_eq!(
        front.get("/echo").status,
        503,
        "its only server is disabled"
    );
}
