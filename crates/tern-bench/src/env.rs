//! The machine side of the disclosure: CPU, crypto acceleration, load
//! average, firewall rules, and where the targets resolve to.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::process::Command;

use tern_tls::cpu::{cpu_model, CpuFeatures};

/// The load machine a run (or part of a merged run) used.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    /// Host name, when readable.
    pub hostname: String,
    /// CPU model from /proc/cpuinfo.
    pub cpu_model: String,
    /// Crypto-relevant CPU features present.
    pub cpu_features: Vec<String>,
    /// Whether AES-GCM runs in hardware (aws-lc picks its paths from CPUID).
    pub aes_gcm_accelerated: bool,
    /// Cores the OS offers this process.
    pub cores_available: usize,
    /// Worker threads the run used (one per core by default).
    pub cores_used: usize,
    /// 1/5/15-minute load average before the run.
    pub load_before: Option<[f64; 3]>,
    /// The same after the run.
    pub load_after: Option<[f64; 3]>,
    /// Firewall rules present, or `unknown`.
    pub firewall: String,
    /// CPU time (user + system) tern bench itself used during the run,
    /// seconds, at /proc's 10 ms resolution; `None` when unreadable.
    #[serde(default)]
    pub client_cpu_s: Option<f64>,
}

impl Machine {
    /// Describes this machine before a run with `workers` threads.
    pub fn detect(workers: usize) -> Machine {
        let features = CpuFeatures::detect();
        Machine {
            hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            cpu_model: cpu_model().unwrap_or_else(|| "unknown".into()),
            cpu_features: features.names().iter().map(|s| s.to_string()).collect(),
            aes_gcm_accelerated: features.aes_gcm_accelerated(),
            cores_available: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cores_used: workers,
            load_before: load_average(),
            load_after: None,
            firewall: firewall_rules(),
            client_cpu_s: None,
        }
    }
}

/// User + system CPU seconds of this process so far, from /proc/self/stat
/// (fields 14 and 15, in USER_HZ ticks, which Linux fixes at 100 per second
/// for /proc whatever the kernel's HZ).
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name may contain spaces; fields are counted after ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

/// The three load averages from /proc/loadavg.
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// Counts nftables and iptables rules where the tools can read them. A
/// firewall on the path (even conntrack alone) changes connection rates.
pub fn firewall_rules() -> String {
    let nft = Command::new("nft")
        .args(["list", "ruleset"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| count_nft_rules(&String::from_utf8_lossy(&o.stdout)));
    let ipt = Command::new("iptables-save")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.starts_with("-A "))
                .count()
        });
    let show = |name: &str, n: Option<usize>| match n {
        Some(n) => format!("{name} {n} rules"),
        None => format!("{name} unknown"),
    };
    format!("{}, {}", show("nftables", nft), show("iptables", ipt))
}

/// Rule lines of `nft list ruleset`: lines inside chains that are not
/// declarations.
fn count_nft_rules(ruleset: &str) -> usize {
    let mut in_chain = false;
    let mut count = 0;
    for line in ruleset.lines().map(str::trim) {
        if line.starts_with("chain ") {
            in_chain = true;
        } else if line == "}" {
            in_chain = false;
        } else if in_chain
            && !line.is_empty()
            && !line.starts_with("type ")
            && !line.starts_with("policy ")
            && !line.starts_with('#')
        {
            count += 1;
        }
    }
    count
}

/// One resolved address of a target.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Address {
    /// The socket address.
    pub addr: SocketAddr,
    /// 127.0.0.0/8 or ::1.
    pub loopback: bool,
    /// Assigned to an interface of this machine (the server shares our CPUs).
    pub same_machine: bool,
}

impl Address {
    /// Classifies `addr`.
    pub fn new(addr: SocketAddr) -> Address {
        Address {
            addr,
            loopback: addr.ip().is_loopback(),
            same_machine: is_local(addr.ip()),
        }
    }
}

/// Binding succeeds only for addresses of this machine's interfaces.
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nft_rules_not_declarations() {
        let ruleset = "table inet filter {\n\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n\t\ttcp dport 22 accept\n\t\tct state established accept\n\t}\n}\n";
        assert_eq!(count_nft_rules(ruleset), 2);
    }

    #[test]
    fn process_cpu_time_is_readable_and_grows() {
        let before = process_cpu_seconds().unwrap();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        // Spin until the kernel has charged us a few ticks (bounded: on a
        // loaded machine wall time and CPU time drift apart).
        while process_cpu_seconds().unwrap() < before + 0.03 {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "CPU time never grew"
            );
        }
    }

    #[test]
    fn loopback_is_same_machine() {
        let a = Address::new("127.0.0.1:443".parse().unwrap());
        assert!(a.loopback && a.same_machine);
        let b = Address::new("192.0.2.1:443".parse().unwrap());
        assert!(!b.loopback && !b.same_machine);
    }
}
