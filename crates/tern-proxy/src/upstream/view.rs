//! A worker's view of its group's servers, and choosing one: the
//! balancing state built on the server set the worker last saw (rebuilt
//! when DNS or a reload changes the set), the pick of a server for a
//! request (round robin, least connections, hash ring or sticky cookie,
//! live servers only, slow start applied), and the sticky cookie's
//! `Set-Cookie`.

use std::sync::Arc;

use super::affinity::{self, Ring, Target};
use super::balance::{self, SmoothWrr};
use super::shared::{AdminState, Server, ServerSet};
use super::{outlier, sessions, Backends, Tries};
use crate::config::{BackendAddr, Balance};

/// The server set this worker last saw and the balancing state built on
/// it. Rebuilt when the group's set has a newer generation (DNS changed
/// it), which a pick notices with one atomic load.
#[derive(Debug)]
pub(super) struct View {
    pub(super) set: Arc<ServerSet>,
    wrr: SmoothWrr,
    /// `balance = "hash"`: the ring of `set` (empty otherwise).
    ring: Ring,
    /// `balance = "sticky_cookie"`: per server of `set`, its cookie's
    /// value and its `Set-Cookie` field value (empty otherwise).
    cookies: Vec<(u64, Box<str>)>,
    /// Weights in slow start (scratch, reused).
    ramped: Vec<u32>,
}

impl View {
    /// The balancing state of `set` for a group with `config`.
    pub(super) fn new(set: Arc<ServerSet>, config: &crate::config::UpstreamConfig) -> View {
        let ring = match config.balance {
            Balance::Hash => {
                let servers: Vec<_> = set.servers.iter().map(|s| (s.addr, s.weight)).collect();
                Ring::new(&servers)
            }
            _ => Ring::default(),
        };
        let cookies = match config.balance {
            Balance::StickyCookie => set
                .servers
                .iter()
                .map(|s| {
                    (
                        affinity::cookie_value(s.addr),
                        affinity::set_cookie(&config.affinity.sticky_cookie, s.addr),
                    )
                })
                .collect(),
            _ => Vec::new(),
        };
        View {
            wrr: SmoothWrr::new(set.servers.len()),
            ramped: Vec::with_capacity(set.servers.len()),
            ring,
            cookies,
            set,
        }
    }
}

/// A server chosen for one request: its state, and its index in the
/// worker's view at the time (a hint: the view may change under an await).
pub(super) struct Picked {
    pub(super) index: usize,
    pub(super) server: Arc<Server>,
}

impl Backends {
    /// The `Set-Cookie` value to send with a response from `server`, when
    /// the group is sticky and the request's cookie did not name it.
    /// Inline, for the groups that are not sticky (most): the call and
    /// the view's borrow out of line were 27 instructions and 5
    /// simulated I1 misses of every response (callgrind).
    #[inline]
    pub(crate) fn set_cookie(&self, tries: &Tries, server: BackendAddr) -> Option<String> {
        if !matches!(self.shared.config.balance, Balance::StickyCookie) {
            return None;
        }
        self.sticky_set_cookie(tries, server)
    }

    /// [`Backends::set_cookie`] for a sticky group.
    #[inline(never)]
    fn sticky_set_cookie(&self, tries: &Tries, server: BackendAddr) -> Option<String> {
        let view = self.view.borrow();
        if view.cookies.is_empty() {
            return None;
        }
        let index = view.set.servers.iter().position(|s| s.addr == server)?;
        let (value, field) = view.cookies.get(index)?;
        match tries.target {
            Target::Sticky(Some(had)) if had == *value => None,
            _ => Some(field.to_string()),
        }
    }

    /// The next live server the policy chooses for `tries` among those
    /// `allowed` that the request has not tried.
    pub(super) fn pick(&self, tries: &Tries, allowed: impl Fn(&Server) -> bool) -> Option<Picked> {
        self.refresh();
        let config = &self.shared.config;
        let mut view = self.view.borrow_mut();
        let View {
            set,
            wrr,
            ring,
            cookies,
            ramped,
        } = &mut *view;
        let servers = &set.servers;
        let eligible = |i: usize| {
            servers.get(i).is_some_and(|s| {
                allowed(s) && s.is_live() && (tries.tried.is_empty() || !tries.tried(s.addr))
            })
        };
        // One server (a terminator in front of one application): round
        // robin and least connections both answer it when it is eligible,
        // whatever the weights (a pick of one leaves the round robin's
        // scores as they were). Not hashing or cookies: their picks are
        // answered by their own rules.
        if servers.len() == 1 && matches!(config.balance, Balance::RoundRobin | Balance::LeastConn)
        {
            return eligible(0).then(|| Picked {
                index: 0,
                server: servers[0].clone(),
            });
        }
        let weights: &[u32] = if outlier::ramped_weights(set, config.outliers.slow_start, ramped) {
            ramped
        } else {
            &set.weights
        };
        let in_flight = |i: usize| servers[i].in_flight();
        let index = match (config.balance, tries.target) {
            (Balance::Hash, Target::Hash(h)) => affinity::pick(
                ring,
                h,
                &set.weights,
                config.affinity.balance_factor,
                in_flight,
                eligible,
            ),
            (Balance::StickyCookie, Target::Sticky(Some(v))) => {
                match cookies.iter().position(|c| c.0 == v) {
                    // Pinned: a draining server still takes it.
                    Some(i) if eligible(i) || pinned_to_draining(&servers[i], &allowed, tries) => {
                        Some(i)
                    }
                    _ => wrr.pick(weights, eligible),
                }
            }
            (Balance::LeastConn, _) => balance::least_conn(wrr, weights, in_flight, eligible),
            _ => wrr.pick(weights, eligible),
        }?;
        Some(Picked {
            index,
            server: servers[index].clone(),
        })
    }

    /// Brings this worker's view up to the group's current set: idle
    /// connections and sessions follow their server to its new index
    /// (those of removed servers are closed; requests running on them
    /// finish), balancing state restarts.
    ///
    /// Inline, the check alone: it runs twice a request (the pick and
    /// the connection's return to the pool), and out of line its return
    /// was laid out past the rare reload's code (56 instructions and 6
    /// simulated I1 misses a keepalive request, callgrind).
    #[inline]
    pub(super) fn refresh(&self) {
        // Generations only grow; the set is stored before its generation,
        // so a newer generation means a newer set is there to load.
        if self.shared.generation() <= self.view.borrow().set.generation {
            return;
        }
        self.load_view();
    }

    /// [`Backends::refresh`] once the group's set has changed.
    #[inline(never)]
    fn load_view(&self) {
        let current = self.shared.servers();
        let set = arc_swap::Guard::into_inner(current);
        let mut view = self.view.borrow_mut();
        let moves: Vec<Option<usize>> = view
            .set
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| set.index_of(s, i))
            .collect();
        self.pool.remap(&moves, set.servers.len());
        sessions::remap(&self.sessions, &moves, set.servers.len());
        *view = View::new(set, &self.shared.config);
    }

    /// The index of `server` in this worker's current view, if it is
    /// still in the group (`hint`: its index when it was picked).
    pub(super) fn index_of(&self, server: &Arc<Server>, hint: usize) -> Option<usize> {
        self.view.borrow().set.index_of(server, hint)
    }
}

/// May a request whose sticky cookie names `server` go to it although it
/// is not live? Yes when the operator is draining it (haproxy's drain:
/// sessions already there finish there) and it is otherwise fine.
fn pinned_to_draining(server: &Server, allowed: impl Fn(&Server) -> bool, tries: &Tries) -> bool {
    server.admin() == AdminState::Draining
        && server.is_up()
        && !server.is_ejected()
        && allowed(server)
        && !tries.tried(server.addr)
}
