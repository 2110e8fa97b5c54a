//! A real nginx (the Debian package) as a backend of tern: HTTPS with a
//! chosen TLS version, optionally requiring a client certificate
//! (`ssl_verify_client on`), or cleartext HTTP/1.1 or h2c on a Unix
//! socket. Every request is answered `200` with a line saying what nginx
//! saw (TLS version, client certificate subject, Host), and logged with
//! `$ssl_session_reused`, so a test can see whether tern resumed.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::certs::CertFiles;
use crate::tempdir::TempDir;
use crate::tern::free_addr;

/// Where Debian installs nginx.
pub const NGINX_BIN: &str = "/usr/sbin/nginx";

/// Why nginx cannot run here, or `None` when it can.
pub fn unavailable() -> Option<String> {
    if Path::new(NGINX_BIN).exists() {
        None
    } else {
        Some(format!(
            "{NGINX_BIN} not found (apt-get install -y nginx-light)"
        ))
    }
}

/// How nginx speaks TLS.
pub struct NginxTls<'a> {
    /// Its certificate.
    pub cert: &'a CertFiles,
    /// `ssl_protocols`, e.g. "TLSv1.3" or "TLSv1.2".
    pub protocols: &'a str,
    /// With a CA file: `ssl_verify_client on` against it.
    pub client_ca: Option<&'a Path>,
}

/// What nginx listens on and speaks.
pub enum NginxListen<'a> {
    /// HTTPS on a free loopback port.
    Tls(NginxTls<'a>),
    /// Cleartext HTTP/1.1 on a Unix socket in its directory.
    Unix,
    /// Cleartext HTTP/2 with prior knowledge (h2c) on a Unix socket.
    UnixH2c,
}

/// A running nginx (one process: `master_process off`), killed on drop.
pub struct Nginx {
    child: Child,
    addr: Option<SocketAddr>,
    socket: Option<PathBuf>,
    dir: TempDir,
}

impl Nginx {
    /// Starts nginx on `listen`; with `keepalive` off it closes every
    /// connection after one response (`keepalive_timeout 0`), so each
    /// request costs its client a new connection (and handshake). Panics
    /// with nginx's error log when it does not start listening.
    pub fn start(listen: NginxListen<'_>, keepalive: bool) -> Nginx {
        let dir = TempDir::new("nginx");
        let d = dir.path().display().to_string();
        let (addr, socket, listen_line, tls_lines) = match &listen {
            NginxListen::Tls(tls) => {
                let addr = free_addr();
                let mut lines = format!(
                    "ssl_certificate {};\n\
                     ssl_certificate_key {};\n\
                     ssl_protocols {};\n\
                     ssl_session_cache shared:tern_tests:1m;\n",
                    tls.cert.chain.display(),
                    tls.cert.key.display(),
                    tls.protocols
                );
                if let Some(ca) = tls.client_ca {
                    lines.push_str(&format!(
                        "ssl_verify_client on;\nssl_client_certificate {};\n",
                        ca.display()
                    ));
                }
                (Some(addr), None, format!("listen {addr} ssl;"), lines)
            }
            NginxListen::Unix | NginxListen::UnixH2c => {
                let path = dir.path().join("app.sock");
                let h2 = if matches!(listen, NginxListen::UnixH2c) {
                    " http2"
                } else {
                    ""
                };
                let line = format!("listen unix:{}{h2};", path.display());
                (None, Some(path), line, String::new())
            }
        };
        let keepalive = if keepalive { 60 } else { 0 };
        let config = format!(
            "daemon off;\n\
             master_process off;\n\
             worker_processes 1;\n\
             pid {d}/nginx.pid;\n\
             error_log {d}/error.log info;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n\
             log_format tern '$ssl_protocol reused=$ssl_session_reused \
             verify=$ssl_client_verify dn=\"$ssl_client_s_dn\" conn_requests=$connection_requests \
             $server_protocol $request_uri';\n\
             access_log {d}/access.log tern;\n\
             client_body_temp_path {d}/body;\n\
             proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\n\
             uwsgi_temp_path {d}/uwsgi;\n\
             scgi_temp_path {d}/scgi;\n\
             keepalive_timeout {keepalive};\n\
             server {{\n\
             {listen_line}\n\
             {tls_lines}\
             location / {{ return 200 \"nginx $ssl_protocol dn=$ssl_client_s_dn host=$host\\n\"; }}\n\
             }}\n\
             }}\n"
        );
        let path = dir.path().join("nginx.conf");
        std::fs::write(&path, config).expect("write nginx.conf");
        let child = Command::new(NGINX_BIN)
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .arg("-c")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn nginx");
        let mut nginx = Nginx {
            child,
            addr,
            socket,
            dir,
        };
        nginx.wait_listening(Duration::from_secs(10));
        nginx
    }

    /// Its TCP address (TLS only).
    pub fn addr(&self) -> SocketAddr {
        self.addr.expect("nginx listens on a Unix socket")
    }

    /// Its Unix socket (Unix only).
    pub fn socket(&self) -> &Path {
        self.socket.as_deref().expect("nginx listens on TCP")
    }

    /// Its access log so far, one request a line:
    /// `PROTOCOL reused=r|. verify=… dn="…" conn_requests=N HTTP/x URI`
    /// (`conn_requests`: which request on its connection it was, from 1).
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default()
    }

    /// Its access log once `done` holds for it, or as it is after 10 s
    /// (nginx writes a line after the response went out, so a client can
    /// read its response before the line is there).
    pub fn access_log_when(&self, done: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let log = self.access_log();
            if done(&log) || std::time::Instant::now() >= deadline {
                return log;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Its error log so far.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    /// Stops it (the socket stays refused or, for a Unix socket, gone).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn accepts(&self) -> bool {
        let wait = Duration::from_millis(200);
        match (&self.addr, &self.socket) {
            (Some(addr), _) => std::net::TcpStream::connect_timeout(addr, wait).is_ok(),
            (None, Some(path)) => std::os::unix::net::UnixStream::connect(path).is_ok(),
            (None, None) => false,
        }
    }

    fn wait_listening(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("nginx exited early with {status}:\n{}", self.error_log());
            }
            if self.accepts() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "nginx is not listening after {timeout:?}:\n{}",
                self.error_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        self.stop();
    }
}
