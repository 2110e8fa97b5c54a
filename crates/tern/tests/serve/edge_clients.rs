//! Per-client limits across workers and the client a trusted proxy names
//! (docs/edge-policy.md), against the real binary with the rustls test
//! client from two loopback addresses.

use std::net::IpAddr;

use tern_testsupport::client::{HttpConn, Response};
use tern_testsupport::tern::Served;

/// One TLS connection from `source` carrying one GET with `extra` header
/// lines; tern's answer.
fn one_request(served: &Served, source: [u8; 4], extra: &str) -> Response {
    let mut conn = HttpConn::connect_from(
        IpAddr::from(source),
        served.addr,
        "localhost",
        served.client.clone(),
    )
    .expect("connect to tern");
    conn.send(format!("GET /echo HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n").as_bytes())
        .expect("send");
    conn.read_response(false).expect("a response")
}

/// Twenty connections from one address, which SO_REUSEPORT spreads over
/// both workers (all twenty on one worker: odds 2^-19): a per-worker
/// bucket would let up to twice the burst through, the shared one lets
/// exactly the burst.
#[test]
fn the_request_rate_holds_across_workers() {
    let served = Served::start(&[
        "--workers",
        "2",
        "--client-rate",
        "1/h",
        "--client-burst",
        "4",
    ]);
    let statuses: Vec<u16> = (0..20)
        .map(|_| one_request(&served, [127, 0, 0, 1], "").status)
        .collect();
    let ok = statuses.iter().filter(|&&s| s == 200).count();
    let limited = statuses.iter().filter(|&&s| s == 429).count();
    assert_eq!((ok, limited), (5, 15), "{statuses:?}");
    assert_eq!(served.backend().requests(), 5);
}

/// A trusted proxy (127.0.0.1) names its clients in X-Client-Id: each
/// named client has its own bucket, and an address (the last element of
/// the list) is grouped like a direct client. An untrusted address
/// (127.0.0.2) cannot pick a bucket by naming itself.
#[test]
fn a_trusted_proxy_names_the_client_and_no_one_else_can() {
    let served = Served::start(&[
        "--client-rate",
        "1/h",
        "--client-burst",
        "0",
        "--client-id-header",
        "X-Client-Id",
        "--client-id-from",
        "127.0.0.1/32",
        "--log-rejected",
        "false",
    ]);
    let (proxy, untrusted) = ([127, 0, 0, 1], [127, 0, 0, 2]);
    let steps: [([u8; 4], &str, u16); 8] = [
        (proxy, "tenant-a", 200),
        (proxy, "tenant-a", 429),
        (proxy, "tenant-b", 200),
        // The last element is the address the proxy saw.
        (proxy, "198.51.100.1, 2001:db8:5:6::1", 200),
        // Same /64 as that address: the same client.
        (proxy, "2001:db8:5:6::2", 429),
        // The proxy's own bucket is untouched by its clients.
        (proxy, "", 200),
        (untrusted, "tenant-c", 200),
        (untrusted, "tenant-d", 429),
    ];
    for (source, id, status) in steps {
        let field = if id.is_empty() {
            String::new()
        } else {
            format!("X-Client-Id: {id}\r\n")
        };
        let got = one_request(&served, source, &field).status;
        assert_eq!(got, status, "from {source:?} naming {id:?}");
    }
    assert_eq!(served.backend().requests(), 5);
}

/// A request ID from a trusted proxy is kept; the same field from anyone
/// else is replaced by tern's.
#[test]
fn a_request_id_is_kept_only_from_client_id_from() {
    let served = Served::start(&[
        "--client-id-header",
        "X-Client-Id",
        "--client-id-from",
        "127.0.0.1",
    ]);
    let id_seen = |source: [u8; 4]| {
        let r = one_request(&served, source, "X-Request-Id: proxy-id-42\r\n");
        assert_eq!(r.status, 200, "{}", r.text());
        r.header("x-request-id").expect("an ID").to_string()
    };
    assert_eq!(id_seen([127, 0, 0, 1]), "proxy-id-42");
    let replaced = id_seen([127, 0, 0, 2]);
    assert_eq!(replaced.len(), 32, "{replaced}");
}
