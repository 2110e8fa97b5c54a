//! `tls_records`'s second mode: TLS 1.3 records sealed by hand with the
//! client's extracted keys, so that whatever a record holds reaches the
//! server's record path.

use rustls::{ClientConnection, ServerConnection};

use super::{configs, handshake, pattern, pour, Ops, MAX_WRITTEN};

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

/// Records made by hand after a TLS 1.3 handshake (see the target's
/// documentation).
pub(super) fn run(input: &[u8]) {
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
