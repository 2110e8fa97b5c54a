//! Server-side CPU cost of the handshakes tern's TLS config performs, with no
//! sockets: a rustls client and the server built by `build_server_config`
//! exchange bytes in memory, and only the server's calls are timed. This
//! isolates what tern-tls decides (key type, group, tickets) from I/O.
//!
//! Run (release, pinned): `taskset -c 1 cargo run -p tern-tls --release --example handshake_cost`
//! Optional argument: handshakes per scenario (default 2000).
//!
//! Prints the conditions first, then per scenario the median of 5 batches of
//! server µs per handshake. The server's wall time is scaled by the share of
//! each batch the thread spent on a CPU (/proc/thread-self/schedstat), so
//! preemption by other processes on a shared machine is mostly discounted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::Resumption;
use rustls::crypto::aws_lc_rs::kx_group;
use rustls::crypto::SupportedKxGroup;
use rustls::pki_types::ServerName;
use rustls::server::ProducesTickets;
use rustls::{
    ClientConfig, ClientConnection, HandshakeKind, ServerConfig, ServerConnection,
    SupportedProtocolVersion,
};
use tern_tls::verify::SignatureOnlyVerifier;
use tern_tls::{build_server_config, LoadedCert, ServerTlsSettings, TicketSource, TlsPolicy};

const BATCHES: usize = 5;
const TLS13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];
const TLS12: &[&SupportedProtocolVersion] = &[&rustls::version::TLS12];

fn main() {
    let per_scenario: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    println!("# tern-tls handshake_cost: server CPU per handshake, in-memory transport");
    println!("# {}", tern_tls::provider_summary());
    println!(
        "# cpu model: {}",
        tern_tls::cpu::cpu_model().unwrap_or_else(|| "unknown".into())
    );
    println!(
        "# build: {}",
        if cfg!(debug_assertions) {
            "DEBUG (numbers meaningless; use --release)"
        } else {
            "release"
        }
    );
    println!("# handshakes per scenario: {per_scenario} in {BATCHES} batches; figure = median batch mean");
    println!("# tickets: rotating in-process keys, 2 TLS 1.3 tickets per full handshake");
    println!();

    let ecdsa = self_signed(&rcgen::PKCS_ECDSA_P256_SHA256, None);
    let rsa = self_signed(&rcgen::PKCS_RSA_SHA256, Some(rcgen::RsaKeySize::_2048));
    let tls13 = TLS13;
    let tls12 = TLS12;

    let x25519 = kx_group::X25519;
    let scenarios = [
        Scenario::new("TLSv1.3 P-256 X25519 full", &ecdsa, tls13, x25519, false),
        Scenario::new(
            "TLSv1.3 P-256 X25519MLKEM768 full",
            &ecdsa,
            tls13,
            kx_group::X25519MLKEM768,
            false,
        ),
        Scenario::new(
            "TLSv1.3 P-256 secp256r1 full",
            &ecdsa,
            tls13,
            kx_group::SECP256R1,
            false,
        ),
        Scenario::new("TLSv1.3 RSA-2048 X25519 full", &rsa, tls13, x25519, false),
        Scenario::new(
            "TLSv1.3 P-256 X25519 resumed (ticket)",
            &ecdsa,
            tls13,
            x25519,
            true,
        ),
        Scenario::new("TLSv1.2 P-256 X25519 full", &ecdsa, tls12, x25519, false),
        Scenario::new(
            "TLSv1.2 P-256 X25519 resumed (ticket)",
            &ecdsa,
            tls12,
            x25519,
            true,
        ),
    ];
    println!("{:<40} {:>12}", "scenario", "server µs");
    for Scenario {
        name,
        cert,
        versions,
        group,
        resume,
    } in scenarios
    {
        let server = server_config(cert);
        let client = client_config(versions, group, resume);
        // Warm up (and, for resumption, obtain the first tickets).
        for _ in 0..20 {
            handshake(&server, &client);
        }
        let mut batch_means = Vec::with_capacity(BATCHES);
        for _ in 0..BATCHES {
            let wall_start = Instant::now();
            let cpu_start = thread_cpu_ns();
            let mut total = Duration::ZERO;
            let n = per_scenario / BATCHES;
            for _ in 0..n {
                let (spent, kind) = handshake(&server, &client);
                let want = if resume {
                    HandshakeKind::Resumed
                } else {
                    HandshakeKind::Full
                };
                assert_eq!(kind, Some(want), "{name}: unexpected handshake kind");
                total += spent;
            }
            // On a shared machine this thread is preempted: scale the
            // server's wall time by the share of the batch it was on CPU.
            let on_cpu = match (cpu_start, thread_cpu_ns()) {
                (Some(a), Some(b)) => {
                    ((b - a) as f64 / wall_start.elapsed().as_nanos() as f64).min(1.0)
                }
                _ => 1.0,
            };
            batch_means.push(total.as_secs_f64() * 1e6 * on_cpu / n as f64);
        }
        batch_means.sort_by(f64::total_cmp);
        println!("{name:<40} {:>12.1}", batch_means[BATCHES / 2]);
    }

    ticket_cost(per_scenario * 10);
}

/// One measured configuration.
struct Scenario<'a> {
    name: &'static str,
    cert: &'a LoadedCert,
    versions: &'static [&'static SupportedProtocolVersion],
    group: &'static dyn SupportedKxGroup,
    resume: bool,
}

impl<'a> Scenario<'a> {
    fn new(
        name: &'static str,
        cert: &'a LoadedCert,
        versions: &'static [&'static SupportedProtocolVersion],
        group: &'static dyn SupportedKxGroup,
        resume: bool,
    ) -> Self {
        Scenario {
            name,
            cert,
            versions,
            group,
            resume,
        }
    }
}

/// One handshake; returns server time spent and the handshake kind.
fn handshake(
    server_config: &Arc<ServerConfig>,
    client_config: &Arc<ClientConfig>,
) -> (Duration, Option<HandshakeKind>) {
    let name = ServerName::try_from("localhost").expect("static name");
    let mut client = ClientConnection::new(client_config.clone(), name).expect("client connection");
    let mut server_time = Duration::ZERO;
    let started = Instant::now();
    let mut server = ServerConnection::new(server_config.clone()).expect("server connection");
    server_time += started.elapsed();
    let mut wire = Vec::with_capacity(16 * 1024);
    loop {
        let mut moved = false;
        while client.wants_write() {
            wire.clear();
            client.write_tls(&mut wire).expect("client write");
            let t = Instant::now();
            server.read_tls(&mut wire.as_slice()).expect("server read");
            server.process_new_packets().expect("server process");
            server_time += t.elapsed();
            moved = true;
        }
        loop {
            wire.clear();
            let t = Instant::now();
            let wants = server.wants_write();
            if wants {
                server.write_tls(&mut wire).expect("server write");
            }
            server_time += t.elapsed();
            if !wants {
                break;
            }
            client.read_tls(&mut wire.as_slice()).expect("client read");
            client.process_new_packets().expect("client process");
            moved = true;
        }
        if !moved && !client.is_handshaking() && !server.is_handshaking() {
            break;
        }
    }
    (server_time, server.handshake_kind())
}

/// Nanoseconds this thread has been on a CPU (Linux schedstat), if readable.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Ticket seal + open through the rotating ticketer, bypassing TLS.
fn ticket_cost(n: usize) {
    let keys = tern_tls::TicketKeys::rotating(Duration::from_secs(3600)).expect("ticket keys");
    let state = [7u8; 200]; // about the size of a rustls TLS 1.3 session value
    let t = Instant::now();
    for _ in 0..n {
        let ticket = keys.encrypt(&state).expect("encrypt");
        let plain = keys.decrypt(&ticket).expect("decrypt");
        assert_eq!(plain.len(), state.len());
    }
    let each = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    println!("{:<40} {each:>12.2}", "ticket encrypt+decrypt (200 B)");
}

fn server_config(cert: &LoadedCert) -> Arc<ServerConfig> {
    build_server_config(&ServerTlsSettings {
        certs: vec![cert.clone()],
        policy: TlsPolicy::default_fast(),
        alpn: vec![b"http/1.1".to_vec()],
        session_cache_entries: 0,
        tickets: TicketSource::Rotating(Duration::from_secs(3600)),
        tls13_tickets: 2,
        managed: Vec::new(),
        managed_first: false,
        acme_tls_alpn: None,
        client_auth: Default::default(),
        name_client_auth: Vec::new(),
        cert_compression: true,
    })
    .expect("server config")
}

fn client_config(
    versions: &[&'static SupportedProtocolVersion],
    group: &'static dyn SupportedKxGroup,
    resume: bool,
) -> Arc<ClientConfig> {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.kx_groups = vec![group];
    let mut config = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .expect("versions")
        .dangerous()
        // Skips chain validation (the client's cost is not measured) but
        // checks signatures, so the server must really sign.
        .with_custom_certificate_verifier(Arc::new(SignatureOnlyVerifier::new(
            &rustls::crypto::aws_lc_rs::default_provider(),
        )))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    if !resume {
        config.resumption = Resumption::disabled();
    }
    Arc::new(config)
}

fn self_signed(
    alg: &'static rcgen::SignatureAlgorithm,
    rsa: Option<rcgen::RsaKeySize>,
) -> LoadedCert {
    let key = match rsa {
        Some(size) => rcgen::KeyPair::generate_rsa_for(alg, size),
        None => rcgen::KeyPair::generate_for(alg),
    }
    .expect("key");
    let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
    let cert = params.self_signed(&key).expect("self-sign");
    tern_tls::certs::from_pem(
        cert.pem().as_bytes(),
        key.serialize_pem().as_bytes(),
        "bench",
        &rustls::crypto::aws_lc_rs::default_provider(),
    )
    .expect("load")
}
