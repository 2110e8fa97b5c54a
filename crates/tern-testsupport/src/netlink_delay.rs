//! A WAN link with a fixed one-way delay between two network namespaces.
//!
//! The kernels we test on have no traffic-control qdiscs, so `tc ... netem`
//! is not available. Instead each end of the link is a TUN device in its own
//! network namespace (`ip netns add`), and a forwarder in this process moves
//! every IP packet from one TUN device to the other after a fixed delay. Both
//! ends run real kernel TCP over a real round trip, so Nagle, delayed ACKs and
//! the initial congestion window behave as they do on a network.
//!
//! Addresses are `10.213.0.1` (client side) and `10.213.0.2` (server side);
//! they exist only inside the two namespaces created for one link. Namespace
//! names carry the process id and a counter, so parallel tests and parallel
//! test binaries never collide, and [`DelayLink`] deletes both on drop.
//!
//! Needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN for `setns`), the `ip` command
//! (Debian package `iproute2`) and `/dev/net/tun`. [`DelayLink::unavailable`]
//! says why a test cannot run here.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Address of the client end, inside [`DelayLink::client_ns`].
pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 1);
/// Address of the server end, inside [`DelayLink::server_ns`].
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 2);

/// Name of the TUN device in each namespace (names are per namespace).
const TUN_NAME: &str = "ternwan0";
/// MTU of both TUN devices: Ethernet's, so MSS and the initial congestion
/// window (10 segments ≈ 14.6 KB) are those of a real path.
const MTU: &str = "1500";
/// How often the forwarder threads look at the stop flag.
const POLL_INTERVAL_MS: i32 = 20;

/// `_IOW('T', 202, int)` from `<linux/if_tun.h>`; not exported by `libc`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

static NEXT_LINK: AtomicU32 = AtomicU32::new(0);

/// Two network namespaces joined by a TUN link with a fixed one-way delay.
pub struct DelayLink {
    client_ns: String,
    server_ns: String,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl DelayLink {
    /// Why a delay link cannot be built on this machine, or `None` if it can.
    pub fn unavailable() -> Option<String> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Some("not running as root (needs CAP_NET_ADMIN)".into());
        }
        if !std::path::Path::new("/dev/net/tun").exists() {
            return Some("/dev/net/tun is missing".into());
        }
        match Command::new("ip").arg("-V").output() {
            Ok(out) if out.status.success() => None,
            _ => Some("the `ip` command (package iproute2) is missing".into()),
        }
    }

    /// Creates the two namespaces and the link; packets wait `one_way` in
    /// each direction, so the round trip is twice that.
    pub fn new(one_way: Duration) -> io::Result<Self> {
        remove_stale_namespaces();
        let n = NEXT_LINK.fetch_add(1, Ordering::Relaxed);
        let tag = format!("tern-{}-{n}", std::process::id());
        let mut link = DelayLink {
            client_ns: format!("{tag}-c"),
            server_ns: format!("{tag}-s"),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        };
        // From here on, Drop cleans up whatever was created.
        for ns in [&link.client_ns, &link.server_ns] {
            ip(&["netns", "add", ns])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        let client_tun = Arc::new(in_namespace(&link.client_ns, open_tun)??);
        let server_tun = Arc::new(in_namespace(&link.server_ns, open_tun)??);
        for (ns, addr) in [
            (link.client_ns.clone(), CLIENT_ADDR),
            (link.server_ns.clone(), SERVER_ADDR),
        ] {
            ip(&["-n", &ns, "link", "set", TUN_NAME, "mtu", MTU, "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                TUN_NAME,
            ])?;
        }
        link.threads.extend(forward(
            client_tun.clone(),
            server_tun.clone(),
            one_way,
            link.stop.clone(),
        ));
        link.threads
            .extend(forward(server_tun, client_tun, one_way, link.stop.clone()));
        Ok(link)
    }

    /// Name of the client-side namespace (address [`CLIENT_ADDR`]).
    pub fn client_ns(&self) -> &str {
        &self.client_ns
    }

    /// Name of the server-side namespace (address [`SERVER_ADDR`]).
    pub fn server_ns(&self) -> &str {
        &self.server_ns
    }

    /// Runs `f` on a fresh thread that has joined the client namespace, so
    /// every socket `f` creates lives there; returns what `f` returns.
    pub fn in_client<T: Send>(&self, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        in_namespace(&self.client_ns, f)
    }

    /// Spawns a thread that joins the server namespace and then runs `f`.
    /// Sockets `f` creates (listeners included) live in that namespace.
    pub fn spawn_in_server<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> JoinHandle<io::Result<T>> {
        let ns = self.server_ns.clone();
        thread::spawn(move || {
            enter_namespace(&ns)?;
            Ok(f())
        })
    }

    /// Starts `tern <args>` inside the server namespace and waits until it
    /// says it listens on `listen`; panics with its stderr after 20 s.
    pub fn start_tern(
        &self,
        listen: std::net::SocketAddr,
        args: &[&str],
    ) -> crate::tern::TernProcess {
        let mut all: Vec<String> = vec!["netns".into(), "exec".into(), self.server_ns().into()];
        all.push(crate::tern::tern_bin().display().to_string());
        all.extend(args.iter().map(|a| a.to_string()));
        // `ip netns exec` execs tern in place, so the handle is tern itself.
        let tern = crate::tern::TernProcess::spawn(std::path::Path::new("ip"), all);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !tern
            .stderr_text()
            .contains(&format!("listening on {listen}"))
        {
            assert!(
                Instant::now() < deadline,
                "tern did not start: {}",
                tern.stderr_text()
            );
            thread::sleep(Duration::from_millis(50));
        }
        tern
    }

    /// A command that will run inside namespace `ns` (`ip netns exec`).
    pub fn command_in(ns: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns]).arg(program);
        cmd
    }
}

impl Drop for DelayLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // The TUN devices went away with their last file descriptor.
        for ns in [&self.client_ns, &self.server_ns] {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// Deletes namespaces left by test processes that died without unwinding
/// (SIGKILL, abort): their names carry a process id that no longer exists.
fn remove_stale_namespaces() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(pid) = name
            .strip_prefix("tern-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Runs `f` on a scoped thread inside namespace `ns`. `setns` changes only
/// the calling thread, which is why a fresh thread is used.
fn in_namespace<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    thread::scope(|s| {
        s.spawn(|| {
            enter_namespace(ns)?;
            Ok(f())
        })
        .join()
        .map_err(|_| io::Error::other("thread inside the namespace panicked"))?
    })
}

fn enter_namespace(ns: &str) -> io::Result<()> {
    let file = File::open(format!("/run/netns/{ns}"))?;
    // SAFETY: the fd is valid for the duration of the call (owned by `file`)
    // and refers to a network namespace; setns only changes this thread.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Opens `/dev/net/tun` and creates [`TUN_NAME`] in the calling thread's
/// network namespace; raw IP packets, no packet-information header.
fn open_tun() -> io::Result<File> {
    let path = c"/dev/net/tun";
    // SAFETY: `path` is a NUL-terminated C string; open has no other
    // preconditions.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by open and is owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data for which all-zero bytes are valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(TUN_NAME.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, and `req` is a
    // valid, exclusively borrowed ifreq living across the call; the name is
    // NUL-terminated because TUN_NAME is shorter than IFNAMSIZ.
    let rc = unsafe { libc::ioctl(owned.as_raw_fd(), TUNSETIFF as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(File::from(owned))
}

/// Starts the two threads of one direction: a reader that timestamps packets
/// from `from`, and a writer that hands each to `to` once `delay` has passed.
fn forward(
    from: Arc<File>,
    to: Arc<File>,
    delay: Duration,
    stop: Arc<AtomicBool>,
) -> [JoinHandle<()>; 2] {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let reader_stop = stop.clone();
    let reader = thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        while !reader_stop.load(Ordering::Relaxed) {
            if !readable(&from, POLL_INTERVAL_MS) {
                continue;
            }
            match (&*from).read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    });
    let writer = thread::spawn(move || {
        // One delay for every packet keeps deadlines in arrival order, so a
        // FIFO is a correct delay queue (and the link never reorders).
        let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
        let tick = Duration::from_millis(POLL_INTERVAL_MS as u64);
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let wait = match queue.front() {
                Some((due, _)) => due.saturating_duration_since(Instant::now()).min(tick),
                None => tick,
            };
            match rx.recv_timeout(wait) {
                Ok(p) => queue.push_back(p),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) if queue.is_empty() => return,
                Err(mpsc::RecvTimeoutError::Disconnected) => thread::sleep(wait),
            }
            let now = Instant::now();
            while queue.front().is_some_and(|(due, _)| *due <= now) {
                if let Some((_, packet)) = queue.pop_front() {
                    // A full device queue drops the packet, as a router would.
                    let _ = (&*to).write(&packet);
                }
            }
        }
    });
    [reader, writer]
}

fn readable(file: &File, timeout_ms: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is one valid pollfd and nfds is 1.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    rc > 0 && pfd.revents & libc::POLLIN != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{SocketAddr, TcpListener, TcpStream};

    #[test]
    fn tcp_round_trip_over_the_link_takes_twice_the_delay() {
        if let Some(why) = DelayLink::unavailable() {
            eprintln!("skipped: {why}");
            return;
        }
        let link = DelayLink::new(Duration::from_millis(25)).expect("link");
        let listener = link
            .spawn_in_server(|| TcpListener::bind((SERVER_ADDR, 7000)))
            .join()
            .expect("join")
            .expect("enter ns")
            .expect("bind");
        let server = thread::spawn(move || listener.accept().map(|_| ()));
        let rtt = link
            .in_client(|| {
                let addr = SocketAddr::from((SERVER_ADDR, 7000));
                let start = Instant::now();
                let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
                let connect = start.elapsed();
                drop(s);
                connect
            })
            .expect("enter ns");
        server.join().expect("join").expect("accept");
        assert!(
            rtt >= Duration::from_millis(48) && rtt < Duration::from_millis(150),
            "connect took {rtt:?}, want about 50 ms"
        );
        let (c, s) = (link.client_ns.clone(), link.server_ns.clone());
        drop(link);
        let list = Command::new("ip")
            .args(["netns", "list"])
            .output()
            .expect("ip");
        let list = String::from_utf8_lossy(&list.stdout);
        assert!(
            !list.contains(&c) && !list.contains(&s),
            "namespaces left behind"
        );
    }
}
