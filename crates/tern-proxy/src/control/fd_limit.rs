//! The open-file limit: raised to its hard ceiling at start, and checked
//! against what the configured connection limits need.
//!
//! Each proxied connection holds two descriptors (client and backend), so
//! the common soft limit of 1024 caps a terminator near 500 connections
//! whatever `max_connections` says. Go's runtime and nginx's
//! `worker_rlimit_nofile` raise it for the same reason. When the limit is
//! still reached, accept(2) fails with EMFILE: the accept loop backs off and
//! counts it (`tern_accept_errors_total`), existing connections go on, and
//! the waiting ones are accepted once descriptors free up.

use crate::config::Config;

/// Descriptors tern needs besides connections: listeners, the access log,
/// epoll and eventfds per worker, health checks.
const RESERVED: u64 = 64;

/// Raises the soft open-file limit to the hard one and says when the
/// configuration's connection limits need more than that: a warning when
/// even the client connections do not fit, a note when only the worst case
/// of a backend connection for each does not.
pub(super) fn raise_for(config: &Config) {
    let (soft, hard) = match rlimit::getrlimit(rlimit::Resource::NOFILE) {
        Ok(limits) => limits,
        Err(e) => {
            tracing::warn!("cannot read the open-file limit: {e}");
            return;
        }
    };
    let limit = if soft < hard {
        match rlimit::setrlimit(rlimit::Resource::NOFILE, hard, hard) {
            Ok(()) => {
                tracing::debug!("open-file limit raised from {soft} to {hard}");
                hard
            }
            Err(e) => {
                tracing::warn!("cannot raise the open-file limit from {soft} to {hard}: {e}");
                soft
            }
        }
    } else {
        soft
    };
    let clients = max_clients(config);
    match shortfall(limit, clients) {
        Shortfall::None => {}
        Shortfall::Backends => tracing::info!(
            "the open-file limit ({limit}) holds max_connections ({clients}) client connections \
             but not a backend connection for each at once (two descriptors per proxied \
             connection); raise it (ulimit -n, systemd LimitNOFILE=) if they can all be busy"
        ),
        Shortfall::Clients => tracing::warn!(
            "the open-file limit ({limit}) is below max_connections ({clients}): past it new \
             connections wait in the listen backlog; raise it (ulimit -n, systemd \
             LimitNOFILE=) or lower max_connections"
        ),
    }
}

/// What an open-file limit cannot hold.
#[derive(Debug, PartialEq, Eq)]
enum Shortfall {
    /// Every allowed client connection with a backend connection of its own.
    None,
    /// The clients, but not a backend connection for each at once (only
    /// requests in flight hold one, so this is the worst case).
    Backends,
    /// Not even the allowed client connections.
    Clients,
}

fn shortfall(limit: u64, clients: u64) -> Shortfall {
    if limit < clients.saturating_add(RESERVED) {
        Shortfall::Clients
    } else if limit < clients.saturating_mul(2).saturating_add(RESERVED) {
        Shortfall::Backends
    } else {
        Shortfall::None
    }
}

/// Client connections the listeners allow at once, together.
fn max_clients(config: &Config) -> u64 {
    config
        .listeners
        .iter()
        .map(|l| l.limits.max_connections as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortfall_says_what_the_limit_cannot_hold() {
        assert_eq!(shortfall(1024, 10_000), Shortfall::Clients);
        assert_eq!(shortfall(20_000, 10_000), Shortfall::Backends);
        assert_eq!(shortfall(1_048_576, 10_000), Shortfall::None);
        assert_eq!(shortfall(10_063, 10_000), Shortfall::Clients);
        assert_eq!(shortfall(20_064, 10_000), Shortfall::None);
    }
}
