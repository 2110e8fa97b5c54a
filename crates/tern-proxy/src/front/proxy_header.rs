//! PROXY protocol headers sent to backends in TCP mode, so the backend
//! learns the real client address (and, with v2, the ALPN and SNI tern
//! negotiated, which lets the backend speak h2 itself, and the TLS facts
//! and client certificate in a `PP2_TYPE_SSL` TLV). Encoding is done by
//! the `ppp` crate, which also parses, so both directions share one
//! well-tested implementation; the SSL TLV's value (flags, verify result,
//! sub-TLVs) is laid out here, as ppp has no builder for it.

use std::net::SocketAddr;

use tern_tls::iana::openssl_suite_name;
use tern_tls::{CertAlgorithms, Negotiated};

use crate::config::ProxyProtocol;

/// The header for a client at `peer` that connected to `listen`.
/// `local` is tern's address on the backend connection, used only when the
/// listen address is unspecified (0.0.0.0), where it is the better guess.
pub(crate) fn encode(
    version: ProxyProtocol,
    peer: SocketAddr,
    listen: SocketAddr,
    tls: &Negotiated,
    local: Option<SocketAddr>,
) -> Vec<u8> {
    let served = match version {
        ProxyProtocol::V1 => None,
        ProxyProtocol::V2 => served_algorithms(tls),
    };
    encode_with(version, peer, listen, tls, served.as_ref(), local)
}

/// [`encode`] with the served certificate's algorithms given.
pub(crate) fn encode_with(
    version: ProxyProtocol,
    peer: SocketAddr,
    listen: SocketAddr,
    tls: &Negotiated,
    served: Option<&CertAlgorithms>,
    local: Option<SocketAddr>,
) -> Vec<u8> {
    let dst = if listen.ip().is_unspecified() {
        local
            .map(|l| SocketAddr::new(l.ip(), listen.port()))
            .unwrap_or(listen)
    } else {
        listen
    };
    // Both ends must be the same family; map v4 into v6 when they differ.
    let (src, dst) = match (peer, dst) {
        (SocketAddr::V4(_), SocketAddr::V4(_)) | (SocketAddr::V6(_), SocketAddr::V6(_)) => {
            (peer, dst)
        }
        (SocketAddr::V4(p), SocketAddr::V6(_)) => (
            SocketAddr::new(p.ip().to_ipv6_mapped().into(), p.port()),
            dst,
        ),
        (SocketAddr::V6(_), SocketAddr::V4(d)) => (
            peer,
            SocketAddr::new(d.ip().to_ipv6_mapped().into(), d.port()),
        ),
    };
    match version {
        ProxyProtocol::V1 => ppp::v1::Addresses::from((src, dst))
            .to_string()
            .into_bytes(),
        ProxyProtocol::V2 => {
            let mut builder = ppp::v2::Builder::with_addresses(
                ppp::v2::Version::Two | ppp::v2::Command::Proxy,
                ppp::v2::Protocol::Stream,
                (src, dst),
            );
            let ssl = ssl_tlv(tls, served);
            let tlvs: [(ppp::v2::Type, Option<&[u8]>); 3] = [
                (ppp::v2::Type::ALPN, tls.alpn.as_deref().map(str::as_bytes)),
                (
                    ppp::v2::Type::Authority,
                    tls.sni.as_deref().map(str::as_bytes),
                ),
                (ppp::v2::Type::SSL, Some(&ssl)),
            ];
            for (kind, value) in tlvs {
                if let Some(v) = value {
                    builder = match builder.write_tlv(kind, v) {
                        Ok(b) => b,
                        // Only fails on a value over 64 KiB, which ALPN and
                        // SNI cannot be; fall back to addresses alone.
                        Err(_) => return encode_v2_bare(src, dst),
                    };
                }
            }
            builder.build().unwrap_or_else(|_| encode_v2_bare(src, dst))
        }
    }
}

/// `PP2_CLIENT_SSL`: the client connected over TLS.
const PP2_CLIENT_SSL: u8 = 0x01;
/// `PP2_CLIENT_CERT_CONN`: it sent a certificate on this connection.
const PP2_CLIENT_CERT_CONN: u8 = 0x02;
/// `PP2_CLIENT_CERT_SESS`: its session carries a certificate (sent on
/// this connection or on the one the session was resumed from).
const PP2_CLIENT_CERT_SESS: u8 = 0x04;
/// The longest value a sub-TLV carries: more than any real name or
/// algorithm, and the whole TLV stays far below the header's 64 KiB.
const MAX_SUB_TLV: usize = 1024;

/// The signature and key algorithm of the certificate tern served this
/// connection with (what the spec's SIG_ALG and KEY_ALG describe: "the
/// certificate presented by the frontend"). Read from the leaf per
/// connection, only when a PROXY v2 header is written.
pub(crate) fn served_algorithms(tls: &Negotiated) -> Option<CertAlgorithms> {
    let leaf = tls.served_cert.as_deref()?.end_entity_cert().ok()?;
    CertAlgorithms::of(leaf.as_ref())
}

/// The value of a `PP2_TYPE_SSL` TLV (the PROXY protocol spec, section
/// 2.2.5): client flags, the verify result (0 when a client certificate
/// was sent and verified, else 1: tern refuses a bad one, so there is no
/// other code to give), then the VERSION, CN, CIPHER, SIG_ALG and KEY_ALG
/// sub-TLVs that apply. Names as HAProxy (OpenSSL) writes them, which is
/// what consumers of this TLV compare against: `TLSv1.3`; OpenSSL's
/// cipher names (`ECDHE-RSA-AES128-GCM-SHA256`; TLS 1.3's are the IANA
/// ones); SIG_ALG and KEY_ALG of tern's own certificate, `served`
/// (`RSA-SHA256`, `RSA2048`), not of the client's.
pub(crate) fn ssl_tlv(tls: &Negotiated, served: Option<&CertAlgorithms>) -> Vec<u8> {
    let cert = tls.client_cert.as_deref();
    let mut client = PP2_CLIENT_SSL;
    if cert.is_some() {
        client |= PP2_CLIENT_CERT_SESS;
        if !tls.resumed {
            client |= PP2_CLIENT_CERT_CONN;
        }
    }
    let verify: u32 = if cert.is_some() { 0 } else { 1 };
    let mut out = Vec::with_capacity(64);
    out.push(client);
    out.extend_from_slice(&verify.to_be_bytes());
    let subs: [(ppp::v2::Type, Option<&str>); 5] = [
        (ppp::v2::Type::SSLVersion, Some(tls.version)),
        (
            ppp::v2::Type::SSLCommonName,
            cert.and_then(|c| c.common_name.as_deref()),
        ),
        (
            ppp::v2::Type::SSLCipher,
            Some(openssl_suite_name(&tls.cipher)),
        ),
        (
            ppp::v2::Type::SSLSignatureAlgorithm,
            served.map(|s| s.sig_alg.as_str()),
        ),
        (
            ppp::v2::Type::SSLKeyAlgorithm,
            served.and_then(|s| s.key_alg.as_deref()),
        ),
    ];
    for (kind, value) in subs {
        let Some(value) = value.filter(|v| !v.is_empty()) else {
            continue;
        };
        let value = &value.as_bytes()[..value.len().min(MAX_SUB_TLV)];
        out.push(u8::from(kind));
        // At most MAX_SUB_TLV, so it fits in two bytes.
        out.extend_from_slice(&(value.len() as u16).to_be_bytes());
        out.extend_from_slice(value);
    }
    out
}

fn encode_v2_bare(src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
    ppp::v2::Builder::with_addresses(
        ppp::v2::Version::Two | ppp::v2::Command::Proxy,
        ppp::v2::Protocol::Stream,
        (src, dst),
    )
    .build()
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls() -> Negotiated {
        Negotiated {
            alpn: Some("h2".into()),
            sni: Some("example.com".into()),
            ..Negotiated::default()
        }
    }

    #[test]
    fn v1_names_the_client() {
        let h = encode(
            ProxyProtocol::V1,
            "192.0.2.1:5000".parse().unwrap(),
            "127.0.0.1:8443".parse().unwrap(),
            &tls(),
            None,
        );
        assert_eq!(h, b"PROXY TCP4 192.0.2.1 127.0.0.1 5000 8443\r\n");
    }

    #[test]
    fn v2_carries_alpn_and_sni_and_parses_back() {
        let h = encode(
            ProxyProtocol::V2,
            "[::1]:5000".parse().unwrap(),
            "[::1]:8443".parse().unwrap(),
            &tls(),
            None,
        );
        let parsed = ppp::v2::Header::try_from(&h[..]).unwrap();
        let tlvs: Vec<_> = parsed.tlvs().map(|t| t.unwrap()).collect();
        assert!(tlvs
            .iter()
            .any(|t| t.kind == u8::from(ppp::v2::Type::ALPN) && &t.value[..] == b"h2"));
        assert!(tlvs.iter().any(
            |t| t.kind == u8::from(ppp::v2::Type::Authority) && &t.value[..] == b"example.com"
        ));
        match parsed.addresses {
            ppp::v2::Addresses::IPv6(a) => assert_eq!(a.source_port, 5000),
            other => panic!("{other:?}"),
        }
    }

    /// The sub-TLVs of an SSL TLV value, after its 5 bytes of flags and
    /// verify result, as (type, text).
    fn sub_tlvs(value: &[u8]) -> Vec<(u8, String)> {
        let mut rest = &value[5..];
        let mut out = Vec::new();
        while !rest.is_empty() {
            let len = usize::from(u16::from_be_bytes([rest[1], rest[2]]));
            out.push((
                rest[0],
                String::from_utf8(rest[3..3 + len].to_vec()).unwrap(),
            ));
            rest = &rest[3 + len..];
        }
        out
    }

    #[test]
    fn v2_ssl_tlv_names_the_verified_client_certificate() {
        let mut tls = tls();
        tls.version = "TLSv1.3";
        tls.cipher = "TLS_AES_128_GCM_SHA256".into();
        let h = encode(
            ProxyProtocol::V2,
            "192.0.2.1:5000".parse().unwrap(),
            "127.0.0.1:8443".parse().unwrap(),
            &tls,
            None,
        );
        let parsed = ppp::v2::Header::try_from(&h[..]).unwrap();
        let ssl = parsed
            .tlvs()
            .map(|t| t.unwrap())
            .find(|t| t.kind == u8::from(ppp::v2::Type::SSL))
            .expect("an SSL TLV");
        assert_eq!(ssl.value[0], PP2_CLIENT_SSL);
        assert_eq!(
            &ssl.value[1..5],
            &1u32.to_be_bytes(),
            "no certificate: not verified"
        );
        assert_eq!(
            sub_tlvs(&ssl.value),
            vec![
                (0x21, "TLSv1.3".into()),
                (0x23, "TLS_AES_128_GCM_SHA256".into())
            ]
        );

        tls.client_cert = Some(std::sync::Arc::new(tern_tls::ClientCert {
            subject: "CN=alice".into(),
            common_name: Some("alice".into()),
            sha256: String::new(),
            chain: Vec::new(),
        }));
        let value = ssl_tlv(&tls, None);
        assert_eq!(
            value[0],
            PP2_CLIENT_SSL | PP2_CLIENT_CERT_CONN | PP2_CLIENT_CERT_SESS
        );
        assert_eq!(&value[1..5], &0u32.to_be_bytes());
        assert_eq!(
            sub_tlvs(&value),
            vec![
                (0x21, "TLSv1.3".into()),
                (0x22, "alice".into()),
                (0x23, "TLS_AES_128_GCM_SHA256".into()),
            ]
        );
        tls.resumed = true;
        assert_eq!(
            ssl_tlv(&tls, None)[0],
            PP2_CLIENT_SSL | PP2_CLIENT_CERT_SESS
        );
    }

    /// SIG_ALG and KEY_ALG name the certificate tern served, and a TLS 1.2
    /// cipher goes by OpenSSL's name, as HAProxy writes them.
    #[test]
    fn v2_ssl_tlv_names_the_served_certificate_and_openssl_cipher() {
        let mut tls = tls();
        tls.version = "TLSv1.2";
        tls.cipher = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into();
        let served = CertAlgorithms {
            sig_alg: "RSA-SHA256".into(),
            key_alg: Some("RSA2048".into()),
        };
        assert_eq!(
            sub_tlvs(&ssl_tlv(&tls, Some(&served))),
            vec![
                (0x21, "TLSv1.2".into()),
                (0x23, "ECDHE-RSA-AES128-GCM-SHA256".into()),
                (0x24, "RSA-SHA256".into()),
                (0x25, "RSA2048".into()),
            ]
        );
        let ed25519 = CertAlgorithms {
            sig_alg: "ED25519".into(),
            key_alg: None,
        };
        assert_eq!(
            sub_tlvs(&ssl_tlv(&tls, Some(&ed25519)))[2..],
            [(0x24, "ED25519".to_string())]
        );
    }
}
