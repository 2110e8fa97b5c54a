//! `tern bench`: a TLS load generator whose results can be trusted.
//!
//! It runs a workload plan (keepalive, new connection per request, or new
//! connection resuming the TLS session; HTTP/1.1, HTTP/2 or HTTP/3; closed loop or
//! open loop at a fixed rate) against one target, or several interleaved
//! (compare mode), and reports what was measured together with the
//! conditions that decide a TLS result: what was negotiated, how many
//! handshakes resumed, how connections were made, the machine it ran on.
//!
//! ```text
//! BenchConfig ─▶ run() ─▶ per target × round: workers (one thread and one
//!                          current-thread runtime each) ─▶ Stats (HDR)
//!                       ─▶ Report { disclosure, targets } ─▶ text | JSON | CSV | HTML
//! ```
//!
//! Not for: parsing command lines (the `tern` binary does), serving, or
//! anything other than loopback in its tests.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod clock;
pub mod config;
pub mod conn;
pub mod env;
pub mod error;
pub mod http1;
pub mod http2;
pub mod http3;
mod mismatch;
pub mod mix;
pub mod progress;
pub mod report;
pub mod run;
pub mod search;
pub mod server;
pub mod shard;
pub mod stages;
pub mod stats;
pub mod target;
pub mod threshold;
mod timeout;
pub mod tls;
pub mod warmup;
pub mod worker;

pub use config::{
    BenchConfig, ConnectionPlan, HttpVersion, LoadModel, ResumptionMode, StopCondition, TlsOptions,
    TlsVersion,
};
pub use error::{BenchError, RequestError};
pub use report::Report;
pub use run::run;
pub use target::Target;
