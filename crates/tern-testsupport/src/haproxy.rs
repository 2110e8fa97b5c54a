//! A real HAProxy (the Debian package) as a PROXY-protocol consumer: it
//! accepts a PROXY v1 or v2 header (`accept-proxy`) and answers every HTTP
//! request with the client address the header carried, so a test can check
//! what tern told its backend; and as a PROXY v2 sender whose SSL TLV is
//! the reference for tern's.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::tempdir::TempDir;
use crate::tern::free_addr;

/// Where Debian installs HAProxy.
pub const HAPROXY_BIN: &str = "/usr/sbin/haproxy";

/// Why HAProxy cannot run here, or `None` when it can.
pub fn unavailable() -> Option<String> {
    if Path::new(HAPROXY_BIN).exists() {
        None
    } else {
        Some(format!(
            "{HAPROXY_BIN} not found (apt-get install -y haproxy)"
        ))
    }
}

/// The `global` and `defaults` sections of every test config: HTTP mode,
/// client and server timeouts of `timeout_s` seconds.
fn preamble(timeout_s: u32) -> String {
    format!(
        "global\n\
         \x20   maxconn 256\n\
         defaults\n\
         \x20   mode http\n\
         \x20   timeout connect 5s\n\
         \x20   timeout client {timeout_s}s\n\
         \x20   timeout server {timeout_s}s\n"
    )
}

/// The chain then the key in one PEM file in `dir`, as HAProxy's `crt`
/// wants them.
fn combined_pem(dir: &TempDir, chain: &Path, key: &Path) -> std::path::PathBuf {
    let pem = dir.path().join("both.pem");
    let mut both = std::fs::read(chain).expect("read the chain");
    both.extend(std::fs::read(key).expect("read the key"));
    std::fs::write(&pem, both).expect("write the combined PEM");
    pem
}

/// A running HAProxy, killed on drop.
pub struct Haproxy {
    addr: SocketAddr,
    child: Child,
    _dir: TempDir,
}

impl Haproxy {
    /// HAProxy on a free loopback port with `bind ... accept-proxy`,
    /// answering every request `200` with body `SRC_IP SRC_PORT AUTHORITY\n`
    /// (`-` when the header carried no authority TLV).
    ///
    /// Panics with HAProxy's output when it does not start listening.
    pub fn start_address_echo() -> Haproxy {
        let addr = free_addr();
        let dir = TempDir::new("haproxy");
        let config = format!(
            "{}\
             frontend from_tern\n\
             \x20   bind {addr} accept-proxy\n\
             \x20   http-request return status 200 content-type text/plain \
             lf-string \"%[src] %[src_port] %[fc_pp_authority]\\n\"\n",
            preamble(10)
        );
        Haproxy::start_with(addr, dir, &config)
    }

    /// HAProxy on a free loopback port terminating TLS with the chain and
    /// key at `chain`/`key` and proxying HTTP to `backend` over reused
    /// keepalive connections (`http-reuse always`): a peer terminator with
    /// the defaults a benchmark would use.
    pub fn start_tls_proxy(chain: &Path, key: &Path, backend: SocketAddr) -> Haproxy {
        let addr = free_addr();
        let dir = TempDir::new("haproxy");
        let pem = combined_pem(&dir, chain, key);
        let config = format!(
            "{}\
             frontend tls\n\
             \x20   bind {addr} ssl crt {}\n\
             \x20   default_backend origin\n\
             backend origin\n\
             \x20   http-reuse always\n\
             \x20   server s1 {backend}\n",
            preamble(30),
            pem.display()
        );
        Haproxy::start_with(addr, dir, &config)
    }

    /// HAProxy on a free loopback port terminating TLS (TCP mode) with the
    /// chain and key at `chain`/`key`, requiring a client certificate from
    /// the CAs in `client_ca`, and passing the bytes to `backend` after a
    /// PROXY v2 header with its `PP2_TYPE_SSL` TLV and every sub-TLV it
    /// can send (version, CN, cipher, signature and key algorithms): the
    /// reference for the TLV tern sends in the same place.
    pub fn start_tls_sending_ssl_tlv(
        chain: &Path,
        key: &Path,
        client_ca: &Path,
        backend: SocketAddr,
    ) -> Haproxy {
        let addr = free_addr();
        let dir = TempDir::new("haproxy");
        let pem = combined_pem(&dir, chain, key);
        let config = format!(
            "{}\
             frontend tls\n\
             \x20   mode tcp\n\
             \x20   bind {addr} ssl crt {} ca-file {} verify required\n\
             \x20   default_backend pp\n\
             backend pp\n\
             \x20   mode tcp\n\
             \x20   server s1 {backend} send-proxy-v2-ssl-cn \
             proxy-v2-options ssl,cert-cn,ssl-cipher,cert-sig,cert-key\n",
            preamble(10),
            pem.display(),
            client_ca.display(),
        );
        Haproxy::start_with(addr, dir, &config)
    }

    /// Checks and starts HAProxy with `config` (kept in `dir`) and waits
    /// until it listens on `addr`. Panics with HAProxy's output when it
    /// refuses the config.
    fn start_with(addr: SocketAddr, dir: TempDir, config: &str) -> Haproxy {
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, config).expect("write haproxy.cfg");
        let check = Command::new(HAPROXY_BIN)
            .arg("-c")
            .arg("-f")
            .arg(&path)
            .output()
            .expect("run haproxy -c");
        assert!(
            check.status.success(),
            "haproxy refuses the test config:\n{}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        // -db: stay in the foreground, so the child is HAProxy itself and
        // dropping it stops it.
        let child = Command::new(HAPROXY_BIN)
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn haproxy");
        let mut haproxy = Haproxy {
            addr,
            child,
            _dir: dir,
        };
        haproxy.wait_listening(Duration::from_secs(10));
        haproxy
    }

    /// Where HAProxy listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn wait_listening(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("haproxy exited early with {status}");
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "haproxy is not listening on {} after {timeout:?}",
                self.addr
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
