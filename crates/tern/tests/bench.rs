//! `tern bench` end to end: the real binary against real TLS servers on
//! loopback (tern-testsupport's `bench_target`, which counts connections and
//! resumed handshakes on the server side), checking that every disclosed
//! value is true.

#[path = "bench/support.rs"]
mod support;

#[path = "bench/disclosure.rs"]
mod disclosure;

#[path = "bench/plans.rs"]
mod plans;

#[path = "bench/reports.rs"]
mod reports;

#[path = "bench/errors.rs"]
mod errors;

#[path = "bench/h3.rs"]
mod h3;

#[path = "bench/hey.rs"]
mod hey;

#[path = "bench/serve.rs"]
mod serve;

#[path = "bench/server_cpu.rs"]
mod server_cpu;

#[path = "bench/truths.rs"]
mod truths;

#[path = "bench/gates.rs"]
mod gates;

#[path = "bench/scale.rs"]
mod scale;

#[path = "bench/shards.rs"]
mod shards;
