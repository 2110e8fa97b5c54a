//! Hand-built ClientHellos and a ServerHello parser, for the offers rustls
//! will not make: finite-field DHE suites, CBC suites, RSA key exchange and
//! protocol versions below TLS 1.2, plus single-group TLS 1.3 offers.
//!
//! We only ever read the server's first handshake message (ServerHello or
//! HelloRetryRequest) or its alert, then close: no key is derived, so the
//! key shares we send need not be usable by us.

use std::io::{self, Read, Write};

/// TLS protocol versions and named groups on the wire (IANA code points).
pub use tern_tls::iana::{
    FFDHE2048, SECP256R1, SECP384R1, SECP521R1, TLS10, TLS11, TLS12, TLS13, X25519, X25519MLKEM768,
};

/// The groups whose acceptance `probe` reports, in the order it reports them.
pub const GROUPS: [u16; 6] = [
    X25519MLKEM768,
    X25519,
    SECP256R1,
    SECP384R1,
    SECP521R1,
    FFDHE2048,
];

/// `SHA-256("HelloRetryRequest")`: the ServerHello random that marks a HRR
/// (RFC 8446, section 4.1.3).
const HRR_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// Largest handshake message we accept while looking for the ServerHello.
const MAX_HELLO_LEN: usize = 1 << 16;

pub use crate::suites::{
    group_name, legacy_suites, suite, suite_name, tls13_suites, version_name, BulkCipher,
    KeyExchange, Suite, SUITES,
};

/// What to put in a hand-built ClientHello.
#[derive(Debug, Clone)]
pub struct ClientHelloSpec {
    /// `legacy_version` of the hello (the highest version for TLS <= 1.2).
    pub version: u16,
    /// `supported_versions` extension; `None` leaves it out (TLS <= 1.2).
    pub supported_versions: Option<Vec<u16>>,
    pub suites: Vec<u16>,
    pub groups: Vec<u16>,
    /// `(group, public key)` entries of `key_share`; empty asks the server to
    /// pick a group with a HelloRetryRequest.
    pub key_shares: Vec<(u16, Vec<u8>)>,
    pub server_name: Option<String>,
    pub alpn: Vec<&'static [u8]>,
}

impl ClientHelloSpec {
    /// A TLS 1.2-style offer with at most `version` and the given suites.
    pub fn legacy(version: u16, suites: Vec<u16>, server_name: Option<String>) -> Self {
        ClientHelloSpec {
            version,
            supported_versions: None,
            suites,
            groups: vec![X25519, SECP256R1, SECP384R1],
            key_shares: Vec::new(),
            server_name,
            alpn: Vec::new(),
        }
    }

    /// A TLS 1.3-only offer of one group with no key share, so an accepting
    /// server must answer with a HelloRetryRequest naming that group.
    pub fn tls13_group(group: u16, server_name: Option<String>) -> Self {
        ClientHelloSpec {
            version: TLS12,
            supported_versions: Some(vec![TLS13]),
            suites: tls13_suites(),
            groups: vec![group],
            key_shares: Vec::new(),
            server_name,
            alpn: Vec::new(),
        }
    }

    /// Encodes the hello as one TLS record.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(512);
        put_u16(&mut body, self.version);
        body.extend_from_slice(&random32());
        // A 32-byte legacy session id, as TLS 1.3 middlebox compatibility asks.
        body.push(32);
        body.extend_from_slice(&random32());
        let mut suites = self.suites.clone();
        suites.push(0x00ff); // TLS_EMPTY_RENEGOTIATION_INFO_SCSV
        put_u16(&mut body, (suites.len() * 2) as u16);
        for id in suites {
            put_u16(&mut body, id);
        }
        body.extend_from_slice(&[1, 0]); // compression: null only
        let exts = self.extensions();
        put_u16(&mut body, exts.len() as u16);
        body.extend_from_slice(&exts);

        let mut hs = vec![1]; // client_hello
        put_u24(&mut hs, body.len());
        hs.extend_from_slice(&body);
        // TLS 1.0 on the record layer: what real clients send for the hello.
        let mut rec = vec![22, 0x03, 0x01];
        put_u16(&mut rec, hs.len() as u16);
        rec.extend_from_slice(&hs);
        rec
    }

    fn extensions(&self) -> Vec<u8> {
        let mut e = Vec::new();
        if let Some(name) = &self.server_name {
            let mut list = vec![0]; // host_name
            put_u16(&mut list, name.len() as u16);
            list.extend_from_slice(name.as_bytes());
            let mut data = Vec::new();
            put_u16(&mut data, list.len() as u16);
            data.extend_from_slice(&list);
            put_ext(&mut e, 0x0000, &data);
        }
        let mut groups = Vec::new();
        put_u16(&mut groups, (self.groups.len() * 2) as u16);
        for g in &self.groups {
            put_u16(&mut groups, *g);
        }
        put_ext(&mut e, 0x000a, &groups);
        put_ext(&mut e, 0x000b, &[1, 0]); // ec_point_formats: uncompressed
        let sig_algs: [u16; 11] = [
            0x0403, 0x0503, 0x0603, 0x0807, 0x0804, 0x0805, 0x0806, 0x0401, 0x0501, 0x0601, 0x0201,
        ];
        let mut sa = Vec::new();
        put_u16(&mut sa, (sig_algs.len() * 2) as u16);
        for a in sig_algs {
            put_u16(&mut sa, a);
        }
        put_ext(&mut e, 0x000d, &sa);
        if !self.alpn.is_empty() {
            let mut list = Vec::new();
            for p in &self.alpn {
                list.push(p.len() as u8);
                list.extend_from_slice(p);
            }
            let mut data = Vec::new();
            put_u16(&mut data, list.len() as u16);
            data.extend_from_slice(&list);
            put_ext(&mut e, 0x0010, &data);
        }
        put_ext(&mut e, 0x0017, &[]); // extended_master_secret
        put_ext(&mut e, 0xff01, &[0]); // renegotiation_info, initial
        if let Some(versions) = &self.supported_versions {
            let mut data = vec![(versions.len() * 2) as u8];
            for v in versions {
                put_u16(&mut data, *v);
            }
            put_ext(&mut e, 0x002b, &data);
            put_ext(&mut e, 0x002d, &[1, 1]); // psk_key_exchange_modes: psk_dhe_ke
            let mut shares = Vec::new();
            for (g, key) in &self.key_shares {
                put_u16(&mut shares, *g);
                put_u16(&mut shares, key.len() as u16);
                shares.extend_from_slice(key);
            }
            let mut data = Vec::new();
            put_u16(&mut data, shares.len() as u16);
            data.extend_from_slice(&shares);
            put_ext(&mut e, 0x0033, &data);
        }
        e
    }
}

/// What the server answered to a hand-built hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerReply {
    /// A ServerHello: the server accepted the offer.
    Hello(ServerHello),
    /// A HelloRetryRequest: the server accepts the offer but wants a key
    /// share for `ServerHello::group`.
    HelloRetry(ServerHello),
    /// A TLS alert (description code, e.g. 40 handshake_failure,
    /// 70 protocol_version).
    Alert(u8),
    /// The connection closed before any answer.
    Closed,
}

/// The parts of a ServerHello that `probe` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerHello {
    /// The negotiated version (from `supported_versions` when present).
    pub version: u16,
    pub suite: u16,
    /// The group of the server's key share (TLS 1.3 only).
    pub group: Option<u16>,
}

/// Errors while reading the server's answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    #[error("I/O: {0}")]
    Io(#[from] io::Error),
    #[error("malformed server reply: {0}")]
    Malformed(&'static str),
}

/// Sends `hello` on `stream` and reads the server's first answer.
pub fn exchange<S: Read + Write>(
    stream: &mut S,
    hello: &ClientHelloSpec,
) -> Result<ServerReply, WireError> {
    stream.write_all(&hello.encode())?;
    read_server_reply(stream)
}

/// Reads records until the first handshake message or an alert.
pub fn read_server_reply<R: Read>(r: &mut R) -> Result<ServerReply, WireError> {
    let mut hs: Vec<u8> = Vec::new();
    loop {
        let mut header = [0u8; 5];
        match read_full(r, &mut header)? {
            0 => return Ok(ServerReply::Closed),
            5 => {}
            _ => return Err(WireError::Malformed("truncated record header")),
        }
        let len = u16::from_be_bytes([header[3], header[4]]) as usize;
        let mut frag = vec![0u8; len];
        if read_full(r, &mut frag)? != len {
            return Err(WireError::Malformed("truncated record"));
        }
        match header[0] {
            21 => {
                return frag
                    .get(1)
                    .map(|d| ServerReply::Alert(*d))
                    .ok_or(WireError::Malformed("short alert"))
            }
            22 => hs.extend_from_slice(&frag),
            _ => {
                return Err(WireError::Malformed(
                    "unexpected record type before ServerHello",
                ))
            }
        }
        if hs.len() >= 4 {
            let msg_len = (hs[1] as usize) << 16 | (hs[2] as usize) << 8 | hs[3] as usize;
            if msg_len > MAX_HELLO_LEN {
                return Err(WireError::Malformed("oversized handshake message"));
            }
            if hs.len() >= 4 + msg_len {
                if hs[0] != 2 {
                    return Err(WireError::Malformed(
                        "first handshake message is not ServerHello",
                    ));
                }
                return parse_server_hello(&hs[4..4 + msg_len]);
            }
        }
    }
}

/// Parses the body of a ServerHello handshake message.
pub fn parse_server_hello(body: &[u8]) -> Result<ServerReply, WireError> {
    let mut c = Cursor(body);
    let legacy_version = c.u16()?;
    let random = c.take(32)?;
    let sid_len = c.u8()? as usize;
    c.take(sid_len)?;
    let suite = c.u16()?;
    let _compression = c.u8()?;
    let mut version = legacy_version;
    let mut group = None;
    if !c.0.is_empty() {
        let ext_len = c.u16()? as usize;
        let mut exts = Cursor(c.take(ext_len)?);
        while !exts.0.is_empty() {
            let kind = exts.u16()?;
            let len = exts.u16()? as usize;
            let mut data = Cursor(exts.take(len)?);
            match kind {
                0x002b => version = data.u16()?,
                // key_share: the group comes first both in a ServerHello
                // (group, key) and in a HelloRetryRequest (group only).
                0x0033 => group = Some(data.u16()?),
                _ => {}
            }
        }
    }
    let hello = ServerHello {
        version,
        suite,
        group,
    };
    if random == HRR_RANDOM {
        Ok(ServerReply::HelloRetry(hello))
    } else {
        Ok(ServerReply::Hello(hello))
    }
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.0.len() < n {
            return Err(WireError::Malformed("ServerHello field runs past its end"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
}

/// Reads until `buf` is full or EOF; returns the bytes read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // A reset right after our hello is how some servers refuse it.
            Err(e) if n == 0 && e.kind() == io::ErrorKind::ConnectionReset => return Ok(0),
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn random32() -> [u8; 32] {
    let mut b = [0u8; 32];
    // The hello random needs no secrecy here; fall back to a fixed pattern
    // rather than fail a probe if the RNG is unavailable.
    if aws_lc_rs::rand::fill(&mut b).is_err() {
        b = [0x5a; 32];
    }
    b
}

fn put_u16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_be_bytes());
}

fn put_u24(v: &mut Vec<u8>, x: usize) {
    v.extend_from_slice(&[(x >> 16) as u8, (x >> 8) as u8, x as u8]);
}

fn put_ext(v: &mut Vec<u8>, kind: u16, data: &[u8]) {
    put_u16(v, kind);
    put_u16(v, data.len() as u16);
    v.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_hello_record(random: [u8; 32], suite: u16, exts: &[u8]) -> Vec<u8> {
        let mut body = vec![0x03, 0x03];
        body.extend_from_slice(&random);
        body.push(0);
        put_u16(&mut body, suite);
        body.push(0);
        put_u16(&mut body, exts.len() as u16);
        body.extend_from_slice(exts);
        let mut hs = vec![2];
        put_u24(&mut hs, body.len());
        hs.extend_from_slice(&body);
        let mut rec = vec![22, 3, 3];
        put_u16(&mut rec, hs.len() as u16);
        rec.extend_from_slice(&hs);
        rec
    }

    #[test]
    fn tls12_server_hello_is_parsed() {
        let rec = server_hello_record([7; 32], 0x009e, &[]);
        let reply = read_server_reply(&mut &rec[..]).unwrap();
        assert_eq!(
            reply,
            ServerReply::Hello(ServerHello {
                version: TLS12,
                suite: 0x009e,
                group: None
            })
        );
    }

    #[test]
    fn hello_retry_request_reports_version_and_group() {
        let mut exts = Vec::new();
        put_ext(&mut exts, 0x002b, &[0x03, 0x04]);
        put_ext(&mut exts, 0x0033, &[0x00, 0x17]);
        let rec = server_hello_record(HRR_RANDOM, 0x1301, &exts);
        let reply = read_server_reply(&mut &rec[..]).unwrap();
        assert_eq!(
            reply,
            ServerReply::HelloRetry(ServerHello {
                version: TLS13,
                suite: 0x1301,
                group: Some(SECP256R1)
            })
        );
    }

    #[test]
    fn server_hello_split_across_records_is_reassembled() {
        let rec = server_hello_record([1; 32], 0xc02f, &[]);
        let hs = &rec[5..];
        let (a, b) = hs.split_at(10);
        let mut two = vec![22, 3, 3];
        put_u16(&mut two, a.len() as u16);
        two.extend_from_slice(a);
        two.extend_from_slice(&[22, 3, 3]);
        put_u16(&mut two, b.len() as u16);
        two.extend_from_slice(b);
        let reply = read_server_reply(&mut &two[..]).unwrap();
        assert!(matches!(reply, ServerReply::Hello(h) if h.suite == 0xc02f));
    }

    #[test]
    fn alert_and_close_are_answers_not_errors() {
        let alert = [21, 3, 3, 0, 2, 2, 40];
        assert_eq!(
            read_server_reply(&mut &alert[..]).unwrap(),
            ServerReply::Alert(40)
        );
        assert_eq!(
            read_server_reply(&mut &[][..]).unwrap(),
            ServerReply::Closed
        );
    }

    #[test]
    fn truncated_server_hello_is_malformed() {
        let rec = server_hello_record([1; 32], 0xc02f, &[]);
        let mut cut = rec[..5].to_vec();
        cut.extend_from_slice(&[2, 0, 0, 6, 3, 3, 0, 0, 0, 0]);
        cut[4] = 10;
        assert!(matches!(
            read_server_reply(&mut &cut[..]),
            Err(WireError::Malformed(_))
        ));
    }

    #[test]
    fn client_hello_lengths_are_consistent_and_suites_present() {
        let spec = ClientHelloSpec::legacy(TLS12, legacy_suites(), Some("example.test".into()));
        let rec = spec.encode();
        assert_eq!(rec[0], 22);
        let rec_len = u16::from_be_bytes([rec[3], rec[4]]) as usize;
        assert_eq!(rec_len, rec.len() - 5);
        let hs_len = (rec[6] as usize) << 16 | (rec[7] as usize) << 8 | rec[8] as usize;
        assert_eq!(hs_len, rec.len() - 9);
        let body = &rec[9..];
        assert_eq!(&body[..2], &[3, 3]);
        let suites_len = u16::from_be_bytes([body[67], body[68]]) as usize;
        assert_eq!(suites_len, (legacy_suites().len() + 1) * 2);
        // ECDHE comes before DHE, which comes before RSA.
        let order = legacy_suites();
        let first_dhe = order
            .iter()
            .position(|id| suite(*id).unwrap().kx == KeyExchange::Dhe)
            .unwrap();
        let last_ecdhe = order
            .iter()
            .rposition(|id| suite(*id).unwrap().kx == KeyExchange::Ecdhe)
            .unwrap();
        assert!(last_ecdhe < first_dhe);
    }
}
