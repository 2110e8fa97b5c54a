//! HTTP/3 client side: QUIC connections (quinn, with the worker's rustls
//! configuration) carrying HTTP/3 streams (h3).
//!
//! The cipher suite, group and handshake kind (full or resumed) come from
//! a patch of quinn-proto (vendor/README.md): quinn keeps them to itself.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use quinn::crypto::rustls::{HandshakeData, QuicClientConfig};

use crate::error::{BenchError, RequestError};
use crate::http1::Exchange;
use crate::http2::{H2Request, CONNECTION_WINDOW, STREAM_WINDOW};
use crate::tls::{group_label, suite_label, KeyCache, Negotiated};

/// The sending half of an HTTP/3 connection.
pub type H3Send = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// Opens QUIC connections to one target, each from an endpoint (a UDP
/// socket) of its own with zero-length client connection IDs, as
/// Chromium and quic-go's `DialAddr` do.
///
/// Why not one endpoint shared by a worker's connections: the server
/// picks one of its SO_REUSEPORT sockets (workers) by the client's
/// address, so every connection of a bench worker reached one server
/// worker; and a shared socket needs client connection IDs, which quinn
/// follows with a spare one (NEW_CONNECTION_ID, RFC 9000 5.1.1) in a
/// datagram of its own after each handshake, beside which the server
/// sends an ACK-only datagram (two ack-eliciting packets, RFC 9000
/// 13.2.2) that browsers do not make it send. At 1,000 connections a
/// second tern serve's CPU per connection under this client equals its
/// CPU under quic-go's, and under the shared socket it was 5-8 % more
/// (bench/h3-clients.sh; BENCHMARKS.md has the other rates).
pub struct H3Connector {
    /// An endpoint held open for the run, used by no connection. The
    /// kernel counts the UDP sockets with GRO on (quinn turns it on):
    /// the first one on and the last one closed rewrite kernel code on
    /// every CPU (a static key). Were a connection's socket the only one,
    /// each connection would interrupt every CPU twice, the server's
    /// included.
    _gro_anchor: quinn::Endpoint,
    config: quinn::ClientConfig,
    /// Each connection's endpoint, made once: the default makes a
    /// stateless-reset HMAC key from fresh random bytes, and the runtime
    /// handle is an allocation.
    endpoint: ClientEndpoint,
    local: SocketAddr,
    laddr: Option<IpAddr>,
    addr: SocketAddr,
    server_name: String,
}

/// Zero-length connection IDs: the client's endpoint holds one
/// connection, so the server's packets need no ID to find it.
struct NoConnectionIds;

impl quinn::ConnectionIdGenerator for NoConnectionIds {
    fn generate_cid(&mut self) -> quinn::ConnectionId {
        quinn::ConnectionId::new(&[])
    }

    fn cid_len(&self) -> usize {
        0
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// A QUIC connection with HTTP/3 on it, and what it took to open it.
pub struct H3Established {
    /// Requests go here.
    pub send: H3Send,
    /// The QUIC connection (for its statistics).
    pub conn: quinn::Connection,
    /// The QUIC handshake (TLS included): first Initial to handshake done.
    pub handshake: Duration,
    /// What was negotiated.
    pub negotiated: Negotiated,
    /// Whether the handshake resumed a TLS session.
    pub resumed: bool,
    /// UDP payload bytes received during the handshake.
    pub handshake_bytes: u64,
}

/// Packets a connection sends before it searches for a path MTU above
/// QUIC's 1200 bytes (quinn-proto patch 0008).
const MTU_SEARCH_AFTER_PACKETS: u64 = 100;

impl H3Connector {
    /// A connector to `addr` sending `server_name`, with `tls` (the
    /// worker's client configuration; ALPN h3, TLS 1.3). Needs the
    /// worker's runtime: the endpoint's socket is registered with it.
    pub fn new(
        addr: SocketAddr,
        server_name: &str,
        tls: Arc<rustls::ClientConfig>,
        laddr: Option<IpAddr>,
    ) -> Result<H3Connector, BenchError> {
        let quic = QuicClientConfig::try_from(tls)
            .map_err(|e| BenchError::TlsConfig(format!("HTTP/3: {e}")))?;
        let mut config = quinn::ClientConfig::new(Arc::new(quic));
        let mut transport = quinn::TransportConfig::default();
        transport
            .stream_receive_window(STREAM_WINDOW.into())
            .receive_window(CONNECTION_WINDOW.into());
        // A bench client receives; larger packets of its own would carry
        // ACKs. It looks for a larger path MTU only after 100 packets, as
        // Chromium's QUIC does (quinn, at once, sends four probes per
        // connection, each immediately ACKed by the server).
        let mut mtu = quinn::MtuDiscoveryConfig::default();
        mtu.start_after(MTU_SEARCH_AFTER_PACKETS);
        transport.mtu_discovery_config(Some(mtu));
        config.transport_config(Arc::new(transport));
        let local: SocketAddr = match (laddr, addr.ip()) {
            (Some(ip), to) if ip.is_ipv4() != to.is_ipv4() => {
                return Err(BenchError::Config(format!(
                    "--laddr {ip}: QUIC to {to} needs a source address of the same family"
                )))
            }
            (Some(ip), _) => (ip, 0).into(),
            (None, IpAddr::V4(_)) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            (None, IpAddr::V6(_)) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        // Also the check that the source address can be bound: a
        // configuration error said before the run, not on every connection.
        let endpoint = ClientEndpoint::new().map_err(BenchError::Runtime)?;
        let anchor = endpoint.open(local).map_err(|e| match laddr {
            Some(ip) => BenchError::Config(format!("--laddr {ip}: bind UDP: {e}")),
            None => BenchError::Runtime(e),
        })?;
        Ok(H3Connector {
            _gro_anchor: anchor,
            config,
            endpoint,
            local,
            laddr,
            addr,
            server_name: server_name.to_string(),
        })
    }

    /// Opens one QUIC connection and starts HTTP/3 on it.
    pub async fn connect(&self, key_cache: &mut KeyCache) -> Result<H3Established, RequestError> {
        let endpoint = self
            .endpoint
            .open(self.local)
            .map_err(|e| match self.laddr {
                Some(ip) => RequestError::Connect(format!("--laddr {ip}: bind UDP: {e}")),
                None => RequestError::Connect(format!("QUIC: bind UDP: {e}")),
            })?;
        let start = Instant::now();
        let connecting = endpoint
            .connect_with(self.config.clone(), self.addr, &self.server_name)
            .map_err(|e| RequestError::Connect(format!("QUIC: {e}")))?;
        let conn = connecting.await.map_err(quic_error)?;
        let handshake = start.elapsed();
        let handshake_bytes = conn.stats().udp_rx.bytes;
        let data = conn
            .handshake_data()
            .and_then(|d| d.downcast::<HandshakeData>().ok());
        let alpn = data
            .as_ref()
            .and_then(|d| d.protocol.as_deref())
            .map_or_else(|| "none".to_string(), |p| String::from_utf8_lossy(p).into());
        let cipher = data
            .as_ref()
            .and_then(|d| d.cipher_suite)
            .map_or_else(|| "none".to_string(), suite_label);
        let group = data
            .as_ref()
            .and_then(|d| d.key_exchange_group)
            .map_or_else(|| "none".to_string(), group_label);
        let resumed = data
            .as_ref()
            .is_some_and(|d| d.handshake_kind == Some(rustls::HandshakeKind::Resumed));
        let server_key = conn
            .peer_identity()
            .and_then(|id| {
                id.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
                    .ok()
            })
            .and_then(|chain| chain.first().map(|leaf| key_cache.describe(leaf.as_ref())))
            .unwrap_or_else(|| "unknown".to_string());
        // No GREASE frames: h3 puts one on the first request stream, and
        // nginx (1.30) then reads that request as cut short and resets it.
        // A load generator measures requests, not extension tolerance.
        let (mut driver, send) = h3::client::builder()
            .send_grease(false)
            .build(h3_quinn::Connection::new(conn.clone()))
            .await
            .map_err(|e| RequestError::Http(format!("HTTP/3 set-up: {e}")))?;
        tokio::task::spawn_local(async move {
            // Errors surface on the streams; nothing more to say here.
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok(H3Established {
            send,
            conn,
            handshake,
            handshake_bytes,
            resumed,
            negotiated: Negotiated {
                version: "TLSv1.3".to_string(),
                cipher,
                group,
                server_key,
                alpn,
            },
        })
    }
}

/// What every client endpoint of a connector shares: its configuration
/// (zero-length connection IDs) and the runtime it runs on.
struct ClientEndpoint {
    config: quinn::EndpointConfig,
    runtime: Arc<dyn quinn::Runtime>,
}

impl ClientEndpoint {
    fn new() -> std::io::Result<ClientEndpoint> {
        let runtime =
            quinn::default_runtime().ok_or_else(|| std::io::Error::other("no async runtime"))?;
        let mut config = quinn::EndpointConfig::default();
        config.cid_generator(|| Box::new(NoConnectionIds));
        Ok(ClientEndpoint { config, runtime })
    }

    /// A new client endpoint on a UDP socket of its own, bound to `local`
    /// (with --laddr, that address, as TCP connections are).
    fn open(&self, local: SocketAddr) -> std::io::Result<quinn::Endpoint> {
        let socket = std::net::UdpSocket::bind(local)?;
        quinn::Endpoint::new(self.config.clone(), None, socket, self.runtime.clone())
    }
}

/// Sends one request on a new stream and reads the whole response. On
/// error, the flag says whether the connection is dead.
pub async fn exchange(
    send: &mut H3Send,
    req: &H2Request,
    expect_body: Option<&[u8]>,
) -> Result<Exchange, (RequestError, bool)> {
    let start = Instant::now();
    let mut stream = send.send_request(req.build()).await.map_err(|e| {
        // The server said GOAWAY (a server draining): this request was
        // never sent, and goes again on the next connection.
        if matches!(e, h3::error::StreamError::RemoteClosing { .. }) {
            (RequestError::Unprocessed, true)
        } else {
            stream_error(e)
        }
    })?;
    if !req.body().is_empty() {
        stream
            .send_data(req.body().clone())
            .await
            .map_err(stream_error)?;
    }
    stream.finish().await.map_err(stream_error)?;
    let response = stream.recv_response().await.map_err(stream_error)?;
    let first = Instant::now();
    let status = response.status().as_u16();
    let mut bytes = 0u64;
    let mut finder = expect_body.map(crate::mix::BodyFinder::new);
    while let Some(mut chunk) = stream.recv_data().await.map_err(stream_error)? {
        bytes += chunk.remaining() as u64;
        // A QUIC frame's data may come in several pieces.
        while chunk.has_remaining() {
            let piece = chunk.chunk();
            let n = piece.len();
            if let Some(f) = &mut finder {
                f.feed(piece);
            }
            chunk.advance(n);
        }
    }
    let done = Instant::now();
    Ok(Exchange {
        status,
        body_bytes: bytes,
        ttfb: first - start,
        body: done - first,
        reusable: true,
        done,
        body_found: finder.is_none_or(|f| f.found()),
    })
}

fn quic_error(e: quinn::ConnectionError) -> RequestError {
    match e {
        quinn::ConnectionError::TimedOut => RequestError::Connect(
            "QUIC handshake timed out (no HTTP/3 on that UDP port?)".to_string(),
        ),
        quinn::ConnectionError::ConnectionClosed(close) => RequestError::Tls {
            detail: format!("QUIC connection closed by the server: {close}"),
            offered: "TLS 1.3, ALPN h3".to_string(),
        },
        other => RequestError::Connect(format!("QUIC: {other}")),
    }
}

fn stream_error(e: h3::error::StreamError) -> (RequestError, bool) {
    // A stream reset leaves the connection usable; anything else may not.
    let dead = !matches!(e, h3::error::StreamError::StreamError { .. });
    (RequestError::Http(format!("HTTP/3: {e}")), dead)
}

/// QUIC transport figures summed over connections.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QuicStats {
    /// QUIC connections these figures cover.
    pub connections: u64,
    /// UDP datagrams sent.
    pub datagrams_sent: u64,
    /// UDP datagrams received.
    pub datagrams_received: u64,
    /// Packets declared lost.
    pub packets_lost: u64,
    /// Congestion events.
    pub congestion_events: u64,
    /// Largest path MTU seen.
    pub max_path_mtu: u16,
}

impl QuicStats {
    /// Adds one connection's statistics.
    pub fn add(&mut self, s: &quinn::ConnectionStats) {
        self.connections += 1;
        self.datagrams_sent += s.udp_tx.datagrams;
        self.datagrams_received += s.udp_rx.datagrams;
        self.packets_lost += s.path.lost_packets;
        self.congestion_events += s.path.congestion_events;
        self.max_path_mtu = self.max_path_mtu.max(s.path.current_mtu);
    }

    /// Adds another worker's figures.
    pub fn merge(&mut self, other: &QuicStats) {
        self.connections += other.connections;
        self.datagrams_sent += other.datagrams_sent;
        self.datagrams_received += other.datagrams_received;
        self.packets_lost += other.packets_lost;
        self.congestion_events += other.congestion_events;
        self.max_path_mtu = self.max_path_mtu.max(other.max_path_mtu);
    }
}
