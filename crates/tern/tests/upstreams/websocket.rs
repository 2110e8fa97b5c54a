//! WebSockets to HTTP/2 backend groups (`h2c`, and `h2` over TLS): from
//! every front end (HTTP/1.1 `Upgrade`, HTTP/2 and HTTP/3 extended
//! CONNECT) tern opens an extended CONNECT stream (RFC 8441) to a backend
//! whose SETTINGS offer it, and tunnels the WebSocket over it. The backend
//! is Hypercorn (`ws_h2_origin.py`), a real RFC 8441 server no one here
//! wrote; it tells each WebSocket which HTTP version it came over. The
//! HTTP/1.1 client is Python's `websockets` (which checks the
//! `Sec-WebSocket-Accept` tern computes); the HTTP/2 and HTTP/3 clients are
//! the h2 crate and quinn + h3 with hand-written frames. A backend without
//! extended CONNECT (hyper's h2c server) gets no stream: 502, and a log
//! line naming why.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tern_testsupport::backend::Backend;
use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::h2client::{h2_client_config, H2Client};
use tern_testsupport::python_origin::start_script;
use tern_testsupport::tern::{log_field, Served};
use tern_testsupport::tools::{run_tool, KillOnDrop, ToolOutput};
use tern_testsupport::ws_frame::client_text;

use crate::grpc::python_with;
use crate::servers;

/// How long a test waits for an access-log line.
const LOG_WAIT: Duration = Duration::from_secs(10);

/// Response rules on every listener here, to see them on the WebSocket's
/// 101 or 200 as on any response.
const RULES: &str = "hsts = \"max-age=600\"\n\
                     [listener.response_headers]\nadd = { \"X-Rule\" = \"on\" }\n";

/// Hypercorn's WebSocket origin on a free port: h2c, or HTTP/2 over TLS
/// with a certificate for 127.0.0.1 from `ca`.
fn start_origin(python: &str, ca: Option<&mut TestCa>) -> (KillOnDrop, SocketAddr) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upstreams/ws_h2_origin.py");
    match ca {
        Some(ca) => {
            let cert = ca.leaf(&["127.0.0.1"], KeyKind::EcdsaP256);
            start_script(
                python,
                &script,
                &[cert.chain.as_os_str(), cert.key.as_os_str()],
            )
        }
        None => start_script(python, &script, &[]),
    }
}

/// The access-log line of the WebSocket to `/ws`, once written.
fn ws_line(served: &Served) -> String {
    served
        .tern
        .wait_stdout_lines("path=/ws", 1, LOG_WAIT)
        .expect("an access-log line for the WebSocket")[0]
        .clone()
}

/// tern (access log on stdout, `--http3` when `h3`) in front of one
/// `protocol` group of `server`, with [`RULES`] and `listener_extra`.
fn front(protocol: &str, group_extra: &str, server: SocketAddr, listener_extra: &str) -> Served {
    let (protocol, group_extra, listener_extra) = (
        protocol.to_string(),
        group_extra.to_string(),
        listener_extra.to_string(),
    );
    Served::builder()
        .cert_names(&["localhost"])
        .no_backend()
        .config(move |c| {
            format!(
                "workers = 1\naccess_log = \"-\"\n\n\
                 [[upstream]]\nname = \"ws\"\nprotocol = \"{protocol}\"\n{group_extra}{}\n\n\
                 [[listener]]\nlisten = \"{}\"\nupstream = \"ws\"\ncert = {:?}\nkey = {:?}\n\
                 {listener_extra}{RULES}",
                servers(&[server]),
                c.listen,
                c.chain(),
                c.key(),
            )
        })
        .start()
}

/// Checks that the access-log `line` counts at least `least` tunnel
/// bytes each way.
fn assert_moved(line: &str, least: u64) {
    for field in ["bytes_in", "bytes_out"] {
        let n: u64 = log_field(line, field)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        assert!(n >= least, "{field} {n} < {least}: {line}");
    }
}

/// The Python clients' `open_timeout` (the TCP connect, TLS and
/// WebSocket handshakes in all), within [`run_python_client`]'s 60 s.
/// `websockets`' own default, 10 s, bounds speed, not a failure: with six
/// copies of these tests at once on a loaded 2-core machine the client
/// gave up at 10 s in 2 runs of 18 with no error from tern or the origin
/// (at load 35-45, Python took over 20 s to import Hypercorn). A stalled
/// tern still fails the test.
const OPEN_TIMEOUT: Duration = Duration::from_secs(50);

/// Python `websockets` over HTTP/1.1 to `path`: prints the 101's fields
/// (one `name: value` per line), then echoes the origin's first message
/// and messages of 3 B and 60 KB.
const PY_CLIENT: &str = r#"
import logging, os, ssl, sys
from websockets.sync.client import connect
if os.environ.get("TERN_TEST_RUST_LOG"):
    logging.basicConfig(level=logging.DEBUG, format="%(created).3f %(name)s %(message)s")
ctx = ssl.create_default_context(cafile=sys.argv[2])
# Uncompressed, so the log's byte counts show the messages; Hypercorn
# leaves the stream open after the closing handshake, so the client,
# waiting for the server to close first, gives up after close_timeout.
with connect(sys.argv[1], ssl=ctx, ping_interval=None, compression=None,
             close_timeout=1, open_timeout=float(sys.argv[3])) as ws:
    for name, value in ws.response.headers.raw_items():
        print(f"{name.lower()}: {value}")
    print("first:", ws.recv(timeout=20))
    for m in ["one", "two" * 20000]:
        ws.send(m)
        assert ws.recv(timeout=20) == m
print("echoed both")
"#;

/// A python3 that imports both Hypercorn (the origin) and websockets (the
/// client), or None when one is missing.
fn python_with_hypercorn_and_websockets() -> Option<&'static str> {
    python_with("hypercorn", "hypercorn")?;
    python_with("websockets", "websockets")
}

/// Runs the Python WebSocket client `script` against `served`'s `/ws`
/// (argv: the wss:// URL, tern's CA file and [`OPEN_TIMEOUT`] in seconds).
fn run_python_client(python: &str, script: &str, served: &Served) -> ToolOutput {
    let url = format!("wss://localhost:{}/ws", served.addr.port());
    let ca = served.ca().ca_file().display().to_string();
    let open_timeout = OPEN_TIMEOUT.as_secs().to_string();
    run_tool(
        python,
        ["-c", script, &url, &ca, &open_timeout],
        b"",
        Duration::from_secs(60),
    )
}

#[test]
fn http11_websocket_reaches_an_h2c_backend_as_extended_connect() {
    let Some(python) = python_with_hypercorn_and_websockets() else {
        return;
    };
    let (_origin, origin_addr) = start_origin(python, None);
    let served = front("h2c", "", origin_addr, "");
    let out = run_python_client(python, PY_CLIENT, &served);
    assert!(
        out.success() && out.stdout.contains("echoed both"),
        "{}\n--- tern:\n{}",
        out.all(),
        served.tern.stderr_text()
    );
    // The origin saw an HTTP/2 request: the extended CONNECT.
    assert!(
        out.stdout.contains("first: http_version=2"),
        "{}",
        out.all()
    );
    // The response rules and the request ID reach the 101; the origin's
    // own field passes.
    for field in [
        "strict-transport-security: max-age=600",
        "x-rule: on",
        "x-request-id: ",
        "x-origin: hypercorn",
        "upgrade: websocket",
    ] {
        assert!(
            out.stdout.contains(field),
            "no {field:?} in the 101:\n{}",
            out.stdout
        );
    }
    let line = &ws_line(&served);
    assert_eq!(log_field(line, "method"), Some("GET"), "{line}");
    assert_eq!(log_field(line, "status"), Some("101"), "{line}");
    assert_eq!(log_field(line, "error"), Some("-"), "{line}");
    assert_moved(line, 60_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_extended_connect_reaches_an_h2_tls_backend() {
    let Some(python) = python_with("hypercorn", "hypercorn") else {
        return;
    };
    let mut backend_ca = TestCa::new();
    let (_origin, origin_addr) = start_origin(python, Some(&mut backend_ca));
    let group = format!(
        "tls_ca = {:?}\n",
        backend_ca.ca_file().display().to_string()
    );
    let served = front("h2", &group, origin_addr, "");
    let client = H2Client::connect(served.addr, h2_client_config(served.ca().ca_pem()))
        .await
        .expect("h2 connect");
    let (head, mut send, mut recv) = client
        .open_websocket("/ws")
        .await
        .expect("extended CONNECT");
    assert_eq!(head.status, 200, "{head:?}\n{}", served.tern.stderr_text());
    assert_eq!(head.headers["strict-transport-security"], "max-age=600");
    assert_eq!(head.headers["x-rule"], "on");
    assert!(head.headers.contains_key("x-request-id"), "{head:?}");
    assert_eq!(head.headers["x-origin"], "hypercorn");
    let big = "b".repeat(70_000);
    let mut frames = client_text("hi");
    frames.extend(client_text(&big));
    let texts = H2Client::websocket_texts(&mut send, &mut recv, frames, 3)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", served.tern.stderr_text()));
    assert_eq!(texts[0], "http_version=2");
    assert_eq!(texts[1], "hi");
    assert!(texts[2] == big, "the 70 KB message came back changed");
    let line = tokio::task::block_in_place(|| ws_line(&served));
    assert_eq!(log_field(&line, "alpn"), Some("h2"), "{line}");
    assert_eq!(log_field(&line, "method"), Some("CONNECT"), "{line}");
    assert_eq!(log_field(&line, "status"), Some("200"), "{line}");
    assert_moved(&line, 70_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h3_extended_connect_reaches_an_h2c_backend() {
    let Some(python) = python_with("hypercorn", "hypercorn") else {
        return;
    };
    let (_origin, origin_addr) = start_origin(python, None);
    let served = front("h2c", "", origin_addr, "http3 = true\n");
    let mut conn = tern_testsupport::h3client::H3Conn::connect_from(
        [127, 0, 0, 1].into(),
        served.addr,
        served.ca().ca_pem(),
    )
    .await
    .expect("an HTTP/3 connection");
    let (status, texts) = conn
        .websocket_texts("/ws", &client_text("over h3"), 2)
        .await
        .expect("a WebSocket");
    assert_eq!(status, 200);
    assert_eq!(texts, ["http_version=2", "over h3"]);
    let line = tokio::task::block_in_place(|| ws_line(&served));
    assert_eq!(log_field(&line, "alpn"), Some("h3"), "{line}");
    assert_eq!(log_field(&line, "status"), Some("200"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_the_backend_refuses_is_relayed_as_its_answer() {
    let Some(python) = python_with("hypercorn", "hypercorn") else {
        return;
    };
    let (_origin, origin_addr) = start_origin(python, None);
    let served = front("h2c", "", origin_addr, "");
    let client = served.h2_client().await;
    let (head, _send, _recv) = client.open_websocket("/refuse").await.expect("an answer");
    assert_eq!(head.status, 403, "{head:?}");
    assert_eq!(head.headers["x-rule"], "on", "rules apply to the refusal");
}

#[test]
fn a_websocket_to_a_backend_without_extended_connect_is_502_naming_why() {
    // hyper's h2c server does not offer SETTINGS_ENABLE_CONNECT_PROTOCOL.
    let backend = Backend::start_h2c();
    let served = front("h2c", "", backend.addr(), "");
    let (response, _conn) = served.raw(
        b"GET /ws HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
          Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    );
    assert_eq!(response.status, 502, "{}", response.text());
    served.wait_log(
        &[
            "does not offer extended CONNECT",
            &backend.addr().to_string(),
        ],
        LOG_WAIT,
    );
    let line = ws_line(&served);
    assert_eq!(
        log_field(&line, "error"),
        Some("backend:no_extended_connect"),
        "{line}"
    );
    assert_eq!(backend.requests(), 0);
}

/// Upgrades tern does not carry to an HTTP/2 group: each answered by
/// tern with nothing sent to the backend.
#[test]
fn upgrades_an_h2c_group_cannot_take_are_refused_before_the_backend() {
    let backend = Backend::start_h2c();
    let served = front("h2c", "", backend.addr(), "");
    let cases: [(&[u8], u16); 2] = [
        // tern answers an HTTP/1.1 client's handshake itself here:
        // without a key there is nothing to answer.
        (
            b"GET /ws HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\n\
              Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n",
            400,
        ),
        // RFC 8441 carries WebSockets only.
        (
            b"GET /upgrade HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\n\
              Upgrade: foo/1\r\n\r\n",
            501,
        ),
    ];
    for (request, status) in cases {
        let (response, _conn) = served.raw(request);
        assert_eq!(response.status, status, "{}", response.text());
    }
    served.wait_log(
        &["an Upgrade other than WebSocket cannot be relayed to an HTTP/2 upstream"],
        LOG_WAIT,
    );
    assert_eq!(backend.requests(), 0);
}

#[test]
fn an_idle_websocket_to_an_h2c_backend_is_closed_after_idle_timeout() {
    let Some(python) = python_with_hypercorn_and_websockets() else {
        return;
    };
    let (_origin, origin_addr) = start_origin(python, None);
    // 2 s: the origin's first message must come before the idle timeout
    // does, and a Python origin on a loaded machine can take a second.
    let served = front("h2c", "", origin_addr, "idle_timeout = \"2s\"\n");
    let script = r#"
import ssl, sys
from websockets.sync.client import connect
from websockets.exceptions import ConnectionClosed
ctx = ssl.create_default_context(cafile=sys.argv[2])
with connect(sys.argv[1], ssl=ctx, ping_interval=None,
             open_timeout=float(sys.argv[3])) as ws:
    ws.recv(timeout=20)
    try:
        ws.recv(timeout=30)
        print("a message came")
    except ConnectionClosed:
        print("closed by tern")
"#;
    let out = run_python_client(python, script, &served);
    assert!(
        out.stdout.contains("closed by tern"),
        "{}\n--- tern:\n{}",
        out.all(),
        served.tern.stderr_text()
    );
    let line = ws_line(&served);
    let total_us: u64 = log_field(&line, "total_us")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(total_us >= 2_000_000, "closed before idle_timeout: {line}");
}

/// RFC 8441 on both hops: headless Chromium loads a page over HTTP/2 and
/// opens its WebSocket on the same connection; tern carries it to the
/// h2c origin as an extended CONNECT of its own, and the origin's first
/// message (what HTTP version its request came over) reaches the page.
#[test]
fn chromium_websocket_rides_extended_connect_on_both_hops() {
    let Some(chromium) = tern_testsupport::chromium::find_chromium() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "chromium is required in CI (.ci/run installs it)"
        );
        eprintln!("skipped: no chromium");
        return;
    };
    let Some(python) = python_with("hypercorn", "hypercorn") else {
        return;
    };
    let (_origin, origin_addr) = start_origin(python, None);
    let served = front("h2c", "", origin_addr, "");
    let url = format!("https://localhost:{}/", served.addr.port());
    let out = tern_testsupport::chromium::dump_dom(&chromium, &url, &[], Duration::from_secs(90));
    assert!(
        out.stdout
            .contains(r#"<p id="echo">echo:http_version=2</p>"#),
        "the origin's message did not reach the page:\n{}\n--- tern:\n{}",
        out.all(),
        served.tern.stderr_text()
    );
    tern_testsupport::chromium::assert_websocket_rode_the_pages_h2_connection(
        &served, "/ws", LOG_WAIT,
    );
}
