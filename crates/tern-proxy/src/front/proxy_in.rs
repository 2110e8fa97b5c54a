//! PROXY protocol in: a listener behind an L4 balancer learns the real
//! client address from a v1 or v2 header the balancer sends before the TLS
//! handshake. Only trusted source networks may send one: anyone else could
//! claim any address. Parsing is done by the `ppp` crate.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::config::TrustedNet;

/// The v2 signature; a v1 header starts with "PROXY ".
const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";

/// Longest v1 header (RFC: 107 bytes including CRLF).
const V1_MAX: usize = 107;

/// Largest v2 header accepted (fixed part + addresses + TLVs). Balancers
/// send a few hundred bytes at most.
const V2_MAX: usize = 16 + 2048;

/// Why a connection's PROXY header was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProxyInError {
    /// The peer is not in `trusted_proxies`.
    #[error("PROXY header from untrusted source {0}")]
    Untrusted(SocketAddr),
    /// Malformed, too long, or not a PROXY header at all.
    #[error("bad PROXY header: {0}")]
    Malformed(String),
    /// Closed or too slow before the header was complete.
    #[error("no complete PROXY header: {0}")]
    Io(std::io::Error),
}

/// Reads exactly the PROXY header from `tcp` (leaving the TLS bytes behind
/// it unread) and returns the client address it carries. A `LOCAL` command
/// or `UNKNOWN` family (health checks from the balancer) keeps `peer`.
pub(crate) async fn read_header(
    tcp: &mut TcpStream,
    peer: SocketAddr,
    trusted: &[TrustedNet],
    deadline: Duration,
) -> Result<SocketAddr, ProxyInError> {
    if !trusted.iter().any(|n| n.contains(&peer.ip())) {
        return Err(ProxyInError::Untrusted(peer));
    }
    match tokio::time::timeout(deadline, read(tcp, peer)).await {
        Ok(r) => r,
        Err(_) => Err(ProxyInError::Io(std::io::ErrorKind::TimedOut.into())),
    }
}

async fn read(tcp: &mut TcpStream, peer: SocketAddr) -> Result<SocketAddr, ProxyInError> {
    let mut head = [0u8; 16];
    tcp.read_exact(&mut head[..6])
        .await
        .map_err(ProxyInError::Io)?;
    if &head[..6] == b"PROXY " {
        return read_v1(tcp, peer).await;
    }
    tcp.read_exact(&mut head[6..])
        .await
        .map_err(ProxyInError::Io)?;
    if head[..12] != V2_SIGNATURE {
        return Err(ProxyInError::Malformed(
            "neither a v1 nor a v2 signature".into(),
        ));
    }
    let len = u16::from_be_bytes([head[14], head[15]]) as usize;
    if 16 + len > V2_MAX {
        return Err(ProxyInError::Malformed(format!(
            "v2 header of {len} bytes is too long"
        )));
    }
    let mut whole = vec![0u8; 16 + len];
    whole[..16].copy_from_slice(&head);
    tcp.read_exact(&mut whole[16..])
        .await
        .map_err(ProxyInError::Io)?;
    decode_v2(&whole, peer)
}

/// The client address in a whole v2 header (signature to the end of its
/// addresses); `peer` for LOCAL commands and address families without one.
pub(crate) fn decode_v2(whole: &[u8], peer: SocketAddr) -> Result<SocketAddr, ProxyInError> {
    let header =
        ppp::v2::Header::try_from(whole).map_err(|e| ProxyInError::Malformed(e.to_string()))?;
    if header.command == ppp::v2::Command::Local {
        return Ok(peer);
    }
    Ok(match header.addresses {
        ppp::v2::Addresses::IPv4(a) => SocketAddr::new(a.source_address.into(), a.source_port),
        ppp::v2::Addresses::IPv6(a) => SocketAddr::new(a.source_address.into(), a.source_port),
        _ => peer,
    })
}

/// Reads the rest of a v1 line one byte at a time: the line ends with CRLF
/// and nothing after it may be consumed (it is the TLS ClientHello).
async fn read_v1(tcp: &mut TcpStream, peer: SocketAddr) -> Result<SocketAddr, ProxyInError> {
    let mut line = b"PROXY ".to_vec();
    while !line.ends_with(b"\r\n") {
        if line.len() >= V1_MAX {
            return Err(ProxyInError::Malformed(
                "v1 header longer than 107 bytes".into(),
            ));
        }
        let b = tcp.read_u8().await.map_err(ProxyInError::Io)?;
        line.push(b);
    }
    decode_v1(&line, peer)
}

/// The client address in a whole v1 line (`PROXY ...\r\n`); `peer` for
/// `UNKNOWN`.
pub(crate) fn decode_v1(line: &[u8], peer: SocketAddr) -> Result<SocketAddr, ProxyInError> {
    // The v1 line is ASCII by its specification. Checked here, not left to
    // ppp: ppp 2.3 slices the text two bytes past its first CR, which
    // panics when a multi-byte character follows the CR (found by fuzzing).
    if !line.is_ascii() {
        return Err(ProxyInError::Malformed("v1 header is not ASCII".into()));
    }
    let text = std::str::from_utf8(line)
        .map_err(|_| ProxyInError::Malformed("v1 header is not text".into()))?;
    let header =
        ppp::v1::Header::try_from(text).map_err(|e| ProxyInError::Malformed(e.to_string()))?;
    Ok(match header.addresses {
        ppp::v1::Addresses::Tcp4(a) => SocketAddr::new(a.source_address.into(), a.source_port),
        ppp::v1::Addresses::Tcp6(a) => SocketAddr::new(a.source_address.into(), a.source_port),
        ppp::v1::Addresses::Unknown => peer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn through(bytes: Vec<u8>, trusted: &str) -> (Result<SocketAddr, ProxyInError>, Vec<u8>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(&bytes).await.unwrap();
            s.shutdown().await.unwrap();
        });
        let (mut tcp, peer) = listener.accept().await.unwrap();
        let nets = vec![trusted.parse::<TrustedNet>().unwrap()];
        let result = read_header(&mut tcp, peer, &nets, Duration::from_secs(2)).await;
        let mut rest = Vec::new();
        let _ = tcp.read_to_end(&mut rest).await;
        client.await.unwrap();
        (result, rest)
    }

    #[test]
    fn v1_line_with_a_multibyte_character_after_a_cr_is_refused_not_a_panic() {
        // Found by fuzz/ (proxy_header): ppp slices inside the character.
        let peer: SocketAddr = "192.0.2.1:1".parse().unwrap();
        let line = b"PROXY 90PROXY UUN\r\xd9\xaf\x018.\nNKNO\r\n";
        assert!(matches!(
            decode_v1(line, peer),
            Err(ProxyInError::Malformed(_))
        ));
    }

    #[tokio::test]
    async fn v1_header_gives_the_client_and_leaves_the_tls_bytes() {
        let (r, rest) = through(
            b"PROXY TCP4 203.0.113.9 127.0.0.1 5555 443\r\n\x16\x03\x01".to_vec(),
            "127.0.0.0/8",
        )
        .await;
        assert_eq!(r.unwrap(), "203.0.113.9:5555".parse().unwrap());
        assert_eq!(rest, b"\x16\x03\x01");
    }

    #[tokio::test]
    async fn v2_header_gives_the_client() {
        let src: SocketAddr = "[2001:db8::7]:4000".parse().unwrap();
        let dst: SocketAddr = "[::1]:443".parse().unwrap();
        let mut bytes = ppp::v2::Builder::with_addresses(
            ppp::v2::Version::Two | ppp::v2::Command::Proxy,
            ppp::v2::Protocol::Stream,
            (src, dst),
        )
        .build()
        .unwrap();
        bytes.extend_from_slice(b"\x16\x03\x01");
        let (r, rest) = through(bytes, "127.0.0.1/32").await;
        assert_eq!(r.unwrap(), src);
        assert_eq!(rest, b"\x16\x03\x01");
    }

    #[tokio::test]
    async fn untrusted_source_and_garbage_are_refused() {
        let (r, _) = through(
            b"PROXY TCP4 203.0.113.9 127.0.0.1 5555 443\r\n".to_vec(),
            "10.0.0.0/8",
        )
        .await;
        assert!(matches!(r, Err(ProxyInError::Untrusted(_))));
        let (r, _) = through(
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage".to_vec(),
            "127.0.0.0/8",
        )
        .await;
        assert!(matches!(r, Err(ProxyInError::Malformed(_))));
        let (r, _) = through(b"PROXY TCP4 nonsense\r\n".to_vec(), "127.0.0.0/8").await;
        assert!(matches!(r, Err(ProxyInError::Malformed(_))));
    }
}
