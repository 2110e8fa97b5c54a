//! TLS records after the handshake, as tern's server reads them: tern
//! patches rustls's record path (vendor/patches/rustls 0026-0028: the
//! plaintext of an application-data record taken without the state
//! machine's round, ChunkVecBuffer's byte count, the rare arms out of
//! line; 0009: an idle connection's read buffer given back and taken
//! again).
//!
//! Each input is one connection: a rustls client and a server configured
//! by tern-tls exactly as `tern serve` is (`build_server_config`, the
//! default policy, tickets, certificate compression) complete a handshake
//! in memory; the first byte says how it goes on:
//!
//! - through the client's API (TLS 1.3 or 1.2): the rest of the input is
//!   a list of operations on the client and the wire between them (see
//!   [`Op`]). The server reads whatever arrives, draining its plaintext
//!   through a bounded buffer (as tokio-rustls's `poll_fill_buf` and
//!   `read` do), and answers with data of its own that the client reads.
//!   While no raw bytes were injected into the wire and none dropped, the
//!   server must accept every record and read exactly the plaintext the
//!   client wrote (and the client what the server wrote).
//! - with records made by hand (TLS 1.3): the client's traffic keys are
//!   extracted after the handshake and the input describes each record
//!   (see `crafted.rs`): its inner content type, its content, its padding,
//!   its outer header; each is encrypted with the client's key and next
//!   sequence number, so it reaches the server's record path whatever it
//!   holds (empty, padded, oversized, alerts, handshake messages such as
//!   KeyUpdate, unknown types). While every record is application data
//!   that TLS 1.3 allows (content of 1 to 16,384 bytes, inner plaintext at
//!   most 16,385 bytes with its padding, the right outer header), the
//!   server must accept them all and read exactly their contents; after
//!   any other, what it read must still be a prefix of the contents.
//!
//! Nothing may panic.
//! The handshake's randomness (aws-lc's generator, the keys of each run)
//! changes the ciphertext from run to run, never its lengths or where its
//! records start: what the operations do, and every check, depend on the
//! input alone.
#![no_main]

use std::io::{BufRead, Read, Write};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection};

/// Bytes of plaintext one side may write in one input: bounds the memory
/// and time an input takes whatever it asks.
const MAX_WRITTEN: usize = 1 << 20;

/// Bytes the server's reader hands over at most per read (a bounded
/// buffer, as an HTTP/1.1 head reader's).
const READ_CHUNK: usize = 4096;

struct Configs {
    server: Arc<ServerConfig>,
    tls13: Arc<ClientConfig>,
    tls12: Arc<ClientConfig>,
    /// TLS 1.3, its traffic keys extractable.
    extracting: Arc<ClientConfig>,
}

/// The server's configuration as `tern serve` builds it (one self-signed
/// certificate, made once per process), and a client for each version.
fn configs() -> &'static Configs {
    static CONFIGS: OnceLock<Configs> = OnceLock::new();
    CONFIGS.get_or_init(|| {
        let policy = tern_tls::TlsPolicy::default_fast();
        let provider = policy.crypto_provider();
        let (cert, key) = tern_tls::selfsigned::localhost().expect("self-signed certificate");
        let cert = tern_tls::certs::from_pem(cert.as_bytes(), key.as_bytes(), "fuzz", &provider)
            .expect("load the certificate");
        let server = tern_tls::build_server_config(&tern_tls::ServerTlsSettings {
            certs: vec![cert],
            policy,
            alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            session_cache_entries: 256,
            tickets: tern_tls::TicketSource::Rotating(Duration::from_secs(12 * 3600)),
            tls13_tickets: 2,
            managed: Vec::new(),
            managed_first: false,
            acme_tls_alpn: None,
            client_auth: Default::default(),
            name_client_auth: Vec::new(),
            cert_compression: true,
        })
        .expect("server config");
        let client = |version: &'static rustls::SupportedProtocolVersion| {
            let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
            let mut config = ClientConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&[version])
                .expect("version")
                .dangerous()
                // Signatures checked, trust not: the certificate is
                // self-signed.
                .with_custom_certificate_verifier(Arc::new(
                    tern_tls::verify::SignatureOnlyVerifier::new(&provider),
                ))
                .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            // Every input starts from a full handshake, whatever ran before.
            config.resumption = rustls::client::Resumption::disabled();
            Arc::new(config)
        };
        let mut extracting = (*client(&rustls::version::TLS13)).clone();
        extracting.enable_secret_extraction = true;
        Configs {
            server,
            tls13: client(&rustls::version::TLS13),
            tls12: client(&rustls::version::TLS12),
            extracting: Arc::new(extracting),
        }
    })
}

/// One operation, decoded from the input.
#[derive(Debug)]
enum Op {
    /// The client writes this many bytes of application data (rustls cuts
    /// them into records of at most 16 KiB).
    Write(usize),
    /// The client writes nothing (rustls must send no record).
    WriteEmpty,
    /// The client's pending records go on the wire, all of the wire reaches
    /// the server, and the server's answer reaches the client.
    Flush,
    /// Only the first so many bytes of the wire reach the server (a record
    /// cut between two reads).
    Deliver(usize),
    /// Raw bytes go on the wire after what the client sent.
    Inject(Vec<u8>),
    /// The last so many bytes of the wire are lost.
    Truncate(usize),
    /// The client sends close_notify.
    CloseNotify,
    /// The client updates its keys and asks the server to (TLS 1.3).
    KeyUpdate,
    /// The server, idle, gives back its read buffer and takes it again
    /// (vendor patch 0009, as tern does between requests).
    IdleBuffer,
    /// The server writes this many bytes of application data.
    Answer(usize),
}

/// Reads the input one operation at a time.
struct Ops<'a>(&'a [u8]);

impl Ops<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*b)
    }

    fn u16(&mut self) -> usize {
        let hi = self.byte().unwrap_or(0);
        let lo = self.byte().unwrap_or(0);
        usize::from(u16::from_be_bytes([hi, lo]))
    }
}

impl Iterator for Ops<'_> {
    type Item = Op;

    fn next(&mut self) -> Option<Op> {
        let op = self.byte()?;
        Some(match op % 10 {
            0 => Op::Write(self.u16() % 20_000),
            1 => Op::WriteEmpty,
            2 => Op::Flush,
            3 => Op::Deliver(self.u16()),
            4 => {
                let n = usize::from(self.byte().unwrap_or(0) % 64);
                let take = n.min(self.0.len());
                let (raw, rest) = self.0.split_at(take);
                self.0 = rest;
                Op::Inject(raw.to_vec())
            }
            5 => Op::Truncate(usize::from(self.byte().unwrap_or(0))),
            6 => Op::CloseNotify,
            7 => Op::KeyUpdate,
            8 => Op::IdleBuffer,
            _ => Op::Answer(self.u16() % 20_000),
        })
    }
}

/// Bytes `n` long, different for every write (so a record delivered twice
/// or out of order shows).
fn pattern(n: usize, seed: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i.wrapping_mul(31).wrapping_add(seed.wrapping_mul(7)) % 251) as u8)
        .collect()
}

/// Runs the handshake in memory; false if it did not complete (it always
/// should: both sides are ours).
fn handshake(client: &mut ClientConnection, server: &mut ServerConnection) -> bool {
    for _ in 0..16 {
        let mut wire = Vec::new();
        while client.wants_write() {
            client
                .write_tls(&mut wire)
                .expect("client writes to memory");
        }
        pour(server, &wire, &mut Vec::new(), true).expect("server takes the client's flight");
        let mut back = Vec::new();
        while server.wants_write() {
            server
                .write_tls(&mut back)
                .expect("server writes to memory");
        }
        pour(client, &back, &mut Vec::new(), true).expect("client takes the server's flight");
        if !client.is_handshaking() && !server.is_handshaking() {
            return true;
        }
    }
    false
}

/// Hands `bytes` to a connection, which processes them, its plaintext
/// drained into `into` as it comes (its buffer of received plaintext is
/// bounded: a full one takes no more records until read). Drains through
/// a bounded buffer, by `fill_buf` and `consume` (tokio-rustls's
/// `poll_fill_buf`) or by `read`.
fn pour<C, S>(
    conn: &mut C,
    mut bytes: &[u8],
    into: &mut Vec<u8>,
    by_fill: bool,
) -> Result<(), rustls::Error>
where
    C: std::ops::DerefMut<Target = rustls::ConnectionCommon<S>>,
    S: rustls::SideData,
{
    let mut full = false;
    loop {
        let took = conn.read_tls(&mut bytes);
        conn.process_new_packets()?;
        drain(&mut conn.reader(), into, by_fill);
        match took {
            Ok(0) => return Ok(()),
            Ok(_) if bytes.is_empty() => return Ok(()),
            Ok(_) => full = false,
            // Buffer full: drained above, so the next read takes more. A
            // drained connection that still takes nothing is a finding.
            Err(e) => {
                assert!(!full, "a drained connection takes no more records: {e}");
                full = true;
            }
        }
    }
}

/// Reads a connection's plaintext until it has none now (or is closed).
fn drain(reader: &mut rustls::Reader<'_>, into: &mut Vec<u8>, by_fill: bool) {
    loop {
        if by_fill {
            let taken = match reader.fill_buf() {
                Ok([]) | Err(_) => return,
                Ok(buf) => {
                    let n = buf.len().min(READ_CHUNK);
                    into.extend_from_slice(&buf[..n]);
                    n
                }
            };
            reader.consume(taken);
        } else {
            let mut buf = [0u8; READ_CHUNK];
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => into.extend_from_slice(&buf[..n]),
            }
        }
        assert!(
            into.len() <= 2 * MAX_WRITTEN,
            "more plaintext read than written"
        );
    }
}

/// The connection under test and what each side wrote and read.
struct Session {
    client: ClientConnection,
    server: ServerConnection,
    /// The client's records not yet delivered to the server.
    wire: Vec<u8>,
    /// Raw bytes were injected or record bytes lost (or more KeyUpdates
    /// in a row than rustls takes): the server may refuse the stream and
    /// read less than was written.
    tainted: bool,
    /// The server refused the stream: nothing more reaches it.
    server_failed: bool,
    /// The client refused the server's records (its alert).
    client_failed: bool,
    sent: Vec<u8>,
    received: Vec<u8>,
    answered: Vec<u8>,
    got_answer: Vec<u8>,
    closed: bool,
    reads: usize,
    /// KeyUpdate requests the client sent since it last sent data.
    key_updates_in_a_row: u32,
}

impl Session {
    fn take_client_records(&mut self) {
        while self.client.wants_write() {
            self.client
                .write_tls(&mut self.wire)
                .expect("client writes to memory");
        }
    }

    /// The first `n` bytes of the wire reach the server, which reads them
    /// and answers.
    fn deliver(&mut self, n: usize) {
        let n = n.min(self.wire.len());
        let bytes: Vec<u8> = self.wire.drain(..n).collect();
        if self.server_failed {
            return;
        }
        self.reads += 1;
        let by_fill = self.reads % 2 == 0;
        if let Err(e) = pour(&mut self.server, &bytes, &mut self.received, by_fill) {
            assert!(
                self.tainted,
                "the server refused records the client made, none altered: {e}"
            );
            self.server_failed = true;
        }
        self.answer_back();
    }

    /// The server's records (tickets, key updates, answers, alerts) reach
    /// the client.
    fn answer_back(&mut self) {
        if self.client_failed {
            return;
        }
        let mut back = Vec::new();
        while self.server.wants_write() {
            if self.server.write_tls(&mut back).is_err() {
                break;
            }
        }
        if let Err(e) = pour(&mut self.client, &back, &mut self.got_answer, true) {
            // A server that refused the stream said so with an alert.
            assert!(
                self.server_failed,
                "the client refused the server's records: {e}"
            );
            self.client_failed = true;
        }
    }

    fn run(&mut self, op: Op) {
        match op {
            Op::Write(n) if !self.closed && self.sent.len() + n <= MAX_WRITTEN => {
                let data = pattern(n, self.sent.len());
                let mut rest = &data[..];
                while !rest.is_empty() {
                    match self.client.writer().write(rest) {
                        Ok(0) => {
                            // The client's buffer of records is full
                            // (rustls's 64 KiB limit): they go on the wire.
                            assert!(self.client.wants_write(), "a client that takes nothing");
                            self.take_client_records();
                        }
                        Ok(k) => {
                            self.sent.extend_from_slice(&rest[..k]);
                            rest = &rest[k..];
                            self.key_updates_in_a_row = 0;
                        }
                        // A client that took the server's fatal alert
                        // writes no more.
                        Err(e) => {
                            assert!(self.client_failed, "client refused plaintext: {e}");
                            break;
                        }
                    }
                }
            }
            Op::Write(_) => {}
            Op::WriteEmpty => {
                let before = self.client.wants_write();
                let n = match self.client.writer().write(&[]) {
                    Ok(n) => n,
                    Err(e) => {
                        assert!(self.client_failed, "client refused an empty write: {e}");
                        return;
                    }
                };
                assert_eq!(n, 0);
                assert_eq!(
                    self.client.wants_write(),
                    before,
                    "an empty write made a record"
                );
            }
            Op::Flush => {
                self.take_client_records();
                self.deliver(usize::MAX);
            }
            Op::Deliver(n) => {
                self.take_client_records();
                self.deliver(n);
            }
            Op::Inject(raw) => {
                self.take_client_records();
                self.tainted |= !raw.is_empty();
                self.wire.extend_from_slice(&raw);
            }
            Op::Truncate(n) => {
                self.take_client_records();
                let keep = self.wire.len().saturating_sub(n);
                self.tainted |= keep < self.wire.len();
                self.wire.truncate(keep);
            }
            Op::CloseNotify => {
                self.client.send_close_notify();
                self.closed = true;
            }
            Op::KeyUpdate => {
                // TLS 1.2 has none: rustls says so, nothing else happens.
                if self.client.refresh_traffic_keys().is_ok() {
                    self.key_updates_in_a_row += 1;
                    // rustls refuses more than 32 KeyUpdate requests with
                    // no application data between them (BoringSSL's
                    // kMaxKeyUpdates): a refusal the server may make.
                    self.tainted |= self.key_updates_in_a_row > 32;
                }
            }
            Op::IdleBuffer => {
                if let Some(buf) = self.server.take_idle_read_buffer() {
                    self.server.give_read_buffer(buf);
                }
            }
            Op::Answer(n) if !self.server_failed && self.answered.len() + n <= MAX_WRITTEN => {
                let data = pattern(n, self.answered.len() + 1);
                let mut rest = &data[..];
                let mut stuck = false;
                while !rest.is_empty() {
                    match self.server.writer().write(rest) {
                        Ok(0) if stuck => break,
                        Ok(k) => {
                            self.answered.extend_from_slice(&rest[..k]);
                            rest = &rest[k..];
                            // A full buffer of records goes to the client
                            // (a client that failed takes none: stuck).
                            stuck = k == 0;
                            self.answer_back();
                        }
                        Err(_) => break,
                    }
                }
                self.answer_back();
            }
            Op::Answer(_) => {}
        }
    }
}

#[path = "tls_records/crafted.rs"]
mod crafted;

fuzz_target!(|data: &[u8]| {
    let Some((&version, ops)) = data.split_first() else {
        return;
    };
    if version & 2 != 0 {
        return crafted::run(ops);
    }
    let configs = configs();
    let client_config = if version & 1 == 0 {
        configs.tls13.clone()
    } else {
        configs.tls12.clone()
    };
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a name");
    let mut client = ClientConnection::new(client_config, name).expect("client");
    let mut server = ServerConnection::new(configs.server.clone()).expect("server");
    assert!(
        handshake(&mut client, &mut server),
        "the handshake did not complete"
    );
    let mut s = Session {
        client,
        server,
        wire: Vec::new(),
        tainted: false,
        server_failed: false,
        client_failed: false,
        sent: Vec::new(),
        received: Vec::new(),
        answered: Vec::new(),
        got_answer: Vec::new(),
        closed: false,
        reads: 0,
        key_updates_in_a_row: 0,
    };
    for op in Ops(ops) {
        s.run(op);
    }
    s.run(Op::Flush);
    if !s.tainted {
        assert!(!s.server_failed);
        assert!(
            s.received == s.sent,
            "the server read {} bytes, not the {} the client wrote",
            s.received.len(),
            s.sent.len()
        );
        assert!(
            s.got_answer == s.answered,
            "the client read {} bytes, not the {} the server wrote",
            s.got_answer.len(),
            s.answered.len()
        );
    } else {
        // What the server read is still a prefix of what was written.
        assert!(
            s.sent.starts_with(&s.received),
            "the server read plaintext nobody wrote"
        );
    }
});
