use super::*;

fn req(raw: &str) -> Result<RequestHead, HttpError> {
    parse_request(raw.as_bytes())
}

#[test]
fn parses_a_plain_request() {
    let h = req("GET /a?b HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nx-a: 2\r\n\r\n").unwrap();
    assert_eq!(h.method(), "GET");
    assert_eq!(h.target(), "/a?b");
    assert_eq!(h.minor_version, 1);
    assert_eq!(h.fields.get("host"), Some(&b"x"[..]));
    assert_eq!(h.fields.get_all("X-A").count(), 2);
}

#[test]
fn refuses_smuggling_syntax() {
    assert_eq!(
        req("GET / HTTP/1.1\nHost: x\n\n").unwrap_err(),
        HttpError::BareLf
    );
    assert_eq!(
        req("GET / HTTP/1.1\r\nHost: x\n\r\n").unwrap_err(),
        HttpError::BareLf
    );
    assert_eq!(
        req("GET / HTTP/1.1\r\nHost: x\r\n y\r\n\r\n").unwrap_err(),
        HttpError::ObsFold
    );
    assert_eq!(
        req("GET / HTTP/1.1\r\nHost : x\r\n\r\n").unwrap_err(),
        HttpError::SpaceBeforeColon
    );
    assert_eq!(
        req("GET / HTTP/1.1\r\nHost: x\0y\r\n\r\n").unwrap_err(),
        HttpError::Nul
    );
    assert_eq!(
        req("GET / HTTP/1.1\r\nHost: x\ry\r\n\r\n").unwrap_err(),
        HttpError::BareCr
    );
}

#[test]
fn too_many_fields_is_too_large() {
    let mut s = String::from("GET / HTTP/1.1\r\n");
    for i in 0..=MAX_HEADERS {
        s.push_str(&format!("x-{i}: v\r\n"));
    }
    s.push_str("\r\n");
    assert_eq!(req(&s).unwrap_err(), HttpError::HeadTooLarge);
}

#[test]
fn every_known_field_name_has_its_kind_in_any_case() {
    use FieldKind::*;
    for (name, kind) in [
        ("Host", Host),
        ("Content-Length", ContentLength),
        ("TRANSFER-ENCODING", TransferEncoding),
        ("Connection", Connection),
        ("Upgrade", Upgrade),
        ("Expect", Expect),
        ("Keep-Alive", HopByHop),
        ("Proxy-Connection", HopByHop),
        ("TE", HopByHop),
        ("Trailer", HopByHop),
        ("X-Forwarded-For", ClientForwarding),
        ("X-Forwarded-Proto", ClientForwarding),
        ("X-Forwarded-Host", ClientForwarding),
        ("X-Forwarded-Port", ClientForwarding),
        ("X-Real-IP", ClientForwarding),
        ("Forwarded", ClientForwarding),
        ("Hosts", Other),
        ("Content-Type", Other),
        ("X-Forwarded-Fox", Other),
    ] {
        assert_eq!(FieldKind::of(name), kind, "{name}");
    }
}

#[test]
fn connection_tokens_are_read_once_while_parsing() {
    for (fields, close, names) in [
        ("Connection: keep-alive\r\n", false, false),
        ("Connection: Keep-Alive\r\n", false, false),
        ("Connection: close\r\n", true, true),
        ("Connection: Keep-Alive , CLOSE\r\n", true, true),
        ("Connection: closed\r\n", false, true),
        ("Connection: keep-alive, x-a\r\n", false, true),
        ("Connection: ,\r\n", false, false),
        (
            "Connection: keep-alive\r\nconnection: close\r\n",
            true,
            true,
        ),
        ("X-Connection: close\r\n", false, false),
    ] {
        let raw = format!("GET / HTTP/1.1\r\nHost: x\r\n{fields}\r\n");
        let head = parse_request(raw.as_bytes()).unwrap();
        assert_eq!(head.fields.asks_close(), close, "{fields}");
        assert_eq!(head.fields.connection_names_fields(), names, "{fields}");
        assert_eq!(
            head.fields.asks_close(),
            head.fields.kind_has_token(FieldKind::Connection, "close"),
            "{fields}"
        );
    }
}

#[test]
fn a_token_name_has_the_same_kind_by_the_fast_compare() {
    let known = [
        "te",
        "host",
        "expect",
        "upgrade",
        "trailer",
        "forwarded",
        "x-real-ip",
        "connection",
        "client-cert",
        "keep-alive",
        "content-length",
        "x-forwarded-for",
        "proxy-connection",
        "x-forwarded-host",
        "x-forwarded-port",
        "transfer-encoding",
        "x-forwarded-proto",
        "client-cert-chain",
        "x_forwarded_for",
        "date",
        "server",
    ];
    // Every known name, in two cases, and with each byte replaced by
    // each token character in turn: the two compares agree on all.
    let tchars: Vec<u8> = (0u8..=127)
        .filter(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        .collect();
    for name in known {
        for name in [name.to_string(), name.to_ascii_uppercase()] {
            let mut bytes = name.into_bytes();
            for at in 0..bytes.len() {
                let keep = bytes[at];
                for &t in &tchars {
                    bytes[at] = t;
                    let text = std::str::from_utf8(&bytes).unwrap();
                    assert_eq!(FieldKind::of_token(&bytes), FieldKind::of(text), "{text}");
                }
                bytes[at] = keep;
            }
        }
    }
}

#[test]
fn field_kinds_are_recognised_and_heads_reuse_their_storage() {
    let mut head = RequestHead::default();
    parse_request_into(
        b"POST /a HTTP/1.1\r\nHOST: x\r\nX-Real-IP: 1\r\nContent-Length: 2\r\nX-Other: y\r\n\r\n",
        &mut head,
    )
    .unwrap();
    assert_eq!(head.fields.first(FieldKind::Host), Some(&b"x"[..]));
    assert_eq!(head.fields.first(FieldKind::ContentLength), Some(&b"2"[..]));
    assert!(head.fields.has(FieldKind::ClientForwarding));
    assert_eq!(
        FieldKind::of("X_Forwarded_For"),
        FieldKind::ClientForwarding
    );
    assert_eq!(FieldKind::of("x-real_ip"), FieldKind::ClientForwarding);
    assert_eq!(FieldKind::of("X_Custom"), FieldKind::Other);
    parse_request_into(b"GET /b HTTP/1.1\r\nHost: y\r\n\r\n", &mut head).unwrap();
    assert_eq!(head.method(), "GET");
    assert_eq!(head.target(), "/b");
    assert_eq!(head.fields.len(), 1);
    assert!(!head.fields.has(FieldKind::ClientForwarding));
}

#[test]
fn parses_response_and_tokens() {
    let raw = b"HTTP/1.1 101 Switching Protocols\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n";
    let h = parse_response(raw).unwrap();
    assert_eq!(h.status, 101);
    assert_eq!(h.reason(), b"Switching Protocols");
    assert!(h.fields.has_token("connection", "upgrade"));
    assert!(!h.is_interim());
}
