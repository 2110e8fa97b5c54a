//! The forwarding fields tern adds to every request it passes on
//! (`X-Forwarded-For`, `X-Forwarded-Proto`, `Forwarded`, and RFC 9440's
//! `Client-Cert` and `Client-Cert-Chain` when the client's certificate was
//! verified), and the ones a client may not set. One source for every backend protocol, so HTTP/1.1
//! and HTTP/2 backends are told the same thing; built without allocating,
//! as this runs per request.

use std::net::IpAddr;

/// Forwarding fields a client may not set; always removed from requests.
pub const CLIENT_FORWARDING_FIELDS: [&str; 8] = [
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-forwarded-port",
    "x-real-ip",
    "forwarded",
    "client-cert",
    "client-cert-chain",
];

/// Which forwarding fields tern adds to requests it forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardedFields {
    /// `X-Forwarded-For: <client ip>`.
    pub x_forwarded_for: bool,
    /// `X-Forwarded-Proto: https`.
    pub x_forwarded_proto: bool,
    /// `Forwarded: for=...;proto=https;host=...` (RFC 7239).
    pub forwarded: bool,
}

impl Default for ForwardedFields {
    fn default() -> Self {
        ForwardedFields {
            x_forwarded_for: true,
            x_forwarded_proto: true,
            forwarded: true,
        }
    }
}

/// What tern knows about the client, for the forwarding fields.
#[derive(Debug, Clone, Copy)]
pub struct ClientFacts<'a> {
    /// The client's address (from the socket, or a trusted PROXY header).
    pub ip: ClientIp,
    /// `"https"` for TLS listeners.
    pub proto: &'static str,
    /// The client's verified certificate, as RFC 9440 fields; `None` when
    /// it sent none (or none was asked for).
    pub client_cert: Option<&'a ClientCertFields>,
}

/// RFC 9440 `Client-Cert` and `Client-Cert-Chain` values of one verified
/// client certificate chain, encoded once per connection: each
/// certificate's DER as a structured-field byte sequence (`:base64:`), the
/// chain a list of them without the leaf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertFields {
    cert: Vec<u8>,
    chain: Vec<u8>,
}

impl ClientCertFields {
    /// The fields for a chain, leaf first (DER). `None` for an empty chain.
    pub fn new<'c>(chain: impl IntoIterator<Item = &'c [u8]>) -> Option<ClientCertFields> {
        let mut certs = chain.into_iter();
        let cert = sf_binary(certs.next()?);
        let mut list = Vec::new();
        for c in certs {
            if !list.is_empty() {
                list.extend_from_slice(b", ");
            }
            list.extend_from_slice(&sf_binary(c));
        }
        Some(ClientCertFields { cert, chain: list })
    }

    /// The `Client-Cert` value.
    pub fn cert(&self) -> &[u8] {
        &self.cert
    }

    /// The `Client-Cert-Chain` value (empty when the client sent the leaf
    /// alone).
    pub fn chain(&self) -> &[u8] {
        &self.chain
    }
}

/// A structured-field byte sequence (RFC 8941 section 3.3.5).
fn sf_binary(der: &[u8]) -> Vec<u8> {
    use base64::Engine as _;
    let mut out = Vec::with_capacity(der.len() * 4 / 3 + 6);
    out.push(b':');
    out.extend_from_slice(
        base64::engine::general_purpose::STANDARD
            .encode(der)
            .as_bytes(),
    );
    out.push(b':');
    out
}

/// True for the forwarding fields a client may not set.
/// Underscore spellings (`X_Forwarded_For`) count too: CGI-style backends
/// read them as the dashed names.
pub fn is_client_forwarding_field(name: &str) -> bool {
    crate::head::FieldKind::of(name) == crate::head::FieldKind::ClientForwarding
}

/// Calls `put(name, value)` for each of tern's forwarding fields for
/// `client` (the ones `add` asks for), in the order HTTP/1.1 heads carry
/// them; a value comes as its pieces, in order (`Forwarded` is made of
/// several). `host` (the request's Host or `:authority`) goes into
/// `Forwarded`. Shared by every request path so HTTP/1.1 and HTTP/2
/// backends are told the same thing. Nothing is copied before `put`: this
/// runs per request, and an HTTP/1.1 head takes the pieces straight into
/// its buffer (a `Forwarded` value assembled in a zeroed 512-byte stack
/// buffer first was ~250 instructions a request, callgrind).
pub fn forwarding_fields(
    client: &ClientFacts,
    add: ForwardedFields,
    host: Option<&[u8]>,
    mut put: impl FnMut(&'static str, &[&[u8]]),
) {
    let ip = &client.ip.text;
    if add.x_forwarded_for {
        put("X-Forwarded-For", &[ip.as_bytes()]);
    }
    if add.x_forwarded_proto {
        put("X-Forwarded-Proto", &[client.proto.as_bytes()]);
    }
    if add.forwarded {
        let (before_ip, after_ip): (&[u8], &[u8]) = if client.ip.addr.is_ipv6() {
            (b"for=\"[", b"]\";proto=")
        } else {
            (b"for=", b";proto=")
        };
        let proto = client.proto.as_bytes();
        match host.filter(|h| is_safe_host(h)) {
            // Host is checked to hold only host/port characters (at most
            // 255), so quoting needs no escapes.
            Some(host) => put(
                "Forwarded",
                &[
                    before_ip,
                    ip.as_bytes(),
                    after_ip,
                    proto,
                    b";host=\"",
                    host,
                    b"\"",
                ],
            ),
            None => put("Forwarded", &[before_ip, ip.as_bytes(), after_ip, proto]),
        }
    }
    // Not optional: a backend behind an mTLS listener must learn who the
    // client is from tern, the client's own fields being removed.
    if let Some(c) = client.client_cert {
        put("Client-Cert", &[c.cert()]);
        if !c.chain().is_empty() {
            put("Client-Cert-Chain", &[c.chain()]);
        }
    }
}

/// Each octet's decimal digits (left-aligned) and their count: an IPv4
/// address is formatted with four lookups instead of a division per digit
/// (it goes into every forwarded request).
const OCTET_TEXT: [[u8; 4]; 256] = {
    let mut table = [[0u8; 4]; 256];
    let mut i = 0;
    while i < 256 {
        let n = i as u8;
        table[i] = if n >= 100 {
            [b'0' + n / 100, b'0' + n / 10 % 10, b'0' + n % 10, 3]
        } else if n >= 10 {
            [b'0' + n / 10, b'0' + n % 10, 0, 2]
        } else {
            [b'0' + n, 0, 0, 1]
        };
        i += 1;
    }
    table
};

/// A client's address with its text, formatted once per connection: the
/// text goes into every forwarded request (formatting it per request was
/// ~75 instructions of a keepalive request, callgrind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIp {
    addr: IpAddr,
    text: IpText,
}

impl ClientIp {
    /// `addr` and its text.
    pub fn new(addr: IpAddr) -> Self {
        ClientIp {
            addr,
            text: IpText::new(addr),
        }
    }

    /// The address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The address as text (`192.0.2.7`, `2001:db8::1`).
    pub fn text(&self) -> &[u8] {
        self.text.as_bytes()
    }
}

impl From<IpAddr> for ClientIp {
    fn from(addr: IpAddr) -> Self {
        ClientIp::new(addr)
    }
}

impl std::str::FromStr for ClientIp {
    type Err = std::net::AddrParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse::<IpAddr>().map(ClientIp::new)
    }
}

/// An IP address as text, formatted on the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IpText {
    buf: [u8; 45],
    len: usize,
}

impl IpText {
    fn new(ip: IpAddr) -> Self {
        let mut t = IpText {
            buf: [0; 45],
            len: 0,
        };
        match ip {
            IpAddr::V4(v4) => {
                for (i, octet) in v4.octets().into_iter().enumerate() {
                    if i > 0 {
                        t.push(b'.');
                    }
                    // Three bytes written, the octet's digits kept: the
                    // buffer holds 15 bytes of text and 3 more.
                    let [a, b, c, len] = OCTET_TEXT[usize::from(octet)];
                    t.buf[t.len..t.len + 3].copy_from_slice(&[a, b, c]);
                    t.len += usize::from(len);
                }
            }
            IpAddr::V6(v6) => {
                let mut cursor = std::io::Cursor::new(&mut t.buf[..]);
                // 45 bytes hold the longest IPv6 text (with an embedded IPv4).
                let _ = std::io::Write::write_fmt(&mut cursor, format_args!("{v6}"));
                t.len = cursor.position() as usize;
            }
        }
        t
    }

    fn push(&mut self, b: u8) {
        self.buf[self.len] = b;
        self.len += 1;
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

fn is_safe_host(host: &[u8]) -> bool {
    !host.is_empty()
        && host.len() <= 255
        && host
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_text_matches_the_standard_formatting() {
        for ip in [
            "0.0.0.0",
            "9.10.99.100",
            "192.0.2.255",
            "::1",
            "2001:db8::8a2e:370:7334",
            "::ffff:1.2.3.4",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ] {
            let addr: IpAddr = ip.parse().unwrap();
            assert_eq!(IpText::new(addr).as_bytes(), addr.to_string().as_bytes());
        }
        // Every octet value, in every position.
        for n in 0..=255u8 {
            let addr = IpAddr::from([n, 255 - n, n / 3, n.wrapping_mul(7)]);
            assert_eq!(IpText::new(addr).as_bytes(), addr.to_string().as_bytes());
        }
    }

    #[test]
    fn client_cert_fields_are_sf_binary_with_the_chain_as_a_list() {
        let leaf: &[u8] = b"\x30\x03leaf";
        let ca: &[u8] = b"ca";
        let f = ClientCertFields::new([leaf, ca, ca]).unwrap();
        assert_eq!(f.cert(), b":MANsZWFm:");
        assert_eq!(f.chain(), b":Y2E=:, :Y2E=:");
        assert!(ClientCertFields::new([leaf]).unwrap().chain().is_empty());
        assert!(ClientCertFields::new(std::iter::empty()).is_none());
    }
}
