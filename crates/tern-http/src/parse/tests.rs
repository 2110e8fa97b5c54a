use crate::head::{parse_request, parse_response, MAX_HEADERS};
use crate::reference;
use crate::HttpError;

fn req(raw: &[u8]) -> Result<reference::Parts, HttpError> {
    parse_request(raw).map(|h| reference::request_parts(&h))
}

fn resp(raw: &[u8]) -> Result<reference::Parts, HttpError> {
    parse_response(raw).map(|h| reference::response_parts(&h))
}

#[test]
fn a_request_reads_its_line_and_fields_with_outer_whitespace_left_out() {
    let p = req(b"\r\nPATCH /a?b=%20 HTTP/1.0\r\nHost:x\r\nX-A: \t v : w \t\r\nX-Empty:  \r\nX-Bin: \x80\xff\r\n\r\n")
        .unwrap();
    assert_eq!(p.start, ("PATCH".into(), b"/a?b=%20".to_vec()));
    assert_eq!(p.minor_version, 0);
    let fields: Vec<(&str, &[u8])> = p
        .fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_slice()))
        .collect();
    assert_eq!(
        fields,
        [
            ("Host", &b"x"[..]),
            ("X-A", b"v : w"),
            ("X-Empty", b""),
            ("X-Bin", b"\x80\xff")
        ]
    );
}

#[test]
fn a_response_reads_its_status_and_reason_in_every_form() {
    for (raw, status, reason) in [
        (&b"HTTP/1.1 200 OK\r\n\r\n"[..], "200", &b"OK"[..]),
        (b"HTTP/1.1 404\r\n\r\n", "404", b""),
        (b"HTTP/1.1 204 \r\n\r\n", "204", b""),
        (
            b"HTTP/1.0 500 Bad\tthing : now\r\n\r\n",
            "500",
            b"Bad\tthing : now",
        ),
        // obs-text in a reason: read as no reason, as httparse does.
        (b"HTTP/1.1 200 \xe9t\xe9\r\n\r\n", "200", b""),
    ] {
        let p = resp(raw).unwrap();
        assert_eq!(p.start, (status.to_string(), reason.to_vec()), "{raw:?}");
    }
}

#[test]
fn each_smuggling_fault_is_refused_and_named() {
    use HttpError::*;
    for (raw, want) in [
        (&b"GET / HTTP/1.1\nHost: x\r\n\r\n"[..], BareLf),
        (b"GET / HTTP/1.1\r\nHost: x\n\r\n", BareLf),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\n", BareLf),
        (b"\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", BareLf),
        (b"GET / HTTP/1.1\r\nHost: x\ry\r\n\r\n", BareCr),
        (b"GET / HTTP/1.1\r\nHo\rst: x\r\n\r\n", BareCr),
        (b"GET / HTTP/1.1\r\nHost: x\0\r\n\r\n", Nul),
        (b"GET / HTTP/1.1\r\nHo\0st: x\r\n\r\n", Nul),
        (b"GET /\0 HTTP/1.1\r\nHost: x\r\n\r\n", Nul),
        (b"GET / HTTP/1.1\r\n Host: x\r\n\r\n", ObsFold),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\tfolded\r\n\r\n", ObsFold),
        (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", SpaceBeforeColon),
        (b"GET / HTTP/1.1\r\nHost\t: x\r\n\r\n", SpaceBeforeColon),
    ] {
        assert_eq!(req(raw).unwrap_err(), want, "{raw:?}");
    }
}

#[test]
fn what_the_grammar_has_no_place_for_is_refused() {
    for raw in [
        &b"GET  / HTTP/1.1\r\n\r\n"[..],
        b"GET /  HTTP/1.1\r\n\r\n",
        b"GET  HTTP/1.1\r\n\r\n",
        b"G(T / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/2.0\r\n\r\n",
        b"GET / HTTP/1.1 \r\n\r\n",
        b"GET / http/1.1\r\n\r\n",
        b"GET /\xff HTTP/1.1\r\n\r\n",
        b"GET /\x7f HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\n: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nX@Y: 1\r\n\r\n",
        b"GET / HTTP/1.1\r\nX-A 1\r\n\r\n",
        b"GET / HTTP/1.1\r\nX-A: \x01\r\n\r\n",
        b"GET / HTTP/1.1\r\nX-A: a\x7fb\r\n\r\n",
        b"GET / HTTP/1.1\r\nX-A: 1\r\n",
        b"GET / HTTP/1.1\r\nX-A: 1\r\n\r\nX",
        b"GET / HTTP/1.1\r\n\r\nX-A: 1\r\n\r\n",
        b"",
    ] {
        let err = req(raw).unwrap_err();
        assert_eq!(err.status(), 400, "{raw:?}");
    }
    for raw in [
        &b"HTTP/1.1 20 OK\r\n\r\n"[..],
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1  200 OK\r\n\r\n",
        b"HTTP/1.1 200 O\x01K\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.2 200 OK\r\n\r\n",
    ] {
        assert_eq!(resp(raw).unwrap_err().status(), 400, "{raw:?}");
    }
}

#[test]
fn more_fields_than_the_limit_are_answered_as_too_large() {
    let head = |n: usize| {
        let mut s = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..n {
            s.extend_from_slice(format!("x-{i}: v\r\n").as_bytes());
        }
        s.extend_from_slice(b"\r\n");
        s
    };
    assert_eq!(req(&head(MAX_HEADERS)).unwrap().fields.len(), MAX_HEADERS);
    assert_eq!(
        req(&head(MAX_HEADERS + 1)).unwrap_err(),
        HttpError::HeadTooLarge
    );
}

#[test]
fn the_word_scans_stop_where_the_byte_scan_does() {
    let alphabet = [
        b'a', b' ', b'\t', b'\r', b'\n', 0, 0x1f, 0x7f, 0x80, 0xff, b'~', b':', b'(',
    ];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..50_000 {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let len = (seed >> 58) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|i| {
                // Mostly plain text, so runs are long enough to matter.
                let r = (seed >> (i % 50)) as usize;
                if r % 7 == 0 {
                    alphabet[(r / 7) % alphabet.len()]
                } else {
                    b'a'
                }
            })
            .collect();
        for at in 0..=len {
            assert_eq!(
                super::scan_text(&bytes, at),
                super::scan(&bytes, at, super::TEXT),
                "{bytes:?} from {at}"
            );
            assert_eq!(
                super::scan_token(&bytes, at),
                super::scan(&bytes, at, super::TOKEN),
                "{bytes:?} from {at}"
            );
        }
    }
}

#[test]
fn a_refused_head_leaves_a_reused_head_empty_and_readable() {
    let mut head = crate::head::RequestHead::default();
    crate::head::parse_request_into(
        b"POST /a-long-target HTTP/1.1\r\nHost: x\r\nX-Long-Name: v\r\n\r\n",
        &mut head,
    )
    .unwrap();
    crate::head::parse_request_into(b"GET / HTTP/1.1\r\nHost: x\r\nBad\0: v\r\n\r\n", &mut head)
        .unwrap_err();
    assert_eq!((head.method(), head.target()), ("", ""));
    assert_eq!(head.fields.iter().count(), 0);
    let mut resp = crate::head::ResponseHead::default();
    crate::head::parse_response_into(b"HTTP/1.1 200 A long reason\r\nX-A: 1\r\n\r\n", &mut resp)
        .unwrap();
    crate::head::parse_response_into(b"HTTP/1.1 200 OK\r\n\r", &mut resp).unwrap_err();
    assert_eq!((resp.status, resp.reason()), (0, &b""[..]));
    assert_eq!(resp.fields.iter().count(), 0);
}

/// A backend's head sent again is kept, not parsed; one that goes on
/// past it, a refused one, and a status line a caller changed are read.
#[test]
fn a_response_head_sent_again_reads_as_the_first() {
    use crate::head::{parse_response_prefix, ResponseHead};
    let first: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 3\r\n\r\n";
    let buf = [first, b"abc"].concat();
    let mut head = ResponseHead::default();
    assert_eq!(
        parse_response_prefix(&buf, 1024, &mut head),
        Some(first.len())
    );
    head.status = 500;
    head.minor_version = 0;
    assert_eq!(
        parse_response_prefix(&buf, 1024, &mut head),
        Some(first.len())
    );
    assert_eq!(
        (head.status, head.minor_version, head.reason()),
        (200, 1, &b"OK"[..])
    );
    assert_eq!(head.fields.get("content-length"), Some(&b"3"[..]));
    assert_eq!(
        parse_response_prefix(&buf, first.len() - 1, &mut head),
        None,
        "the limit holds for a head sent again"
    );
    let longer: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 3\r\nX-A: b\r\n\r\n";
    assert_eq!(
        parse_response_prefix(longer, 1024, &mut head),
        Some(longer.len())
    );
    assert_eq!(head.fields.get("x-a"), Some(&b"b"[..]));
    let refused: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nBad\0: v\r\n\r\n";
    assert_eq!(parse_response_prefix(refused, 1024, &mut head), None);
    assert_eq!(head.fields.iter().count(), 0);
    assert_eq!(
        parse_response_prefix(longer, 1024, &mut head),
        Some(longer.len())
    );
    assert_eq!(head.fields.iter().count(), 3);
}

fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Replaces, inserts or removes one byte of `head` (never left empty).
fn mutate(head: &mut Vec<u8>, alphabet: &[u8], next: &mut impl FnMut() -> u64) {
    let at = (next() % head.len() as u64) as usize;
    let byte = alphabet[(next() % alphabet.len() as u64) as usize];
    match next() % 3 {
        0 => head[at] = byte,
        1 => head.insert(at, byte),
        _ => {
            head.remove(at);
        }
    }
    if head.is_empty() {
        head.push(byte);
    }
}

/// The differential check the fuzz target makes, over heads mutated
/// from a few real ones: same verdict, same parts.
#[test]
fn the_parser_reads_what_the_old_pipeline_read() {
    let bases: [&[u8]; 6] = [
        b"GET /a?b HTTP/1.1\r\nHost: x\r\nX-A: b : c\r\nConnection: keep-alive\r\n\r\n",
        b"GET /long/target?q=1 HTTP/1.1\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) Gecko\r\nAccept: text/html,application/xhtml+xml\r\n\r\n",
        b"HTTP/1.1 200 Everything Is Fine Here\r\nDate: Thu, 26 Nov 2026 05:00:00 GMT\r\nETag: \"6543a1b2-64\"\r\n\r\n",
        b"\r\nPOST / HTTP/1.0\r\nContent-Length:  2 \r\nX:\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 100\r\nX-E:\t\r\n\r\n",
        b"HTTP/1.0 404\r\nA: \x80\r\n\r\n",
    ];
    let alphabet = [
        b'\r', b'\n', b' ', b'\t', b':', b'a', 0, 0x7f, 0x80, b'/', b'1', b'(',
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || xorshift(&mut seed);
    let mut agreed_ok = 0;
    for round in 0..60_000 {
        let mut head = bases[round % bases.len()].to_vec();
        for _ in 0..1 + next() % 3 {
            mutate(&mut head, &alphabet, &mut next);
        }
        let both_read = if head.starts_with(b"HTTP/") || round % 4 >= 2 {
            reference::check_response(&head)
        } else {
            reference::check_request(&head)
        };
        agreed_ok += usize::from(both_read);
    }
    assert!(agreed_ok > 1_000, "only {agreed_ok} mutated heads parsed");
}

/// The prefix parse reads a head only where finding its end and then
/// parsing it read the same, whatever follows it: nothing, a body, a
/// second head, a part of one, empty lines; and refuses to read heads
/// that begin with empty lines or end past the limit.
#[test]
fn the_prefix_parse_reads_what_finding_the_end_then_parsing_reads() {
    let heads: [&[u8]; 8] = [
        b"GET /a?b HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, x-a\r\n\r\n",
        b"POST / HTTP/1.0\r\nContent-Length: 2\r\nX:\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 3\r\n\r\n",
        b"HTTP/1.1 204\r\nConnection: close\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
        b"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nA: b\n\r\n",
        // What check_response_prefix reads each buffer over first.
        reference::EARLIER_RESPONSE,
    ];
    let tails: [&[u8]; 7] = [
        b"",
        b"abc",
        b"\r\n",
        b"\n",
        b"GET / HTTP/1.1\r\nHost: y\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n",
        b"\r\n\r\n",
    ];
    let alphabet = [b'\r', b'\n', b' ', b':', b'a', 0, 0x80];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || xorshift(&mut seed);
    let mut read = 0;
    for round in 0..40_000 {
        let mut buf = heads[round % heads.len()].to_vec();
        if round % 3 != 0 {
            mutate(&mut buf, &alphabet, &mut next);
        }
        buf.extend_from_slice(tails[(next() % tails.len() as u64) as usize]);
        let cut = buf.len() - (next() % 4) as usize * usize::from(round % 5 == 0);
        let buf = &buf[..cut];
        let max = if round % 7 == 0 { 40 } else { 64 * 1024 };
        let found = if buf.starts_with(b"HTTP/") {
            reference::check_response_prefix(buf, max)
        } else {
            reference::check_request_prefix(buf, max)
        };
        read += usize::from(found);
    }
    assert!(read > 5_000, "only {read} buffers read by the prefix parse");
    let mut head = crate::head::RequestHead::default();
    assert_eq!(
        crate::head::parse_request_prefix(heads[5], 1024, &mut head),
        None,
        "a head after empty lines is left to find_head_end"
    );
    assert_eq!(
        crate::head::parse_request_prefix(heads[0], heads[0].len() - 1, &mut head),
        None,
        "a head past the limit is left to find_head_end"
    );
}

/// A head that repeats, byte for byte, the one a reused head holds reads
/// as that head (its version and status as the bytes say, whatever was set
/// since); a head that differs in one byte, or in its length, is parsed;
/// a refused one leaves nothing to repeat.
#[test]
fn a_repeated_head_reads_as_the_held_one_and_a_changed_one_is_parsed() {
    use crate::head::{parse_request_prefix, parse_response_prefix, RequestHead, ResponseHead};
    let a: &[u8] =
        b"HTTP/1.1 200 OK\r\nDate: Thu, 26 Nov 2026 16:27:00 GMT\r\nContent-Length: 3\r\n\r\nabc";
    let b: &[u8] =
        b"HTTP/1.1 200 OK\r\nDate: Thu, 26 Nov 2026 16:27:01 GMT\r\nContent-Length: 3\r\n\r\nabc";
    let c: &[u8] =
        b"HTTP/1.0 404 OK\r\nDate: Thu, 26 Nov 2026 16:27:01 GMT\r\nContent-Length: 3\r\n\r\n";
    let mut head = ResponseHead::default();
    assert_eq!(parse_response_prefix(a, 1024, &mut head), Some(a.len() - 3));
    head.status = 500;
    head.minor_version = 0;
    assert_eq!(parse_response_prefix(a, 1024, &mut head), Some(a.len() - 3));
    assert_eq!((head.status, head.minor_version), (200, 1));
    assert_eq!(
        parse_response_prefix(a, a.len() - 4, &mut head),
        None,
        "past the limit"
    );
    assert_eq!(parse_response_prefix(b, 1024, &mut head), Some(b.len() - 3));
    assert_eq!(
        head.fields.get("date"),
        Some(&b"Thu, 26 Nov 2026 16:27:01 GMT"[..])
    );
    assert_eq!(parse_response_prefix(c, 1024, &mut head), Some(c.len()));
    assert_eq!((head.status, head.minor_version), (404, 0));
    // A bare LF where the held head has CRLF: refused, not read as it.
    let bad = b"HTTP/1.0 404 OK\r\nDate: Thu, 26 Nov 2026 16:27:01 GMT\nContent-Length: 3\r\n\r\n";
    assert_eq!(parse_response_prefix(bad, 1024, &mut head), None);
    assert!(head.fields.raw().is_empty());

    let get: &[u8] = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n";
    let mut req = RequestHead::default();
    assert_eq!(parse_request_prefix(get, 1024, &mut req), Some(28));
    req.minor_version = 0;
    assert_eq!(parse_request_prefix(get, 1024, &mut req), Some(28));
    assert_eq!(
        (req.method(), req.target(), req.minor_version),
        ("GET", "/a", 1)
    );
    let other: &[u8] = b"GET /b HTTP/1.0\r\nHost: x\r\n\r\n";
    assert_eq!(parse_request_prefix(other, 1024, &mut req), Some(28));
    assert_eq!((req.target(), req.minor_version), ("/b", 0));
}
