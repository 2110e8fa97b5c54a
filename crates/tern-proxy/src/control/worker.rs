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
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::access_log::{Sink, WorkerLog, FLUSH_INTERVAL};
use crate::control::generation::Generation;
use crate::control::quic::QuicAcceptor;
use crate::exchange::{ListenerCtx, WorkerCtx};
use crate::front::{handle, refuse_overloaded};
use crate::metrics::Metrics;
use crate::upstream::Backends;

/// A new generation for a worker, with this worker's sockets for listen
/// addresses the previous generation did not have.
pub(crate) struct WorkerUpdate {
    pub generation: Arc<Generation>,
    pub new_sockets: HashMap<SocketAddr, std::net::TcpListener>,
    /// UDP sockets (QUIC) for listeners that turned HTTP/3 on.
    pub new_udp_sockets: HashMap<SocketAddr, std::net::UdpSocket>,
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
    /// The per-client table every worker shares.
    pub clients: Arc<crate::exchange::clients::Clients>,
}

/// Runs a worker until shutdown and drained. Blocks the calling thread.
pub(crate) fn run(spec: WorkerSpec) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    // Each poll of the LocalSet is a turn: the request path reads the
    // clock once per turn (tern_deadline::now), not once per use.
    rt.block_on(tern_deadline::Turns::new(local.run_until(serve(spec))))
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
    freed: Rc<Notify>,
    acceptors: HashMap<SocketAddr, Acceptor>,
    /// QUIC endpoints of listeners with HTTP/3 on.
    quic: HashMap<SocketAddr, QuicAcceptor>,
    /// Pools of the current generation, dropped (closing idle backend
    /// connections) when a reload replaces them.
    upstreams: Rc<Vec<Backends>>,
}

async fn serve(spec: WorkerSpec) -> std::io::Result<()> {
    let ctx = Rc::new(WorkerCtx {
        metrics: spec.metrics.clone(),
        log: WorkerLog::new(spec.sink.clone()),
        shutdown: spec.shutdown.clone(),
        clients: spec.clients.clone(),
    });
    let mut worker = Worker {
        ctx: ctx.clone(),
        active: Rc::new(Cell::new(0)),
        open: spec.open_connections.clone(),
        freed: Rc::new(Notify::new()),
        acceptors: HashMap::new(),
        quic: HashMap::new(),
        upstreams: Rc::new(Vec::new()),
    };
    worker.apply(spec.first)?;
    tracing::debug!(
        bytes = ?crate::front::task_sizes(),
        "memory each connection's task holds for its life"
    );
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
            .map_or(crate::config::defaults::BACKEND_POOL_SIZE, |l| {
                l.config.limits.backend_pool_size
            });
        let upstreams: Rc<Vec<Backends>> = Rc::new(
            generation
                .upstreams
                .iter()
                .map(|u| Backends::new(u.clone(), pool_size))
                .collect(),
        );
        // Idle connections unused for long close even when no request
        // comes to notice; the sweep ends with the generation's pools.
        let pools = Rc::downgrade(&upstreams);
        tokio::task::spawn_local(async move {
            loop {
                tokio::time::sleep(crate::upstream::SWEEP_INTERVAL).await;
                let Some(pools) = pools.upgrade() else { break };
                pools.iter().for_each(Backends::sweep);
            }
        });
        let mut new_sockets = update.new_sockets;
        let mut new_udp_sockets = update.new_udp_sockets;
        let mut keep = Vec::new();
        for l in &generation.listeners {
            let listen = l.config.listen;
            keep.push(listen);
            let alt_svc = l
                .config
                .h3
                .as_ref()
                .and_then(|h3| h3.alt_svc.as_deref())
                .and_then(|v| http::HeaderValue::from_str(v).ok());
            let ctx = Rc::new(ListenerCtx {
                config: l.config.clone(),
                acceptor: TlsAcceptor::from(l.tls.clone()),
                by_name: l.by_name.clone(),
                upstreams: upstreams.clone(),
                default_upstream: l.default_upstream,
                alt_svc,
            });
            if let Some(existing) = self.acceptors.get(&listen) {
                *existing.current.borrow_mut() = ctx;
                self.apply_quic(l, existing.current.clone(), &mut new_udp_sockets)?;
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
                self.counter(),
            ));
            self.apply_quic(l, current.clone(), &mut new_udp_sockets)?;
            self.acceptors.insert(listen, Acceptor { current, task });
        }
        // Endpoints of listeners gone, or with HTTP/3 turned off, take no
        // new connections; established ones go on.
        self.quic.retain(|addr, q| {
            let stays = generation
                .listeners
                .iter()
                .any(|l| l.config.listen == *addr && l.quic.is_some());
            if !stays {
                q.stop_accepting();
            }
            stays
        });
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

impl Worker {
    fn counter(&self) -> ConnCounter {
        ConnCounter {
            active: self.active.clone(),
            open: self.open.clone(),
            freed: self.freed.clone(),
        }
    }

    /// Starts or updates the QUIC endpoint of listener `l` (HTTP/3 on).
    fn apply_quic(
        &mut self,
        l: &crate::control::generation::ListenerShared,
        current: Rc<RefCell<Rc<ListenerCtx>>>,
        new_udp_sockets: &mut HashMap<SocketAddr, std::net::UdpSocket>,
    ) -> std::io::Result<()> {
        let Some(config) = &l.quic else {
            return Ok(());
        };
        let listen = l.config.listen;
        if let Some(existing) = self.quic.get(&listen) {
            existing.update(config.clone());
            return Ok(());
        }
        let Some(socket) = new_udp_sockets.remove(&listen) else {
            tracing::error!(%listen, "no UDP socket for an HTTP/3 listener");
            return Ok(());
        };
        let acceptor = QuicAcceptor::start(
            socket,
            config.clone(),
            current,
            self.ctx.clone(),
            self.counter(),
        )?;
        self.quic.insert(listen, acceptor);
        Ok(())
    }
}

async fn accept_loop(
    socket: TcpListener,
    current: Rc<RefCell<Rc<ListenerCtx>>>,
    worker: Rc<WorkerCtx>,
    counter: ConnCounter,
) {
    let mut shutdown = worker.shutdown.clone();
    let overflow = Rc::new(Cell::new(0usize));
    let mut last_accept_warning: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            r = socket.accept() => r,
            _ = shutdown.wait_for(|s| *s) => break,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors or memory: back off instead of
                // spinning on the same error; the connection stays in the
                // backlog. One warning a second at most, the rest counted.
                worker.metrics.accept_error();
                let now = Instant::now();
                if last_accept_warning
                    .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
                {
                    last_accept_warning = Some(now);
                    tracing::warn!(
                        "accept failed: {e}; retrying in 50 ms (see tern_accept_errors_total)"
                    );
                }
                // A connection of this worker closing frees a descriptor:
                // retry then (after a flood, the backlog drains at once);
                // other holders (backend connections) within 50 ms.
                tokio::select! {
                    _ = counter.freed.notified() => {}
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
                continue;
            }
        };
        let listener = current.borrow().clone();
        let max = listener.config.limits.max_connections;
        let Some(guard) = counter.admit(max, &worker.metrics) else {
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
        };
        let worker = worker.clone();
        tokio::task::spawn_local(handle(tcp, peer, listener, worker, guard));
    }
}

/// Connections over the limit that a worker answers with 503 at once.
fn overflow_budget(max: usize) -> usize {
    (max / 10).clamp(4, 256)
}

/// A worker's connection counts, shared by its TCP and QUIC accept loops:
/// `max_connections` bounds both together.
#[derive(Clone)]
pub(super) struct ConnCounter {
    pub active: Rc<Cell<usize>>,
    pub open: Arc<AtomicUsize>,
    /// Woken when a connection of this worker ends (its descriptor is
    /// closed): an accept loop out of descriptors waits on it.
    pub freed: Rc<Notify>,
}

impl ConnCounter {
    /// Counts a new connection, or None when the listener's limit `max`
    /// is reached (the connection must be turned away).
    pub(super) fn admit(&self, max: usize, metrics: &Arc<Metrics>) -> Option<ConnGuard> {
        if self.open.fetch_add(1, Ordering::AcqRel) >= max {
            self.open.fetch_sub(1, Ordering::AcqRel);
            metrics.connection_refused();
            return None;
        }
        metrics.connection_opened();
        self.active.set(self.active.get() + 1);
        Some(ConnGuard {
            active: self.active.clone(),
            open: self.open.clone(),
            freed: self.freed.clone(),
            metrics: metrics.clone(),
        })
    }
}

/// Counts a connection while it lives (also if its task is dropped).
pub(crate) struct ConnGuard {
    active: Rc<Cell<usize>>,
    open: Arc<AtomicUsize>,
    freed: Rc<Notify>,
    metrics: Arc<Metrics>,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.active.set(self.active.get().saturating_sub(1));
        self.open.fetch_sub(1, Ordering::AcqRel);
        self.metrics.connection_closed();
        self.freed.notify_one();
    }
}
