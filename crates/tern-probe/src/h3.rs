//! HTTP/3: whether the endpoint advertises it (Alt-Svc) and whether that
//! advertisement holds: a QUIC handshake to the advertised UDP port (ALPN
//! h3, TLS 1.3) and one GET over it, timed, so its round trips can be set
//! beside TCP + TLS's. An Alt-Svc that points at an HTTP/3 nobody answers
//! costs browsers a wasted attempt before they fall back.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Buf;
use serde::Serialize;

use crate::probe::Target;

/// What the HTTP/3 check saw.
#[derive(Debug, Clone, Default, Serialize)]
pub struct H3Check {
    /// The Alt-Svc field of the HTTP/1.1 response, as sent.
    pub alt_svc: Option<String>,
    /// The UDP port its `h3` entry names, if it has one (on the same host:
    /// entries naming another host are not followed).
    pub advertised_port: Option<u16>,
    /// A QUIC handshake with ALPN h3 completed.
    pub reachable: bool,
    /// Time from the first Initial to the handshake's completion.
    pub handshake_ms: Option<f64>,
    /// The cipher suite and key-exchange group the QUIC handshake chose.
    pub cipher: Option<String>,
    pub group: Option<String>,
    /// `handshake_ms` in round trips of the TCP path (when the RTT is large
    /// enough to count them).
    pub handshake_rtts: Option<f64>,
    /// Status of `GET /` over HTTP/3.
    pub status: Option<u16>,
    /// Time from the request to the complete response.
    pub response_ms: Option<f64>,
    /// Why the handshake or the request failed.
    pub error: Option<String>,
}

/// The port of the first `h3` entry of an Alt-Svc value that names this
/// host (`h3=":443"`, or `h3="host:443"` with host the probed one).
pub fn advertised_h3_port(alt_svc: &str, host: &str) -> Option<u16> {
    alt_svc.split(',').find_map(|entry| {
        let (protocol, rest) = entry.trim().split_once('=')?;
        if protocol.trim() != "h3" {
            return None;
        }
        let authority = rest.split(';').next()?.trim().trim_matches('"');
        let (h, port) = authority.rsplit_once(':')?;
        let h = h.trim_start_matches('[').trim_end_matches(']');
        (h.is_empty() || h.eq_ignore_ascii_case(host)).then(|| port.parse().ok())?
    })
}

/// Runs the check when `alt_svc` advertises h3 on this host; `rtt_ms` is
/// the TCP path's round trip, for counting the handshake's round trips.
pub(crate) fn check(
    target: &Target,
    alt_svc: Option<&str>,
    rtt_ms: Option<f64>,
    notes: &mut Vec<String>,
) -> H3Check {
    let mut c = H3Check {
        alt_svc: alt_svc.map(str::to_string),
        ..H3Check::default()
    };
    let Some(port) = alt_svc.and_then(|a| advertised_h3_port(a, &target.host)) else {
        return c;
    };
    c.advertised_port = Some(port);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            notes.push(format!("HTTP/3: {e}"));
            return c;
        }
    };
    let addr = SocketAddr::new(target.addr.ip(), port);
    match runtime.block_on(handshake_and_get(target, addr)) {
        Ok((handshake, status, response)) => {
            c.reachable = true;
            c.handshake_ms = Some(ms(handshake.took));
            c.cipher = handshake.cipher;
            c.group = handshake.group;
            c.status = Some(status);
            c.response_ms = Some(ms(response));
        }
        Err(Failure::Handshake(e)) => c.error = Some(e),
        Err(Failure::Request(handshake, e)) => {
            c.reachable = true;
            c.handshake_ms = Some(ms(handshake.took));
            c.cipher = handshake.cipher;
            c.group = handshake.group;
            c.error = Some(e);
        }
    }
    c.handshake_rtts = match (c.handshake_ms, rtt_ms) {
        (Some(h), Some(rtt)) if rtt > 0.0 => Some(h / rtt),
        _ => None,
    };
    c
}

enum Failure {
    Handshake(String),
    Request(Handshake, String),
}

/// A completed QUIC handshake: how long it took and what it chose.
struct Handshake {
    took: Duration,
    cipher: Option<String>,
    group: Option<String>,
}

async fn handshake_and_get(
    target: &Target,
    addr: SocketAddr,
) -> Result<(Handshake, u16, Duration), Failure> {
    let fail = |e: &dyn std::fmt::Display| Failure::Handshake(e.to_string());
    let tls = target
        .config(&[&rustls::version::TLS13], &[b"h3"], false)
        .map_err(|e| fail(&e))?;
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(|e| fail(&e))?;
    let local: SocketAddr = match addr.ip() {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let mut endpoint = quinn::Endpoint::client(local).map_err(|e| fail(&e))?;
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    let name = match &target.server_name {
        rustls::pki_types::ServerName::DnsName(n) => n.as_ref().to_string(),
        _ => target.host.clone(),
    };
    let start = Instant::now();
    let connecting = endpoint.connect(addr, &name).map_err(|e| fail(&e))?;
    let conn = match tokio::time::timeout(target.timeout, connecting).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => return Err(fail(&e)),
        Err(_) => {
            return Err(Failure::Handshake(format!(
                "no QUIC handshake within {:?} (UDP port {} filtered or nothing listening)",
                target.timeout,
                addr.port()
            )))
        }
    };
    let data = conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok());
    let handshake = Handshake {
        took: start.elapsed(),
        cipher: data
            .as_ref()
            .and_then(|d| d.cipher_suite)
            .map(|s| crate::suites::suite_name(s).into_owned()),
        group: data
            .as_ref()
            .and_then(|d| d.key_exchange_group)
            .map(|g| crate::suites::group_name(g).into_owned()),
    };
    let request = async {
        // No GREASE frame (tern bench sends none either): nginx 1.30 resets
        // a request stream that carries one, and the probe would report a
        // working HTTP/3 as failing.
        let (mut driver, mut send) = h3::client::builder()
            .send_grease(false)
            .build::<_, _, bytes::Bytes>(h3_quinn::Connection::new(conn.clone()))
            .await
            .map_err(|e| e.to_string())?;
        let drive = async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await };
        let get = async {
            let started = Instant::now();
            let req = http::Request::get(format!("https://{}/", target.host))
                .body(())
                .map_err(|e| e.to_string())?;
            let mut stream = send.send_request(req).await.map_err(|e| e.to_string())?;
            stream.finish().await.map_err(|e| e.to_string())?;
            let response = stream.recv_response().await.map_err(|e| e.to_string())?;
            while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
                chunk.advance(chunk.remaining());
            }
            Ok::<_, String>((response.status().as_u16(), started.elapsed()))
        };
        tokio::select! {
            done = get => done,
            closed = drive => Err(format!("HTTP/3 connection closed: {closed}")),
        }
    };
    let result = tokio::time::timeout(target.timeout, request).await;
    conn.close(quinn::VarInt::from_u32(0x100), b"");
    // Long enough for the close to leave; the server would time out anyway.
    let _ = tokio::time::timeout(Duration::from_millis(300), endpoint.wait_idle()).await;
    match result {
        Ok(Ok((status, took))) => Ok((handshake, status, took)),
        Ok(Err(e)) => Err(Failure::Request(handshake, e)),
        Err(_) => Err(Failure::Request(
            handshake,
            format!("no HTTP/3 response within {:?}", target.timeout),
        )),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_h3_port_of_this_host_only() {
        assert_eq!(
            advertised_h3_port("h3=\":443\"; ma=86400", "a.test"),
            Some(443)
        );
        assert_eq!(
            advertised_h3_port("h3-29=\":8443\", h3=\":9443\"; ma=60", "a.test"),
            Some(9443)
        );
        assert_eq!(
            advertised_h3_port("h3=\"a.test:4433\"", "A.test"),
            Some(4433)
        );
        assert_eq!(advertised_h3_port("h3=\"other.test:443\"", "a.test"), None);
        assert_eq!(advertised_h3_port("h2=\":443\"", "a.test"), None);
        assert_eq!(advertised_h3_port("clear", "a.test"), None);
        assert_eq!(advertised_h3_port("h3=\":notaport\"", "a.test"), None);
    }
}
