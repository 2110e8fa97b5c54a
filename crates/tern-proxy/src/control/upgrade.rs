//! Binary upgrade: the running tern hands its listening sockets to a new
//! binary (`tern serve --upgrade`) over a Unix socket (SCM_RIGHTS), the new
//! one starts its workers on them, and only then does the old one drain.
//! The sockets stay open throughout, so no connection attempt is refused;
//! a new binary that fails before it is ready leaves the old one serving.
//!
//! The exchange, on a `SOCK_SEQPACKET` socket (message boundaries keep
//! each batch of descriptors with its message):
//!
//! | from | message                  | meaning |
//! |------|--------------------------|---------|
//! | new  | `tern-upgrade 1 <pid>`   | hello |
//! | old  | `fds` + up to 200 descriptors | repeated: every listening socket, by type and address in worker order |
//! | old  | `end <n>`                | `n` descriptors were sent |
//! | new  | `ready` or `failed <why>`| workers serve on the sockets / the new binary gives up |
//! | old  | `draining`               | the old process stops accepting and drains |
//!
//! The sockets are matched to the new configuration by their own address
//! ([`super::inherit`]), so the old and new configurations may differ.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};
use tokio::sync::mpsc;

use super::inherit::{Held, Inherited};
use crate::error::ServeError;

const HELLO: &str = "tern-upgrade 1";
/// Descriptors per message, under the kernel's SCM_MAX_FD (253).
const FDS_PER_MESSAGE: usize = 200;
/// Longest message either side sends (a `failed` reason is cut to fit).
const MAX_MESSAGE: usize = 4096;
/// Time for each step of the exchange but the new binary's start.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Time the new binary has to start its workers (build its configuration,
/// read its keys) before the old one gives up on it and keeps serving.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The running tern's side: answers upgrade requests on `path` from a
/// thread of its own (each exchange is a few blocking steps). `handed`
/// receives the new process's pid once it serves; this process must then
/// drain. Only the owner of the process (mode 0600) may connect.
pub(crate) fn serve(
    path: &Path,
    held: Held,
    handed: mpsc::UnboundedSender<u32>,
) -> Result<(), ServeError> {
    let err = |message: String| ServeError::Upgrade {
        path: path.to_owned(),
        message,
    };
    // Bound under a temporary name and renamed into place, so that `path`
    // always names a listening socket (the previous process's until now).
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let listener = seqpacket().map_err(|e| err(format!("creating the socket: {e}")))?;
    let addr = SocketAddrUnix::new(&tmp).map_err(|e| err(format!("{}: {e}", tmp.display())))?;
    rustix::net::bind(&listener, &addr).map_err(|e| err(format!("binding: {e}")))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            err(format!("putting the socket in place: {e}"))
        })?;
    rustix::net::listen(&listener, 4).map_err(|e| err(format!("listening: {e}")))?;
    let shown = path.display().to_string();
    std::thread::Builder::new()
        .name("tern-upgrade".into())
        .spawn(move || loop {
            let conn = match rustix::net::accept_with(&listener, SocketFlags::CLOEXEC) {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!("upgrade socket {shown}: accept failed: {e}; upgrades are off");
                    return;
                }
            };
            match hand_over(&conn, &held) {
                Ok(pid) => {
                    let _ = handed.send(pid);
                    return;
                }
                Err(e) => tracing::error!("upgrade failed, still serving: {e}"),
            }
        })
        .map_err(|e| err(format!("starting its thread: {e}")))?;
    tracing::info!(
        "upgrade socket on {} (tern serve --upgrade)",
        path.display()
    );
    Ok(())
}

/// One exchange with a new binary; its pid once it serves.
fn hand_over(conn: &OwnedFd, held: &Held) -> Result<u32, String> {
    let io = |what: &str| {
        let what = what.to_owned();
        move |e: rustix::io::Errno| format!("{what}: {e}")
    };
    set_timeout(conn, STEP_TIMEOUT).map_err(io("setting a timeout"))?;
    let hello = receive_text(conn).map_err(|e| format!("reading the hello: {e}"))?;
    let pid: u32 = hello
        .strip_prefix(HELLO)
        .and_then(|rest| rest.trim().parse().ok())
        .ok_or_else(|| format!("not an upgrade request: {hello:?}"))?;
    tracing::info!(pid, "upgrade requested: handing the listening sockets over");
    let sent = held.with_all(|fds| -> Result<usize, String> {
        let mut space =
            vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(FDS_PER_MESSAGE))];
        for chunk in fds.chunks(FDS_PER_MESSAGE) {
            let mut control = SendAncillaryBuffer::new(&mut space);
            if !control.push(SendAncillaryMessage::ScmRights(chunk)) {
                return Err("descriptors do not fit a message".into());
            }
            rustix::net::sendmsg(
                conn,
                &[IoSlice::new(b"fds")],
                &mut control,
                SendFlags::NOSIGNAL,
            )
            .map_err(io("sending sockets"))?;
        }
        Ok(fds.len())
    })?;
    send_text(conn, &format!("end {sent}")).map_err(io("sending sockets"))?;
    set_timeout(conn, START_TIMEOUT).map_err(io("setting a timeout"))?;
    let answer = receive_text(conn).map_err(|e| match e {
        Received::Closed => format!("the new process (pid {pid}) exited before it served"),
        Received::Failed(rustix::io::Errno::AGAIN) => {
            format!("the new process (pid {pid}) did not serve within {START_TIMEOUT:?}")
        }
        e => format!("waiting for the new process (pid {pid}): {e}"),
    })?;
    if answer == "ready" {
        send_text(conn, "draining").map_err(io("confirming"))?;
        return Ok(pid);
    }
    match answer.strip_prefix("failed ") {
        Some(why) => Err(format!("the new process (pid {pid}) did not start: {why}")),
        None => Err(format!("unexpected answer from pid {pid}: {answer:?}")),
    }
}

/// The new binary's end of the exchange, between receiving the sockets
/// and serving on them.
pub(crate) struct Upgrade {
    conn: OwnedFd,
    path: PathBuf,
    /// The running tern's pid.
    pub old_pid: u32,
}

impl Upgrade {
    /// Asks the tern listening on `path` for its sockets.
    pub(crate) fn connect(path: &Path) -> Result<(Upgrade, Inherited), ServeError> {
        let err = |message: String| ServeError::Upgrade {
            path: path.to_owned(),
            message,
        };
        let conn = seqpacket().map_err(|e| err(format!("creating a socket: {e}")))?;
        let addr = SocketAddrUnix::new(path).map_err(|e| err(e.to_string()))?;
        rustix::net::connect(&conn, &addr)
            .map_err(|e| err(format!("no running tern answers there: {e}")))?;
        let old_pid = rustix::net::sockopt::socket_peercred(&conn)
            .map(|c| c.pid.as_raw_nonzero().get().unsigned_abs())
            .unwrap_or(0);
        set_timeout(&conn, STEP_TIMEOUT).map_err(|e| err(e.to_string()))?;
        send_text(&conn, &format!("{HELLO} {}", std::process::id()))
            .map_err(|e| err(format!("sending the hello: {e}")))?;
        let mut fds = Vec::new();
        let mut space =
            vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(FDS_PER_MESSAGE))];
        loop {
            let mut buf = [0u8; 64];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let got = rustix::net::recvmsg(
                &conn,
                &mut [IoSliceMut::new(&mut buf)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            )
            .map_err(|e| err(format!("receiving the sockets: {e}")))?;
            for message in control.drain() {
                if let RecvAncillaryMessage::ScmRights(received) = message {
                    fds.extend(received);
                }
            }
            let text = std::str::from_utf8(&buf[..got.bytes.min(buf.len())]).unwrap_or("");
            if got.bytes == 0 {
                return Err(err("the running tern closed the connection".into()));
            }
            if text == "fds" {
                continue;
            }
            match text
                .strip_prefix("end ")
                .and_then(|n| n.parse::<usize>().ok())
            {
                Some(n) if n == fds.len() => break,
                Some(n) => return Err(err(format!("{n} sockets sent but {} received", fds.len()))),
                None => return Err(err(format!("unexpected message {text:?}"))),
            }
        }
        let count = fds.len();
        let inherited = Inherited::from_fds(fds, "the running tern")?;
        tracing::info!(
            old = old_pid,
            "upgrade: {count} listening sockets received from the running tern"
        );
        Ok((
            Upgrade {
                conn,
                path: path.to_owned(),
                old_pid,
            },
            inherited,
        ))
    }

    /// Tells the running tern this binary gives up (it keeps serving).
    pub(crate) fn failed(&self, why: &str) {
        let mut message = format!("failed {why}");
        if message.len() > MAX_MESSAGE {
            let mut cut = MAX_MESSAGE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        let _ = send_text(&self.conn, &message);
    }

    /// Tells the running tern this binary serves; returns once it has
    /// confirmed that it drains.
    pub(crate) fn ready(self) -> Result<(), ServeError> {
        let err = |message: String| ServeError::Upgrade {
            path: self.path.clone(),
            message,
        };
        send_text(&self.conn, "ready")
            .map_err(|e| err(format!("the running tern is gone: {e}")))?;
        match receive_text(&self.conn) {
            Ok(answer) if answer == "draining" => Ok(()),
            Ok(other) => Err(err(format!("unexpected answer {other:?}"))),
            Err(e) => Err(err(format!(
                "the running tern did not confirm (it may have given up waiting): {e}"
            ))),
        }
    }
}

#[derive(Debug)]
enum Received {
    Closed,
    Failed(rustix::io::Errno),
    NotText,
}

impl std::fmt::Display for Received {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Received::Closed => f.write_str("connection closed"),
            Received::Failed(e) => write!(f, "{e}"),
            Received::NotText => f.write_str("not UTF-8 text"),
        }
    }
}

/// A Unix socket that keeps message boundaries (each batch of
/// descriptors stays with its message), closed on exec.
fn seqpacket() -> Result<OwnedFd, rustix::io::Errno> {
    rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
}

fn receive_text(conn: &OwnedFd) -> Result<String, Received> {
    let mut buf = vec![0u8; MAX_MESSAGE];
    let (n, _) =
        rustix::net::recv(conn, &mut buf[..], RecvFlags::empty()).map_err(Received::Failed)?;
    if n == 0 {
        return Err(Received::Closed);
    }
    buf.truncate(n.min(MAX_MESSAGE));
    String::from_utf8(buf).map_err(|_| Received::NotText)
}

fn send_text(conn: &OwnedFd, text: &str) -> Result<(), rustix::io::Errno> {
    rustix::net::send(conn, text.as_bytes(), SendFlags::NOSIGNAL).map(|_| ())
}

fn set_timeout(conn: &impl AsFd, timeout: Duration) -> Result<(), rustix::io::Errno> {
    rustix::net::sockopt::set_socket_timeout(
        conn,
        rustix::net::sockopt::Timeout::Recv,
        Some(timeout),
    )
}
