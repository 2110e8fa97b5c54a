//! Entry points for the fuzz targets in `fuzz/` (not an API): the parsers
//! of untrusted input that live inside this crate, on byte slices.

use std::net::SocketAddr;
use std::path::Path;

/// Decodes a PROXY protocol header as tern's listener does: a v1 line when
/// `bytes` starts with `PROXY `, else a whole v2 header. Returns the client
/// address, or None when tern would close the connection.
pub fn proxy_header(bytes: &[u8]) -> Option<SocketAddr> {
    let peer = SocketAddr::from(([192, 0, 2, 1], 1));
    let decoded = if bytes.starts_with(b"PROXY ") {
        crate::front::decode_proxy_v1(bytes, peer)
    } else {
        crate::front::decode_proxy_v2(bytes, peer)
    };
    decoded.ok()
}

/// Loads a TOML configuration from `text` as `tern serve --config` would
/// (certificate paths resolve against a directory that does not exist, so
/// only files named absolutely are read). Returns the one-line error.
pub fn config_toml(text: &str) -> Result<(), String> {
    let overrides = crate::config::GlobalOptions::default();
    crate::config::file::parse(Path::new("/nonexistent/tern.toml"), text, &overrides)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The client's side of one HTTP/2 connection to tern's real HTTP/2 front
/// end, in memory: the connection preface, then `frames` (any bytes); once
/// tern has been quiet for a moment (no output, the backend idle), the
/// client's end of stream. Requests go to a backend on loopback that
/// answers every request `200 ok` and closes. Returns what tern wrote back.
///
/// Panics when the session does not end within 5 s of the client's EOF: a
/// connection whose client has gone must end (bounded by its streams, not
/// by timeouts of tens of seconds).
pub fn h2_session(frames: &[u8]) -> Vec<u8> {
    h2_fuzz::SESSION.with(|s| s.run(frames))
}

mod h2_fuzz {
    use std::cell::{Cell, RefCell};
    use std::net::SocketAddr;
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::TlsAcceptor;

    use crate::access_log::{Sink, WorkerLog};
    use crate::config::{self, AccessLogTarget, GlobalOptions, ListenerOptions, LogFormat};
    use crate::control::generation::Generation;
    use crate::exchange::{ConnCtx, ListenerCtx, WorkerCtx};
    use crate::upstream::Backends;

    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    /// How long tern must write nothing, with the backend idle, before the
    /// client hangs up (a loopback exchange takes well under this).
    const QUIET: Duration = Duration::from_micros(300);
    /// The longest a client waits for tern to go quiet.
    const PATIENCE: Duration = Duration::from_millis(20);

    thread_local! {
        pub(super) static SESSION: Session = Session::new();
        /// Backend connections being answered now.
        static BACKEND_BUSY: Cell<usize> = const { Cell::new(0) };
    }

    pub(super) struct Session {
        runtime: tokio::runtime::Runtime,
        local: tokio::task::LocalSet,
        listener: Rc<ListenerCtx>,
        worker: Rc<WorkerCtx>,
        // Keeps the shutdown channel open (tern is not shutting down).
        _shutdown: tokio::sync::watch::Sender<bool>,
    }

    impl Session {
        fn new() -> Session {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime for the fuzz target");
            let local = tokio::task::LocalSet::new();
            let backend = local.block_on(&runtime, start_backend());
            let listener_options = ListenerOptions {
                listen: Some("127.0.0.1:0".into()),
                backends: vec![backend.to_string()],
                ..ListenerOptions::default()
            };
            let config = config::from_options(&GlobalOptions::default(), &listener_options)
                .expect("the fuzz target's configuration");
            let generation =
                Generation::build(&config, None, &mut None).expect("the fuzz target's listener");
            let l = &generation.listeners[0];
            let listener = Rc::new(ListenerCtx {
                config: l.config.clone(),
                acceptor: TlsAcceptor::from(l.tls.clone()),
                upstreams: Rc::new(
                    generation
                        .upstreams
                        .iter()
                        .map(|u| Backends::new(u.clone(), 4))
                        .collect(),
                ),
                default_upstream: l.default_upstream,
                alt_svc: None,
            });
            let sink = Sink::open(&AccessLogTarget::Off, LogFormat::Text).expect("no access log");
            let (shutdown_tx, shutdown) = tokio::sync::watch::channel(false);
            let worker = Rc::new(WorkerCtx {
                metrics: Default::default(),
                log: WorkerLog::new(sink),
                shutdown,
            });
            Session {
                runtime,
                local,
                listener,
                worker,
                _shutdown: shutdown_tx,
            }
        }

        pub(super) fn run(&self, frames: &[u8]) -> Vec<u8> {
            let (client, server) = tokio::io::duplex(64 * 1024);
            let listener = self.listener.clone();
            let worker = self.worker.clone();
            let mut input = PREFACE.to_vec();
            input.extend_from_slice(frames);
            let session = async move {
                let serve = tokio::task::spawn_local(async move {
                    let ctx = ConnCtx {
                        peer: SocketAddr::from(([192, 0, 2, 1], 4711)),
                        tls: tern_tls::Negotiated {
                            alpn: Some("h2".into()),
                            sni: Some("localhost".into()),
                            ..Default::default()
                        },
                        handshake_us: 0,
                        listener: &listener,
                        worker: &worker,
                    };
                    crate::front::h2::serve(server, &ctx).await;
                });
                let (mut read, mut write) = tokio::io::split(client);
                let out = Rc::new(RefCell::new(Vec::new()));
                let reader = {
                    let out = out.clone();
                    tokio::task::spawn_local(async move {
                        let mut buf = vec![0u8; 16 * 1024];
                        while let Ok(n) = read.read(&mut buf).await {
                            if n == 0 {
                                break;
                            }
                            out.borrow_mut().extend_from_slice(&buf[..n]);
                        }
                    })
                };
                // tern may stop reading (or close) before taking it all.
                let _ = tokio::time::timeout(PATIENCE, write.write_all(&input)).await;
                // Let the exchanges run: yield (the IO driver is polled
                // between tasks) until tern is quiet.
                let started = Instant::now();
                let mut seen = (usize::MAX, 0);
                let mut last_change = started;
                while !serve.is_finished() && started.elapsed() < PATIENCE {
                    tokio::task::yield_now().await;
                    let now = (out.borrow().len(), BACKEND_BUSY.with(Cell::get));
                    if now != seen || now.1 > 0 {
                        seen = now;
                        last_change = Instant::now();
                    } else if last_change.elapsed() >= QUIET {
                        break;
                    }
                }
                let _ = write.shutdown().await;
                let _ = serve.await;
                drop(write);
                let _ = reader.await;
                out.take()
            };
            // (The timer is made inside the runtime.)
            let ended = self.local.block_on(&self.runtime, async {
                tokio::time::timeout(Duration::from_secs(5), session).await
            });
            ended.expect("the HTTP/2 session did not end within 5 s of the client's EOF")
        }
    }

    /// An HTTP/1.1 backend answering each request head with `200 ok` and
    /// closing; runs on the session's LocalSet.
    async fn start_backend() -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fuzz backend");
        let addr = listener.local_addr().expect("fuzz backend address");
        tokio::task::spawn_local(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                BACKEND_BUSY.with(|b| b.set(b.get() + 1));
                tokio::task::spawn_local(async move {
                    struct Done;
                    impl Drop for Done {
                        fn drop(&mut self) {
                            BACKEND_BUSY.with(|b| b.set(b.get().saturating_sub(1)));
                        }
                    }
                    let _done = Done;
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 1 << 20 {
                        match tcp.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = tcp
                        .write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                        )
                        .await;
                });
            }
        });
        addr
    }
}

#[cfg(test)]
mod tests {
    /// The harness reaches the backend: a GET gets its `200 ok`.
    #[test]
    fn h2_session_serves_a_get_from_the_backend() {
        fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
            let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
            f.extend_from_slice(&[kind, flags]);
            f.extend_from_slice(&stream.to_be_bytes());
            f.extend_from_slice(payload);
            f
        }
        let get = b"\x82\x87\x84\x01\x09localhost";
        let mut input = frame(4, 0, 0, &[]);
        input.extend(frame(1, 0x5, 1, get));
        let out = super::h2_session(&input);
        let mut frames = Vec::new();
        let mut rest = &out[..];
        while rest.len() >= 9 {
            let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
            frames.push((rest[3], rest[9..9 + len].to_vec()));
            rest = &rest[9 + len..];
        }
        assert!(
            frames.iter().any(|(kind, _)| *kind == 1),
            "no HEADERS: {frames:?}"
        );
        assert!(
            frames
                .iter()
                .any(|(kind, payload)| *kind == 0 && payload == b"ok"),
            "no DATA \"ok\": {frames:?}"
        );
    }
}
