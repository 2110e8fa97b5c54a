//! OCSP stapling (issue 3, item 9) with responses made by `openssl ocsp`
//! and checked with `openssl s_client -status`: the staple is served, a
//! replaced file is served after SIGHUP, and a staple for another
//! certificate or past its nextUpdate is not served, with a warning.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tern_testsupport::backend::Backend;
use tern_testsupport::openssl_pki::{backdated, OcspStatus, OpensslCa, OpensslLeaf};
use tern_testsupport::reload::{hangup, wait_stderr_lines};
use tern_testsupport::tern::{free_addr, tern_bin, TernProcess};
use tern_testsupport::tools::s_client;

use super::LOG_WAIT;

/// A week, in minutes: a staple's usual validity.
const WEEK_MINUTES: u32 = 7 * 24 * 60;

/// tern serving `leaf` with `--ocsp staple`.
fn stapling_tern(
    leaf: &OpensslLeaf,
    staple: &Path,
    backend: &Backend,
) -> (TernProcess, SocketAddr) {
    let addr = free_addr();
    let args = [
        "serve".to_string(),
        "--listen".into(),
        addr.to_string(),
        "--backend".into(),
        backend.addr().to_string(),
        "--cert".into(),
        leaf.chain.display().to_string(),
        "--key".into(),
        leaf.key.display().to_string(),
        "--ocsp".into(),
        staple.display().to_string(),
    ];
    (TernProcess::start(tern_bin(), addr, args), addr)
}

/// What `openssl s_client -status` printed about the stapled response.
fn staple_seen(addr: SocketAddr, ca: &OpensslCa) -> String {
    let ca_file = ca.ca_file().display().to_string();
    let out = s_client(
        addr,
        &["-servername", "localhost", "-status", "-CAfile", &ca_file],
        b"",
    );
    let text = out.all();
    assert!(
        text.contains("Verify return code: 0 (ok)"),
        "s_client did not verify tern's chain:\n{text}"
    );
    text
}

fn next_update_line(s_client_text: &str) -> Option<String> {
    s_client_text
        .lines()
        .find(|l| l.trim_start().starts_with("Next Update:"))
        .map(|l| l.trim().to_string())
}

#[test]
fn ocsp_staple_is_served_and_a_replaced_one_after_sighup() {
    let mut ca = OpensslCa::new();
    let leaf = ca.leaf(&["localhost", "127.0.0.1"]);
    let first = ca.ocsp_response(&leaf, OcspStatus::Good, Some(WEEK_MINUTES), "first.der");
    let second = ca.ocsp_response(
        &leaf,
        OcspStatus::Good,
        Some(4 * WEEK_MINUTES),
        "second.der",
    );
    let staple = ca.dir().join("staple.der");
    std::fs::copy(&first, &staple).expect("install the first staple");
    let backend = Backend::start();
    let (mut tern, addr) = stapling_tern(&leaf, &staple, &backend);

    let before = staple_seen(addr, &ca);
    assert!(
        before.contains("OCSP Response Status: successful"),
        "no staple served:\n{before}"
    );
    assert!(before.contains("Cert Status: good"), "{before}");
    let before_next = next_update_line(&before).expect("the first staple has a Next Update");

    let tmp = ca.dir().join("staple.der.new");
    std::fs::copy(&second, &tmp).expect("copy the second staple");
    std::fs::rename(&tmp, &staple).expect("replace the staple");
    hangup(&mut tern);
    wait_stderr_lines(&tern, "reloaded", 1, LOG_WAIT)
        .unwrap_or_else(|stderr| panic!("reload not applied:\n{stderr}"));

    let after = staple_seen(addr, &ca);
    assert!(
        after.contains("OCSP Response Status: successful"),
        "{after}"
    );
    let after_next = next_update_line(&after).expect("the second staple has a Next Update");
    assert_ne!(
        before_next, after_next,
        "the staple served after SIGHUP is still the first one"
    );
}

/// tern starts and serves the certificate without the bad `staple`.
fn refused_staple(staple: &Path, ca: &OpensslCa, leaf: &OpensslLeaf, reason: &str) -> TernProcess {
    let backend = Backend::start();
    let (tern, addr) = stapling_tern(leaf, staple, &backend);
    let seen = staple_seen(addr, ca);
    assert!(
        seen.contains("OCSP response: no response sent"),
        "a bad staple ({reason}) was served:\n{seen}"
    );
    tern
}

/// tern's stderr says why `staple` is not served, naming the file.
fn assert_warned(tern: &TernProcess, staple: &Path, reason: &str) {
    let warnings = wait_stderr_lines(tern, "WARN", 1, LOG_WAIT)
        .unwrap_or_else(|stderr| panic!("no warning about the {reason} staple:\n{stderr}"));
    let staple_name = staple.display().to_string();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(&staple_name) && w.contains(reason)),
        "no warning names {staple_name} and says {reason:?}: {warnings:?}"
    );
}

/// A staple for another certificate of the same CA.
fn other_leaf_staple(ca: &mut OpensslCa) -> (OpensslLeaf, PathBuf) {
    let leaf = ca.leaf(&["localhost", "127.0.0.1"]);
    let other = ca.leaf(&["other.example"]);
    let staple = ca.ocsp_response(&other, OcspStatus::Good, Some(WEEK_MINUTES), "other.der");
    (leaf, staple)
}

/// A staple for `leaf` whose nextUpdate is long past.
fn stale_staple(ca: &mut OpensslCa) -> (OpensslLeaf, PathBuf) {
    let leaf = ca.leaf(&["localhost", "127.0.0.1"]);
    let fresh = ca.ocsp_response(&leaf, OcspStatus::Good, Some(WEEK_MINUTES), "fresh.der");
    let staple = ca.dir().join("stale.der");
    let bytes = std::fs::read(&fresh).expect("read the staple");
    std::fs::write(&staple, backdated(&bytes)).expect("write the stale staple");
    (leaf, staple)
}

#[test]
fn ocsp_staple_for_another_certificate_is_not_served() {
    let mut ca = OpensslCa::new();
    let (leaf, staple) = other_leaf_staple(&mut ca);
    refused_staple(&staple, &ca, &leaf, "serial");
}

#[test]
fn ocsp_staple_past_next_update_is_not_served() {
    let mut ca = OpensslCa::new();
    let (leaf, staple) = stale_staple(&mut ca);
    refused_staple(&staple, &ca, &leaf, "nextUpdate");
}

#[test]
fn refused_ocsp_staples_are_warned_about() {
    let mut ca = OpensslCa::new();
    let (leaf, staple) = other_leaf_staple(&mut ca);
    let tern = refused_staple(&staple, &ca, &leaf, "serial");
    assert_warned(&tern, &staple, "serial");
    let (leaf, staple) = stale_staple(&mut ca);
    let tern = refused_staple(&staple, &ca, &leaf, "nextUpdate");
    assert_warned(&tern, &staple, "nextUpdate");
}
