//! Starting, reloading and stopping `tern serve`.
//!
//! Workers run the data plane. The main thread runs the control plane on a
//! small runtime of its own: signals, reloads, health checks, the admin
//! listener.
//!
//! | signal          | effect                                                        |
//! |-----------------|---------------------------------------------------------------|
//! | SIGHUP          | reload: re-read the configuration and every file it names;    |
//! |                 | a bad one is refused and the running one keeps serving        |
//! | SIGTERM, SIGINT | stop accepting; finish in-flight requests (up to the shutdown |
//! |                 | timeout); close idle connections; exit 0                      |
//!
//! A new binary started with `tern serve --upgrade` takes the listening
//! sockets over ([`super::upgrade`]); this process then drains as on
//! SIGTERM.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::os::fd::AsFd;

use tokio::sync::{mpsc, watch};

use crate::access_log::Sink;
use crate::config::{AcceptMode, Config, ConfigError, ListenerConfig, Mode};
use crate::control::acme::AcmeRegistry;
use crate::control::generation::Generation;
use crate::control::inherit::{Held, Inherited, Kind};
use crate::control::sockets::{bind, bind_plain, bind_udp, take_worker_sockets};
use crate::control::upgrade::Upgrade;
use crate::control::worker::{self, WorkerSpec, WorkerUpdate};
use crate::error::ServeError;
use crate::metrics::Metrics;

mod reload;
use reload::{reload_now, WatchedFiles, FILE_POLL};

/// Re-reads the configuration on SIGHUP (the file, or the command line's
/// certificate files).
pub type Reloader = Box<dyn Fn() -> Result<Config, ConfigError> + Send>;

/// The generation workers currently start connections with, for the admin
/// listener (health) and the next reload.
pub(crate) type Current = Arc<Mutex<Arc<Generation>>>;

/// How `tern serve` gets its listening sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Start {
    /// Binds them (or takes systemd's, `LISTEN_FDS`).
    Fresh,
    /// Takes them from the tern running on `upgrade_socket`, which drains
    /// once this one serves (docs/upgrade.md).
    Upgrade,
}

/// Runs `tern serve` until SIGTERM or SIGINT (or until a new binary has
/// taken over), then drains and returns.
pub fn run(config: Config, reload: Option<Reloader>, start: Start) -> Result<(), ServeError> {
    // First, before any thread exists: it clears LISTEN_FDS and LISTEN_PID.
    let mut inherited = Inherited::from_systemd()?;
    let mut upgrade = None;
    if start == Start::Upgrade {
        let Some(path) = config.upgrade_socket.clone() else {
            return Err(ConfigError::new(
                "--upgrade needs `upgrade_socket` (--upgrade-socket): the path the running tern listens on",
            )
            .into());
        };
        let (u, from_old) = Upgrade::connect(&path)?;
        inherited = from_old;
        upgrade = Some(u);
    }
    let outcome = serve(config, reload, inherited, &mut upgrade);
    if let (Err(e), Some(u)) = (&outcome, &upgrade) {
        u.failed(&e.to_string());
    }
    outcome
}

fn serve(
    config: Config,
    reload: Option<Reloader>,
    mut inherited: Inherited,
    upgrade: &mut Option<Upgrade>,
) -> Result<(), ServeError> {
    tracing::info!("{}", tern_tls::provider_summary());
    super::fd_limit::raise_for(&config);
    let io = |context| move |source| ServeError::Io { context, source };
    let sink =
        Sink::open(&config.access_log, config.log_format).map_err(io("opening the access log"))?;
    let control = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io("starting the control loop"))?;

    // Signal handlers exist before anything is announced: a SIGHUP sent as
    // soon as "listening on" appears must reload, not kill (the default
    // action of SIGHUP).
    let signals = {
        let _entered = control.enter();
        Signals::install()?
    };
    let mut demo = None;
    let mut acme = AcmeRegistry::default();
    let generation = Arc::new(Generation::build(&config, None, &mut demo, &mut acme)?);
    let held = Held::default();
    let mut plain_http = Vec::new();
    for l in &config.listeners {
        if let Some(addr) = l.http_listen {
            let socket = match inherited.single_tcp(addr) {
                Some(s) => s,
                None => bind_plain(addr)?,
            };
            held.add(Kind::Tcp, addr, socket.as_fd());
            plain_http.push((socket, l.listen.port()));
        }
    }
    let admin_socket = match config.admin {
        Some(addr) => {
            let socket = match inherited.single_tcp(addr) {
                Some(s) => s,
                None => bind_plain(addr)?,
            };
            held.add(Kind::Tcp, addr, socket.as_fd());
            Some(socket)
        }
        None => None,
    };
    let mut sockets = HashMap::new();
    let mut udp_sockets = HashMap::new();
    for l in &config.listeners {
        let tcp = match inherited.tcp_for_workers(l.listen, config.workers)? {
            Some(s) => s,
            None => bind(l.listen, config.accept, config.workers)?,
        };
        held.add_all(Kind::Tcp, l.listen, &tcp);
        sockets.insert(l.listen, tcp);
        if l.h3.is_some() {
            let udp = match inherited.udp_for_workers(l.listen, config.workers)? {
                Some(s) => s,
                None => bind_udp(l.listen, config.workers)?,
            };
            held.add_all(Kind::Udp, l.listen, &udp);
            udp_sockets.insert(l.listen, udp);
        }
    }
    inherited.close_unused();
    let (handed_tx, handed_rx) = mpsc::unbounded_channel();
    if upgrade.is_none() {
        if let Some(path) = &config.upgrade_socket {
            super::upgrade::serve(path, held.clone(), handed_tx.clone())?;
        }
    }
    // Everything that needs root is done: sockets bound, keys read.
    super::privilege::drop_to(config.run_as.as_ref())?;
    let metrics = Arc::new(Metrics::default());
    // Backends given by name get their addresses before the first request.
    control.block_on(generation.resolve_names(config.dns, &metrics));
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let open = Arc::new(AtomicUsize::new(0));
    let clients = Arc::default();
    let mut threads = Vec::with_capacity(config.workers);
    let mut senders = Vec::with_capacity(config.workers);
    for id in 0..config.workers {
        let (tx, rx) = mpsc::unbounded_channel();
        senders.push(tx);
        let spec = WorkerSpec {
            id,
            first: WorkerUpdate {
                generation: generation.clone(),
                new_sockets: take_worker_sockets(&mut sockets, id),
                new_udp_sockets: take_worker_sockets(&mut udp_sockets, id),
            },
            updates: rx,
            sink: sink.clone(),
            shutdown: shutdown_rx.clone(),
            open_connections: open.clone(),
            metrics: metrics.clone(),
            grace: config.shutdown_timeout,
            clients: Arc::clone(&clients),
        };
        let handle = std::thread::Builder::new()
            .name(format!("tern-worker-{id}"))
            .spawn(move || worker::run(spec))
            .map_err(io("starting a worker thread"))?;
        threads.push(handle);
    }
    for l in &config.listeners {
        announce(l, &config, &generation);
    }
    let current: Current = Arc::new(Mutex::new(generation.clone()));
    drop(generation);

    let grace = control.block_on(async {
        if let Ok(g) = current.lock() {
            g.start_health_checks();
            g.start_resolvers(config.dns, &metrics);
        }
        acme.start_and_retain(&config);
        // The listeners of the control runtime, stopped when a new binary
        // takes over (it serves them on the same sockets).
        let mut control_listeners = Vec::new();
        for (socket, https_port) in plain_http {
            let addr = socket.local_addr().ok();
            let listener = tokio::net::TcpListener::from_std(socket).map_err(|source| {
                ServeError::Io {
                    context: "starting the plain-HTTP listener",
                    source,
                }
            })?;
            if let Some(addr) = addr {
                tracing::info!(
                    "plain HTTP on http://{addr}: ACME HTTP-01 answers, other requests redirected to https port {https_port}"
                );
            }
            control_listeners.push(tokio::spawn(crate::control::plain_http::serve(
                listener,
                https_port,
                acme.challenges().http.clone(),
            )));
        }
        if let (Some(addr), Some(socket)) = (config.admin, admin_socket) {
            let listener = tokio::net::TcpListener::from_std(socket)
                .map_err(|source| ServeError::Bind { addr, source })?;
            tracing::info!("admin listener on http://{addr}/metrics and /health");
            control_listeners.push(tokio::spawn(crate::control::admin::serve(
                listener,
                metrics.clone(),
                current.clone(),
                shutdown_rx.clone(),
            )));
        }
        let mut serving = true;
        if let Some(u) = upgrade.take() {
            let old = u.old_pid;
            match u.ready() {
                Ok(()) => {
                    tracing::info!(old, "upgrade: serving; the previous tern drains");
                    if let Some(path) = &config.upgrade_socket {
                        if let Err(e) = super::upgrade::serve(path, held.clone(), handed_tx) {
                            tracing::error!("{e}; the next upgrade needs a restart");
                        }
                    }
                }
                Err(e) => {
                    tracing::error!("{e}; shutting down, the previous tern keeps serving");
                    serving = false;
                }
            }
        }
        let mut state = ControlState {
            config,
            senders,
            current: current.clone(),
            demo,
            metrics: metrics.clone(),
            acme,
            held,
            handed_over: false,
        };
        if serving {
            control_loop(&mut state, signals, reload, handed_rx).await?;
        }
        for task in control_listeners {
            if state.handed_over {
                task.abort();
            }
        }
        Ok::<_, ServeError>(state.config.shutdown_timeout)
    })?;

    let _ = shutdown_tx.send(true);
    // Workers enforce the shutdown timeout themselves; this only bounds how
    // long the main thread waits for them beyond it. The control runtime
    // keeps running meanwhile, so the admin listener answers (/health: 503
    // draining) until the end.
    let deadline = std::time::Instant::now() + grace + Duration::from_secs(1);
    control.block_on(async {
        while threads.iter().any(|t| !t.is_finished()) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    for t in threads {
        // A worker that did not return by the deadline is left behind when
        // the process exits.
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

struct ControlState {
    config: Config,
    senders: Vec<mpsc::UnboundedSender<WorkerUpdate>>,
    current: Current,
    demo: Option<SocketAddr>,
    metrics: Arc<Metrics>,
    acme: AcmeRegistry,
    /// Copies of the listening sockets, for the next upgrade.
    held: Held,
    /// A new binary serves on this process's sockets now.
    handed_over: bool,
}

/// The signals tern acts on.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers; needs to run inside the control runtime.
    fn install() -> Result<Self, ServeError> {
        use tokio::signal::unix::{signal, SignalKind};
        let io = |source| ServeError::Io {
            context: "installing signal handlers",
            source,
        };
        Ok(Signals {
            term: signal(SignalKind::terminate()).map_err(io)?,
            int: signal(SignalKind::interrupt()).map_err(io)?,
            hup: signal(SignalKind::hangup()).map_err(io)?,
        })
    }
}

/// Waits for signals: reloads on SIGHUP, returns on SIGTERM/SIGINT or
/// once a new binary serves (`handed` yields its pid).
async fn control_loop(
    state: &mut ControlState,
    signals: Signals,
    reload: Option<Reloader>,
    mut handed: mpsc::UnboundedReceiver<u32>,
) -> Result<(), ServeError> {
    let Signals {
        mut term,
        mut int,
        mut hup,
    } = signals;
    let mut watched = WatchedFiles::of(&state.config);
    let mut poll = tokio::time::interval(FILE_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = poll.tick(), if !watched.is_empty() => {
                if watched.changed() {
                    tracing::info!("an OCSP staple file changed: reloading");
                    reload_now(state, &reload);
                    watched = WatchedFiles::of(&state.config);
                }
            }
            _ = term.recv() => {
                tracing::info!("SIGTERM received: shutting down, finishing in-flight requests (up to {:?})", state.config.shutdown_timeout);
                return Ok(());
            }
            _ = int.recv() => {
                tracing::info!("SIGINT received: shutting down, finishing in-flight requests (up to {:?})", state.config.shutdown_timeout);
                return Ok(());
            }
            Some(pid) = handed.recv() => {
                tracing::info!(new = pid, "upgrade: the new binary serves; draining: no new connections, finishing in-flight requests (up to {:?})", state.config.shutdown_timeout);
                state.handed_over = true;
                return Ok(());
            }
            _ = hup.recv() => {
                tracing::info!("SIGHUP received: reloading");
                reload_now(state, &reload);
                watched = WatchedFiles::of(&state.config);
            }
        }
    }
}

fn announce(l: &ListenerConfig, config: &Config, generation: &Generation) {
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
    let hsts = l
        .edge
        .response_headers
        .add
        .iter()
        .any(|(n, _)| &**n == "strict-transport-security");
    if l.listen.port() == 443 && l.mode == Mode::Http && !hsts {
        tracing::info!(
            "note: {} serves HTTPS on port 443 without HSTS: browsers will still try plain HTTP first, open to downgrade (set hsts, e.g. \"max-age=31536000\"; docs/edge-policy.md)",
            l.listen
        );
    }
    if let Some(h3) = &l.h3 {
        let advertised = h3
            .alt_svc
            .as_deref()
            .unwrap_or("not advertised (alt_svc_max_age = 0)");
        tracing::info!(
            "HTTP/3 (QUIC v1) on udp {}, max {} streams per connection, Retry above {} handshakes under way per worker; Alt-Svc: {advertised}",
            l.listen,
            h3.max_streams,
            h3.retry_above
        );
    }
    let shared = generation
        .listeners
        .iter()
        .find(|s| s.config.listen == l.listen);
    if let Some(upstream) = shared.and_then(|s| generation.upstreams.get(s.default_upstream)) {
        let servers: Vec<String> = upstream
            .config
            .servers
            .iter()
            .map(ToString::to_string)
            .collect();
        if upstream.config.name == "demo" {
            let url = format!("https://{}/", l.listen).replace("127.0.0.1", "localhost");
            tracing::info!(
                "no --backend given: answering from the built-in demo origin ({}). Try: curl -k {url}   \
                 Point tern at a real service with --backend HOST:PORT (and --cert/--key for your own certificate).",
                servers.join(", ")
            );
        } else {
            tracing::info!(
                "forwarding to {} (upstream {:?})",
                servers.join(", "),
                upstream.config.name
            );
        }
    }
    for c in &l.tls.certs {
        if c.source == "built-in self-signed" {
            tracing::warn!("no --cert given: using a fresh self-signed certificate for localhost (clients will not trust it)");
        }
    }
}
