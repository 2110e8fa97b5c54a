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

/// Raises the soft open-file limit to the hard one and warns when the
/// configuration's connection limits need more than that.
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
    let needed = needed_descriptors(config);
    if needed > limit {
        tracing::warn!(
            "the open-file limit is {limit} but the connection limits need about {needed} \
             descriptors (two per proxied connection): past the limit new connections wait \
             in the listen backlog; raise it (ulimit -n, systemd LimitNOFILE=) or lower max_connections"
        );
    }
}

/// Two descriptors per allowed client connection (client and backend) and
/// the reserve.
fn needed_descriptors(config: &Config) -> u64 {
    let connections: u64 = config
        .listeners
        .iter()
        .map(|l| l.limits.max_connections as u64)
        .sum();
    connections.saturating_mul(2).saturating_add(RESERVED)
}
