//! Which versions, suites and groups the server accepts and picks, from
//! hand-built hellos (one fresh connection per offer).

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::report::{Negotiated, Negotiation};
use crate::wire::{self, ClientHelloSpec, ServerReply};

/// Sends one hand-built offer on a fresh connection.
pub fn offer(
    addr: SocketAddr,
    spec: &ClientHelloSpec,
    timeout: Duration,
) -> Result<ServerReply, wire::WireError> {
    let mut tcp = TcpStream::connect_timeout(&addr, timeout)?;
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(timeout))?;
    tcp.set_write_timeout(Some(timeout))?;
    wire::exchange(&mut tcp, spec)
}

/// Describes an accepted hand-built offer.
pub fn negotiated(reply: &ServerReply) -> Option<Negotiated> {
    match reply {
        ServerReply::Hello(h) | ServerReply::HelloRetry(h) => Some(Negotiated {
            version: wire::version_name(h.version).to_string(),
            suite: wire::suite_name(h.suite).into_owned(),
            key_exchange: wire::suite(h.suite).map(|s| s.kx),
            group: h.group.map(|g| wire::group_name(g).into_owned()),
            alpn: None,
        }),
        ServerReply::Alert(_) | ServerReply::Closed => None,
    }
}

/// Runs every hand-built offer and fills what it can of a [`Negotiation`];
/// offers that fail at the socket level are noted, not fatal.
pub fn run(
    addr: SocketAddr,
    sni: Option<&str>,
    timeout: Duration,
    notes: &mut Vec<String>,
) -> Negotiation {
    let sni = sni.map(str::to_string);
    let mut n = Negotiation::default();

    for version in [wire::TLS10, wire::TLS11, wire::TLS12] {
        let spec = ClientHelloSpec::legacy(version, wire::legacy_suites(), sni.clone());
        let accepted = match offer(addr, &spec, timeout) {
            Ok(ServerReply::Hello(h)) => Some(h.version == version),
            Ok(_) => Some(false),
            Err(e) => {
                notes.push(format!("{} offer: {e}", wire::version_name(version)));
                None
            }
        };
        n.versions
            .push((wire::version_name(version).to_string(), accepted));
    }
    // TLS 1.3 with no key share: an accepting server answers with a
    // HelloRetryRequest naming the group it wants, so we need no real keys.
    let mut tls13 = ClientHelloSpec::tls13_group(wire::X25519, sni.clone());
    tls13.groups = vec![
        wire::X25519,
        wire::SECP256R1,
        wire::SECP384R1,
        wire::SECP521R1,
    ];
    let tls13_accepted = match offer(addr, &tls13, timeout) {
        Ok(ServerReply::Hello(h)) | Ok(ServerReply::HelloRetry(h)) => {
            Some(h.version == wire::TLS13)
        }
        Ok(_) => Some(false),
        Err(e) => {
            notes.push(format!("TLSv1.3 offer: {e}"));
            None
        }
    };
    n.versions.push(("TLSv1.3".to_string(), tls13_accepted));

    if tls13_accepted == Some(true) {
        for group in wire::GROUPS {
            let spec = ClientHelloSpec::tls13_group(group, sni.clone());
            let accepted = match offer(addr, &spec, timeout) {
                Ok(ServerReply::HelloRetry(h)) | Ok(ServerReply::Hello(h)) => {
                    Some(h.version == wire::TLS13 && h.group == Some(group))
                }
                Ok(_) => Some(false),
                Err(_) => None,
            };
            n.groups
                .push((wire::group_name(group).into_owned(), accepted));
        }
    }

    let legacy = wire::legacy_suites();
    let legacy_reply = offer(
        addr,
        &ClientHelloSpec::legacy(wire::TLS12, legacy.clone(), sni.clone()),
        timeout,
    );
    n.legacy = legacy_reply.as_ref().ok().and_then(negotiated);

    let mut dhe_first = legacy.clone();
    dhe_first.sort_by_key(|id| wire::suite(*id).map(|s| s.kx) != Some(wire::KeyExchange::Dhe));
    let dhe_reply = offer(
        addr,
        &ClientHelloSpec::legacy(wire::TLS12, dhe_first, sni.clone()),
        timeout,
    );
    n.legacy_dhe_first = dhe_reply.as_ref().ok().and_then(negotiated);

    // Whose order decides: offer the legacy list reversed. Same pick as in
    // order → the server's preference; a different pick → the client's.
    let mut reversed = legacy;
    reversed.reverse();
    let reversed_reply = offer(
        addr,
        &ClientHelloSpec::legacy(wire::TLS12, reversed, sni),
        timeout,
    );
    n.preference = match (&n.legacy, reversed_reply.as_ref().ok().and_then(negotiated)) {
        (Some(a), Some(b)) if a.suite == b.suite => "server".into(),
        (Some(_), Some(_)) => "client".into(),
        _ => "unknown".into(),
    };
    if n.legacy.is_none() {
        notes.push("the server accepted no TLS 1.2 suite from the legacy offer".into());
    }
    n
}
