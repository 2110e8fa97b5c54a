//! TLS for tern: certificates and SNI selection, the protocol/cipher/group
//! policy, session tickets and resumption, OCSP staples, the crypto provider
//! and the CPU features it relies on; and the TLS rules `tern serve`,
//! `tern bench` and `tern probe` share: suite and group names ([`iana`]),
//! OCSP staple reading and freshness ([`ocsp`]), the client verifier that
//! checks signatures but not trust ([`verify`]).
//!
//! This crate builds `rustls` configurations and explains them; it does no
//! I/O on sockets and parses no command lines. Not for: judging a server's
//! trust chain (clients here either use webpki roots or [`verify`]).
//!
//! ```text
//!  CertFiles ──certs::load──▶ LoadedCert ─┐
//!  names ──TlsPolicy::from_names──────────┼─▶ ServerTlsSettings ──build_server_config──▶ Arc<ServerConfig>
//!  TicketSource (rotating | keys file) ───┘        (SniResolver, TicketKeys inside)
//!  ServerConnection ──negotiated()──▶ Negotiated (version, cipher, group, ALPN, SNI, resumed)
//! ```
//!
//! The only crypto provider is aws-lc-rs, always passed explicitly.

#![forbid(unsafe_code, unused_must_use)]
#![warn(missing_docs)]

pub mod cert_names;
pub mod certs;
pub mod client_auth;
pub mod compression;
pub mod cpu;
mod error;
pub mod iana;
pub mod managed;
pub mod ocsp;
pub mod policy;
pub mod selfsigned;
pub mod server;
pub mod sni;
pub mod tickets;
pub mod verify;

pub use cert_names::CertAlgorithms;
pub use certs::{CertFiles, KeyKind, LoadedCert};
pub use client_auth::{ClientAuth, ClientAuthFiles, ClientAuthMode, ClientCert, ClientCertRefusal};
pub use error::TlsError;
pub use policy::TlsPolicy;
pub use server::{
    build_server_config, build_server_config_reusing, build_server_configs,
    build_server_configs_reusing, expiry_warning, initcwnd_warning, negotiated, policy_warning,
    provider_summary, quic_server_config, NameConfigs, NamedClientAuth, Negotiated, ServerConfigs,
    ServerTlsSettings, TicketSource, QUIC_TICKETS,
};
pub use sni::SniResolver;
pub use tickets::TicketKeys;
