//! A worker: one OS thread, one single-threaded event loop, its own
//! listening sockets. Connections never move between workers, so per-worker
//! state (backend pool, log buffer) needs no locks.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::access_log::{Sink, WorkerLog, FLUSH_INTERVAL};
use crate::backend::Backends;
use crate::config::ListenerConfig;
use crate::conn::{handle, refuse_overloaded, ListenerCtx, WorkerCtx};

/// What a worker is given when it starts.
pub(crate) struct WorkerSpec {
    pub id: usize,
    /// (socket, settings, TLS config, backend addresses) per listener.
    pub listeners: Vec<WorkerListener>,
    pub sink: Sink,
    pub shutdown: watch::Receiver<bool>,
    pub open_connections: Arc<AtomicUsize>,
    pub grace: Duration,
}

pub(crate) struct WorkerListener {
    pub socket: std::net::TcpListener,
    pub config: Arc<ListenerConfig>,
    pub tls: Arc<rustls::ServerConfig>,
    pub backends: Vec<std::net::SocketAddr>,
}

/// Runs a worker until shutdown and drained. Blocks the calling thread.
pub(crate) fn run(spec: WorkerSpec) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, serve(spec))
}

async fn serve(spec: WorkerSpec) -> std::io::Result<()> {
    let worker = Rc::new(WorkerCtx {
        log: WorkerLog::new(spec.sink.clone()),
        shutdown: spec.shutdown.clone(),
    });
    let active = Rc::new(Cell::new(0usize));
    let mut listeners = Vec::new();
    for l in spec.listeners {
        let socket = TcpListener::from_std(l.socket)?;
        let ctx = Rc::new(ListenerCtx {
            acceptor: TlsAcceptor::from(l.tls),
            backends: Backends::new(l.backends, l.config.limits.backend_pool_size),
            config: l.config,
        });
        listeners.push(ctx.clone());
        tokio::task::spawn_local(accept_loop(
            socket,
            ctx,
            worker.clone(),
            active.clone(),
            spec.open_connections.clone(),
        ));
    }
    let flusher = {
        let worker = worker.clone();
        tokio::task::spawn_local(async move {
            loop {
                tokio::time::sleep(FLUSH_INTERVAL).await;
                worker.log.flush();
            }
        })
    };
    let mut shutdown = spec.shutdown;
    while !*shutdown.borrow() {
        if shutdown.changed().await.is_err() {
            break;
        }
    }
    // Accept loops stop by themselves; idle connections close at once and
    // busy ones after their current request. Wait for them, within reason.
    let deadline = tokio::time::Instant::now() + spec.grace;
    while active.get() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if active.get() > 0 {
        tracing::warn!(
            worker = spec.id,
            open = active.get(),
            "shutdown deadline reached; closing connections"
        );
    }
    flusher.abort();
    worker.log.flush();
    for l in listeners {
        l.backends.clear();
    }
    Ok(())
}

async fn accept_loop(
    socket: TcpListener,
    listener: Rc<ListenerCtx>,
    worker: Rc<WorkerCtx>,
    active: Rc<Cell<usize>>,
    open: Arc<AtomicUsize>,
) {
    let mut shutdown = worker.shutdown.clone();
    let max = listener.config.limits.max_connections;
    let overflow = Rc::new(Cell::new(0usize));
    loop {
        let accepted = tokio::select! {
            r = socket.accept() => r,
            _ = shutdown.changed() => break,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors or memory: back off instead of
                // spinning on the same error.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if open.fetch_add(1, Ordering::AcqRel) >= max {
            open.fetch_sub(1, Ordering::AcqRel);
            // Over the limit: a few get a proper 503 so clients and load
            // balancers see why; past that budget they are closed at once,
            // so an overload cannot buy itself unbounded handshakes.
            if overflow.get() < overflow_budget(max) {
                overflow.set(overflow.get() + 1);
                let (listener, overflow) = (listener.clone(), overflow.clone());
                tokio::task::spawn_local(async move {
                    refuse_overloaded(tcp, peer, listener).await;
                    overflow.set(overflow.get() - 1);
                });
            } else {
                tracing::debug!(client = %peer, max, "connection limit reached; closing");
                drop(tcp);
            }
            continue;
        }
        let guard = ConnGuard {
            active: active.clone(),
            open: open.clone(),
        };
        active.set(active.get() + 1);
        let (listener, worker) = (listener.clone(), worker.clone());
        tokio::task::spawn_local(async move {
            let _guard = guard;
            handle(tcp, peer, listener, worker).await;
        });
    }
}

/// Connections over the limit that a worker answers with 503 at once.
fn overflow_budget(max: usize) -> usize {
    (max / 10).clamp(4, 256)
}

/// Counts a connection while it lives (also if its task is dropped).
struct ConnGuard {
    active: Rc<Cell<usize>>,
    open: Arc<AtomicUsize>,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.active.set(self.active.get().saturating_sub(1));
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}
