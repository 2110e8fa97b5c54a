//! A real browser: headless Chromium loads a page with 60 same-origin
//! subresources through tern. Browsers pick h2 by ALPN and multiplex a page
//! on one connection; if tern's h2 were broken or refused, Chromium would
//! fall back to several HTTP/1.1 connections, and the access log says so.
//! The same page over HTTP/3 (QUIC forced on for tern's origin) must come
//! over one QUIC connection.

use std::collections::BTreeSet;
use std::time::Duration;

use tern_testsupport::chromium::{dump_dom, find_chromium, quic_flags, AssetSite, SCRIPT_MARKER};
use tern_testsupport::tern::{log_field, Served};

use crate::skip_without;

const SCRIPTS: usize = 30;
const IMAGES: usize = 30;

#[test]
fn chromium_loads_a_page_of_sixty_resources_over_h2_on_few_connections() {
    load_asset_page(&[], false, "h2", 2);
}

#[test]
fn chromium_loads_a_page_of_sixty_resources_over_h3_on_one_connection() {
    load_asset_page(&["--http3"], true, "h3", 1);
}

/// Chromium loads the asset page through tern (started with `serve_args`,
/// QUIC forced on when `quic`): every script runs, every request is logged
/// with `alpn`, and they came over at most `max_connections` connections.
fn load_asset_page(serve_args: &[&str], quic: bool, alpn: &str, max_connections: usize) {
    let found = find_chromium();
    if skip_without("chromium", found.is_some()) {
        return;
    }
    let Some(chromium) = found else { return };
    let site = AssetSite::start(SCRIPTS, IMAGES);
    let served = Served::builder()
        .args(serve_args)
        .backend_addr(site.addr())
        .start();
    let url = format!("https://localhost:{}/", served.addr.port());
    let flags = if quic {
        quic_flags(served.addr.port(), &served.cert.leaf_der)
    } else {
        Vec::new()
    };
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let out = dump_dom(&chromium, &url, &flags, Duration::from_secs(90));
    assert!(
        out.success(),
        "chromium failed: {:?}\n{}",
        out.status,
        out.stderr
    );

    // Every script ran, so every script came through tern.
    for i in 0..SCRIPTS {
        let marker = format!("id=\"{SCRIPT_MARKER}{i}\"");
        assert!(
            out.stdout.contains(&marker),
            "script {i} did not run:\n{}",
            out.stdout
        );
    }
    let wanted = 1 + SCRIPTS + IMAGES;
    let lines = served
        .tern
        .wait_stdout_lines("status=200", wanted, Duration::from_secs(10))
        .unwrap_or_else(|log| panic!("fewer than {wanted} answered requests in the log:\n{log}"));
    let log = served.tern.stdout_text();
    let all: Vec<&str> = log.lines().filter(|l| l.contains("path=")).collect();
    let other: Vec<&&str> = all
        .iter()
        .filter(|l| log_field(l, "alpn") != Some(alpn))
        .collect();
    assert!(other.is_empty(), "requests not over {alpn}:\n{other:#?}");
    let clients: BTreeSet<&str> = all.iter().filter_map(|l| log_field(l, "client")).collect();
    eprintln!(
        "chromium: {} requests ({} answered 200) over {} connection(s); origin saw {}",
        all.len(),
        lines.len(),
        clients.len(),
        site.requests()
    );
    assert!(
        clients.len() <= max_connections,
        "{} requests came over {} connections: {clients:?}",
        all.len(),
        clients.len()
    );
    for i in 0..IMAGES {
        let path = format!("path=/i/{i}.svg ");
        assert!(
            log.contains(&path),
            "image {i} was not requested through tern"
        );
    }
}
