//! The control plane: start-up and signals ([`server`]), generations of
//! settings built on reload ([`generation`]), workers with their accept
//! loops ([`worker`]) and QUIC endpoints ([`quic`]), certificates kept
//! current over ACME ([`acme`]), the control plane's small HTTP listeners
//! ([`oneshot`]: the admin listener [`admin`] and the plain-HTTP listener
//! [`plain_http`]) and the built-in demo origin ([`demo`]).

pub(crate) mod acme;
pub(crate) mod admin;
pub(crate) mod demo;
mod fd_limit;
pub(crate) mod generation;
pub(crate) mod oneshot;
pub(crate) mod plain_http;
pub(crate) mod quic;
pub(crate) mod server;
pub(crate) mod worker;
