//! The control plane: start-up and signals ([`server`]), generations of
//! settings built on reload ([`generation`]), workers with their accept
//! loops ([`worker`]) and QUIC endpoints ([`quic`]), the listening sockets
//! it opens ([`sockets`]), certificates kept
//! current over ACME ([`acme`]), listening sockets handed over by a
//! previous binary or systemd ([`inherit`], [`upgrade`]), the switch to an
//! unprivileged user ([`privilege`]), the control plane's small HTTP listeners
//! ([`oneshot`]: the admin listener [`admin`] and the plain-HTTP listener
//! [`plain_http`]) and the built-in demo origin ([`demo`]).

pub(crate) mod acme;
pub(crate) mod admin;
mod admin_servers;
pub(crate) mod demo;
mod fd_limit;
pub(crate) mod generation;
mod inherit;
pub(crate) mod oneshot;
pub(crate) mod plain_http;
mod privilege;
pub(crate) mod quic;
pub(crate) mod server;
mod sockets;
mod upgrade;
pub(crate) mod worker;
