//! Small TLS + HTTP/1.1 servers that can be told to fall into the traps
//! `tern probe` looks for: a handshake flight written in small pieces with
//! Nagle on, with or without TCP_NODELAY, behind any listener (so they can
//! run inside a [`crate::netlink_delay`] namespace).
//!
//! The HTTP side answers every request (any method, body read by
//! Content-Length) with `200 ok` in one write, and keeps the connection
//! alive. It never sets TCP_QUICKACK, like most servers.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection};

use crate::certs::CertFiles;

/// How the server writes its handshake flight.
#[derive(Debug, Clone, Copy)]
pub struct FlightOptions {
    /// Write the flight in pieces of this many bytes (one `write` each), as
    /// a server with a small TLS write buffer does; `None` writes it at once.
    pub chunk: Option<usize>,
    /// Set TCP_NODELAY on accepted sockets.
    pub nodelay: bool,
    /// Close a connection that has been idle (no request) this long.
    pub idle_timeout: Duration,
    /// Re-arm TCP_QUICKACK after every read, so the kernel acknowledges at
    /// once instead of delaying the ACK (the server-side fix for the
    /// split-write penalty).
    pub quickack: bool,
}

impl FlightOptions {
    /// A well-behaved server: one write, TCP_NODELAY, 10 s idle timeout.
    pub fn one_write() -> Self {
        FlightOptions {
            chunk: None,
            nodelay: true,
            idle_timeout: Duration::from_secs(10),
            quickack: false,
        }
    }

    /// A flight in `chunk`-byte writes with Nagle on, 10 s idle timeout.
    pub fn in_pieces(chunk: usize) -> Self {
        FlightOptions {
            chunk: Some(chunk),
            nodelay: false,
            idle_timeout: Duration::from_secs(10),
            quickack: false,
        }
    }
}

/// A running trap server; stops accepting on drop.
pub struct FlightServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FlightServer {
    /// Serves TLS with `cert` on `listener` (already bound, in whatever
    /// network namespace the caller chose).
    pub fn start(listener: TcpListener, cert: &CertFiles, opts: FlightOptions) -> FlightServer {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert.chain)
            .expect("open chain")
            .collect::<Result<_, _>>()
            .expect("parse chain");
        let key = PrivateKeyDer::from_pem_file(&cert.key).expect("parse key");
        let config = ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server config");
        // The trap is a server that sends its chain whole, as OpenSSL 3.0
        // servers (and rustls without its brotli/zlib features) do: the
        // workspace's rustls would otherwise compress the padded chain.
        let mut config = config;
        config.cert_compressors = Vec::new();
        let config = Arc::new(config);
        let addr = listener.local_addr().expect("local addr");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let stop_accept = stop.clone();
        let thread = thread::spawn(move || {
            while !stop_accept.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((sock, _)) => {
                        let config = config.clone();
                        thread::spawn(move || {
                            let _ = serve_connection(sock, config, opts);
                        });
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        thread::sleep(Duration::from_millis(5));
                    }
                    Err(_) => return,
                }
            }
        });
        FlightServer {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    /// Where the server listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for FlightServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_connection(
    mut sock: TcpStream,
    config: Arc<ServerConfig>,
    opts: FlightOptions,
) -> io::Result<()> {
    sock.set_nonblocking(false)?;
    sock.set_nodelay(opts.nodelay)?;
    sock.set_read_timeout(Some(opts.idle_timeout))?;
    let mut conn = ServerConnection::new(config).map_err(io::Error::other)?;
    while conn.is_handshaking() {
        if conn.wants_write() {
            flush(&mut conn, &mut sock, opts.chunk)?;
        } else if conn.read_tls(&mut sock)? == 0 {
            return Ok(());
        } else {
            conn.process_new_packets().map_err(io::Error::other)?;
        }
    }
    flush(&mut conn, &mut sock, None)?;
    let mut pending: Vec<u8> = Vec::new();
    loop {
        // Read one request: head, then Content-Length bytes of body.
        let (head_end, body_len) = loop {
            if let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                break (end + 4, content_length(&pending[..end]));
            }
            if !read_plain(&mut conn, &mut sock, &mut pending, opts.quickack)? {
                return Ok(());
            }
        };
        while pending.len() < head_end + body_len {
            if !read_plain(&mut conn, &mut sock, &mut pending, opts.quickack)? {
                return Ok(());
            }
        }
        pending.drain(..head_end + body_len);
        conn.writer()
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")?;
        flush(&mut conn, &mut sock, None)?;
    }
}

/// Writes everything rustls has queued, in `chunk`-sized writes or at once.
fn flush(
    conn: &mut ServerConnection,
    sock: &mut TcpStream,
    chunk: Option<usize>,
) -> io::Result<()> {
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out)?;
    }
    match chunk {
        Some(n) => {
            for piece in out.chunks(n.max(1)) {
                sock.write_all(piece)?;
            }
        }
        None => sock.write_all(&out)?,
    }
    Ok(())
}

/// Appends decrypted bytes to `buf`; false when the client has gone.
fn read_plain(
    conn: &mut ServerConnection,
    sock: &mut TcpStream,
    buf: &mut Vec<u8>,
    quickack: bool,
) -> io::Result<bool> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match conn.reader().read(&mut chunk) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return Ok(true);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return Ok(false),
        }
        if conn.read_tls(sock)? == 0 {
            return Ok(false);
        }
        if quickack {
            set_quickack(sock)?;
        }
        conn.process_new_packets().map_err(io::Error::other)?;
        if conn.wants_write() {
            flush(conn, sock, None)?;
        }
    }
}

fn content_length(head: &[u8]) -> usize {
    String::from_utf8_lossy(head)
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Linux clears TCP_QUICKACK again on its own, so servers re-arm it after
/// each read.
fn set_quickack(sock: &TcpStream) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: the fd is a valid TCP socket owned by `sock` for the whole call,
    // and we pass a pointer to a live c_int together with its exact size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
