//! Client CPU per request of the tern-bench engine alone, without the
//! `tern` binary: `cargo run --release -p tern-bench --example client_cost --
//! URL h1|h2|new N [no-timeout]`. bench/client-cost.sh compares the real binary with
//! wrk, h2load and hey; this is for quick iterations on the engine.

use tern_bench::{BenchConfig, ConnectionPlan, HttpVersion, StopCondition, Target};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(url), Some(mode), Some(n)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("usage: client_cost URL h1|h2|new N");
        std::process::exit(2);
    };
    let target = match Target::parse(url) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut config = BenchConfig::new(vec![target]);
    config.workers = 1;
    config.connections = 50;
    config.stop = StopCondition::Requests(n.parse().unwrap_or(100_000));
    config.tls.groups = vec!["X25519".into()];
    if args.get(4).is_some_and(|a| a == "no-timeout") {
        config.timeout = None;
    }
    match mode.as_str() {
        "h2" => {
            config.http = HttpVersion::Http2;
            config.streams_per_connection = 10;
        }
        "new" => config.plan = ConnectionPlan::NewConnection,
        _ => {}
    }
    match tern_bench::run(config) {
        Ok(report) => {
            let s = &report.targets[0].summary;
            let cpu = report.machines[0].client_cpu_s.unwrap_or(0.0);
            println!(
                "{mode}: {} requests, {} failed, {:.0} req/s, {:.2} µs CPU per request",
                s.completed,
                s.failed,
                s.rps,
                cpu * 1e6 / s.completed.max(1) as f64
            );
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
