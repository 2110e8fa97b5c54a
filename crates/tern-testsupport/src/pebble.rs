//! Pebble, Let's Encrypt's test ACME CA, with `pebble-challtestsrv` as its
//! DNS server (every name resolves to 127.0.0.1, no AAAA), on loopback
//! ports chosen per test. Installed by `.ci/run` with `go install`.
//!
//! Pebble validates challenges on fixed ports from its configuration
//! (`tlsPort` for TLS-ALPN-01, `httpPort` for HTTP-01): the test picks
//! tern's ports first and gives them to [`Pebble::start`].

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::certs::{KeyKind, TestCa};
use crate::tern::free_addr;

/// How a Pebble instance behaves.
#[derive(Clone, Debug)]
pub struct PebbleOptions {
    /// Port Pebble connects to for TLS-ALPN-01 (tern's TLS listener).
    pub tls_port: u16,
    /// Port Pebble connects to for HTTP-01 (tern's http_listen).
    pub http_port: u16,
    /// Lifetime of issued certificates, in seconds.
    pub validity_secs: u64,
    /// Share of nonces Pebble rejects as bad (`PEBBLE_WFE_NONCEREJECT`);
    /// Pebble's own default is 5.
    pub nonce_reject_percent: u8,
    /// External Account Binding required, with this (key id, base64url
    /// HMAC key) accepted.
    pub eab: Option<(String, String)>,
}

impl PebbleOptions {
    /// Defaults for a TLS listener on `tls_port`: 1-hour certificates,
    /// Pebble's default 5 % of nonces rejected.
    pub fn tls_alpn(tls_port: u16) -> Self {
        PebbleOptions {
            tls_port,
            http_port: free_addr().port(),
            validity_secs: 3600,
            nonce_reject_percent: 5,
            eab: None,
        }
    }
}

/// A running Pebble and challenge DNS server, killed on drop.
pub struct Pebble {
    pebble: Child,
    dns: Child,
    /// The ACME directory URL.
    pub directory: String,
    /// The root Pebble's own HTTPS certificate chains to (for `--acme-ca-root`).
    pub wfe_root: PathBuf,
    management: SocketAddr,
    _wfe_ca: TestCa,
    log: PathBuf,
}

/// The two binaries: `$PEBBLE` and `$CHALLTESTSRV`, else on PATH or in
/// Go's bin directory.
pub fn binaries() -> Option<(PathBuf, PathBuf)> {
    let find = |env: &str, name: &str| -> Option<PathBuf> {
        if let Some(p) = std::env::var_os(env) {
            return Some(PathBuf::from(p));
        }
        let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        if let Some(gopath) = std::env::var_os("GOPATH") {
            dirs.push(PathBuf::from(gopath).join("bin"));
        }
        if let Some(home) = std::env::var_os("HOME") {
            dirs.push(PathBuf::from(home).join("go/bin"));
        }
        dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
    };
    Some((
        find("PEBBLE", "pebble")?,
        find("CHALLTESTSRV", "pebble-challtestsrv")?,
    ))
}

/// The binaries, or None with a "skipped" note; under CI (`CI` set) a
/// missing Pebble fails the test instead, so CI cannot skip silently.
pub fn require() -> Option<(PathBuf, PathBuf)> {
    match binaries() {
        Some(b) => Some(b),
        None if std::env::var_os("CI").is_some() => {
            panic!("pebble and pebble-challtestsrv are not installed (.ci/run installs them with go install)")
        }
        None => {
            eprintln!("skipped: pebble is not installed (go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.1 and pebble-challtestsrv)");
            None
        }
    }
}

impl Pebble {
    /// Starts the DNS server and Pebble and waits until both accept.
    ///
    /// Their ports are probed free and released before they bind them
    /// ([`free_addr`]: below the kernel's ephemeral range, so no outgoing
    /// connection or `bind(:0)` takes one), yet another process can still
    /// start listening on one in between: the server then exits at once.
    /// That is seen and the start tried again on fresh ports, up to three
    /// times; any other failure panics with their log.
    pub fn start(binaries: &(PathBuf, PathBuf), options: &PebbleOptions) -> Pebble {
        let mut exits = Vec::new();
        for _ in 0..3 {
            match Pebble::try_start(binaries, options) {
                Ok(started) => return started,
                Err(log) => exits.push(log),
            }
        }
        panic!(
            "pebble or pebble-challtestsrv exited at start three times; their logs:\n{}",
            exits.join("\n---\n")
        );
    }

    /// One start on fresh ports: the running pair once every port accepts;
    /// `Err(log)` when one of them exited first. Panics (with the log) when
    /// they neither listen nor exit within 20 s.
    fn try_start(binaries: &(PathBuf, PathBuf), options: &PebbleOptions) -> Result<Pebble, String> {
        let mut wfe_ca = TestCa::new();
        let wfe = wfe_ca.leaf(&["127.0.0.1", "localhost"], KeyKind::EcdsaP256);
        let listen = free_addr();
        let management = free_addr();
        let dns = free_addr();
        let dns_management = free_addr();
        let config = serde_json::json!({
            "pebble": {
                "listenAddress": listen.to_string(),
                "managementListenAddress": management.to_string(),
                "certificate": wfe.chain,
                "privateKey": wfe.key,
                "httpPort": options.http_port,
                "tlsPort": options.tls_port,
                "ocspResponderURL": "",
                "externalAccountBindingRequired": options.eab.is_some(),
                "externalAccountMACKeys": options
                    .eab
                    .iter()
                    .map(|(kid, key)| (kid.clone(), serde_json::Value::from(key.clone())))
                    .collect::<serde_json::Map<_, _>>(),
                "retryAfter": { "authz": 1, "order": 1 },
                "profiles": {
                    "default": {
                        "description": "tern tests",
                        "validityPeriod": options.validity_secs,
                    }
                }
            }
        });
        let config_file = wfe_ca.dir().join("pebble.json");
        std::fs::write(&config_file, config.to_string()).expect("write pebble.json");
        let log = wfe_ca.dir().join("pebble.log");
        let log_file = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .expect("pebble log file")
        };
        let dns_child = Command::new(&binaries.1)
            .args(["-dnsserver", &dns.to_string()])
            .args(["-management", &dns_management.to_string()])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", ""])
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .stdin(Stdio::null())
            .stdout(log_file())
            .stderr(log_file())
            .spawn()
            .expect("start pebble-challtestsrv");
        let pebble = Command::new(&binaries.0)
            .args(["-config", &config_file.display().to_string()])
            .args(["-dnsserver", &dns.to_string()])
            // Validate at once instead of after a random 0-15 s.
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env(
                "PEBBLE_WFE_NONCEREJECT",
                options.nonce_reject_percent.to_string(),
            )
            .stdin(Stdio::null())
            .stdout(log_file())
            .stderr(log_file())
            .spawn()
            .expect("start pebble");
        let mut started = Pebble {
            pebble,
            dns: dns_child,
            directory: format!("https://{listen}/dir"),
            wfe_root: wfe_ca.ca_file().to_path_buf(),
            management,
            _wfe_ca: wfe_ca,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        for addr in [listen, management, dns] {
            while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
                let exited = [&mut started.pebble, &mut started.dns]
                    .into_iter()
                    .any(|child| !matches!(child.try_wait(), Ok(None)));
                if exited {
                    started.stop();
                    return Err(started.log());
                }
                assert!(
                    Instant::now() < deadline,
                    "timed out after 20s waiting for pebble listening on {addr}; its log:\n{}",
                    started.log()
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Ok(started)
    }

    /// Stops Pebble and its DNS server (the CA becomes unreachable); the
    /// files, `wfe_root` among them, stay until drop.
    pub fn stop(&mut self) {
        for child in [&mut self.pebble, &mut self.dns] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Pebble's output so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The root of the certificates Pebble issues (made fresh at each
    /// start), PEM, from its management interface.
    pub fn issuer_root_pem(&self) -> String {
        let url = format!("https://{}/roots/0", self.management);
        let out =
            crate::tools::curl(&["-sS", "--fail", "--cacert", path_str(&self.wfe_root), &url]);
        assert!(out.success(), "GET {url}: {}", out.all());
        let pem = out.stdout.clone();
        assert!(pem.contains("BEGIN CERTIFICATE"), "{pem}");
        pem
    }

    /// The `tern serve` flags that point at this CA with a state directory.
    pub fn tern_args(&self, state_dir: &Path) -> Vec<String> {
        vec![
            "--acme-directory".into(),
            self.directory.clone(),
            "--acme-ca-root".into(),
            self.wfe_root.display().to_string(),
            "--acme-state-dir".into(),
            state_dir.display().to_string(),
            "--acme-retry".into(),
            "1s".into(),
        ]
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

impl Drop for Pebble {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a TLS-ALPN-01 validator sees: connects to `addr` offering only
/// ALPN `acme-tls/1` with SNI `name` and returns the SHA-256 digest in the
/// served certificate's acmeIdentifier extension (RFC 8737), if the
/// handshake succeeds and the certificate has one for `name`.
pub fn tls_alpn_answer(addr: SocketAddr, name: &str) -> Option<Vec<u8>> {
    use rustls_pki_types::pem::PemObject;
    let out = crate::tools::s_client(addr, &["-alpn", "acme-tls/1", "-servername", name], b"");
    if !out.stdout.contains("ALPN protocol: acme-tls/1") {
        return None;
    }
    let der = rustls_pki_types::CertificateDer::from_pem_slice(out.stdout.as_bytes()).ok()?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
    let names_ok = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .is_some_and(|san| {
            san.value.general_names.iter().any(
                |n| matches!(n, x509_parser::extensions::GeneralName::DNSName(d) if *d == name),
            )
        });
    let ext = cert
        .extensions()
        .iter()
        .find(|e| e.oid.to_id_string() == "1.3.6.1.5.5.7.1.31" && e.critical)?;
    // The value is an OCTET STRING holding the 32-byte digest.
    let value = ext.value;
    (names_ok && value.len() == 34 && value[0] == 0x04 && value[1] == 32)
        .then(|| value[2..].to_vec())
}
