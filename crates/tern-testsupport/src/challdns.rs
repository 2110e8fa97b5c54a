//! A DNS server a test can change on the fly: `pebble-challtestsrv`
//! (Let's Encrypt's, installed by `.ci/run` with Pebble) with only its DNS
//! server and its HTTP management API on, on loopback ports chosen per
//! test. Names it was not told about get no answer records (no default
//! address); its records carry TTL 0.

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::tempdir::TempDir;
use crate::tern::{free_addr, wait_until};

/// A running `pebble-challtestsrv`, killed on drop.
pub struct ChallDns {
    child: Child,
    /// Where it answers DNS (UDP and TCP): give it to tern as `resolver`.
    pub dns: SocketAddr,
    management: SocketAddr,
    log: PathBuf,
    _dir: TempDir,
}

impl ChallDns {
    /// Starts it and waits until it accepts; `None` (with a "skipped"
    /// note) when it is not installed outside CI, as for Pebble.
    pub fn start() -> Option<ChallDns> {
        let (_, binary) = crate::pebble::require()?;
        let dir = TempDir::new("challdns");
        let log = dir.path().join("challtestsrv.log");
        let log_file = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .expect("challtestsrv log file")
        };
        let dns = free_addr();
        let management = free_addr();
        let child = Command::new(binary)
            .args(["-dnsserver", &dns.to_string()])
            .args(["-management", &management.to_string()])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", ""])
            .args(["-defaultIPv4", "", "-defaultIPv6", ""])
            .stdin(Stdio::null())
            .stdout(log_file())
            .stderr(log_file())
            .spawn()
            .expect("start pebble-challtestsrv");
        let started = ChallDns {
            child,
            dns,
            management,
            log,
            _dir: dir,
        };
        for addr in [dns, management] {
            wait_until(
                &format!("pebble-challtestsrv listening on {addr}"),
                Duration::from_secs(20),
                || TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok(),
            );
        }
        Some(started)
    }

    /// Makes `addresses` the A records of `host` (none: it has no A record).
    pub fn set_a(&self, host: &str, addresses: &[&str]) {
        self.set_records("a", host, addresses);
    }

    /// Makes `addresses` the AAAA records of `host` (none: no AAAA record).
    pub fn set_aaaa(&self, host: &str, addresses: &[&str]) {
        self.set_records("aaaa", host, addresses);
    }

    fn set_records(&self, kind: &str, host: &str, addresses: &[&str]) {
        self.post(
            &format!("clear-{kind}"),
            &serde_json::json!({ "host": host }),
        );
        if !addresses.is_empty() {
            self.post(
                &format!("add-{kind}"),
                &serde_json::json!({ "host": host, "addresses": addresses }),
            );
        }
    }

    /// Stops the server: queries go unanswered (a resolver outage).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Its output so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn post(&self, path: &str, body: &serde_json::Value) {
        let url = format!("http://{}/{path}", self.management);
        let out = crate::tools::curl(&["-sS", "--fail", "-d", &body.to_string(), &url]);
        assert!(out.success(), "POST {url}: {}\n{}", out.all(), self.log());
    }
}

impl Drop for ChallDns {
    fn drop(&mut self) {
        self.stop();
    }
}
