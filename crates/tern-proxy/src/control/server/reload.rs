//! Reloads: on SIGHUP or when a watched file changes, the new configuration
//! is built into a new generation and handed to every worker; nothing changes
//! unless all of it succeeds, and what only a restart can change is said so.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::{announce, ControlState, Reloader};
use crate::config::Config;
use crate::control::generation::Generation;
use crate::control::inherit::Kind;
use crate::control::sockets::{bind, bind_udp, take_worker_sockets};
use crate::control::worker::WorkerUpdate;
use crate::error::ServeError;

/// How often staple files are checked for changes.
pub(super) const FILE_POLL: Duration = Duration::from_secs(5);

pub(super) fn reload_now(state: &mut ControlState, reload: &Option<Reloader>) {
    match reload {
        Some(load) => {
            let outcome = load()
                .map_err(ServeError::from)
                .and_then(|new| apply_reload(state, new));
            state.metrics.reload(outcome.is_ok());
            match outcome {
                Ok(id) => tracing::info!(generation = id, "reloaded"),
                Err(e) => tracing::error!("reload refused, keeping the running configuration: {e}"),
            }
        }
        None => tracing::warn!("reload ignored: nothing to reload"),
    }
}

/// OCSP staple files and their last modification times: responders
/// refresh staples every few hours, and a new one must be served without
/// an operator sending SIGHUP.
pub(super) struct WatchedFiles(Vec<(std::path::PathBuf, Option<std::time::SystemTime>)>);

impl WatchedFiles {
    pub(super) fn of(config: &Config) -> Self {
        let files = config
            .listeners
            .iter()
            .flat_map(|l| l.ocsp_files.iter().cloned())
            .map(|p| {
                let t = modified(&p);
                (p, t)
            })
            .collect();
        WatchedFiles(files)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when any file's modification time moved since the last look.
    pub(super) fn changed(&mut self) -> bool {
        let mut any = false;
        for (path, seen) in &mut self.0 {
            let now = modified(path);
            if now != *seen {
                *seen = now;
                any = true;
            }
        }
        any
    }
}

fn modified(path: &std::path::Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Builds the new generation, opens sockets for new addresses and hands
/// both to the workers. Nothing changes unless all of it succeeds.
fn apply_reload(state: &mut ControlState, new: Config) -> Result<u64, ServeError> {
    if new.workers != state.config.workers
        || new.accept != state.config.accept
        || new.shutdown_timeout != state.config.shutdown_timeout
        || new.admin != state.config.admin
        || new.log_format != state.config.log_format
        || new.access_log != state.config.access_log
    {
        tracing::warn!(
            "workers, accept, shutdown_timeout, admin, log_format and access_log change only on restart; \
             the running values stay"
        );
    }
    let previous = state
        .current
        .lock()
        .map(|g| g.clone())
        .map_err(|_| ServeError::Io {
            context: "reloading",
            source: std::io::Error::other("generation lock poisoned"),
        })?;
    let plain_before: Vec<_> = state
        .config
        .listeners
        .iter()
        .map(|l| l.http_listen)
        .collect();
    let plain_after: Vec<_> = new.listeners.iter().map(|l| l.http_listen).collect();
    if plain_before != plain_after {
        tracing::warn!(
            "http_listen changes only on restart; the running plain-HTTP listeners stay"
        );
    }
    let generation = Arc::new(Generation::build(
        &new,
        Some(&previous),
        &mut state.demo,
        &mut state.acme,
    )?);
    state.acme.start_and_retain(&new);
    let old_addrs: HashSet<SocketAddr> =
        previous.listeners.iter().map(|l| l.config.listen).collect();
    let old_quic: HashSet<SocketAddr> = previous
        .listeners
        .iter()
        .filter(|l| l.quic.is_some())
        .map(|l| l.config.listen)
        .collect();
    let mut sockets = HashMap::new();
    let mut udp_sockets = HashMap::new();
    for l in &new.listeners {
        if !old_addrs.contains(&l.listen) {
            sockets.insert(
                l.listen,
                bind(l.listen, state.config.accept, state.config.workers)?,
            );
        }
        if l.h3.is_some() && !old_quic.contains(&l.listen) {
            udp_sockets.insert(l.listen, bind_udp(l.listen, state.config.workers)?);
        }
    }
    // What the next upgrade hands over: the new addresses, not the gone.
    let plain: HashSet<SocketAddr> = state
        .config
        .listeners
        .iter()
        .filter_map(|l| l.http_listen)
        .chain(state.config.admin)
        .collect();
    state.held.retain(|kind, addr| {
        plain.contains(&addr)
            || new
                .listeners
                .iter()
                .any(|l| l.listen == addr && (kind == Kind::Tcp || l.h3.is_some()))
    });
    for (addr, list) in &sockets {
        state.held.add_all(Kind::Tcp, *addr, list);
    }
    for (addr, list) in &udp_sockets {
        state.held.add_all(Kind::Udp, *addr, list);
    }
    generation.start_health_checks();
    generation.start_resolvers(new.dns, &state.metrics);
    for (id, tx) in state.senders.iter().enumerate() {
        let _ = tx.send(WorkerUpdate {
            generation: generation.clone(),
            new_sockets: take_worker_sockets(&mut sockets, id),
            new_udp_sockets: take_worker_sockets(&mut udp_sockets, id),
        });
    }
    let _ = previous.retired.send(true);
    for l in &new.listeners {
        if !old_addrs.contains(&l.listen) {
            announce(l, &new, &generation);
        }
    }
    if let Ok(mut g) = state.current.lock() {
        *g = generation.clone();
    }
    let old = &state.config;
    state.config = Config {
        workers: old.workers,
        accept: old.accept,
        shutdown_timeout: old.shutdown_timeout,
        admin: old.admin,
        log_format: old.log_format,
        access_log: old.access_log.clone(),
        ..new
    };
    Ok(generation.id)
}
