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
//!   (see [`Crafted`]): its inner content type, its content, its padding,
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
    /// Raw bytes were injected or record bytes lost: the server may refuse
    /// the stream and read less than was written.
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
                match self.client.writer().write_all(&data) {
                    Ok(()) => self.sent.extend_from_slice(&data),
                    // A client that took the server's fatal alert writes
                    // no more.
                    Err(e) => assert!(self.client_failed, "client refused plaintext: {e}"),
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
                let _ = self.client.refresh_traffic_keys();
            }
            Op::IdleBuffer => {
                if let Some(buf) = self.server.take_idle_read_buffer() {
                    self.server.give_read_buffer(buf);
                }
            }
            Op::Answer(n) if !self.server_failed && self.answered.len() + n <= MAX_WRITTEN => {
                let data = pattern(n, self.answered.len() + 1);
                if self.server.writer().write_all(&data).is_ok() {
                    self.answered.extend_from_slice(&data);
                }
                self.answer_back();
            }
            Op::Answer(_) => {}
        }
    }
}

/// One record made by hand, decoded from the input.
#[derive(Debug)]
struct Crafted {
    /// The inner content type (23: application data).
    inner_type: u8,
    /// Content bytes (a pattern), up to 16,384 + 255 (too long for TLS).
    len: usize,
    /// Zero bytes of padding after the inner type.
    padding: usize,
    /// The outer header's content type and version, when not the right
    /// ones (23, 0x0303).
    outer: Option<(u8, [u8; 2])>,
    /// Only the first so many bytes of the wire reach the server now.
    deliver: Option<usize>,
}

/// Reads the input one crafted record at a time.
struct Records<'a>(Ops<'a>);

impl Iterator for Records<'_> {
    type Item = Crafted;

    fn next(&mut self) -> Option<Crafted> {
        let flags = self.0.byte()?;
        // Mostly application data: other types end the stream.
        let inner_type = match flags & 0x0f {
            0..=11 => 23,
            _ => self.0.byte().unwrap_or(0),
        };
        let len = self.0.u16() % (16_384 + 256);
        let padding = if flags & 0x10 != 0 {
            self.0.u16() % 17_000
        } else {
            0
        };
        let outer = (flags & 0x20 != 0).then(|| {
            let t = self.0.byte().unwrap_or(0);
            (t, [self.0.byte().unwrap_or(0), self.0.byte().unwrap_or(0)])
        });
        let deliver = (flags & 0x40 != 0).then(|| self.0.u16());
        Some(Crafted {
            inner_type,
            len,
            padding,
            outer,
            deliver,
        })
    }
}

/// The client's sending half after its keys were extracted: encrypts
/// records as TLS 1.3 does (RFC 8446 section 5.2), whatever they hold.
struct Sealer {
    key: aws_lc_rs::aead::LessSafeKey,
    iv: [u8; 12],
    seq: u64,
}

impl Sealer {
    fn new(seq: u64, secrets: rustls::ConnectionTrafficSecrets) -> Sealer {
        use aws_lc_rs::aead::{UnboundKey, AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305};
        use rustls::ConnectionTrafficSecrets as S;
        let (alg, key, iv) = match secrets {
            S::Aes128Gcm { key, iv } => (&AES_128_GCM, key, iv),
            S::Aes256Gcm { key, iv } => (&AES_256_GCM, key, iv),
            S::Chacha20Poly1305 { key, iv } => (&CHACHA20_POLY1305, key, iv),
            _ => unreachable!("TLS 1.3 suites are AEADs"),
        };
        let key = UnboundKey::new(alg, key.as_ref()).expect("a key of the suite's length");
        Sealer {
            key: aws_lc_rs::aead::LessSafeKey::new(key),
            iv: iv.as_ref().try_into().expect("a 12-byte IV"),
            seq,
        }
    }

    /// The record `r` whose content is `content`, encrypted, on `wire`.
    fn seal(&mut self, r: &Crafted, content: &[u8], wire: &mut Vec<u8>) {
        let mut inner = Vec::with_capacity(content.len() + 1 + r.padding + 16);
        inner.extend_from_slice(content);
        inner.push(r.inner_type);
        inner.resize(inner.len() + r.padding, 0);
        let len = u16::try_from(inner.len() + 16).unwrap_or(u16::MAX);
        let (outer_type, version) = r.outer.unwrap_or((23, [3, 3]));
        let [hi, lo] = len.to_be_bytes();
        let header = [outer_type, version[0], version[1], hi, lo];
        let mut nonce = self.iv;
        for (n, s) in nonce[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        self.seq += 1;
        self.key
            .seal_in_place_append_tag(
                aws_lc_rs::aead::Nonce::assume_unique_for_key(nonce),
                aws_lc_rs::aead::Aad::from(header),
                &mut inner,
            )
            .expect("seal");
        wire.extend_from_slice(&header);
        wire.extend_from_slice(&inner);
    }
}

/// Records made by hand after a TLS 1.3 handshake (see the module's
/// documentation).
fn crafted(input: &[u8]) {
    let configs = configs();
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a name");
    let mut client = ClientConnection::new(configs.extracting.clone(), name).expect("client");
    let mut server = ServerConnection::new(configs.server.clone()).expect("server");
    assert!(
        handshake(&mut client, &mut server),
        "the handshake did not complete"
    );
    // The server's session tickets reach the client, then the client is
    // only its keys.
    let mut back = Vec::new();
    while server.wants_write() {
        server
            .write_tls(&mut back)
            .expect("server writes to memory");
    }
    pour(&mut client, &back, &mut Vec::new(), true).expect("client takes the tickets");
    let secrets = client
        .dangerous_extract_secrets()
        .expect("extractable keys");
    let mut sealer = Sealer::new(secrets.tx.0, secrets.tx.1);
    let mut wire = Vec::new();
    let mut sent = Vec::new();
    let mut received = Vec::new();
    let mut regular = true;
    let mut failed = false;
    let mut reads = 0usize;
    for r in Records(Ops(input)) {
        if sent.len() + r.len > MAX_WRITTEN {
            break;
        }
        let content = pattern(r.len, sent.len());
        // What TLS 1.3 lets a peer send as application data.
        regular &= r.inner_type == 23
            && (1..=16_384).contains(&r.len)
            && r.len + 1 + r.padding <= 16_385
            && r.outer.is_none_or(|o| o == (23, [3, 3]));
        if r.inner_type == 23 {
            sent.extend_from_slice(&content);
        }
        sealer.seal(&r, &content, &mut wire);
        let n = r.deliver.map_or(wire.len(), |n| n.min(wire.len()));
        if failed {
            continue;
        }
        reads += 1;
        let bytes: Vec<u8> = wire.drain(..n).collect();
        if let Err(e) = pour(&mut server, &bytes, &mut received, reads % 2 == 0) {
            assert!(!regular, "the server refused regular records: {e}");
            failed = true;
        }
    }
    if !failed {
        if let Err(e) = pour(&mut server, &wire, &mut received, true) {
            assert!(!regular, "the server refused regular records: {e}");
        }
    }
    if regular {
        assert!(
            received == sent,
            "the server read {} bytes, not the {} sent",
            received.len(),
            sent.len()
        );
    } else {
        assert!(
            sent.starts_with(&received),
            "the server read plaintext nobody sent"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&version, ops)) = data.split_first() else {
        return;
    };
    if version & 2 != 0 {
        return crafted(ops);
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
