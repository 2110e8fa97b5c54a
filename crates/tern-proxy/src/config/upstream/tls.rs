//! TLS from tern to a group's servers (`tls = true`, `https://` servers,
//! `protocol = "h2"`): whom to trust, which name to check and send, which
//! ALPN to offer, and the client certificate to show.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

use super::super::options::{defaults, UpstreamOptions};
use super::super::resolve::key_err;
use super::super::KeyError;
use super::addr::ServerSpec;
use super::BackendProtocol;

/// How tern speaks TLS to the servers of a group.
#[derive(Debug, Clone)]
pub struct BackendTls {
    /// The `tls_ca` file, read when the configuration is (start and
    /// reload); `None`: the system's CA certificates.
    pub ca_file: Option<PathBuf>,
    /// The name each server's certificate must carry (and the SNI sent),
    /// parallel to [`super::UpstreamConfig::servers`].
    pub server_names: Vec<ServerName<'static>>,
    /// Client settings: tern's TLS policy (TLS 1.2/1.3, ECDHE, AEAD), the
    /// ALPN protocols offered, the roots, the client certificate, and a
    /// session cache shared by every worker (resumption).
    pub client: Arc<rustls::ClientConfig>,
    /// The `tls_client_cert` file, when tern shows a certificate.
    pub client_cert_file: Option<PathBuf>,
    /// The roots and the client chain, so that two configurations compare
    /// equal only when they trust and show the same certificates.
    roots: Vec<CertificateDer<'static>>,
    client_chain: Vec<CertificateDer<'static>>,
}

impl PartialEq for BackendTls {
    fn eq(&self, other: &Self) -> bool {
        self.ca_file == other.ca_file
            && self.server_names == other.server_names
            && self.roots == other.roots
            && self.client_cert_file == other.client_cert_file
            && self.client_chain == other.client_chain
            && self.client.alpn_protocols == other.client.alpn_protocols
            && self.client.enable_sni == other.client.enable_sni
    }
}

impl Eq for BackendTls {}

/// The TLS settings of a group speaking `protocol` to `servers`, when
/// `on`; otherwise `None`, and every `tls_*` key is refused (it would
/// silently do nothing).
pub(super) fn backend_tls(
    o: &UpstreamOptions,
    protocol: BackendProtocol,
    on: bool,
    servers: &[ServerSpec],
    base: &Path,
) -> Result<Option<BackendTls>, KeyError> {
    if !on {
        for (key, set) in [
            ("tls_ca", o.tls_ca.is_some()),
            ("tls_server_name", o.tls_server_name.is_some()),
            ("tls_sni", o.tls_sni.is_some()),
            ("tls_alpn", !o.tls_alpn.is_empty()),
            ("tls_client_cert", o.tls_client_cert.is_some()),
            ("tls_client_key", o.tls_client_key.is_some()),
        ] {
            if set {
                return Err(key_err(
                    key,
                    "only applies with TLS to the servers (tls = true, https:// servers, \
                     or protocol = \"h2\")",
                ));
            }
        }
        return Ok(None);
    }
    let ca_file = o.tls_ca.as_ref().map(|ca| base.join(ca));
    let roots = match &ca_file {
        Some(file) => load_ca(file)?,
        None => system_roots()?,
    };
    let server_names = match &o.tls_server_name {
        Some(name) => {
            let name = ServerName::try_from(name.as_str())
                .map(|n| n.to_owned())
                .map_err(|_| {
                    key_err(
                        "tls_server_name",
                        format!("{name:?} is neither a DNS name nor an IP address"),
                    )
                })?;
            vec![name; servers.len()]
        }
        None => servers
            .iter()
            .map(default_server_name)
            .collect::<Result<_, _>>()?,
    };
    let mut store = rustls::RootCertStore::empty();
    let (_, unusable) = store.add_parsable_certificates(roots.iter().cloned());
    if let (Some(file), true) = (&ca_file, unusable > 0) {
        return Err(key_err(
            "tls_ca",
            format!("{}: {unusable} unusable CA certificate(s)", file.display()),
        ));
    }
    let alpn = alpn(o, protocol)?;
    let (client_chain, client_cert_file, certified) = client_cert(o, base)?;
    // tern's own policy (no CBC, no DHE, TLS 1.2 at least) holds on the
    // backend side too.
    let policy = tern_tls::TlsPolicy::default();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(policy.crypto_provider()))
        .with_protocol_versions(&policy.versions())
        .map_err(|e| key_err("tls", format!("TLS client settings: {e}")))?
        .with_root_certificates(store);
    let mut client = match certified {
        Some(key) => {
            builder.with_client_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(key)))
        }
        None => builder.with_no_client_auth(),
    };
    client.alpn_protocols = alpn;
    client.enable_sni = o.tls_sni.unwrap_or(defaults::TLS_SNI);
    Ok(Some(BackendTls {
        ca_file,
        server_names,
        client: Arc::new(client),
        client_cert_file,
        roots,
        client_chain,
    }))
}

/// The ALPN ids offered: `h2` alone for HTTP/2 (a server that cannot
/// speak it must fail the handshake, never fall back to HTTP/1.1);
/// `tls_alpn` or `http/1.1` for HTTP/1.1 (never `h2`: tern would then be
/// bound to speak it).
fn alpn(o: &UpstreamOptions, protocol: BackendProtocol) -> Result<Vec<Vec<u8>>, KeyError> {
    if protocol == BackendProtocol::H2 {
        if !o.tls_alpn.is_empty() {
            return Err(key_err(
                "tls_alpn",
                "protocol \"h2\" always offers ALPN h2 alone",
            ));
        }
        return Ok(vec![b"h2".to_vec()]);
    }
    if o.tls_alpn.is_empty() {
        return Ok(defaults::TLS_ALPN
            .iter()
            .map(|id| id.as_bytes().to_vec())
            .collect());
    }
    let mut ids = Vec::new();
    for id in &o.tls_alpn {
        match id.as_str() {
            "none" if o.tls_alpn.len() == 1 => return Ok(Vec::new()),
            "h2" => {
                return Err(key_err(
                    "tls_alpn",
                    "an HTTP/1.1 group cannot offer h2 (set protocol = \"h2\" for HTTP/2 over TLS)",
                ))
            }
            "" | "none" => {
                return Err(key_err(
                    "tls_alpn",
                    "an empty protocol name (use [\"none\"] alone to offer no ALPN)",
                ))
            }
            id if id.len() > 255 || !id.is_ascii() => {
                return Err(key_err(
                    "tls_alpn",
                    format!("{id:?} is not an ALPN protocol id"),
                ))
            }
            id => ids.push(id.as_bytes().to_vec()),
        }
    }
    Ok(ids)
}

type ClientCert = (
    Vec<CertificateDer<'static>>,
    Option<PathBuf>,
    Option<Arc<rustls::sign::CertifiedKey>>,
);

/// The client certificate and key (`tls_client_cert`, `tls_client_key`),
/// loaded and checked the way a listener's are (the key matches the leaf,
/// the leaf is valid now).
fn client_cert(o: &UpstreamOptions, base: &Path) -> Result<ClientCert, KeyError> {
    let (cert, key) = match (&o.tls_client_cert, &o.tls_client_key) {
        (None, None) => return Ok((Vec::new(), None, None)),
        (Some(cert), Some(key)) => (base.join(cert), base.join(key)),
        (Some(_), None) => {
            return Err(key_err(
                "tls_client_cert",
                "needs tls_client_key (the private key of the client certificate)",
            ))
        }
        (None, Some(_)) => {
            return Err(key_err(
                "tls_client_key",
                "needs tls_client_cert (the client certificate chain)",
            ))
        }
    };
    let provider = tern_tls::TlsPolicy::default().crypto_provider();
    let files = tern_tls::CertFiles {
        cert: cert.clone(),
        key,
        ocsp: None,
    };
    let loaded = tern_tls::certs::load(&files, &provider)
        .map_err(|e| key_err("tls_client_cert", e.to_string()))?;
    let chain = loaded.certified.cert.clone();
    Ok((chain, Some(cert), Some(loaded.certified)))
}

/// The CA certificates in the PEM file `path` (at least one).
fn load_ca(path: &Path) -> Result<Vec<CertificateDer<'static>>, KeyError> {
    let pem =
        std::fs::read(path).map_err(|e| key_err("tls_ca", format!("{}: {e}", path.display())))?;
    let roots = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| key_err("tls_ca", format!("{}: not PEM: {e}", path.display())))?;
    if roots.is_empty() {
        return Err(key_err(
            "tls_ca",
            format!("{}: no CERTIFICATE in this PEM file", path.display()),
        ));
    }
    Ok(roots)
}

/// The system's CA certificates (the OpenSSL locations, SSL_CERT_FILE and
/// SSL_CERT_DIR; rustls-native-certs), read when the configuration is.
fn system_roots() -> Result<Vec<CertificateDer<'static>>, KeyError> {
    let found = rustls_native_certs::load_native_certs();
    if found.certs.is_empty() {
        let why = found
            .errors
            .first()
            .map_or_else(|| "none found".to_string(), ToString::to_string);
        return Err(key_err(
            "tls",
            format!(
                "no system CA certificates to check the servers against ({why}): \
                 install them (ca-certificates) or set tls_ca"
            ),
        ));
    }
    Ok(found.certs)
}

/// The name a server's certificate is checked against when no
/// `tls_server_name` is set: the host it was written with, which for an
/// IP address means an IP address entry of the certificate.
fn default_server_name(spec: &ServerSpec) -> Result<ServerName<'static>, KeyError> {
    let Some(host) = &spec.host else {
        return Err(key_err(
            "tls_server_name",
            format!(
                "{}: TLS over a Unix socket needs tls_server_name, the name its certificate carries",
                spec.addr
            ),
        ));
    };
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ServerName::IpAddress(ip.into()));
    }
    ServerName::try_from(host.clone()).map_err(|_| {
        key_err(
            "servers",
            format!(
                "{host:?} is not a DNS name to check a certificate against; set tls_server_name"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_server_name_is_the_host_as_written() {
        let name = |text: &str| {
            let spec = super::super::addr::parse_server(text, Path::new("/")).expect("parses");
            default_server_name(&spec).map_err(|e| e.message)
        };
        assert_eq!(
            name("https://localhost:8443"),
            Ok(ServerName::try_from("localhost").expect("name").to_owned())
        );
        assert_eq!(
            name("10.0.0.7:8443"),
            Ok(ServerName::IpAddress(
                "10.0.0.7".parse::<IpAddr>().expect("ip").into()
            ))
        );
        assert_eq!(
            name("[::1]:8443"),
            Ok(ServerName::IpAddress(
                "::1".parse::<IpAddr>().expect("ip").into()
            ))
        );
        let unix = name("unix:/run/app.sock").expect_err("no name");
        assert!(unix.contains("needs tls_server_name"), "{unix}");
    }
}
