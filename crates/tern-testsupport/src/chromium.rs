//! A real browser against tern: headless Chromium loading a page whose many
//! subresources come from the same origin, served by [`AssetSite`], a small
//! hyper origin.
//!
//! What the test learns: whether a browser negotiates h2 with tern and
//! multiplexes the page's requests on one connection, as it would in
//! production (a browser opens a second connection only when the first
//! fails or is refused).

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

use crate::tempdir::TempDir;
use crate::tools::{run_tool, ToolOutput};

/// The Chromium binary on PATH (`chromium`, `chromium-browser`,
/// `google-chrome`), if any.
pub fn find_chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// How tests start Chromium: headless, as root (no sandbox), and without
/// the background traffic that a closed test network refuses.
pub const HEADLESS_FLAGS: [&str; 7] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
];

/// Flags that make Chromium speak HTTP/3 to `localhost:port` from the
/// first request (no Alt-Svc round first) and accept `cert_der` there.
/// QUIC in Chromium ignores `--ignore-certificate-errors`; it takes the
/// certificate's key pinned by hash instead. `localhost` is mapped to
/// 127.0.0.1 because Chromium tries ::1 first over UDP.
pub fn quic_flags(port: u16, cert_der: &[u8]) -> Vec<String> {
    vec![
        format!("--origin-to-force-quic-on=localhost:{port}"),
        "--host-resolver-rules=MAP localhost 127.0.0.1".to_string(),
        format!(
            "--ignore-certificate-errors-spki-list={}",
            spki_sha256_base64(cert_der)
        ),
    ]
}

/// Flags under which Chromium finds HTTP/3 at `localhost` the way browsers
/// do, through an `Alt-Svc` header on a TCP response, and accepts
/// `cert_der` over both TCP and QUIC.
///
/// Chromium refuses QUIC with a certificate that does not chain to a public
/// root (ERR_QUIC_CERT_ROOT_NOT_KNOWN, even when it is trusted locally or
/// pinned) unless the host is named in `--origin-to-force-quic-on`, and
/// that exemption matches the host alone. Naming port 1 of localhost, which
/// no test requests, lifts the root check for localhost without forcing
/// QUIC on the port under test: there QUIC is used only once an Alt-Svc
/// advertisement has been seen.
pub fn alt_svc_flags(cert_der: &[u8]) -> Vec<String> {
    vec![
        "--origin-to-force-quic-on=localhost:1".to_string(),
        "--host-resolver-rules=MAP localhost 127.0.0.1".to_string(),
        format!(
            "--ignore-certificate-errors-spki-list={}",
            spki_sha256_base64(cert_der)
        ),
    ]
}

/// Base64 of the SHA-256 of a certificate's SubjectPublicKeyInfo, the form
/// Chromium's `--ignore-certificate-errors-spki-list` takes.
pub fn spki_sha256_base64(cert_der: &[u8]) -> String {
    use base64::Engine;
    let (_, cert) =
        x509_parser::parse_x509_certificate(cert_der).expect("a test certificate parses");
    let digest = aws_lc_rs::digest::digest(
        &aws_lc_rs::digest::SHA256,
        cert.tbs_certificate.subject_pki.raw,
    );
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// Loads `url` in headless Chromium with a fresh profile and returns what
/// `--dump-dom` printed (the DOM after the load event: every script has run).
///
/// Certificate errors are ignored because the test CA is not in Chromium's
/// trust store; the test checks tern's side instead. `extra` flags come
/// before the URL (`--disable-http2`, say).
pub fn dump_dom(
    chromium: &std::path::Path,
    url: &str,
    extra: &[&str],
    timeout: Duration,
) -> ToolOutput {
    let profile = TempDir::new("chromium-profile");
    dump_dom_in(chromium, profile.path(), url, extra, timeout)
}

/// [`dump_dom`] with the profile in `profile`, kept between runs: what
/// Chromium learned in one (an Alt-Svc advertisement, say) it uses in the
/// next, as a browser does between visits.
pub fn dump_dom_in(
    chromium: &std::path::Path,
    profile: &std::path::Path,
    url: &str,
    extra: &[&str],
    timeout: Duration,
) -> ToolOutput {
    let user_data = format!("--user-data-dir={}", profile.display());
    let program = chromium.display().to_string();
    let mut args = HEADLESS_FLAGS.to_vec();
    args.extend(["--ignore-certificate-errors", &user_data, "--dump-dom"]);
    args.extend_from_slice(extra);
    args.push(url);
    run_tool(&program, args, b"", timeout)
}

/// An origin serving `/` as an HTML page that references `scripts` scripts
/// (`/s/N.js`, each setting `window.loadedN`) and `images` images
/// (`/i/N.svg`), and serving those files. Stops on drop.
pub struct AssetSite {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// A script's marker in the DOM: each script appends one element with this
/// id prefix, so `--dump-dom` shows which scripts ran.
pub const SCRIPT_MARKER: &str = "ran-script-";

impl AssetSite {
    /// Starts the site on a free port of 127.0.0.1.
    pub fn start(scripts: usize, images: usize) -> AssetSite {
        let listener = StdTcpListener::bind("127.0.0.1:0").expect("bind the asset site");
        listener
            .set_nonblocking(true)
            .expect("non-blocking asset site");
        let addr = listener.local_addr().expect("asset site address");
        let requests = Arc::new(AtomicUsize::new(0));
        let (stop_tx, stop_rx) = oneshot::channel();
        let counter = requests.clone();
        let page = Bytes::from(page(scripts, images));
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("asset site runtime");
            runtime.block_on(serve(listener, page, counter, stop_rx));
        });
        AssetSite {
            addr,
            requests,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests answered so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for AssetSite {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn page(scripts: usize, images: usize) -> String {
    let mut html = String::from("<!doctype html>\n<html><head><title>tern h2 page</title>\n");
    for i in 0..scripts {
        html.push_str(&format!("<script src=\"/s/{i}.js\"></script>\n"));
    }
    html.push_str("</head><body>\n");
    for i in 0..images {
        html.push_str(&format!(
            "<img src=\"/i/{i}.svg\" width=\"8\" height=\"8\" alt=\"{i}\">\n"
        ));
    }
    html.push_str("</body></html>\n");
    html
}

async fn serve(
    listener: StdTcpListener,
    page: Bytes,
    requests: Arc<AtomicUsize>,
    mut stop: oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(e) => panic!("asset site listener: {e}"),
    };
    loop {
        let (stream, _) = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(_) => continue,
            },
        };
        let _ = stream.set_nodelay(true);
        let page = page.clone();
        let requests = requests.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                requests.fetch_add(1, Ordering::SeqCst);
                let answer = asset(&req, &page);
                async move { Ok::<_, Infallible>(answer) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn asset(req: &Request<Incoming>, page: &Bytes) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let (body, content_type) = if path == "/" {
        (page.clone(), "text/html; charset=utf-8")
    } else if let Some(n) = numbered(path, "/s/", ".js") {
        let script = format!(
            "(function(){{var e=document.createElement('i');e.id='{SCRIPT_MARKER}{n}';\
             (document.body||document.documentElement).appendChild(e);}})();\n"
        );
        (Bytes::from(script), "text/javascript")
    } else if let Some(n) = numbered(path, "/i/", ".svg") {
        let svg = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"8\" height=\"8\">\
             <rect width=\"8\" height=\"8\" fill=\"#{:06x}\"/></svg>\n",
            n * 4099 % 0xff_ffff
        );
        (Bytes::from(svg), "image/svg+xml")
    } else {
        let mut response = Response::new(Full::new(Bytes::from_static(b"not found\n")));
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    };
    let mut response = Response::new(Full::new(body));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// N from `<prefix>N<suffix>`.
fn numbered(path: &str, prefix: &str, suffix: &str) -> Option<usize> {
    path.strip_prefix(prefix)?
        .strip_suffix(suffix)?
        .parse()
        .ok()
}

/// Checks tern's access log (on its stdout) after Chromium loaded a page
/// at `/` whose WebSocket went to `ws_path`: the WebSocket was an HTTP/2
/// extended CONNECT (`alpn=h2 method=CONNECT status=200`) from the same
/// client address as the page, so it rode the page's connection. Returns
/// the WebSocket's line.
pub fn assert_websocket_rode_the_pages_h2_connection(
    served: &crate::tern::Served,
    ws_path: &str,
    wait: Duration,
) -> String {
    use crate::tern::log_field;
    let line = served
        .tern
        .wait_stdout_lines(&format!("path={ws_path}"), 1, wait)
        .expect("an access-log line for the WebSocket")[0]
        .clone();
    assert_eq!(log_field(&line, "alpn"), Some("h2"), "{line}");
    assert_eq!(log_field(&line, "method"), Some("CONNECT"), "{line}");
    assert_eq!(log_field(&line, "status"), Some("200"), "{line}");
    let page = served
        .tern
        .wait_stdout_lines("path=/ ", 1, wait)
        .expect("an access-log line for the page");
    assert_eq!(
        log_field(&page[0], "client"),
        log_field(&line, "client"),
        "the WebSocket rode the page's connection:\n{page:?}\n{line}"
    );
    line
}
