//! The few fields of a stapled OCSP response that decide whether it helps:
//! the certificate status and the `thisUpdate`/`nextUpdate` window.
//!
//! A minimal DER walk over RFC 6960's structures (we need four fields, not a
//! general ASN.1 library); anything unexpected yields `None`, and the report
//! then says the staple could not be read.

use serde::Serialize;

/// What the staple says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StapleInfo {
    /// `good`, `revoked` or `unknown` (of the first SingleResponse).
    pub status: String,
    /// Seconds since the Unix epoch.
    pub this_update: i64,
    /// Seconds since the Unix epoch; `None` when the responder gave none.
    pub next_update: Option<i64>,
}

impl StapleInfo {
    /// Fresh means `now` lies in `[thisUpdate, nextUpdate]`.
    pub fn fresh_at(&self, now: i64) -> bool {
        self.this_update <= now && self.next_update.is_none_or(|n| now <= n)
    }
}

const SEQUENCE: u8 = 0x30;
const ENUMERATED: u8 = 0x0a;
const OCTET_STRING: u8 = 0x04;
const GENERALIZED_TIME: u8 = 0x18;
const CONTEXT_0: u8 = 0xa0;

/// Parses a DER `OCSPResponse`.
pub fn parse(der: &[u8]) -> Option<StapleInfo> {
    let (tag, resp, _) = tlv(der)?;
    require(tag, SEQUENCE)?;
    let (tag, status, rest) = tlv(resp)?;
    require(tag, ENUMERATED)?;
    if status != [0] {
        return None; // not "successful": no response bytes
    }
    let (tag, bytes, _) = tlv(rest)?;
    require(tag, CONTEXT_0)?;
    let (tag, bytes, _) = tlv(bytes)?;
    require(tag, SEQUENCE)?;
    let (_oid_tag, _oid, rest) = tlv(bytes)?;
    let (tag, basic, _) = tlv(rest)?;
    require(tag, OCTET_STRING)?;

    // BasicOCSPResponse ::= SEQUENCE { tbsResponseData, ... }
    let (tag, basic, _) = tlv(basic)?;
    require(tag, SEQUENCE)?;
    let (tag, mut tbs, _) = tlv(basic)?;
    require(tag, SEQUENCE)?;
    // ResponseData ::= SEQUENCE { version [0] OPTIONAL, responderID,
    //                             producedAt, responses, ... }
    let (tag, _, after) = tlv(tbs)?;
    if tag == CONTEXT_0 {
        tbs = after;
        let (_, _, after) = tlv(tbs)?; // responderID
        tbs = after;
    } else {
        tbs = after; // that was responderID
    }
    let (tag, _, after) = tlv(tbs)?;
    require(tag, GENERALIZED_TIME)?; // producedAt
    let (tag, responses, _) = tlv(after)?;
    require(tag, SEQUENCE)?;
    // SingleResponse ::= SEQUENCE { certID, certStatus, thisUpdate,
    //                               nextUpdate [0] EXPLICIT OPTIONAL, ... }
    let (tag, single, _) = tlv(responses)?;
    require(tag, SEQUENCE)?;
    let (_, _, rest) = tlv(single)?; // certID
    let (status_tag, _, rest) = tlv(rest)?;
    let status = match status_tag & 0x1f {
        0 => "good",
        1 => "revoked",
        _ => "unknown",
    };
    let (tag, this_update, rest) = tlv(rest)?;
    require(tag, GENERALIZED_TIME)?;
    let next_update = match tlv(rest) {
        Some((CONTEXT_0, inner, _)) => {
            let (tag, t, _) = tlv(inner)?;
            require(tag, GENERALIZED_TIME)?;
            Some(generalized_time(t)?)
        }
        _ => None,
    };
    Some(StapleInfo {
        status: status.to_string(),
        this_update: generalized_time(this_update)?,
        next_update,
    })
}

fn require(tag: u8, want: u8) -> Option<()> {
    (tag == want).then_some(())
}

/// One DER tag-length-value: `(tag, content, rest)`. Single-byte tags and
/// definite lengths only, as DER requires for everything OCSP uses.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        first as usize
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| acc << 8 | *b as usize);
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return None;
    }
    let (content, rest) = rest.split_at(len);
    Some((tag, content, rest))
}

/// `YYYYMMDDHHMMSS[.f*]Z` to seconds since the Unix epoch.
fn generalized_time(t: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(t).ok()?;
    let s = s.strip_suffix('Z')?;
    let s = s.split('.').next()?;
    if s.len() != 14 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s[r].parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (hh, mm, ss) = (num(8..10)?, num(10..12)?, num(12..14)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn der(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        if content.len() < 0x80 {
            v.push(content.len() as u8);
        } else {
            v.push(0x82);
            v.extend_from_slice(&(content.len() as u16).to_be_bytes());
        }
        v.extend_from_slice(content);
        v
    }

    fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
        parts.concat()
    }

    /// A structurally faithful OCSPResponse with the given SingleResponse
    /// status tag and times (signature and certificates are dummies).
    fn response(status_tag: u8, this: &str, next: Option<&str>) -> Vec<u8> {
        let cert_id = der(
            SEQUENCE,
            &cat(&[
                der(SEQUENCE, &der(0x06, &[0x2b, 0x0e])),
                der(OCTET_STRING, &[1; 20]),
                der(OCTET_STRING, &[2; 20]),
                der(0x02, &[5]),
            ]),
        );
        let mut single = cat(&[
            cert_id,
            der(status_tag, &[]),
            der(GENERALIZED_TIME, this.as_bytes()),
        ]);
        if let Some(n) = next {
            single.extend(der(CONTEXT_0, &der(GENERALIZED_TIME, n.as_bytes())));
        }
        let tbs = der(
            SEQUENCE,
            &cat(&[
                der(0xa2, &der(OCTET_STRING, &[3; 20])),
                der(GENERALIZED_TIME, this.as_bytes()),
                der(SEQUENCE, &der(SEQUENCE, &single)),
            ]),
        );
        let basic = der(
            SEQUENCE,
            &cat(&[
                tbs,
                der(SEQUENCE, &der(0x06, &[0x2a])),
                der(0x03, &[0, 1, 2]),
            ]),
        );
        let bytes = der(
            SEQUENCE,
            &cat(&[
                der(0x06, &[0x2b, 6, 1, 5, 5, 7, 48, 1, 1]),
                der(OCTET_STRING, &basic),
            ]),
        );
        der(
            SEQUENCE,
            &cat(&[der(ENUMERATED, &[0]), der(CONTEXT_0, &bytes)]),
        )
    }

    #[test]
    fn good_response_with_window_is_parsed_and_judged_fresh() {
        let r = response(0x80, "20261120000000Z", Some("20261127000000Z"));
        let info = parse(&r).unwrap();
        assert_eq!(info.status, "good");
        assert_eq!(info.this_update, 1_795_132_800);
        assert_eq!(info.next_update, Some(1_795_132_800 + 7 * 86_400));
        assert!(info.fresh_at(1_795_132_800 + 86_400));
        assert!(!info.fresh_at(1_795_132_800 + 8 * 86_400));
        assert!(!info.fresh_at(1_795_132_800 - 1));
    }

    #[test]
    fn revoked_status_and_missing_next_update_are_reported() {
        let r = response(0xa1, "20000101000000Z", None);
        let info = parse(&r).unwrap();
        assert_eq!(info.status, "revoked");
        assert_eq!(info.this_update, 946_684_800);
        assert_eq!(info.next_update, None);
    }

    #[test]
    fn garbage_and_unsuccessful_responses_yield_none() {
        assert!(parse(&[0x30, 0x03, 0x0a, 0x01, 0x01]).is_none());
        assert!(parse(b"not der at all").is_none());
        let mut r = response(0x80, "20261120000000Z", None);
        r.truncate(r.len() - 3);
        assert!(parse(&r).is_none());
    }

    #[test]
    fn generalized_time_handles_fractions_and_rejects_nonsense() {
        assert_eq!(generalized_time(b"19700101000000Z"), Some(0));
        assert_eq!(generalized_time(b"19700101000001.5Z"), Some(1));
        assert_eq!(generalized_time(b"19701301000000Z"), None);
        assert_eq!(generalized_time(b"1970010100000Z"), None);
    }
}
