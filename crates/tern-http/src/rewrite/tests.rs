use super::*;
use crate::head::{parse_request, parse_response};

#[test]
fn connection_keep_alive_names_no_other_field() {
    let plain =
        parse_response(b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nX-A: 1\r\n\r\n").unwrap();
    assert!(!plain.fields.connection_names_fields());
    let naming =
        parse_response(b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, x-a\r\nX-A: 1\r\n\r\n")
            .unwrap();
    assert!(naming.fields.connection_names_fields());
    let mut out = Vec::new();
    write_response_head(&naming, false, &FieldEdits::NONE, &mut out);
    assert!(!String::from_utf8(out).unwrap().contains("X-A"));
}

#[test]
fn kept_field_lines_are_copied_as_received_around_dropped_ones() {
    let head = parse_response(
        b"HTTP/1.1 200 OK\r\nServer: x\r\nDate:d\r\nConnection: keep-alive\r\nETag: \"e\" \r\nKeep-Alive: timeout=5\r\nX-Last: 1\r\n\r\n",
    )
    .unwrap();
    let mut out = Vec::new();
    write_response_head(&head, true, &FieldEdits::NONE, &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "HTTP/1.1 200 OK\r\nServer: x\r\nDate:d\r\nETag: \"e\" \r\nX-Last: 1\r\nConnection: close\r\n\r\n"
    );
    let drop: Vec<Box<str>> = vec!["x-last".into(), "server".into()];
    let edits = FieldEdits {
        drop: &drop,
        add: Vec::new(),
    };
    let mut out = Vec::new();
    write_response_head(&head, false, &edits, &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "HTTP/1.1 200 OK\r\nDate:d\r\nETag: \"e\" \r\n\r\n"
    );
    // No hop-by-hop field: a rule's name alone drops a line, and a
    // head without one goes whole.
    let plain = parse_response(
        b"HTTP/1.1 200 OK\r\nServer: x\r\nDate:d\r\nX-Last: 1\r\nX-Lasts: 2\r\n\r\n",
    )
    .unwrap();
    for (edits, want) in [
        (&edits, "HTTP/1.1 200 OK\r\nDate:d\r\nX-Lasts: 2\r\n\r\n"),
        (
            &FieldEdits::NONE,
            "HTTP/1.1 200 OK\r\nServer: x\r\nDate:d\r\nX-Last: 1\r\nX-Lasts: 2\r\n\r\n",
        ),
    ] {
        let mut out = Vec::new();
        write_response_head(&plain, false, edits, &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }
}

#[test]
fn a_head_written_again_gets_the_lines_its_rules_keep_and_a_new_head_its_own() {
    let raw = b"HTTP/1.1 200 OK\r\nServer: x\r\nConnection: keep-alive\r\nX-Last: 1\r\n\r\n";
    let mut head = parse_response(raw).unwrap();
    let drop: Vec<Box<str>> = vec!["x-last".into()];
    let same: Vec<Box<str>> = vec!["x-last".into()];
    let other: Vec<Box<str>> = vec!["server".into()];
    let write = |head: &ResponseHead, drop: &[Box<str>], close: bool| {
        let edits = FieldEdits {
            drop,
            add: Vec::new(),
        };
        let mut out = b"prefix".to_vec();
        write_response_head(head, close, &edits, &mut out);
        String::from_utf8(out).unwrap()
    };
    let dropped = "prefixHTTP/1.1 200 OK\r\nServer: x\r\n\r\n";
    assert_eq!(write(&head, &drop, false), dropped);
    // Kept lines: the same rules by content (another list), the same
    // lines; the close is not part of them.
    assert_eq!(write(&head, &same, false), dropped);
    assert_eq!(
        write(&head, &drop, true),
        "prefixHTTP/1.1 200 OK\r\nServer: x\r\nConnection: close\r\n\r\n"
    );
    // Other rules: chosen again, then the first rules' lines again.
    assert_eq!(
        write(&head, &other, false),
        "prefixHTTP/1.1 200 OK\r\nX-Last: 1\r\n\r\n"
    );
    assert_eq!(write(&head, &drop, false), dropped);
    assert_eq!(
        write(&head, &[], false),
        "prefixHTTP/1.1 200 OK\r\nServer: x\r\nX-Last: 1\r\n\r\n"
    );
    // The same value refilled by another head (and by a refused one):
    // that head's lines, never the kept ones.
    crate::head::parse_response_into(b"HTTP/1.1 404 No\r\nX-Last: 2\r\nVia: y\r\n\r\n", &mut head)
        .unwrap();
    assert_eq!(
        write(&head, &drop, false),
        "prefixHTTP/1.1 404 No\r\nVia: y\r\n\r\n"
    );
    assert!(
        crate::head::parse_response_into(b"HTTP/1.1 200 OK\r\nA:\x00\r\n\r\n", &mut head).is_err()
    );
    assert_eq!(write(&head, &drop, false), "prefixHTTP/1.1 000 \r\n\r\n");
    // A copy chooses its lines itself.
    let head = parse_response(raw).unwrap();
    assert_eq!(write(&head, &drop, false), dropped);
    assert_eq!(
        write(&head.clone(), &other, false),
        "prefixHTTP/1.1 200 OK\r\nX-Last: 1\r\n\r\n"
    );
}

fn rewrite(raw: &str, ip: &str, conn: BackendConnection) -> String {
    let head = parse_request(raw.as_bytes()).unwrap();
    let mut out = Vec::new();
    let facts = ClientFacts {
        ip: ip.parse().unwrap(),
        proto: "https",
        client_cert: None,
    };
    write_request_head(
        &head,
        &facts,
        ForwardedFields::default(),
        conn,
        &FieldEdits::NONE,
        &mut out,
    );
    String::from_utf8(out).unwrap()
}

#[test]
fn forged_client_cert_fields_are_removed_and_tern_s_added() {
    let raw = "GET / HTTP/1.1\r\nHost: a\r\nClient-Cert: :Zm9yZ2Vk:\r\nclient-cert-chain: :Zm9yZ2Vk:\r\nClient_Cert: :Zm9yZ2Vk:\r\n\r\n";
    let head = parse_request(raw.as_bytes()).unwrap();
    let leaf: &[u8] = b"leaf";
    let verified = ClientCertFields::new([leaf]).unwrap();
    for client_cert in [None, Some(&verified)] {
        let facts = ClientFacts {
            ip: "192.0.2.7".parse().unwrap(),
            proto: "https",
            client_cert,
        };
        let mut out = Vec::new();
        write_request_head(
            &head,
            &facts,
            ForwardedFields::default(),
            BackendConnection::KeepAlive,
            &FieldEdits::NONE,
            &mut out,
        );
        let out = String::from_utf8(out).unwrap();
        assert!(!out.contains("Zm9yZ2Vk"), "{out}");
        assert_eq!(
            out.contains("Client-Cert: :bGVhZg==:\r\n"),
            client_cert.is_some(),
            "{out}"
        );
        assert!(!out.contains("Client-Cert-Chain"), "{out}");
    }
}

#[test]
fn forged_forwarding_fields_are_replaced() {
    let out = rewrite(
        "GET /p HTTP/1.1\r\nHost: example.com:8443\r\nX-Forwarded-For: 6.6.6.6\r\nX-Real-IP: 6.6.6.6\r\nforwarded: for=6.6.6.6\r\nX-Forwarded-Host: evil\r\nX-Forwarded-Port: 1\r\nX-Forwarded-Proto: http\r\n\r\n",
        "192.0.2.7",
        BackendConnection::KeepAlive,
    );
    assert!(!out.contains("6.6.6.6"), "{out}");
    assert!(!out.contains("evil"), "{out}");
    assert!(out.contains("X-Forwarded-For: 192.0.2.7\r\n"), "{out}");
    assert!(out.contains("X-Forwarded-Proto: https\r\n"), "{out}");
    assert!(
        out.contains("Forwarded: for=192.0.2.7;proto=https;host=\"example.com:8443\"\r\n"),
        "{out}"
    );
    assert!(
        out.starts_with("GET /p HTTP/1.1\r\nHost: example.com:8443\r\n"),
        "{out}"
    );
}

#[test]
fn ipv6_client_is_quoted_in_forwarded() {
    let out = rewrite(
        "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "::1",
        BackendConnection::KeepAlive,
    );
    assert!(
        out.contains("Forwarded: for=\"[::1]\";proto=https"),
        "{out}"
    );
    assert!(out.contains("X-Forwarded-For: ::1\r\n"), "{out}");
}

#[test]
fn hop_by_hop_fields_stop_here() {
    let out = rewrite(
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, X-Secret, Content-Length\r\nKeep-Alive: 5\r\nX-Secret: s\r\nTE: trailers\r\nContent-Length: 0\r\n\r\n",
        "127.0.0.1",
        BackendConnection::KeepAlive,
    );
    assert!(!out.to_ascii_lowercase().contains("keep-alive"), "{out}");
    assert!(!out.contains("X-Secret"), "{out}");
    assert!(!out.contains("TE:"), "{out}");
    assert!(out.contains("Content-Length: 0\r\n"), "{out}");
}

#[test]
fn upgrade_is_passed_on_when_asked() {
    let out = rewrite(
        "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        "127.0.0.1",
        BackendConnection::Upgrade,
    );
    assert!(out.contains("Upgrade: websocket\r\n"), "{out}");
    assert!(out.contains("Connection: upgrade\r\n"), "{out}");
}

#[test]
fn h2_request_becomes_an_h1_head_with_joined_cookies() {
    let fields: Vec<(&str, &[u8])> = vec![
        ("cookie", b"a=1"),
        ("x-forwarded-for", b"6.6.6.6"),
        ("cookie", b"b=2"),
        ("accept", b"*/*"),
    ];
    let mut out = Vec::new();
    let facts = ClientFacts {
        ip: "192.0.2.1".parse().unwrap(),
        proto: "https",
        client_cert: None,
    };
    write_request_head_from_h2(
        "POST",
        "/p?q",
        Some(b"example.com"),
        fields.iter().copied(),
        H1BodyFraming::Chunked,
        &facts,
        ForwardedFields::default(),
        &FieldEdits::NONE,
        &mut out,
    );
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("POST /p?q HTTP/1.1\r\nHost: example.com\r\naccept: */*\r\ncookie: a=1; b=2\r\nTransfer-Encoding: chunked\r\n"), "{text}");
    assert!(!text.contains("6.6.6.6"), "{text}");
    assert!(
        text.contains("Forwarded: for=192.0.2.1;proto=https;host=\"example.com\"\r\n"),
        "{text}"
    );
}

#[test]
fn h1_request_keeps_end_to_end_fields_for_h2() {
    let head = parse_request(
        b"POST /u HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, X-Secret\r\nX-Secret: s\r\n\
          Transfer-Encoding: chunked\r\nExpect: 100-continue\r\nX-Real-IP: 6.6.6.6\r\n\
          TE: trailers\r\nAccept: */*\r\nCookie: a=1\r\n\r\n",
    )
    .unwrap();
    let kept: Vec<(&str, &[u8])> = h1_request_fields_for_h2(&head).collect();
    assert_eq!(kept, vec![("Accept", &b"*/*"[..]), ("Cookie", &b"a=1"[..])]);
}

#[test]
fn h2_request_fields_for_h2_drop_host_and_forged_ones() {
    for name in [
        "host",
        "connection",
        "te",
        "x-forwarded-for",
        "forwarded",
        "x_real_ip",
    ] {
        assert!(!keeps_h2_request_field_for_h2(name), "{name}");
    }
    for name in ["content-length", "cookie", "accept", "user-agent"] {
        assert!(keeps_h2_request_field_for_h2(name), "{name}");
    }
}

#[test]
fn forwarding_fields_are_the_same_for_every_path() {
    let facts = ClientFacts {
        ip: "192.0.2.9".parse().unwrap(),
        proto: "https",
        client_cert: None,
    };
    let mut seen = Vec::new();
    forwarding_fields(
        &facts,
        ForwardedFields::default(),
        Some(b"h.test"),
        |n, v| seen.push(format!("{n}: {}", String::from_utf8_lossy(&v.concat()))),
    );
    assert_eq!(
        seen,
        [
            "X-Forwarded-For: 192.0.2.9",
            "X-Forwarded-Proto: https",
            "Forwarded: for=192.0.2.9;proto=https;host=\"h.test\""
        ]
    );
}

#[test]
fn h2_response_becomes_an_h1_head() {
    let fields: Vec<(&str, &[u8])> = vec![
        ("content-type", b"text/plain"),
        ("keep-alive", b"5"),
        ("set-cookie", b"a=1"),
    ];
    let mut out = Vec::new();
    write_response_head_from_h2(
        200,
        "OK",
        fields.iter().copied(),
        true,
        true,
        &FieldEdits::NONE,
        &mut out,
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nset-cookie: a=1\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
}

#[test]
fn response_head_drops_hop_by_hop_and_adds_close() {
    let head = parse_response(b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\n").unwrap();
    let mut out = Vec::new();
    write_response_head(&head, true, &FieldEdits::NONE, &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
    );
}
