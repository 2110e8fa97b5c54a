//! Entry points for the fuzz targets in `fuzz/` (not an API): the parsers
//! of untrusted input that live inside this crate, on byte slices.

use std::net::SocketAddr;
use std::path::Path;

/// Decodes a PROXY protocol header as tern's listener does: a v1 line when
/// `bytes` starts with `PROXY `, else a whole v2 header. Returns the client
/// address, or None when tern would close the connection.
pub fn proxy_header(bytes: &[u8]) -> Option<SocketAddr> {
    let peer = SocketAddr::from(([192, 0, 2, 1], 1));
    let decoded = if bytes.starts_with(b"PROXY ") {
        crate::front::decode_proxy_v1(bytes, peer)
    } else {
        crate::front::decode_proxy_v2(bytes, peer)
    };
    decoded.ok()
}

/// Loads a TOML configuration from `text` as `tern serve --config` would
/// (certificate paths resolve against a directory that does not exist, so
/// only files named absolutely are read). Returns the one-line error.
pub fn config_toml(text: &str) -> Result<(), String> {
    let overrides = crate::config::GlobalOptions::default();
    crate::config::file::parse(Path::new("/nonexistent/tern.toml"), text, &overrides)
        .map(|_| ())
        .map_err(|e| e.to_string())
}
