//! A backend's response head: parse it, decide its framing for a GET and a
//! HEAD; the head tern writes for the client must parse again with the
//! same status.
//! The parser is also compared with the pipeline it replaced, and its
//! one-pass prefix parse with finding the head's end and then parsing,
//! also into a head that holds an earlier response (a head sent again is
//! kept, not parsed: the seeds `repeated` and `earlier-and-more` start
//! with that earlier head). A head written again (its field lines kept
//! from the last write) must be written as a fresh copy of it would be.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern_http::framing::response_framing;
use tern_http::head::{check_head_syntax, find_head_end, parse_response};
use tern_http::rewrite::{write_response_head, FieldEdits};

fuzz_target!(|data: &[u8]| {
    // The one-pass prefix parse (tern's usual path) reads a head only
    // where finding its end and then parsing it read the same.
    tern_http::reference::check_response_prefix(data, 64 * 1024);
    let mut scanned = 0;
    let Ok(Some(end)) = find_head_end(data, &mut scanned, 64 * 1024) else {
        return;
    };
    let raw = &data[..end];
    // tern's parser and the pipeline it replaced (the syntax check, then
    // httparse) refuse the same heads and read the same parts.
    tern_http::reference::check_response(raw);
    if check_head_syntax(raw).is_err() {
        return;
    }
    let Ok(head) = parse_response(raw) else {
        return;
    };
    let _ = response_framing(true, false, &head);
    if response_framing(false, false, &head).is_err() {
        return;
    }
    let mut out = Vec::new();
    write_response_head(&head, false, &FieldEdits::NONE, &mut out);
    check_head_syntax(&out).expect("tern wrote a head that breaks the syntax rules");
    // Written again, the field lines come from those kept at the last
    // write (with the same rules) or are chosen afresh (other rules): the
    // same head as a copy that never wrote it makes.
    let mut repeated = Vec::new();
    write_response_head(&head, false, &FieldEdits::NONE, &mut repeated);
    assert_eq!(repeated, out, "a head written again differs");
    if let Some((name, _, _)) = head.fields.iter_kinds().last() {
        let drop: Vec<Box<str>> = vec![name.to_ascii_lowercase().into()];
        let edits = FieldEdits {
            drop: &drop,
            add: Vec::new(),
        };
        let mut fresh = Vec::new();
        write_response_head(&head.clone(), true, &edits, &mut fresh);
        for _ in 0..2 {
            let mut written = Vec::new();
            write_response_head(&head, true, &edits, &mut written);
            assert_eq!(written, fresh, "a head written again under a rule differs");
        }
    }
    let again = match parse_response(&out) {
        Ok(again) => again,
        // tern may add one field (Connection) to a head that already
        // carries MAX_HEADERS: the client's parser reads it, not tern's.
        Err(tern_http::HttpError::HeadTooLarge)
            if head.fields.len() + 1 > tern_http::head::MAX_HEADERS =>
        {
            return;
        }
        Err(e) => panic!("tern wrote a head it cannot parse: {e:?}"),
    };
    assert_eq!(again.status, head.status);
});
