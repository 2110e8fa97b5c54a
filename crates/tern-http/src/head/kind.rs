//! What a header field is to tern ([`FieldKind`]), recognised once while
//! parsing, and the case-insensitive name comparison that recognises it.

/// Fields whose meaning tern acts on, recognised once while parsing so
/// that lookups on the request path do not compare names again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// `Host`.
    Host,
    /// `Content-Length`.
    ContentLength,
    /// `Transfer-Encoding`.
    TransferEncoding,
    /// `Connection`.
    Connection,
    /// `Upgrade`.
    Upgrade,
    /// `Expect`.
    Expect,
    /// Other hop-by-hop fields: `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`.
    HopByHop,
    /// Forwarding fields a client may not set (`X-Forwarded-*`, `X-Real-IP`,
    /// `Forwarded`, and RFC 9440's `Client-Cert` and `Client-Cert-Chain`).
    ClientForwarding,
    /// Anything else.
    Other,
}

impl FieldKind {
    /// True for the kinds that describe one connection, not the message
    /// (never carried into HTTP/2 or to another hop).
    pub fn is_connection_specific(self) -> bool {
        matches!(
            self,
            FieldKind::Connection
                | FieldKind::Upgrade
                | FieldKind::HopByHop
                | FieldKind::TransferEncoding
        )
    }

    /// The kind of a field name (case-insensitive).
    pub fn of(name: &str) -> FieldKind {
        FieldKind::classify(name.as_bytes(), <[u8]>::eq_ignore_ascii_case)
    }

    /// [`FieldKind::of`] for a name the parser checked is made of token
    /// characters: compared eight bytes at a time.
    pub(crate) fn of_token(name: &[u8]) -> FieldKind {
        FieldKind::classify(name, token_eq)
    }

    /// The kind of `b`, `same(b, known)` comparing it with a known name
    /// (lowercase) of the same length.
    fn classify<F: Fn(&[u8], &[u8]) -> bool + Copy>(b: &[u8], same: F) -> FieldKind {
        use FieldKind::*;
        let is = |known: &str| same(b, known.as_bytes());
        // The length picks at most three candidates; most names on the wire
        // (Accept, User-Agent, Cookie...) have a length no known name has.
        let kind = match b.len() {
            2 if is("te") => HopByHop,
            4 if is("host") => Host,
            6 if is("expect") => Expect,
            7 if is("upgrade") => Upgrade,
            7 if is("trailer") => HopByHop,
            9 if is("forwarded") || is("x-real-ip") => ClientForwarding,
            10 if is("connection") => Connection,
            11 if is("client-cert") => ClientForwarding,
            10 if is("keep-alive") => HopByHop,
            14 if is("content-length") => ContentLength,
            15 if is("x-forwarded-for") => ClientForwarding,
            16 if is("proxy-connection") => HopByHop,
            16 if is("x-forwarded-host") || is("x-forwarded-port") => ClientForwarding,
            17 if is("transfer-encoding") => TransferEncoding,
            17 if is("x-forwarded-proto") || is("client-cert-chain") => ClientForwarding,
            _ => Other,
        };
        // CGI-style backends (PHP, many frameworks) read `X_Forwarded_For`
        // as `X-Forwarded-For`: a client must not smuggle one in that way.
        // Only names as long as a forwarding field's can be one (most names
        // are not: no search for '_' in them).
        if kind == Other && matches!(b.len(), 9 | 11 | 15..=17) && b.contains(&b'_') {
            return FieldKind::of_underscored(b, same);
        }
        kind
    }

    /// The kind's bit in [`Fields`](super::Fields)' set of kinds present.
    pub(crate) fn bit(self) -> u16 {
        1 << self as u16
    }

    /// The set of `kinds`, for [`Fields::copy_lines_except`](super::Fields::copy_lines_except).
    pub fn bits(kinds: &[FieldKind]) -> u16 {
        kinds.iter().fold(0, |set, k| set | k.bit())
    }

    /// `ClientForwarding` for underscore spellings of forwarding fields.
    fn of_underscored<F: Fn(&[u8], &[u8]) -> bool + Copy>(name: &[u8], same: F) -> FieldKind {
        let dashed: Vec<u8> = name
            .iter()
            .map(|&b| if b == b'_' { b'-' } else { b })
            .collect();
        if FieldKind::classify(&dashed, same) == FieldKind::ClientForwarding {
            FieldKind::ClientForwarding
        } else {
            FieldKind::Other
        }
    }
}

/// The bit standing for names of `len` bytes in a set of name lengths
/// (63 and longer share one).
pub(crate) fn length_bit(len: usize) -> u64 {
    1 << len.min(63)
}

/// `name == known` ignoring ASCII case, for a `name` of token characters
/// and a `known` name of lowercase letters and '-': setting each byte's
/// 0x20 bit lowercases a letter, and of the bytes it changes into a letter
/// or '-' only uppercase letters are token characters (CR would become
/// '-'), so the test is exact for those inputs.
#[inline]
pub(super) fn token_eq(name: &[u8], known: &[u8]) -> bool {
    const CASE: u64 = u64::from_le_bytes([0x20; 8]);
    let word = |b: &[u8], at: usize| {
        b.get(at..)
            .and_then(<[u8]>::first_chunk::<8>)
            .map(|w| u64::from_le_bytes(*w))
    };
    if name.len() != known.len() {
        return false;
    }
    let Some(last) = name.len().checked_sub(8) else {
        return name.iter().zip(known).all(|(&n, &k)| n | 0x20 == k);
    };
    // Words at 0, 8, ... and one ending at the last byte (overlapping).
    let mut at = 0;
    loop {
        let here = at.min(last);
        match (word(name, here), word(known, here)) {
            (Some(n), Some(k)) if n | CASE == k => {}
            _ => return false,
        }
        if here == last {
            return true;
        }
        at += 8;
    }
}
