//! A TLS HTTP server for `tern bench` tests whose TLS side the test chooses
//! (versions, cipher suites, key type, tickets, session cache) and which
//! counts what really happened: TCP connections, handshakes, resumed
//! handshakes, requests. It speaks HTTP/1.1 and HTTP/2 (by ALPN) with hyper.
//!
//! Paths: `/` 100 bytes; `/bytes/N` N bytes; `/slow/MS` waits MS ms;
//! `/stall-once/MS` waits MS ms the first time it is asked, then answers at
//! once (a backend hiccup, for open-loop tests).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache};
use rustls::{HandshakeKind, ServerConfig, SupportedProtocolVersion};
use tokio::sync::oneshot;

use crate::certs::{KeyKind, TestCa};

/// What the server offers.
#[derive(Debug, Clone)]
pub struct BenchTargetOptions {
    /// TLS versions accepted.
    pub versions: Vec<&'static SupportedProtocolVersion>,
    /// Cipher suites accepted, by rustls name (`TLS13_AES_128_GCM_SHA256`);
    /// empty for all of aws-lc-rs'.
    pub ciphers: Vec<&'static str>,
    /// Server key.
    pub key: KeyKind,
    /// Issue session tickets (TLS 1.2 RFC 5077 and TLS 1.3).
    pub tickets: bool,
    /// Keep a server-side session cache (TLS 1.2 session IDs, TLS 1.3
    /// stateful tickets when `tickets` is off).
    pub session_cache: bool,
}

impl Default for BenchTargetOptions {
    fn default() -> Self {
        BenchTargetOptions {
            versions: vec![&rustls::version::TLS13, &rustls::version::TLS12],
            ciphers: Vec::new(),
            key: KeyKind::EcdsaP256,
            tickets: true,
            session_cache: true,
        }
    }
}

/// Counters kept by the server.
#[derive(Debug, Default)]
struct Counters {
    connections: AtomicUsize,
    handshakes: AtomicUsize,
    resumed: AtomicUsize,
    requests: AtomicUsize,
    stalled: AtomicBool,
}

/// A running server; stops on drop.
pub struct BenchTarget {
    addr: SocketAddr,
    counters: Arc<Counters>,
    ca: TestCa,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl BenchTarget {
    /// Starts a server on a free port of 127.0.0.1 with a fresh test CA.
    pub fn start(opts: BenchTargetOptions) -> BenchTarget {
        let mut ca = TestCa::new();
        let leaf = ca.leaf(&["127.0.0.1", "localhost"], opts.key);
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&leaf.chain)
            .expect("open chain")
            .collect::<Result<_, _>>()
            .expect("parse chain");
        let key = PrivateKeyDer::from_pem_file(&leaf.key).expect("parse key");
        let mut provider = rustls::crypto::aws_lc_rs::default_provider();
        if !opts.ciphers.is_empty() {
            provider.cipher_suites.retain(|s| {
                s.suite()
                    .as_str()
                    .is_some_and(|name| opts.ciphers.contains(&name))
            });
            assert!(
                !provider.cipher_suites.is_empty(),
                "no known cipher in {:?}",
                opts.ciphers
            );
        }
        let mut config = ServerConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(&opts.versions)
            .expect("versions fit suites")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("certificate and key match");
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        config.session_storage = if opts.session_cache {
            ServerSessionMemoryCache::new(1024)
        } else {
            Arc::new(NoServerSessionStorage {})
        };
        if opts.tickets {
            config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new().expect("ticketer");
        } else {
            config.send_tls13_tickets = if opts.session_cache { 2 } else { 0 };
        }
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("address");
        let counters = Arc::new(Counters::default());
        let (stop_tx, stop_rx) = oneshot::channel();
        let thread_counters = counters.clone();
        let thread = std::thread::Builder::new()
            .name(format!("bench-target-{addr}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(serve(listener, acceptor, thread_counters, stop_rx));
            })
            .expect("spawn server thread");
        BenchTarget {
            addr,
            counters,
            ca,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// `https://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The CA file that verifies the server's chain.
    pub fn ca_file(&self) -> PathBuf {
        self.ca.ca_file().to_path_buf()
    }

    /// TCP connections accepted.
    pub fn connections(&self) -> usize {
        self.counters.connections.load(Ordering::SeqCst)
    }

    /// TLS handshakes completed.
    pub fn handshakes(&self) -> usize {
        self.counters.handshakes.load(Ordering::SeqCst)
    }

    /// Of those, resumed.
    pub fn resumed(&self) -> usize {
        self.counters.resumed.load(Ordering::SeqCst)
    }

    /// HTTP requests answered.
    pub fn requests(&self) -> usize {
        self.counters.requests.load(Ordering::SeqCst)
    }
}

impl Drop for BenchTarget {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    counters: Arc<Counters>,
    mut stop: oneshot::Receiver<()>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
    loop {
        let stream = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok((s, _)) => s,
                Err(_) => continue,
            },
        };
        let _ = stream.set_nodelay(true);
        counters.connections.fetch_add(1, Ordering::SeqCst);
        let acceptor = acceptor.clone();
        let counters = counters.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let (_, conn) = tls.get_ref();
            counters.handshakes.fetch_add(1, Ordering::SeqCst);
            if conn.handshake_kind() == Some(HandshakeKind::Resumed) {
                counters.resumed.fetch_add(1, Ordering::SeqCst);
            }
            let h2 = conn.alpn_protocol() == Some(b"h2");
            let service_counters = counters.clone();
            let service = hyper::service::service_fn(move |req| {
                service_counters.requests.fetch_add(1, Ordering::SeqCst);
                handle(req, service_counters.clone())
            });
            let io = TokioIo::new(tls);
            if h2 {
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(io, service)
                    .await;
            } else {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            }
        });
    }
}

async fn handle(
    req: Request<hyper::body::Incoming>,
    counters: Arc<Counters>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path();
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    let first = parts.next().unwrap_or("");
    let number: u64 = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    let body = match first {
        "bytes" => vec![b'x'; number as usize],
        "slow" => {
            tokio::time::sleep(Duration::from_millis(number)).await;
            b"slow\n".to_vec()
        }
        "stall-once" => {
            if !counters.stalled.swap(true, Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(number)).await;
            }
            b"ok\n".to_vec()
        }
        _ => vec![b'x'; 100],
    };
    Ok(Response::new(Full::new(Bytes::from(body))))
}
