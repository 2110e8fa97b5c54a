//! Routing by Host (or SNI when a request has no Host) to several groups
//! behind one listener.

use tern_testsupport::backend::Backend;
use tern_testsupport::tern::Served;

use crate::{servers, start_front};

struct Routed {
    front: Served,
    web: Backend,
    api: Backend,
    wild: Backend,
}

fn routed() -> Routed {
    let (web, api, wild) = (Backend::start(), Backend::start(), Backend::start());
    let upstreams = format!(
        "[[upstream]]\nname = \"web\"\n{}\n\n[[upstream]]\nname = \"api\"\n{}\n\n\
         [[upstream]]\nname = \"wild\"\n{}\n",
        servers(&[web.addr()]),
        servers(&[api.addr()]),
        servers(&[wild.addr()]),
    );
    let routes = "\n[[listener.route]]\nhost = \"api.test\"\nupstream = \"api\"\n\n\
                  [[listener.route]]\nhost = \"*.example.test\"\nupstream = \"wild\"\n";
    let front = start_front(1, &upstreams, "web", routes);
    Routed {
        front,
        web,
        api,
        wild,
    }
}

impl Routed {
    /// The backend that answered `request` sent on a connection with SNI `sni`.
    fn answered_by(&self, sni: &str, request: &str) -> String {
        let mut conn = self.front.connect_as(sni);
        conn.send(request.as_bytes()).expect("send");
        let response = conn
            .read_response(false)
            .unwrap_or_else(|e| panic!("{request:?}: {e}\n{}", self.front.tern.stderr_text()));
        assert_eq!(response.status, 200, "{request:?}: {}", response.text());
        response.json()["backend"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    fn by_host(&self, host: &str) -> String {
        self.answered_by(
            "localhost",
            &format!("GET /echo HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        )
    }
}

#[test]
fn host_picks_the_group_and_everything_else_goes_to_the_default() {
    let r = routed();
    let (web, api) = (r.web.addr().to_string(), r.api.addr().to_string());
    assert_eq!(r.by_host("api.test"), api);
    assert_eq!(
        r.by_host("API.Test:8443"),
        api,
        "case and port do not matter"
    );
    assert_eq!(
        r.by_host("api.test."),
        api,
        "a trailing dot does not matter"
    );
    assert_eq!(r.by_host("localhost"), web);
    assert_eq!(r.by_host("other.test"), web);
    assert_eq!(
        r.by_host("v2.api.test"),
        web,
        "an exact route is not a suffix"
    );
}

#[test]
fn wildcard_route_matches_exactly_one_label() {
    let r = routed();
    let (web, wild) = (r.web.addr().to_string(), r.wild.addr().to_string());
    assert_eq!(r.by_host("shop.example.test"), wild);
    assert_eq!(r.by_host("WWW.EXAMPLE.TEST"), wild);
    assert_eq!(r.by_host("example.test"), web, "the wildcard needs a label");
    assert_eq!(r.by_host("a.b.example.test"), web, "only one label");
}

#[test]
fn request_without_host_is_routed_by_sni_and_host_wins_over_sni() {
    let r = routed();
    let (web, api, wild) = (
        r.web.addr().to_string(),
        r.api.addr().to_string(),
        r.wild.addr().to_string(),
    );
    // HTTP/1.0 may omit Host; then the SNI decides.
    assert_eq!(r.answered_by("api.test", "GET /echo HTTP/1.0\r\n\r\n"), api);
    assert_eq!(
        r.answered_by("shop.example.test", "GET /echo HTTP/1.0\r\n\r\n"),
        wild
    );
    assert_eq!(
        r.answered_by("localhost", "GET /echo HTTP/1.0\r\n\r\n"),
        web
    );
    assert_eq!(
        r.answered_by("api.test", "GET /echo HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        web
    );
}
