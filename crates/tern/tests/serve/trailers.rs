//! Trailers through tern, every front end × every backend protocol
//! ({HTTP/1.1, HTTP/2, HTTP/3 client} × {HTTP/1.1, h2c, h2 over TLS
//! backend}), as docs/http2.md's trailer table says:
//!
//! - the backend's response trailers `x-sum` and `grpc-status` reach
//!   HTTP/2 and HTTP/3 clients, and HTTP/1.1 clients that sent
//!   `TE: trailers` (chunked trailers); an HTTP/1.1 client without it gets
//!   none;
//! - the client's request trailer `x-req-sum` reaches every backend;
//! - fields that must not come from trailers (`set-cookie` from the
//!   backend, `authorization` from the client) never pass.
//!
//! Real peers: hyper backends (tern-testsupport's `/trailers`), a raw
//! HTTP/1.1 client, the h2 crate's client, and aioquic for HTTP/3.

use std::collections::HashMap;
use std::process::Command;

use tern_testsupport::backend::Backend;
use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::h2client::bytes::Bytes;
use tern_testsupport::h2client::http::{HeaderMap, HeaderValue};
use tern_testsupport::h2client::{request, Body};
use tern_testsupport::tern::Served;
use tern_testsupport::tools::run_command;

use crate::clients::CLIENT_TIMEOUT;
use crate::h3::{h3_client_args, python_with_aioquic, H3Run};

/// The backend protocols of the matrix.
#[derive(Debug, Clone, Copy)]
enum Leg {
    H1,
    H2c,
    H2Tls,
}

const LEGS: [Leg; 3] = [Leg::H1, Leg::H2c, Leg::H2Tls];

/// tern (HTTP/3 on too) in front of a `/trailers` backend of `leg`'s
/// protocol; the CA the h2 backend's certificate chains to is kept with
/// it.
fn front(leg: Leg) -> (Served, Backend, Option<TestCa>) {
    let (backend, protocol, ca) = match leg {
        Leg::H1 => (Backend::start(), "http/1.1", None),
        Leg::H2c => (Backend::start_h2c(), "h2c", None),
        Leg::H2Tls => {
            let mut ca = TestCa::new();
            let cert = ca.leaf(&["127.0.0.1"], KeyKind::EcdsaP256);
            (Backend::start_tls(&cert, &["h2"]), "h2", Some(ca))
        }
    };
    let tls_ca = ca
        .as_ref()
        .map(|ca| format!("tls_ca = {:?}\n", ca.ca_file().display().to_string()))
        .unwrap_or_default();
    let addr = backend.addr();
    let served = Served::builder()
        .no_backend()
        .config(move |c| {
            format!(
                "workers = 1\naccess_log = \"off\"\n\n\
                 [[upstream]]\nname = \"b\"\nprotocol = \"{protocol}\"\n{tls_ca}servers = [\"{addr}\"]\n\n\
                 [[listener]]\nlisten = \"{}\"\nupstream = \"b\"\nhttp3 = true\ncert = {:?}\nkey = {:?}\n",
                c.listen,
                c.chain(),
                c.key(),
            )
        })
        .start();
    (served, backend, ca)
}

/// What arrived on one path: the response trailers the client got, and
/// the request trailers the backend reported.
struct Arrived {
    response: HashMap<String, String>,
    request: HashMap<String, String>,
}

impl Arrived {
    /// The request trailers from the backend's JSON answer.
    fn new(response: HashMap<String, String>, body: &[u8]) -> Arrived {
        let json: serde_json::Value = serde_json::from_slice(body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)));
        let request = json["trailers"]
            .as_array()
            .unwrap_or_else(|| panic!("no trailers list: {json}"))
            .iter()
            .map(|pair| {
                (
                    pair[0].as_str().unwrap_or("").to_ascii_lowercase(),
                    pair[1].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        Arrived { response, request }
    }

    /// The table's row: the relayed fields arrived both ways, the
    /// forbidden ones did not (`response_expected`: whether this client
    /// gets response trailers at all).
    fn check(&self, path: &str, response_expected: bool) {
        if response_expected {
            assert_eq!(
                self.response.get("x-sum").map(String::as_str),
                Some("42"),
                "{path}: {:?}",
                self.response
            );
            assert_eq!(
                self.response.get("grpc-status").map(String::as_str),
                Some("0"),
                "{path}: {:?}",
                self.response
            );
        } else {
            assert!(
                self.response.is_empty(),
                "{path}: no trailers expected: {:?}",
                self.response
            );
        }
        assert!(
            !self.response.contains_key("set-cookie"),
            "{path}: {:?}",
            self.response
        );
        assert_eq!(
            self.request.get("x-req-sum").map(String::as_str),
            Some("7"),
            "{path}: {:?}",
            self.request
        );
        assert!(
            !self.request.contains_key("authorization"),
            "{path}: {:?}",
            self.request
        );
    }
}

/// A chunked body's payload and trailer fields (the bytes after the head).
fn dechunk(mut rest: &[u8]) -> (Vec<u8>, HashMap<String, String>) {
    let mut payload = Vec::new();
    loop {
        let eol = find(rest, b"\r\n").expect("chunk-size line");
        let size_text = std::str::from_utf8(&rest[..eol]).expect("size line text");
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or_else(|e| panic!("chunk size {size_text:?}: {e}"));
        rest = &rest[eol + 2..];
        if size == 0 {
            break;
        }
        payload.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
    let mut trailers = HashMap::new();
    loop {
        let eol = find(rest, b"\r\n").expect("trailer line");
        if eol == 0 {
            return (payload, trailers);
        }
        let line = String::from_utf8_lossy(&rest[..eol]).into_owned();
        let (name, value) = line.split_once(':').expect("name: value");
        trailers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
        rest = &rest[eol + 2..];
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// An HTTP/1.1 client's chunked POST with trailers; `te` adds
/// `TE: trailers`.
fn h1_exchange(served: &Served, te: bool) -> Arrived {
    let request = format!(
        "POST /trailers HTTP/1.1\r\nHost: localhost\r\n{}Transfer-Encoding: chunked\r\n\
         Connection: close\r\n\r\n5\r\nhello\r\n0\r\nx-req-sum: 7\r\nauthorization: secret\r\n\r\n",
        if te { "TE: trailers\r\n" } else { "" }
    );
    let (raw, _) = served.exchange(&request);
    let head_end = find(&raw, b"\r\n\r\n").expect("a response head") + 4;
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let (payload, trailers) = dechunk(&raw[head_end..]);
    Arrived::new(trailers, &payload)
}

#[test]
fn h1_client_trailers_both_ways_with_every_backend() {
    for leg in LEGS {
        let (served, _backend, _ca) = front(leg);
        h1_exchange(&served, true).check(&format!("h1 (TE: trailers) -> {leg:?}"), true);
        h1_exchange(&served, false).check(&format!("h1 (no TE) -> {leg:?}"), false);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_client_trailers_both_ways_with_every_backend() {
    for leg in LEGS {
        let (served, _backend, _ca) = tokio::task::block_in_place(|| front(leg));
        let client = served.h2_client().await;
        let mut post = request("POST", "/trailers");
        post.headers_mut()
            .insert("te", HeaderValue::from_static("trailers"));
        let mut trailers = HeaderMap::new();
        trailers.insert("x-req-sum", HeaderValue::from_static("7"));
        trailers.insert("authorization", HeaderValue::from_static("secret"));
        let body = Body::WithTrailers(vec![Bytes::from_static(b"hello")], trailers);
        let response = client
            .send(post, body)
            .await
            .unwrap_or_else(|e| panic!("h2 -> {leg:?}: {e}\n{}", served.tern.stderr_text()));
        assert_eq!(response.status, 200, "{}", response.text());
        let got = response
            .trailers
            .iter()
            .flatten()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        Arrived::new(got, &response.body).check(&format!("h2 -> {leg:?}"), true);
    }
}

#[test]
fn h3_client_trailers_both_ways_with_every_backend() {
    let Some(python) = python_with_aioquic() else {
        return;
    };
    for leg in LEGS {
        let (served, _backend, _ca) = front(leg);
        let run = H3Run {
            method: "POST",
            path: "/trailers",
            body_len: 5,
            ..H3Run::default()
        };
        let mut command = Command::new(&python);
        command
            .args(h3_client_args(&served, &run))
            .env("TRAILERS", "1");
        let out = run_command(command, b"", CLIENT_TIMEOUT);
        assert!(out.success(), "h3 -> {leg:?}: {}", out.all());
        let line: serde_json::Value = serde_json::from_str(out.stdout.lines().next().unwrap_or(""))
            .unwrap_or_else(|e| panic!("h3 -> {leg:?}: {e}: {}", out.all()));
        assert_eq!(line["status"], 200, "h3 -> {leg:?}: {line}");
        let got = line["trailers"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let body = serde_json::to_vec(&line["body"]).unwrap_or_default();
        Arrived::new(got, &body).check(&format!("h3 -> {leg:?}"), true);
    }
}
