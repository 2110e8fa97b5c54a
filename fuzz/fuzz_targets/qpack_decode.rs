//! Any bytes as the payload of a client's HEADERS frame, through h3's
//! QPACK decoding as tern's HTTP/3 front end runs it (h3 0.0.8 with tern's
//! patches 0004, 0007, 0011 and 0012 to its string decoding; the bridge is
//! h3 patch 0013): never a panic, and where it decodes,
//! - the payload split in two pieces decodes the same (strings across the
//!   split take `prefix_string::decode`'s copying paths);
//! - the decoded size is the sum RFC 9204 4.2.2 defines and within the
//!   limit, and a limit just below it refuses the section as too large;
//! - the fields encoded again by h3's encoder decode to the same fields;
//! - every decoded string Huffman-encodes and decodes to itself;
//! - making a request of the fields (pseudo-header checks, URI) ends in a
//!   request or an error, the same after the heads before as alone (h3
//!   patch 0020 keeps the last head's names and authority per thread);
//! - the fields that make a response head encode to the same bytes through
//!   the fields kept from the heads before (h3 patch 0019) as without.
//!
//! The bytes are also decoded as one Huffman-coded string: where that
//! decodes, encoding the result gives back the bytes exactly (padding is
//! at most 7 bits of ones, RFC 7541 5.2, so the code is canonical).
//!
//! Seeds (fuzz/corpus/qpack_decode): four requests (curl's GET, a JSON
//! POST, a browser's GET, a WebSocket CONNECT) as ls-qpack's encoder
//! writes them (pylsqpack 1.0.0, aioquic's, with no dynamic table, as h3 allows
//! none), Huffman-coded strings included, and RFC 7541 C.4.1's Huffman
//! code of "www.example.com".
#![no_main]

use h3::fuzz_bridge::{
    decode_field_section, decode_field_section_in_two, encode_field_section,
    encode_response_fields, huffman_decode, huffman_encode, request_parts, request_parts_alone,
    Refused,
};
use libfuzzer_sys::fuzz_target;
use tern_proxy::config::defaults::H2_MAX_HEADER_LIST_SIZE;

/// tern's HTTP/3 `max_field_section_size` (front/h3: `h2_max_header_list_size`).
const MAX: u64 = H2_MAX_HEADER_LIST_SIZE as u64;

fuzz_target!(|data: &[u8]| {
    if let Ok(decoded) = huffman_decode(data) {
        assert_eq!(huffman_encode(&decoded), data, "Huffman code not canonical");
    }

    let whole = decode_field_section(data, MAX);
    let at = data.first().map_or(0, |&b| usize::from(b)) % (data.len() + 1);
    assert_eq!(
        decode_field_section_in_two(data, at, MAX),
        whole,
        "split at {at}"
    );
    let section = match whole {
        Ok(section) => section,
        Err(Refused::TooLarge(size)) => {
            assert!(size > MAX, "refused {size} bytes under the limit");
            return;
        }
        Err(Refused::Invalid(_)) => return,
    };

    let size: u64 = section
        .fields
        .iter()
        .map(|(name, value)| (name.len() + value.len() + 32) as u64)
        .sum();
    assert_eq!(section.mem_size, size);
    assert!(size <= MAX);
    if size > 0 {
        assert_eq!(
            decode_field_section(data, size - 1),
            Err(Refused::TooLarge(size)),
            "a limit below the decoded size"
        );
    }

    let again = encode_field_section(&section.fields).expect("stateless encoding");
    assert_eq!(
        decode_field_section(&again, MAX),
        Ok(section.clone()),
        "encoded again: {again:?}"
    );

    for (name, value) in &section.fields {
        for string in [name, value] {
            let code = huffman_encode(string);
            assert_eq!(huffman_decode(&code).as_ref(), Ok(string));
        }
    }

    // The names and authority kept from the inputs before (h3 patch
    // 0020) change nothing.
    assert_eq!(
        request_parts(&section.fields),
        request_parts_alone(&section.fields),
        "after the heads before"
    );

    // A response head of the fields: the bytes kept from the heads before
    // and from itself (h3 patch 0019) are the bytes encoding writes.
    let (first, second, reference) = encode_response_fields(&section.fields);
    assert_eq!(first, reference, "after the heads before");
    assert_eq!(second, reference, "again");
});
