//! gRPC through tern: grpc-go's own interop client (TLS, ALPN h2) runs
//! every standard test case through tern to grpc-go's interop server in
//! an h2c group and in an h2 (TLS) group. Every case passes; each call's
//! access-log line carries its grpc-status; a call whose backend is gone
//! gets gRPC's UNAVAILABLE from tern (a trailers-only response), not a
//! bare 502 body.
//!
//! Skipped, with a message, only where the interop binaries are not
//! installed (outside CI: `.ci/run` installs them, and CI fails without).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tern_testsupport::certs::{KeyKind, TestCa};
use tern_testsupport::grpc_interop::{
    interop_dir, run_case, start_server, INTEROP_DIR, STANDARD_CASES,
};
use tern_testsupport::tern::{free_addr, log_field, Served};

use crate::servers;

/// tern in front of one group `grpc` of `protocol` (`extra`: more keys of
/// the group), its access log on stdout.
fn grpc_front(protocol: &str, backend: SocketAddr, extra: &str) -> Served {
    grpc_front_with(protocol, backend, extra, "")
}

/// [`grpc_front`] with `listener_extra` keys in the listener.
fn grpc_front_with(
    protocol: &str,
    backend: SocketAddr,
    extra: &str,
    listener_extra: &str,
) -> Served {
    Served::builder()
        .cert_names(&["localhost"])
        .no_backend()
        .config(move |c| {
            format!(
                "workers = 1\naccess_log = \"-\"\n\n\
                 [[upstream]]\nname = \"grpc\"\nprotocol = \"{protocol}\"\n{extra}{}\n\n\
                 [[listener]]\nlisten = \"{}\"\nupstream = \"grpc\"\ncert = {:?}\nkey = {:?}\n{listener_extra}",
                servers(&[backend]),
                c.listen,
                c.chain(),
                c.key(),
            )
        })
        .start()
}

/// Runs every standard case through `front`; panics naming each case that
/// failed, with the client's words and tern's log.
fn all_cases_pass(dir: &Path, front: &Served) {
    let ca = front.ca().ca_file();
    let failed: Vec<String> = STANDARD_CASES
        .iter()
        .filter_map(|case| {
            let out = run_case(dir, front.addr, ca, "localhost", case);
            (!out.success()).then(|| format!("{case}: {}", out.all().trim()))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} interop cases failed through tern:\n{}\n--- tern stderr:\n{}",
        failed.len(),
        STANDARD_CASES.len(),
        failed.join("\n"),
        front.tern.stderr_text()
    );
}

/// The access-log lines of calls to `method` (a path suffix), once at
/// least `count` are written.
fn call_lines(front: &Served, method: &str, count: usize) -> Vec<String> {
    front
        .tern
        .wait_stdout_lines(method, count, Duration::from_secs(10))
        .unwrap_or_else(|out| panic!("no {count} log lines for {method}:\n{out}"))
}

/// The calls' statuses as the access log gives them, and the backend's
/// gRPC status codes carried in trailers (OK) and in a trailers-only
/// response (UNIMPLEMENTED), with the status the call ended with.
fn assert_grpc_statuses_logged(front: &Served) {
    for line in call_lines(front, "/grpc.testing.TestService/EmptyCall", 1) {
        assert_eq!(log_field(&line, "status"), Some("200"), "{line}");
        assert_eq!(log_field(&line, "grpc_status"), Some("0"), "{line}");
    }
    let lines = call_lines(front, "/grpc.testing.UnimplementedService/", 1);
    assert_eq!(log_field(&lines[0], "grpc_status"), Some("12"), "{lines:?}");
    // status_code_and_message asks the server for code 2 (UNKNOWN).
    let lines = call_lines(front, "grpc_status=2", 1);
    assert!(lines[0].contains("/grpc.testing.TestService/"), "{lines:?}");
}

fn skip() {
    eprintln!(
        "skipped: grpc-go's interop client/server are not installed in ~/{INTEROP_DIR} \
         (.ci/run installs them: go install google.golang.org/grpc/interop/client@VERSION)"
    );
}

#[test]
fn grpc_interop_cases_pass_through_tern_to_an_h2c_backend() {
    let Some(dir) = interop_dir() else {
        return skip();
    };
    let backend_addr = free_addr();
    let backend = start_server(&dir, backend_addr, None);
    let front = grpc_front("h2c", backend_addr, "");
    all_cases_pass(&dir, &front);
    assert_grpc_statuses_logged(&front);

    // The backend gone: the call fails as UNAVAILABLE, which gRPC clients
    // may retry, and the log says so.
    drop(backend);
    let out = run_case(
        &dir,
        front.addr,
        front.ca().ca_file(),
        "localhost",
        "empty_unary",
    );
    assert!(!out.success(), "the call cannot succeed: {}", out.all());
    assert!(
        out.all().contains("code = Unavailable"),
        "a gRPC error the client understands: {}",
        out.all()
    );
    let lines = call_lines(&front, "grpc_status=14", 1);
    assert!(lines[0].contains("error=backend:"), "{lines:?}");
}

#[test]
fn grpc_interop_cases_pass_through_tern_to_an_h2_tls_backend() {
    let Some(dir) = interop_dir() else {
        return skip();
    };
    let mut backend_ca = TestCa::new();
    let cert = backend_ca.leaf(&["127.0.0.1", "localhost"], KeyKind::EcdsaP256);
    let backend_addr = free_addr();
    let _backend = start_server(&dir, backend_addr, Some((&cert.chain, &cert.key)));
    let extra = format!(
        "tls_ca = {:?}\n",
        backend_ca.ca_file().display().to_string()
    );
    let front = grpc_front("h2", backend_addr, &extra);
    all_cases_pass(&dir, &front);
    assert_grpc_statuses_logged(&front);
}

/// Python's grpcio (C core: a second gRPC implementation) calls grpc-go's
/// interop server through tern, unary and server streaming, with raw
/// protobuf bytes (no generated code): `UnaryCall` asking for a 100-byte
/// payload, `StreamingOutputCall` asking for 3 responses.
const GRPCIO_CLIENT: &str = r#"
import sys
import grpc
ca = open(sys.argv[2], "rb").read()
creds = grpc.ssl_channel_credentials(root_certificates=ca)
opts = [("grpc.ssl_target_name_override", "localhost")]
with grpc.secure_channel(sys.argv[1], creds, options=opts) as ch:
    raw = dict(request_serializer=None, response_deserializer=None)
    unary = ch.unary_unary("/grpc.testing.TestService/UnaryCall", **raw)
    # SimpleRequest{response_size: 100}
    reply, call = unary.with_call(b"\x10\x64", timeout=20)
    assert len(reply) > 100, reply
    assert call.code() == grpc.StatusCode.OK, call.code()
    stream = ch.unary_stream("/grpc.testing.TestService/StreamingOutputCall", **raw)
    # StreamingOutputCallRequest{response_parameters: [{size: 10}, {size: 20}, {size: 30}]}
    replies = list(stream(b"\x12\x02\x08\x0a\x12\x02\x08\x14\x12\x02\x08\x1e", timeout=20))
    assert len(replies) == 3, replies
    print("grpcio unary and streaming ok")
"#;

/// `python3` when it has grpcio (`.ci/run` installs it); a skip with a
/// message elsewhere, a failure in CI.
fn python_with_grpcio() -> Option<&'static str> {
    python_with("grpc", "grpcio")
}

/// `python3` when it can import `module` (from the pip package `package`,
/// which `.ci/run` installs); a skip with a message elsewhere, a failure
/// in CI.
pub(crate) fn python_with(module: &str, package: &str) -> Option<&'static str> {
    let ok = tern_testsupport::tools::run_tool(
        "python3",
        ["-c", &format!("import {module}")],
        b"",
        Duration::from_secs(30),
    )
    .success();
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{package} is required in CI (.ci/run installs it)"
        );
        eprintln!("skipped: python3 has no {package} (pip install {package})");
    }
    ok.then_some("python3")
}

/// Runs the Python `script` (argv: target, CA file) against grpc-go's
/// interop server (h2c) through a tern with `listener_extra` keys; checks
/// it succeeded and returns the access-log lines of its calls to `method`
/// (a path suffix), once there are `count`. None (after a skip message)
/// without the tools.
fn grpcio_through_tern(
    script: &str,
    listener_extra: &str,
    (method, count): (&str, usize),
) -> Option<Vec<String>> {
    let (Some(dir), Some(python)) = (interop_dir(), python_with_grpcio()) else {
        skip();
        return None;
    };
    let backend_addr = free_addr();
    let _backend = start_server(&dir, backend_addr, None);
    let front = grpc_front_with("h2c", backend_addr, "", listener_extra);
    let target = format!("127.0.0.1:{}", front.addr.port());
    let ca = front.ca().ca_file().display().to_string();
    let out = tern_testsupport::tools::run_tool(
        python,
        ["-c", script, &target, &ca],
        b"",
        Duration::from_secs(60),
    );
    assert!(
        out.success() && out.stdout.contains(" ok"),
        "{}\n--- tern:\n{}",
        out.all(),
        front.tern.stderr_text()
    );
    Some(call_lines(&front, method, count))
}

#[test]
fn python_grpcio_calls_the_go_server_through_tern() {
    let Some(lines) = grpcio_through_tern(GRPCIO_CLIENT, "", ("StreamingOutputCall", 1)) else {
        return;
    };
    let line = &lines[0];
    assert_eq!(log_field(line, "grpc_status"), Some("0"), "{line}");
}

/// grpcio asks grpc-go's server for 10 responses 400 ms apart: a server
/// stream of about 4 s, through a tern whose `backend_response_timeout`
/// and `idle_timeout` are 2 s. Neither cuts a stream while data flows:
/// each bounds a silence, not the stream.
const LONG_STREAM_CLIENT: &str = r#"
import sys, time
import grpc
def varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | 0x80 if n else b])
        if not n:
            return out
# ResponseParameters{size: 10, interval_us: 400000}, ten times.
param = b"\x08\x0a\x10" + varint(400000)
request = (b"\x12" + bytes([len(param)]) + param) * 10
ca = open(sys.argv[2], "rb").read()
creds = grpc.ssl_channel_credentials(root_certificates=ca)
opts = [("grpc.ssl_target_name_override", "localhost")]
with grpc.secure_channel(sys.argv[1], creds, options=opts) as ch:
    stream = ch.unary_stream("/grpc.testing.TestService/StreamingOutputCall",
                             request_serializer=None, response_deserializer=None)
    start = time.monotonic()
    replies = list(stream(request, timeout=30))
    took = time.monotonic() - start
    assert len(replies) == 10, len(replies)
    assert took > 3.0, took
    print(f"10 replies in {took:.1f} s: ok")
"#;

#[test]
fn a_grpc_stream_outlives_the_timeouts_while_data_flows() {
    // A reply every 400 ms for 4 s against 2 s timeouts: twice the
    // timeouts, and 1.6 s between replies to spare for a loaded machine's
    // stall (1 s timeouts against 300 ms left 0.7 s).
    let timeouts = "backend_response_timeout = \"2s\"\nidle_timeout = \"2s\"\n";
    let Some(lines) = grpcio_through_tern(LONG_STREAM_CLIENT, timeouts, ("StreamingOutputCall", 1))
    else {
        return;
    };
    let line = &lines[0];
    assert_eq!(log_field(line, "grpc_status"), Some("0"), "{line}");
    assert_eq!(log_field(line, "error"), Some("-"), "{line}");
}

/// grpcio against a tern allowing one call every 2 s (no burst): the
/// call over the rate fails as RESOURCE_EXHAUSTED carrying Retry-After;
/// a channel whose retry policy covers RESOURCE_EXHAUSTED with a 10 ms
/// backoff retries it after tern's `grpc-retry-pushback-ms` (2 s), by
/// which time a token is back, and succeeds. Without the pushback its
/// retry would come 10 ms later and be refused again.
const RATE_LIMITED_CLIENT: &str = r#"
import sys, json, time
import grpc
ca = open(sys.argv[2], "rb").read()
creds = grpc.ssl_channel_credentials(root_certificates=ca)
base = [("grpc.ssl_target_name_override", "localhost")]
retry = json.dumps({"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
    "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
                    "backoffMultiplier": 1, "retryableStatusCodes": ["RESOURCE_EXHAUSTED"]}}]})
raw = dict(request_serializer=None, response_deserializer=None)
path = "/grpc.testing.TestService/UnaryCall"
with grpc.secure_channel(sys.argv[1], creds, options=base + [("grpc.enable_retries", 0)]) as ch:
    unary = ch.unary_unary(path, **raw)
    unary(b"\x10\x64", timeout=20)
    try:
        unary(b"\x10\x64", timeout=20)
        sys.exit("a call over the rate was served")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.code()
        md = dict(e.trailing_metadata() or ())
        assert md.get("retry-after") == "2", md
with grpc.secure_channel(sys.argv[1], creds, options=base + [("grpc.service_config", retry)]) as ch:
    unary = ch.unary_unary(path, **raw)
    start = time.monotonic()
    reply = unary(b"\x10\x64", timeout=20)
    took = time.monotonic() - start
    assert len(reply) > 100, reply
    assert took >= 1.0, took
    print(f"retried after tern's pushback, {took:.1f} s: ok")
"#;

#[test]
fn a_rate_limited_grpc_call_is_resource_exhausted_and_retried_after_the_pushback() {
    let limit = "client_rate = \"30/m\"\nclient_burst = 0\n";
    let Some(lines) = grpcio_through_tern(RATE_LIMITED_CLIENT, limit, ("UnaryCall", 4)) else {
        return;
    };
    let refused: Vec<_> = lines
        .iter()
        .filter(|l| log_field(l, "grpc_status") == Some("8"))
        .collect();
    assert_eq!(refused.len(), 2, "{lines:#?}");
    for line in refused {
        assert_eq!(
            log_field(line, "error"),
            Some("client:rate_limited"),
            "{line}"
        );
    }
}

/// A gRPC server of grpcio's own making with the standard health service
/// (grpcio-health-checking): service "" is NOT_SERVING throughout, the
/// service tern asks about starts SERVING and takes each status read on
/// stdin. Prints "ready" once it listens.
const HEALTH_SERVER: &str = r#"
import sys
from concurrent import futures
import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
servicer = health.HealthServicer()
health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
servicer.set("tern.test", health_pb2.HealthCheckResponse.SERVING)
server.add_insecure_port(sys.argv[1])
server.start()
print("ready", flush=True)
for line in sys.stdin:
    servicer.set("tern.test", getattr(health_pb2.HealthCheckResponse, line.strip()))
    print("set", line.strip(), flush=True)
server.stop(0)
"#;

/// `health_check_grpc` against grpcio's health service: NOT_SERVING marks
/// the server down (and says so), SERVING up again; the service asked
/// about is the configured one (the server as a whole stays NOT_SERVING).
#[test]
fn grpc_health_checks_follow_the_servers_own_health_service() {
    let Some(python) = python_with("grpc_health.v1.health", "grpcio-health-checking") else {
        return;
    };
    let addr = free_addr();
    let mut server = std::process::Command::new(python)
        .args(["-c", HEALTH_SERVER, &addr.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the grpcio health server");
    let mut stdin = server.stdin.take().expect("stdin");
    let mut stdout = std::io::BufReader::new(server.stdout.take().expect("stdout"));
    let _server = tern_testsupport::tools::KillOnDrop(server);
    let mut said = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut said).expect("the server's first line");
    assert_eq!(said.trim(), "ready");
    let front = grpc_front_with(
        "h2c",
        addr,
        "health_check_grpc = \"tern.test\"\nhealth_check_interval = \"100ms\"\n\
         health_check_timeout = \"1s\"\nrise = 1\nfall = 1\n",
        "",
    );
    let wait = Duration::from_secs(10);
    for (status, verdict) in [("NOT_SERVING", "backend down"), ("SERVING", "backend up")] {
        std::io::Write::write_all(&mut stdin, format!("{status}\n").as_bytes()).expect("tell");
        front.wait_log(
            &[verdict, &addr.to_string(), "grpc.health.v1.Health/Check"],
            wait,
        );
    }
    front.wait_log(&["backend down", "health status NOT_SERVING (2)"], wait);
}
