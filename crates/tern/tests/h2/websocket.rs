//! WebSockets through tern to an HTTP/1.1 backend: Chromium, having loaded
//! a page over HTTP/2, opens its WebSocket on the same connection with an
//! extended CONNECT (RFC 8441; tern advertises SETTINGS_ENABLE_CONNECT_
//! PROTOCOL), which tern turns into an HTTP/1.1 `Upgrade: websocket`; the
//! echo comes back. Python's `websockets` client does the same over
//! HTTP/1.1. The backend is Python's `websockets` server
//! (`ws_origin.py`): real WebSocket framing at both ends. Over HTTP/3
//! (RFC 9220) the client is quinn + h3 and the backend the harness's
//! byte-echoing `/upgrade`.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tern_testsupport::chromium::{dump_dom, find_chromium};
use tern_testsupport::python_origin::start_script;
use tern_testsupport::tern::{log_field, Served};
use tern_testsupport::tools::{run_tool, KillOnDrop};

use crate::{skip_without, LOG_WAIT};

/// `python3` when it has the `websockets` package (`.ci/run` installs it).
fn python_with_websockets() -> Option<&'static str> {
    let ok = run_tool(
        "python3",
        ["-c", "import websockets"],
        b"",
        Duration::from_secs(30),
    )
    .success();
    (!skip_without("python3 with websockets (pip install websockets)", ok)).then_some("python3")
}

/// The WebSocket origin on a free port.
fn start_origin(python: &str) -> (KillOnDrop, SocketAddr) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/h2/ws_origin.py");
    start_script(python, &script, &[])
}

#[test]
fn chromium_websocket_rides_the_pages_h2_connection() {
    let found = find_chromium();
    if skip_without("chromium", found.is_some()) {
        return;
    }
    let (Some(chromium), Some(python)) = (found, python_with_websockets()) else {
        return;
    };
    let (_origin, origin_addr) = start_origin(python);
    let served = Served::builder().backend_addr(origin_addr).start();
    let url = format!("https://localhost:{}/", served.addr.port());
    let out = dump_dom(&chromium, &url, &[], Duration::from_secs(90));
    assert!(
        out.stdout
            .contains(r#"<p id="echo">echo:hello over https:</p>"#),
        "the echo did not reach the page:\n{}\n--- tern:\n{}",
        out.all(),
        served.tern.stderr_text()
    );
    tern_testsupport::chromium::assert_websocket_rode_the_pages_h2_connection(
        &served, "/ws", LOG_WAIT,
    );
}

#[test]
fn python_websockets_client_echoes_over_http11() {
    let Some(python) = python_with_websockets() else {
        return;
    };
    let (_origin, origin_addr) = start_origin(python);
    let served = Served::builder()
        .backend_addr(origin_addr)
        .args(&["--hsts", "max-age=600"])
        .start();
    let script = format!(
        "import ssl\n\
         from websockets.sync.client import connect\n\
         ctx = ssl.create_default_context(cafile={ca:?})\n\
         with connect('wss://localhost:{port}/ws', ssl=ctx) as ws:\n\
         \x20   for name, value in ws.response.headers.raw_items():\n\
         \x20       print(f'{{name.lower()}}: {{value}}')\n\
         \x20   for m in ['one', 'two' * 20000]:\n\
         \x20       ws.send(m)\n\
         \x20       assert ws.recv(timeout=20) == m\n\
         print('echoed both')\n",
        ca = served.ca().ca_file().display().to_string(),
        port = served.addr.port(),
    );
    let out = run_tool(python, ["-c", &script], b"", Duration::from_secs(60));
    assert!(
        out.success() && out.stdout.contains("echoed both"),
        "{}\n--- tern:\n{}",
        out.all(),
        served.tern.stderr_text()
    );
    // The response rules reach the 101 as any response (issue 25).
    for field in ["strict-transport-security: max-age=600", "x-request-id: "] {
        assert!(
            out.stdout.contains(field),
            "no {field:?} in the 101:\n{}",
            out.stdout
        );
    }
    let lines = served
        .tern
        .wait_stdout_lines("path=/ws", 1, LOG_WAIT)
        .expect("an access-log line for the WebSocket");
    assert_eq!(log_field(&lines[0], "status"), Some("101"), "{}", lines[0]);
    assert_eq!(log_field(&lines[0], "method"), Some("GET"), "{}", lines[0]);
}

/// An extended CONNECT from the h2 crate's client to an HTTP/1.1
/// backend: its `200` carries the response rules (HSTS, the request ID)
/// like any response, and the harness's `/upgrade` echoes bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2_extended_connects_200_carries_the_response_rules() {
    let served = Served::start(&["--hsts", "max-age=600"]);
    let client = served.h2_client().await;
    let (head, mut send, mut recv) = client
        .open_websocket("/upgrade")
        .await
        .expect("extended CONNECT");
    assert_eq!(head.status, 200, "{head:?}");
    assert_eq!(head.headers["strict-transport-security"], "max-age=600");
    assert!(head.headers.contains_key("x-request-id"), "{head:?}");
    send.send_data(bytes::Bytes::from_static(b"ping"), false)
        .expect("send");
    let echoed = tokio::time::timeout(Duration::from_secs(20), recv.data())
        .await
        .expect("an echo within 20 s")
        .expect("data")
        .expect("no error");
    assert_eq!(&echoed[..], b"ping");
}

/// RFC 9220: a WebSocket opened with an extended CONNECT on an HTTP/3
/// request stream (quinn + h3 with tern's vendored patch 0003, the only
/// RFC 9220 client here) reaches an HTTP/1.1 backend as `Upgrade`, and
/// bytes come back through the tunnel; the access log has the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h3_extended_connect_websocket_is_tunnelled_to_an_http11_backend() {
    let served = Served::start(&["--http3"]);
    let mut conn = tern_testsupport::h3client::H3Conn::connect_from(
        [127, 0, 0, 1].into(),
        served.addr,
        served.ca().ca_pem(),
    )
    .await
    .expect("an HTTP/3 connection");
    let (status, back) = conn
        .websocket_echo("/upgrade", b"hello over h3")
        .await
        .expect("a WebSocket");
    assert_eq!(status, 200);
    assert_eq!(back, b"hello over h3");
    let line = tokio::task::block_in_place(|| {
        served
            .tern
            .wait_stdout_lines("method=CONNECT", 1, LOG_WAIT)
            .expect("an access-log line")[0]
            .clone()
    });
    assert!(line.contains("alpn=h3"), "{line}");
    assert!(line.contains("status=200"), "{line}");
}

/// A plain CONNECT (a forward-proxy tunnel to `host:port`) is not
/// relayed, over HTTP/1.1 or HTTP/2: 501, and the backend sees nothing
/// (docs/http2.md, "Plain CONNECT: not relayed, by decision").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_connect_is_501_over_http11_and_http2() {
    let served = Served::start(&[]);
    let (response, _conn) = tokio::task::block_in_place(|| {
        served.raw(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
    });
    assert_eq!(response.status, 501, "{}", response.text());
    let client = served.h2_client().await;
    let (answer, _send) = client
        .open(tern_testsupport::h2client::request("CONNECT", "/"))
        .await
        .expect("a stream");
    let answer = answer.await.expect("an answer");
    assert_eq!(answer.status(), 501);
    assert_eq!(served.backend().requests(), 0);
}
