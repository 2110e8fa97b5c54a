//! A client's request head, as tern reads it: find its end, check its
//! syntax, parse it, check Host and framing; when tern would forward it,
//! the head written for the backend must parse again (no split or injected
//! line), carry no client-supplied forwarding field, and carry tern's own
//! X-Forwarded-For exactly once.
//! The parser is also compared with the pipeline it replaced, and its
//! one-pass prefix parse with finding the head's end and then parsing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern_http::forwarding::{ClientFacts, ForwardedFields};
use tern_http::head::{check_head_syntax, find_head_end, parse_request, FieldKind};
use tern_http::rewrite::{write_request_head, BackendConnection, FieldEdits};

fuzz_target!(|data: &[u8]| {
    // The one-pass prefix parse (tern's usual path) reads a head only
    // where finding its end and then parsing it read the same.
    tern_http::reference::check_request_prefix(data, 64 * 1024);
    let mut scanned = 0;
    let Ok(Some(end)) = find_head_end(data, &mut scanned, 64 * 1024) else {
        return;
    };
    let raw = &data[..end];
    // tern's parser and the pipeline it replaced (the syntax check, then
    // httparse) refuse the same heads and read the same parts.
    tern_http::reference::check_request(raw);
    if check_head_syntax(raw).is_err() {
        return;
    }
    let Ok(head) = parse_request(raw) else {
        return;
    };
    if tern_http::check_host(&head).is_err() || tern_http::framing::request_framing(&head).is_err()
    {
        return;
    }
    let client = ClientFacts {
        ip: "203.0.113.7".parse().expect("literal"),
        proto: "https",
        client_cert: None,
    };
    let write = |out: &mut Vec<u8>| {
        write_request_head(
            &head,
            &client,
            ForwardedFields::default(),
            BackendConnection::KeepAlive,
            &FieldEdits::NONE,
            out,
        )
    };
    let mut out = Vec::new();
    write(&mut out);
    check_head_syntax(&out).expect("tern wrote a head that breaks the syntax rules");
    // Written again (its field lines kept from the first write when it
    // carries a kind that stops): the same head.
    let mut repeated = Vec::new();
    write(&mut repeated);
    assert_eq!(repeated, out, "a head written again differs");
    let again = match parse_request(&out) {
        Ok(again) => again,
        // tern adds up to three fields to a head that may already carry
        // MAX_HEADERS: the backend's parser reads it, not tern's.
        Err(tern_http::HttpError::HeadTooLarge)
            if head.fields.len() + 3 > tern_http::head::MAX_HEADERS =>
        {
            return;
        }
        Err(e) => panic!("tern wrote a head it cannot parse: {e:?}"),
    };
    let xff: Vec<&[u8]> = again.fields.get_all("x-forwarded-for").collect();
    assert_eq!(xff, [&b"203.0.113.7"[..]], "exactly tern's X-Forwarded-For");
    for (name, _, kind) in again.fields.iter_kinds() {
        if kind == FieldKind::ClientForwarding {
            let ours = ["x-forwarded-for", "x-forwarded-proto", "forwarded"];
            assert!(
                ours.iter().any(|o| name.eq_ignore_ascii_case(o)),
                "client forwarding field {name:?} reached the backend"
            );
        }
    }
    assert_eq!(again.method(), head.method());
    assert_eq!(again.target(), head.target());
});
