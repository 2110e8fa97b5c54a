//! Starting and stopping `tern serve`: TLS configs, sockets, workers,
//! signals.
//!
//! | signal          | effect                                                        |
//! |-----------------|---------------------------------------------------------------|
//! | SIGTERM, SIGINT | stop accepting; finish in-flight requests (up to the shutdown |
//! |                 | timeout); close idle connections; exit 0                      |

use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::watch;

use crate::access_log::Sink;
use crate::config::{AcceptMode, Config, ListenerConfig, Mode, Upstream};
use crate::error::ServeError;
use crate::worker::{self, WorkerListener, WorkerSpec};

/// Pending connections the kernel queues per listening socket.
const LISTEN_BACKLOG: i32 = 4096;

/// Runs `tern serve` until SIGTERM or SIGINT, then drains and returns.
pub fn run(config: Config) -> Result<(), ServeError> {
    tracing::info!("{}", tern_tls::provider_summary());
    let sink =
        Sink::open(&config.access_log, config.log_format).map_err(|source| ServeError::Io {
            context: "opening the access log",
            source,
        })?;

    let mut demo_addr = None;
    let mut prepared = Vec::new();
    for l in &config.listeners {
        let tls = tern_tls::build_server_config(&l.tls).map_err(|source| ServeError::Tls {
            listen: l.listen,
            source,
        })?;
        for cert in &l.tls.certs {
            if let Some(warning) = tern_tls::initcwnd_warning(cert) {
                tracing::warn!("{warning}");
            }
        }
        let backends = match &l.upstream {
            Upstream::Backends(addrs) => addrs.clone(),
            Upstream::Demo => {
                let addr = match demo_addr {
                    Some(a) => a,
                    None => {
                        let a = crate::demo::start().map_err(|source| ServeError::Io {
                            context: "starting the demo origin",
                            source,
                        })?;
                        demo_addr = Some(a);
                        a
                    }
                };
                vec![addr]
            }
        };
        let sockets = bind(l.listen, config.accept, config.workers)?;
        prepared.push((Arc::new(l.clone()), tls, backends, sockets));
    }

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let open = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::with_capacity(config.workers);
    let mut per_worker: Vec<Vec<WorkerListener>> =
        (0..config.workers).map(|_| Vec::new()).collect();
    for (cfg, tls, backends, sockets) in prepared {
        for (w, socket) in sockets.into_iter().enumerate() {
            per_worker[w].push(WorkerListener {
                socket,
                config: cfg.clone(),
                tls: tls.clone(),
                backends: backends.clone(),
            });
        }
    }
    for (id, listeners) in per_worker.into_iter().enumerate() {
        let spec = WorkerSpec {
            id,
            listeners,
            sink: sink.clone(),
            shutdown: shutdown_rx.clone(),
            open_connections: open.clone(),
            grace: config.shutdown_timeout,
        };
        let handle = std::thread::Builder::new()
            .name(format!("tern-worker-{id}"))
            .spawn(move || worker::run(spec))
            .map_err(|source| ServeError::Io {
                context: "starting a worker thread",
                source,
            })?;
        threads.push(handle);
    }
    for l in &config.listeners {
        announce(l, &config, demo_addr);
    }

    wait_for_signal()?;
    tracing::info!(
        "shutting down: finishing in-flight requests (up to {:?})",
        config.shutdown_timeout
    );
    let _ = shutdown_tx.send(true);
    let deadline = std::time::Instant::now() + config.shutdown_timeout + Duration::from_secs(1);
    for t in threads {
        // Workers drain within the shutdown timeout; a thread that does not
        // return by then is left behind when the process exits.
        while !t.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if t.is_finished() {
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!("worker failed: {e}"),
                Err(_) => tracing::error!("worker thread panicked"),
            }
        }
    }
    tracing::info!("stopped");
    Ok(())
}

fn announce(l: &ListenerConfig, config: &Config, demo: Option<SocketAddr>) {
    let mode = match l.mode {
        Mode::Http => "http",
        Mode::Tcp { .. } => "tcp",
    };
    let accept = match config.accept {
        AcceptMode::ReusePort => "reuseport",
        AcceptMode::Shared => "shared",
    };
    tracing::info!(
        "listening on {} ({mode}, workers={}, accept={accept}, {})",
        l.listen,
        config.workers,
        l.tls.policy.describe()
    );
    match (&l.upstream, demo) {
        (Upstream::Demo, Some(addr)) => {
            let url = format!("https://{}/", l.listen).replace("127.0.0.1", "localhost");
            tracing::info!(
                "no --backend given: answering from the built-in demo origin ({addr}). Try: curl -k {url}   \
                 Point tern at a real service with --backend HOST:PORT (and --cert/--key for your own certificate)."
            );
        }
        (Upstream::Backends(b), _) => {
            let list: Vec<String> = b.iter().map(ToString::to_string).collect();
            tracing::info!("forwarding to {}", list.join(", "));
        }
        _ => {}
    }
    for c in &l.tls.certs {
        if c.source == "built-in self-signed" {
            tracing::warn!("no --cert given: using a fresh self-signed certificate for localhost (clients will not trust it)");
        }
    }
}

/// Opens the listening sockets of one listener: one per worker with
/// SO_REUSEPORT, or one shared by all.
fn bind(
    addr: SocketAddr,
    mode: AcceptMode,
    workers: usize,
) -> Result<Vec<std::net::TcpListener>, ServeError> {
    let make = |reuse_port: bool| -> std::io::Result<std::net::TcpListener> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        if reuse_port {
            socket.set_reuse_port(true)?;
        }
        if addr.is_ipv6() {
            socket.set_only_v6(true)?;
        }
        // Accepted sockets inherit TCP_NODELAY on Linux; they set it again
        // anyway, before the handshake.
        socket.set_tcp_nodelay(true)?;
        socket.bind(&addr.into())?;
        socket.listen(LISTEN_BACKLOG)?;
        socket.set_nonblocking(true)?;
        Ok(socket.into())
    };
    let bind_err = |source| ServeError::Bind { addr, source };
    match mode {
        AcceptMode::ReusePort => (0..workers).map(|_| make(true).map_err(bind_err)).collect(),
        AcceptMode::Shared => {
            let first = make(false).map_err(bind_err)?;
            let mut all = Vec::with_capacity(workers);
            for _ in 1..workers {
                all.push(first.try_clone().map_err(bind_err)?);
            }
            all.push(first);
            Ok(all)
        }
    }
}

fn wait_for_signal() -> Result<(), ServeError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| ServeError::Io {
            context: "starting the signal loop",
            source,
        })?;
    rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let io = |source| ServeError::Io {
            context: "installing signal handlers",
            source,
        };
        let mut term = signal(SignalKind::terminate()).map_err(io)?;
        let mut int = signal(SignalKind::interrupt()).map_err(io)?;
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received"),
            _ = int.recv() => tracing::info!("SIGINT received"),
        }
        Ok(())
    })
}
