//! Privilege drop: tern binds its sockets and reads its keys as the user
//! it was started as (root, for port 443 outside systemd), then switches
//! to `user`/`group` before any worker starts, so no client is ever
//! served as root.
//!
//! Policy for root without `user`: tern runs, with a warning. Refusing
//! would break containers that run as root inside their own user
//! namespace, where root is already unprivileged on the host; the warning
//! names the option that fixes it.

use nix::unistd::{getegid, geteuid, setgid, setgroups, setuid, Gid, Uid};

use crate::config::RunAs;
use crate::error::ServeError;

/// Switches the whole process (every thread: glibc applies set*id to all)
/// to `run_as`, or warns when it stays root.
pub(crate) fn drop_to(run_as: Option<&RunAs>) -> Result<(), ServeError> {
    let Some(to) = run_as else {
        if geteuid().is_root() {
            tracing::warn!(
                "running as root: set `user` (--user) to serve as an unprivileged user once \
                 the sockets are open and the keys read"
            );
        }
        return Ok(());
    };
    let err = |message: String| ServeError::Privileges {
        user: to.user.clone(),
        message,
    };
    let (uid, gid) = (Uid::from_raw(to.uid), Gid::from_raw(to.gid));
    if geteuid() == uid && getegid() == gid {
        return Ok(());
    }
    if !geteuid().is_root() {
        return Err(err(format!(
            "tern runs as uid {}; switching users needs root",
            geteuid()
        )));
    }
    // Supplementary groups first (root's would otherwise stay), then the
    // group, then the user: after setuid nothing else may change.
    setgroups(&[gid]).map_err(|e| err(format!("setgroups: {e}")))?;
    setgid(gid).map_err(|e| err(format!("setgid({gid}): {e}")))?;
    setuid(uid).map_err(|e| err(format!("setuid({uid}): {e}")))?;
    if setuid(Uid::from_raw(0)).is_ok() && to.uid != 0 {
        return Err(err("root could be regained after the switch".into()));
    }
    tracing::info!(
        "running as user {} (uid {}), group {} (gid {})",
        to.user,
        to.uid,
        to.group,
        to.gid
    );
    Ok(())
}
