//! TLS for tern: certificates and SNI selection, the protocol/cipher/group
//! policy, session tickets and resumption, OCSP staples, the crypto provider
//! and the CPU features it relies on.
//!
//! This crate builds `rustls` configurations and explains them; it does no
//! I/O on sockets and parses no command lines.

#![forbid(unsafe_code)]

pub mod cpu;
