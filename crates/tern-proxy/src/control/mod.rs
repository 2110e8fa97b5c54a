//! The control plane: start-up and signals ([`server`]), generations of
//! settings built on reload ([`generation`]), workers with their accept
//! loops ([`worker`]) and QUIC endpoints ([`quic`]), the admin listener ([`admin`]) and the built-in demo
//! origin ([`demo`]).

pub(crate) mod admin;
pub(crate) mod demo;
mod fd_limit;
pub(crate) mod generation;
pub(crate) mod quic;
pub(crate) mod server;
pub(crate) mod worker;
