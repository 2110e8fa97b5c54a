//! PROXY protocol headers sent to backends in TCP mode, so the backend
//! learns the real client address (and, with v2, the ALPN and SNI tern
//! negotiated, which lets the backend speak h2 itself). Encoding is done by
//! the `ppp` crate, which also parses, so both directions share one
//! well-tested implementation.

use std::net::SocketAddr;

use tern_tls::Negotiated;

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
            let tlvs: [(ppp::v2::Type, Option<&[u8]>); 2] = [
                (ppp::v2::Type::ALPN, tls.alpn.as_deref().map(str::as_bytes)),
                (
                    ppp::v2::Type::Authority,
                    tls.sni.as_deref().map(str::as_bytes),
                ),
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
}
