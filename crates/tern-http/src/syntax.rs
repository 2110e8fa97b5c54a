//! Where a head ends, and the strict syntax rules of an HTTP/1.1 head
//! checked on its raw bytes: the bytes RFC 9112 lets a lenient parser
//! accept and a request smuggler exploits (bare LF, bare CR, NUL, obsolete
//! line folding, whitespace between a field name and its colon). The head
//! parser ([`crate::parse`]) enforces them as it reads; this separate check
//! is for heads tern writes (the fuzz targets check every one) and for the
//! reference pipeline the parser is compared with (`reference`, behind
//! the cargo feature of that name).

use crate::HttpError;

/// Where a complete head ends in a buffer that starts with it.
///
/// Returns `Ok(Some(len))` with the length including the final empty line,
/// `Ok(None)` when more bytes are needed, and an error when `max` bytes have
/// arrived without an end (the head is too large).
///
/// `scanned` is a resumption hint: bytes before it were already searched, so
/// repeated calls as data trickles in stay linear.
pub fn find_head_end(
    buf: &[u8],
    scanned: &mut usize,
    max: usize,
) -> Result<Option<usize>, HttpError> {
    // Back up 2 bytes so a terminator split across reads is still found.
    let start = scanned.saturating_sub(2);
    let window = &buf[..buf.len().min(max)];
    // The head ends at the first empty line. Accept LF LF and LF CR LF here
    // so that a head with bare LFs is *found* and then refused by
    // `check_head_syntax`, instead of waiting for a CRLFCRLF that never comes.
    for lf in memchr::memchr_iter(b'\n', &window[start..]) {
        let p = start + lf;
        match (window.get(p + 1), window.get(p + 2)) {
            (Some(b'\n'), _) => return Ok(Some(p + 2)),
            (Some(b'\r'), Some(b'\n')) => return Ok(Some(p + 3)),
            _ => {}
        }
    }
    *scanned = window.len();
    if buf.len() >= max {
        return Err(HttpError::HeadTooLarge);
    }
    Ok(None)
}

/// Checks the raw bytes of a head (ending with its empty line) for what RFC
/// 9112 forbids but lenient parsers accept.
pub fn check_head_syntax(head: &[u8]) -> Result<(), HttpError> {
    if has_no_suspect_pair(head) {
        return Ok(());
    }
    check_head_syntax_exactly(head)
}

/// True when no byte, and no pair of neighbouring bytes, in `head` could
/// be one of the faults [`check_head_syntax_exactly`] finds: a NUL, a CR
/// not followed by LF, an LF not preceded by CR, SP or HTAB after an LF
/// (obsolete folding), SP or HTAB before a colon. False sends the head to
/// the exact check (a colon after a space inside a value is allowed).
///
/// Clean heads are the rule, and this is one pass without branches the
/// compiler vectorises: a search per CR and LF (two a line) cost a
/// 240-byte response head about 2,000 instructions, this about 300.
fn has_no_suspect_pair(head: &[u8]) -> bool {
    let (Some(&first), Some(&last)) = (head.first(), head.last()) else {
        return true;
    };
    if first == b'\n' || last == b'\r' || last == 0 {
        return false;
    }
    let mut suspect = false;
    for (&a, &b) in head.iter().zip(&head[1..]) {
        let blank_a = (a == b' ') | (a == b'\t');
        let blank_b = (b == b' ') | (b == b'\t');
        suspect |= (a == 0)
            | ((a == b'\r') ^ (b == b'\n'))
            | ((a == b'\n') & blank_b)
            | (blank_a & (b == b':'));
    }
    !suspect
}

/// [`check_head_syntax`] without the fast path: finds the first fault and
/// says which it is.
fn check_head_syntax_exactly(head: &[u8]) -> Result<(), HttpError> {
    // One vectorised scan finds every CR, LF and NUL (about two hits a
    // line); only field lines are searched again, for their first colon.
    let mut line_start = 0;
    for i in memchr::memchr3_iter(b'\r', b'\n', 0, head) {
        match head[i] {
            0 => return Err(HttpError::Nul),
            b'\r' => {
                if head.get(i + 1) != Some(&b'\n') {
                    return Err(HttpError::BareCr);
                }
            }
            _ => {
                if i == 0 || head[i - 1] != b'\r' {
                    return Err(HttpError::BareLf);
                }
                // The first line (request or status line) has no field name.
                if line_start > 0 {
                    let line = &head[line_start..i - 1];
                    if let Some(colon) = memchr::memchr(b':', line) {
                        if colon > 0 && matches!(line[colon - 1], b' ' | b'\t') {
                            return Err(HttpError::SpaceBeforeColon);
                        }
                    }
                }
                line_start = i + 1;
                if matches!(head.get(line_start), Some(b' ' | b'\t')) {
                    return Err(HttpError::ObsFold);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_syntax_check_agrees_with_the_exact_one() {
        // Every string of up to 7 bytes over the bytes the rules are about,
        // then longer ones from a fixed pseudo-random sequence.
        let alphabet = [b'\r', b'\n', b' ', b'\t', b':', b'a', 0];
        let agree = |head: &[u8]| {
            assert_eq!(
                check_head_syntax(head),
                check_head_syntax_exactly(head),
                "{head:?}"
            );
        };
        let mut head = Vec::new();
        for len in 0..=7u32 {
            for mut n in 0..alphabet.len().pow(len) {
                head.clear();
                for _ in 0..len {
                    head.push(alphabet[n % alphabet.len()]);
                    n /= alphabet.len();
                }
                agree(&head);
            }
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            let mut head = b"GET / HTTP/1.1\r\nHost: x\r\nX-A: b : c\r\n\r\n".to_vec();
            for _ in 0..2 {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let at = (seed >> 33) as usize % head.len();
                head[at] = alphabet[(seed >> 20) as usize % alphabet.len()];
            }
            agree(&head);
        }
        assert!(check_head_syntax(b"GET / HTTP/1.1\r\nX-A: b :c\r\n\r\n").is_ok());
    }

    #[test]
    fn finds_head_end_across_reads_and_bounds_size() {
        let mut scanned = 0;
        let mut buf = b"GET / HTTP/1.1\r\nHost: x\r\n\r".to_vec();
        assert_eq!(find_head_end(&buf, &mut scanned, 1024).unwrap(), None);
        buf.push(b'\n');
        assert_eq!(
            find_head_end(&buf, &mut scanned, 1024).unwrap(),
            Some(buf.len())
        );
        let big = vec![b'a'; 100];
        let mut scanned = 0;
        assert_eq!(
            find_head_end(&big, &mut scanned, 100).unwrap_err(),
            HttpError::HeadTooLarge
        );
    }
}
