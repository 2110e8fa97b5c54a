//! OCSP staples are checked before they are served: responses made by
//! `openssl ocsp` (a real responder's encoder) for the right leaf are
//! stapled; for another leaf, another issuer, past nextUpdate, not yet
//! valid, unsuccessful or unparsable they are not, and the warning says why.

use std::path::Path;
use std::time::{Duration, SystemTime};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use tern_testsupport::openssl_pki::{backdated, OcspStatus, OpensslCa, OpensslLeaf};
use tern_tls::certs::{self, CertFiles};
use tern_tls::ocsp::{check_staple, StapleVerdict};

const WEEK_MINUTES: u32 = 7 * 24 * 60;
const DAY: Duration = Duration::from_secs(24 * 3600);

fn provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::aws_lc_rs::default_provider()
}

fn chain(leaf: &OpensslLeaf) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(&leaf.chain)
        .expect("open the chain")
        .collect::<Result<_, _>>()
        .expect("chain PEM parses")
}

fn load(leaf: &OpensslLeaf, staple: &Path) -> tern_tls::LoadedCert {
    let files = CertFiles {
        cert: leaf.chain.clone(),
        key: leaf.key.clone(),
        ocsp: Some(staple.to_path_buf()),
    };
    certs::load(&files, &provider()).expect("the certificate itself loads")
}

fn refusal(verdict: StapleVerdict) -> String {
    match verdict {
        StapleVerdict::Refuse(why) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn good_staple_for_the_leaf_is_stapled() {
    let mut ca = OpensslCa::new();
    let leaf = ca.leaf(&["localhost"]);
    let staple = ca.ocsp_response(&leaf, OcspStatus::Good, Some(WEEK_MINUTES), "good.der");
    let loaded = load(&leaf, &staple);
    let bytes = std::fs::read(&staple).expect("read the staple");
    assert_eq!(loaded.ocsp_warning, None);
    assert_eq!(loaded.ocsp_len, bytes.len());
    assert_eq!(loaded.certified.ocsp.as_deref(), Some(bytes.as_slice()));
    // Also without the issuer in the chain (only the name hash can be checked).
    let leaf_only = &chain(&leaf)[..1];
    assert_eq!(
        check_staple(&bytes, leaf_only, SystemTime::now()),
        StapleVerdict::Serve
    );
}

#[test]
fn staple_for_another_leaf_is_not_stapled_and_says_so() {
    let mut ca = OpensslCa::new();
    let leaf = ca.leaf(&["localhost"]);
    let other = ca.leaf(&["other.example"]);
    let staple = ca.ocsp_response(&other, OcspStatus::Good, Some(WEEK_MINUTES), "other.der");
    let loaded = load(&leaf, &staple);
    assert_eq!(loaded.certified.ocsp, None, "a wrong staple was attached");
    assert_eq!(loaded.ocsp_len, 0);
    let warning = loaded.ocsp_warning.expect("a warning");
    assert!(warning.contains(&staple.display().to_string()), "{warning}");
    assert!(warning.contains("another certificate"), "{warning}");
    assert!(
        warning.contains(&format!("serial {}", colon_hex(&other.serial_hex))),
        "{warning}"
    );
}

#[test]
fn staple_for_the_same_serial_from_another_ca_is_not_stapled() {
    // Both CAs number their first leaf 0x1001: only the issuer hashes differ.
    let mut ours = OpensslCa::new();
    let mut theirs = OpensslCa::new();
    let leaf = ours.leaf(&["localhost"]);
    let impostor = theirs.leaf(&["localhost"]);
    assert_eq!(leaf.serial_hex, impostor.serial_hex);
    let staple = theirs.ocsp_response(&impostor, OcspStatus::Good, Some(WEEK_MINUTES), "x.der");
    let bytes = std::fs::read(&staple).expect("read the staple");
    let why = refusal(check_staple(&bytes, &chain(&leaf), SystemTime::now()));
    assert!(why.contains("another issuer"), "{why}");
}

#[test]
fn staple_past_next_update_or_before_this_update_is_not_stapled() {
    let mut ca = OpensslCa::new();
    let leaf = ca.leaf(&["localhost"]);
    let staple = ca.ocsp_response(&leaf, OcspStatus::Good, Some(WEEK_MINUTES), "week.der");
    let bytes = std::fs::read(&staple).expect("read the staple");
    let chain = chain(&leaf);
    let now = SystemTime::now();
    assert_eq!(
        check_staple(&bytes, &chain, now + 6 * DAY),
        StapleVerdict::Serve
    );
    let why = refusal(check_staple(&bytes, &chain, now + 8 * DAY));
    assert!(why.contains("past its nextUpdate"), "{why}");
    let why = refusal(check_staple(&bytes, &chain, now - DAY));
    assert!(
        why.contains("thisUpdate") && why.contains("future"),
        "{why}"
    );

    // Through load(): a staple whose nextUpdate is already behind us.
    let stale = ca.dir().join("stale.der");
    std::fs::write(&stale, backdated(&bytes)).expect("write the stale staple");
    let loaded = load(&leaf, &stale);
    assert_eq!(loaded.certified.ocsp, None);
    let warning = loaded.ocsp_warning.expect("a warning");
    assert!(warning.contains("nextUpdate"), "{warning}");
}

#[test]
fn staple_without_next_update_is_stapled() {
    let mut ca = OpensslCa::new();
    let leaf = ca.leaf(&["localhost"]);
    let staple = ca.ocsp_response(&leaf, OcspStatus::Good, None, "open.der");
    let loaded = load(&leaf, &staple);
    assert_eq!(loaded.ocsp_warning, None);
    assert!(loaded.certified.ocsp.is_some());
}

#[test]
fn revoked_staple_is_stapled_with_a_warning() {
    let mut ca = OpensslCa::new();
    let leaf = ca.leaf(&["localhost"]);
    let staple = ca.ocsp_response(&leaf, OcspStatus::Revoked, Some(WEEK_MINUTES), "r.der");
    let loaded = load(&leaf, &staple);
    // Clients must learn the truth; hiding it would help nobody.
    assert!(loaded.certified.ocsp.is_some());
    let warning = loaded.ocsp_warning.expect("a warning");
    assert!(warning.contains("REVOKED"), "{warning}");
}

#[test]
fn unsuccessful_or_garbage_responses_are_not_stapled() {
    let mut ca = OpensslCa::new();
    let leaf = ca.leaf(&["localhost"]);
    let chain = chain(&leaf);
    // OCSPResponse { responseStatus tryLater(3) }: no responseBytes.
    let try_later = [0x30, 0x03, 0x0a, 0x01, 0x03];
    let why = refusal(check_staple(&try_later, &chain, SystemTime::now()));
    assert!(why.contains("not successful"), "{why}");
    let why = refusal(check_staple(b"not DER at all", &chain, SystemTime::now()));
    assert!(why.contains("not a DER OCSP response"), "{why}");

    let path = ca.dir().join("try-later.der");
    std::fs::write(&path, try_later).expect("write");
    let loaded = load(&leaf, &path);
    assert_eq!(loaded.certified.ocsp, None);
    assert!(loaded.ocsp_warning.is_some());
}

/// "1001" -> "10:01", as the warning prints serials.
fn colon_hex(hex: &str) -> String {
    let padded = if hex.len() % 2 == 1 {
        format!("0{hex}")
    } else {
        hex.to_string()
    };
    let pairs: Vec<&str> = (0..padded.len())
        .step_by(2)
        .map(|i| &padded[i..i + 2])
        .collect();
    pairs.join(":")
}
