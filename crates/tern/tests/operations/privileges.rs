//! Privilege drop (issue 27): started as root with `user`, tern binds and
//! reads its keys as root, then serves as that user; a key the user
//! cannot read at a reload is refused and the old key kept. Real peers:
//! the tern binary, a rustls client and a hyper backend; the uid is read
//! from /proc. These tests need root (CI runs as root) and the `nobody`
//! user.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use tern_testsupport::backend::Backend;
use tern_testsupport::client::{self, HttpConn};
use tern_testsupport::reload::{hangup, wait_stderr_lines};
use tern_testsupport::tern::{free_addr, tern_bin, TernProcess};

use super::{ca_and_leaf, config_toml, listener_toml, write_atomically, LOG_WAIT};

/// The `Uid:` or `Gid:` line of a /proc status file: real, effective,
/// saved and filesystem ids.
fn ids(status: &Path, field: &str) -> Vec<u32> {
    let text = std::fs::read_to_string(status).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn nobody() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    let line = passwd
        .lines()
        .find(|l| l.starts_with("nobody:"))
        .expect("a nobody user");
    let fields: Vec<&str> = line.split(':').collect();
    (
        fields[2].parse().expect("uid"),
        fields[3].parse().expect("gid"),
    )
}

/// A tern.toml in `dir` with `user = "nobody"` and `listener`.
fn nobody_config(dir: &Path, listener: &str) -> std::path::PathBuf {
    let path = dir.join("tern.toml");
    let text = format!(
        "user = \"nobody\"\n{}",
        config_toml(&[listener.to_string()])
    );
    write_atomically(&path, &text);
    path
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn user_option_serves_as_that_user_with_no_root_id_left() {
    let own = Path::new("/proc/self/status");
    assert_eq!(ids(own, "Uid:").first(), Some(&0), "these tests need root");
    let (ca, cert) = ca_and_leaf();
    let backend = Backend::start();
    let addr = free_addr();
    let path = nobody_config(ca.dir(), &listener_toml(addr, &[backend.addr()], &cert));
    let path_text = path.display().to_string();
    let tern = TernProcess::start(tern_bin(), addr, ["serve", "--config", &path_text]);
    let (uid, gid) = nobody();
    // Workers start after the switch: every thread of the process.
    let tasks = std::fs::read_dir(format!("/proc/{}/task", tern.pid())).expect("tasks");
    for task in tasks.flatten() {
        let status = task.path().join("status");
        let tid = task.file_name();
        assert_eq!(ids(&status, "Uid:"), vec![uid; 4], "thread {tid:?}");
        assert_eq!(ids(&status, "Gid:"), vec![gid; 4], "thread {tid:?}");
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", tern.pid())).expect("status");
    let groups = status
        .lines()
        .find(|l| l.starts_with("Groups:"))
        .unwrap_or("");
    assert_eq!(
        groups.split_whitespace().skip(1).collect::<Vec<_>>(),
        vec![gid.to_string().as_str()],
        "supplementary groups left: {groups}"
    );
    let mut conn =
        HttpConn::connect(addr, "localhost", client::client_config(ca.ca_pem())).expect("connect");
    assert_eq!(conn.get("localhost", "/echo").expect("request").status, 200);
    let said = wait_stderr_lines(&tern, "running as user nobody", 1, LOG_WAIT)
        .unwrap_or_else(|stderr| panic!("no line says which user:\n{stderr}"));
    assert!(said[0].contains(&format!("uid {uid}")), "{said:?}");
}

#[test]
fn key_the_user_cannot_read_at_reload_is_refused_and_the_old_key_kept() {
    let (ca, cert) = ca_and_leaf();
    let backend = Backend::start();
    let addr = free_addr();
    // The user must reach the config file and certificate to reload at
    // all; the key stays root's (mode 0600), as a freshly renewed key
    // written by root would be.
    chmod(ca.dir(), 0o755);
    chmod(&cert.chain, 0o644);
    chmod(&cert.key, 0o600);
    let path = nobody_config(ca.dir(), &listener_toml(addr, &[backend.addr()], &cert));
    chmod(&path, 0o644);
    let path_text = path.display().to_string();
    let mut tern = TernProcess::start(tern_bin(), addr, ["serve", "--config", &path_text]);
    hangup(&mut tern);
    let refused = wait_stderr_lines(&tern, "reload refused", 1, LOG_WAIT)
        .unwrap_or_else(|stderr| panic!("the reload was not refused:\n{stderr}"));
    let key = cert.key.display().to_string();
    assert!(
        refused[0].contains(&key) && refused[0].to_lowercase().contains("permission denied"),
        "the refusal does not name the key and say why: {refused:?}"
    );
    // Still serving with the key read at start.
    let mut conn = HttpConn::connect(addr, "localhost", client::client_config(ca.ca_pem()))
        .expect("connect after the refused reload");
    assert_eq!(conn.get("localhost", "/echo").expect("request").status, 200);
    assert!(tern.try_status().is_none());
}
