//! A worker: one OS thread, one single-threaded event loop, its own
//! listening sockets. Connections never move between workers, so per-worker
//! state (backend pools, log buffer) needs no locks.
//!
//! On reload the control plane sends each worker the new generation (and
//! sockets for new listen addresses). Accept loops on addresses that stay
//! switch to the new settings for new connections; established connections
//! keep the generation they started with until they end.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::access_log::{Sink, WorkerLog, FLUSH_INTERVAL};
use crate::control::generation::Generation;
use crate::exchange::{ListenerCtx, WorkerCtx};
use crate::front::{handle, refuse_overloaded};
use crate::metrics::Metrics;
use crate::upstream::Backends;

/// A new generation for a worker, with this worker's sockets for listen
/// addresses the previous generation did not have.
pub(crate) struct WorkerUpdate {
    pub generation: Arc<Generation>,
    pub new_sockets: HashMap<SocketAddr, std::net::TcpListener>,
}

/// What a worker is given when it starts.
pub(crate) struct WorkerSpec {
    pub id: usize,
    pub first: WorkerUpdate,
    pub updates: mpsc::UnboundedReceiver<WorkerUpdate>,
    pub sink: Sink,
    pub shutdown: watch::Receiver<bool>,
    pub open_connections: Arc<AtomicUsize>,
    pub metrics: Arc<Metrics>,
    pub grace: Duration,
}

/// Runs a worker until shutdown and drained. Blocks the calling thread.
pub(crate) fn run(spec: WorkerSpec) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, serve(spec))
}

/// An accept loop and the listener settings it hands to new connections.
struct Acceptor {
    current: Rc<RefCell<Rc<ListenerCtx>>>,
    task: JoinHandle<()>,
}

struct Worker {
    ctx: Rc<WorkerCtx>,
    active: Rc<Cell<usize>>,
    open: Arc<AtomicUsize>,
    acceptors: HashMap<SocketAddr, Acceptor>,
    /// Pools of the current generation, dropped (closing idle backend
    /// connections) when a reload replaces them.
    upstreams: Rc<Vec<Backends>>,
}

async fn serve(spec: WorkerSpec) -> std::io::Result<()> {
    let ctx = Rc::new(WorkerCtx {
        metrics: spec.metrics.clone(),
        log: WorkerLog::new(spec.sink.clone()),
        shutdown: spec.shutdown.clone(),
    });
    let mut worker = Worker {
        ctx: ctx.clone(),
        active: Rc::new(Cell::new(0)),
        open: spec.open_connections.clone(),
        acceptors: HashMap::new(),
        upstreams: Rc::new(Vec::new()),
    };
    worker.apply(spec.first)?;
    let flusher = {
        let ctx = ctx.clone();
        tokio::task::spawn_local(async move {
            loop {
                tokio::time::sleep(FLUSH_INTERVAL).await;
                ctx.log.flush();
            }
        })
    };
    let mut shutdown = spec.shutdown;
    let mut updates = spec.updates;
    loop {
        tokio::select! {
            changed = shutdown.wait_for(|s| *s) => {
                let _ = changed;
                break;
            }
            update = updates.recv() => match update {
                Some(u) => {
                    if let Err(e) = worker.apply(u) {
                        tracing::error!(worker = spec.id, "reload: {e}");
                    }
                }
                // The control plane is gone: tern is stopping.
                None => break,
            },
        }
    }
    // Accept loops stop by themselves; idle connections close at once and
    // busy ones after their current request. Wait for them, within reason.
    let deadline = tokio::time::Instant::now() + spec.grace;
    while worker.active.get() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if worker.active.get() > 0 {
        tracing::warn!(
            worker = spec.id,
            open = worker.active.get(),
            "shutdown deadline reached; closing connections"
        );
    }
    flusher.abort();
    ctx.log.flush();
    Ok(())
}

impl Worker {
    /// Switches to a new generation.
    fn apply(&mut self, update: WorkerUpdate) -> std::io::Result<()> {
        let generation = update.generation;
        let pool_size = generation
            .listeners
            .first()
            .map_or(64, |l| l.config.limits.backend_pool_size);
        let upstreams: Rc<Vec<Backends>> = Rc::new(
            generation
                .upstreams
                .iter()
                .map(|u| Backends::new(u.clone(), pool_size))
                .collect(),
        );
        let mut new_sockets = update.new_sockets;
        let mut keep = Vec::new();
        for l in &generation.listeners {
            let listen = l.config.listen;
            keep.push(listen);
            let ctx = Rc::new(ListenerCtx {
                config: l.config.clone(),
                acceptor: TlsAcceptor::from(l.tls.clone()),
                upstreams: upstreams.clone(),
                default_upstream: l.default_upstream,
            });
            if let Some(existing) = self.acceptors.get(&listen) {
                *existing.current.borrow_mut() = ctx;
                continue;
            }
            let Some(socket) = new_sockets.remove(&listen) else {
                tracing::error!(%listen, "no socket for a new listener");
                continue;
            };
            let socket = TcpListener::from_std(socket)?;
            let current = Rc::new(RefCell::new(ctx));
            let task = tokio::task::spawn_local(accept_loop(
                socket,
                current.clone(),
                self.ctx.clone(),
                self.active.clone(),
                self.open.clone(),
            ));
            self.acceptors.insert(listen, Acceptor { current, task });
        }
        // Listeners gone from the configuration stop accepting; their
        // established connections go on.
        self.acceptors.retain(|addr, a| {
            let stays = keep.contains(addr);
            if !stays {
                a.task.abort();
            }
            stays
        });
        self.upstreams = upstreams;
        Ok(())
    }
}

async fn accept_loop(
    socket: TcpListener,
    current: Rc<RefCell<Rc<ListenerCtx>>>,
    worker: Rc<WorkerCtx>,
    active: Rc<Cell<usize>>,
    open: Arc<AtomicUsize>,
) {
    let mut shutdown = worker.shutdown.clone();
    let overflow = Rc::new(Cell::new(0usize));
    loop {
        let accepted = tokio::select! {
            r = socket.accept() => r,
            _ = shutdown.wait_for(|s| *s) => break,
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
        let listener = current.borrow().clone();
        let max = listener.config.limits.max_connections;
        if open.fetch_add(1, Ordering::AcqRel) >= max {
            open.fetch_sub(1, Ordering::AcqRel);
            worker.metrics.connection_refused();
            // Over the limit: a few get a proper 503 so clients and load
            // balancers see why; past that budget they are closed at once,
            // so an overload cannot buy itself unbounded handshakes.
            if overflow.get() < overflow_budget(max) {
                overflow.set(overflow.get() + 1);
                let overflow = overflow.clone();
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
        worker.metrics.connection_opened();
        let guard = ConnGuard {
            active: active.clone(),
            open: open.clone(),
            metrics: worker.metrics.clone(),
        };
        active.set(active.get() + 1);
        let worker = worker.clone();
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
    metrics: Arc<Metrics>,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.active.set(self.active.get().saturating_sub(1));
        self.open.fetch_sub(1, Ordering::AcqRel);
        self.metrics.connection_closed();
    }
}
