//! Session ticket keys: encryption of resumption state handed to clients.
//!
//! A ticket is `key name (16) || nonce (12) || AES-256-GCM(issued_at (8, BE
//! unix seconds) || state) || tag (16)`, with the key name as associated
//! data. The name lets a ticket find its key among the current and previous
//! ones; `issued_at` bounds the age of a ticket even when keys live in a file
//! that an operator forgets to rotate.
//!
//! Forward secrecy of resumed sessions depends on erasing old keys, so keys
//! made in-process rotate and old ones are dropped, and a ticket is accepted
//! for at most twice the rotation period.

use std::fmt;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use base64::Engine;
use rustls::server::ProducesTickets;

use crate::TlsError;

/// Bytes of a key name at the start of every ticket.
pub const KEY_NAME_LEN: usize = 16;
/// Bytes of an AES-256 key.
pub const AES_KEY_LEN: usize = 32;
/// Bytes of one key in a keys file: name followed by the AES key.
pub const KEY_LINE_BYTES: usize = KEY_NAME_LEN + AES_KEY_LEN;
/// Longest ticket lifetime TLS 1.3 allows a server to announce (RFC 8446 §4.6.1).
const MAX_ANNOUNCED_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
const TAG_LEN: usize = 16;
const ISSUED_LEN: usize = 8;
/// How many keys an in-process rotating set keeps: the current one and the
/// one before it. Two periods is then the most a ticket can live.
const ROTATING_KEYS_KEPT: usize = 2;

/// Session ticket encryption with keys that rotate: one current key
/// encrypts, previous keys still decrypt.
pub struct TicketKeys {
    ring: RwLock<KeyRing>,
    /// `Some(period)` for in-process keys that rotate on their own.
    rotation: Option<Duration>,
    /// Announced to clients as the ticket lifetime.
    lifetime: Duration,
    /// Tickets older than this are refused whatever key made them.
    max_age: Duration,
    /// Where the keys came from: "in-process" or the file path, for Debug.
    origin: String,
}

struct KeyRing {
    /// `keys[0]` encrypts; all decrypt.
    keys: Vec<TicketKey>,
    /// When the in-process keys rotate next.
    next_rotation: Option<Instant>,
}

struct TicketKey {
    name: [u8; KEY_NAME_LEN],
    aead: LessSafeKey,
}

impl TicketKey {
    fn from_bytes(bytes: &[u8; KEY_LINE_BYTES]) -> Result<Self, TlsError> {
        let mut name = [0u8; KEY_NAME_LEN];
        name.copy_from_slice(&bytes[..KEY_NAME_LEN]);
        let unbound = UnboundKey::new(&AES_256_GCM, &bytes[KEY_NAME_LEN..])
            .map_err(|_| TlsError::Crypto("AES-256-GCM key setup failed".into()))?;
        Ok(TicketKey {
            name,
            aead: LessSafeKey::new(unbound),
        })
    }

    fn random() -> Result<Self, TlsError> {
        Self::from_bytes(&random_key_bytes()?)
    }
}

impl TicketKeys {
    /// Random keys made in-process, rotated every `period` (e.g. 12 h). For a
    /// single instance: another process cannot decrypt these tickets.
    /// Tickets are accepted for no longer than twice `period`.
    pub fn rotating(period: Duration) -> Result<Arc<Self>, TlsError> {
        if period.is_zero() {
            return Err(TlsError::PolicyConflict(
                "ticket key rotation period must be above zero".into(),
            ));
        }
        Ok(Arc::new(TicketKeys {
            ring: RwLock::new(KeyRing {
                keys: vec![TicketKey::random()?],
                next_rotation: Instant::now().checked_add(period),
            }),
            rotation: Some(period),
            lifetime: period,
            max_age: period.saturating_mul(2),
            origin: "in-process".to_string(),
        }))
    }

    /// Keys shared by a fleet: a file with one key per line (hex or base64
    /// of 48 bytes = 16-byte name + 32-byte AES-256 key; '#' comments and
    /// blank lines ignored). The first key encrypts; all decrypt. Tickets
    /// are accepted for at most `lifetime` after they were issued.
    ///
    /// Operators rotate by prepending a new key (and, after the lifetime,
    /// deleting the last) and reloading. Errors name the file and line.
    pub fn from_file(path: &Path, lifetime: Duration) -> Result<Arc<Self>, TlsError> {
        let text = std::fs::read_to_string(path).map_err(|source| TlsError::Read {
            what: "ticket keys",
            path: path.to_path_buf(),
            source,
        })?;
        let keys = parse_keys_file(&text, path)?;
        Ok(Arc::new(TicketKeys {
            ring: RwLock::new(KeyRing {
                keys,
                next_rotation: None,
            }),
            rotation: None,
            lifetime,
            max_age: lifetime,
            origin: path.display().to_string(),
        }))
    }

    /// A fresh random key line (hex, 96 characters) for a keys file.
    pub fn generate_key_line() -> String {
        match random_key_bytes() {
            Ok(bytes) => hex_encode(&bytes),
            // The system RNG failing is not recoverable by the caller; an
            // empty line is ignored by `from_file`, so nothing weak is used.
            Err(_) => String::new(),
        }
    }

    /// Makes a new current key now, as if the rotation period had elapsed;
    /// the oldest key beyond the current and previous one is erased. Only
    /// for in-process keys: keys from a file rotate by editing the file.
    pub fn rotate_now(&self) -> Result<(), TlsError> {
        let Some(period) = self.rotation else {
            return Err(TlsError::PolicyConflict(
                "ticket keys from a file rotate by editing the file and reloading".into(),
            ));
        };
        let fresh = TicketKey::random()?;
        let mut ring = self.ring.write().unwrap_or_else(|p| p.into_inner());
        ring.push_front(fresh);
        ring.next_rotation = Instant::now().checked_add(period);
        Ok(())
    }

    /// How many keys can currently decrypt.
    pub fn key_count(&self) -> usize {
        self.ring
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys
            .len()
    }

    /// Rotates when the period has elapsed. A failed RNG keeps the old keys
    /// (tickets keep working) and is retried on the next call.
    fn rotate_if_due(&self) {
        let Some(period) = self.rotation else {
            return;
        };
        let now = Instant::now();
        let due = |ring: &KeyRing| ring.next_rotation.is_some_and(|t| now >= t);
        if !due(&self.ring.read().unwrap_or_else(|p| p.into_inner())) {
            return;
        }
        let mut ring = self.ring.write().unwrap_or_else(|p| p.into_inner());
        if !due(&ring) {
            return; // another thread rotated meanwhile
        }
        match TicketKey::random() {
            Ok(fresh) => {
                ring.push_front(fresh);
                ring.next_rotation = now.checked_add(period);
            }
            Err(e) => tracing::warn!("ticket key rotation postponed: {e}"),
        }
    }
}

impl KeyRing {
    fn push_front(&mut self, key: TicketKey) {
        self.keys.insert(0, key);
        self.keys.truncate(ROTATING_KEYS_KEPT);
    }
}

impl fmt::Debug for TicketKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print key material.
        f.debug_struct("TicketKeys")
            .field("origin", &self.origin)
            .field("rotation", &self.rotation)
            .field("lifetime", &self.lifetime)
            .field("keys", &self.key_count())
            .finish()
    }
}

impl ProducesTickets for TicketKeys {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        let announced = self.lifetime.min(MAX_ANNOUNCED_LIFETIME);
        u32::try_from(announced.as_secs()).unwrap_or(u32::MAX)
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.rotate_if_due();
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce).ok()?;
        let issued = unix_now().to_be_bytes();

        let ring = self.ring.read().unwrap_or_else(|p| p.into_inner());
        let key = ring.keys.first()?;
        let mut out =
            Vec::with_capacity(KEY_NAME_LEN + NONCE_LEN + ISSUED_LEN + plain.len() + TAG_LEN);
        out.extend_from_slice(&key.name);
        out.extend_from_slice(&nonce);
        let body_start = out.len();
        out.extend_from_slice(&issued);
        out.extend_from_slice(plain);
        let mut body = out.split_off(body_start);
        key.aead
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&key.name),
                &mut body,
            )
            .ok()?;
        out.extend_from_slice(&body);
        Some(out)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        self.rotate_if_due();
        // `ticket` is attacker-controlled: only slicing with checked bounds
        // and AEAD verification before anything is trusted.
        let name = ticket.get(..KEY_NAME_LEN)?;
        let nonce = ticket.get(KEY_NAME_LEN..KEY_NAME_LEN + NONCE_LEN)?;
        let sealed = ticket.get(KEY_NAME_LEN + NONCE_LEN..)?;
        if sealed.len() < ISSUED_LEN + TAG_LEN {
            return None;
        }
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;

        let ring = self.ring.read().unwrap_or_else(|p| p.into_inner());
        let key = ring.keys.iter().find(|k| k.name == name)?;
        let mut body = sealed.to_vec();
        let plain_len = key
            .aead
            .open_in_place(nonce, Aad::from(&key.name), &mut body)
            .ok()?
            .len();
        drop(ring);
        body.truncate(plain_len);

        let issued = u64::from_be_bytes(body.get(..ISSUED_LEN)?.try_into().ok()?);
        let age = unix_now().checked_sub(issued)?; // issued in the future: refuse
        if age > self.max_age.as_secs() {
            return None;
        }
        body.drain(..ISSUED_LEN);
        Some(body)
    }
}

fn random_key_bytes() -> Result<[u8; KEY_LINE_BYTES], TlsError> {
    let mut bytes = [0u8; KEY_LINE_BYTES];
    aws_lc_rs::rand::fill(&mut bytes)
        .map_err(|_| TlsError::Crypto("system random number generator failed".into()))?;
    Ok(bytes)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Parses the text of a ticket-key file (for the fuzz targets: the file
/// reader without the file); returns how many keys it holds.
#[doc(hidden)]
pub fn parse_key_file_text(text: &str) -> Result<usize, TlsError> {
    parse_keys_file(text, Path::new("ticket.keys")).map(|keys| keys.len())
}

fn parse_keys_file(text: &str, path: &Path) -> Result<Vec<TicketKey>, TlsError> {
    let mut keys: Vec<TicketKey> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |reason: String| TlsError::TicketKeyLine {
            path: path.to_path_buf(),
            line: index + 1,
            reason,
        };
        let bytes = decode_key_line(line).map_err(bad)?;
        let key = TicketKey::from_bytes(&bytes).map_err(|e| bad(e.to_string()))?;
        if keys.iter().any(|k| k.name == key.name) {
            return Err(bad("duplicate key name (first 16 bytes)".into()));
        }
        keys.push(key);
    }
    if keys.is_empty() {
        return Err(TlsError::NoTicketKeys {
            path: path.to_path_buf(),
        });
    }
    Ok(keys)
}

/// Decodes one key: 96 hex characters, or base64 (standard or URL-safe,
/// padded or not) of 48 bytes.
fn decode_key_line(line: &str) -> Result<[u8; KEY_LINE_BYTES], String> {
    let bytes = if line.len() == KEY_LINE_BYTES * 2 && line.bytes().all(|b| b.is_ascii_hexdigit()) {
        hex_decode(line).ok_or_else(|| "invalid hex".to_string())?
    } else {
        let engines = [
            &base64::engine::general_purpose::STANDARD,
            &base64::engine::general_purpose::STANDARD_NO_PAD,
            &base64::engine::general_purpose::URL_SAFE,
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ];
        engines
            .iter()
            .find_map(|e| e.decode(line).ok())
            .ok_or_else(|| format!("not 96 hex characters nor base64 of {KEY_LINE_BYTES} bytes"))?
    };
    <[u8; KEY_LINE_BYTES]>::try_from(bytes.as_slice()).map_err(|_| {
        format!(
            "key is {} bytes, expected {KEY_LINE_BYTES} (16-byte name + 32-byte AES-256 key)",
            bytes.len()
        )
    })
}

/// Lowercase hex.
pub(crate) fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
    s
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    s.as_bytes()
        .chunks(2)
        .map(|pair| match pair {
            [hi, lo] => Some(digit(*hi)? << 4 | digit(*lo)?),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_tampering() {
        let keys = TicketKeys::rotating(Duration::from_secs(3600)).unwrap();
        let ticket = keys.encrypt(b"session state").unwrap();
        assert_eq!(keys.decrypt(&ticket).unwrap(), b"session state");
        let mut tampered = ticket.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert!(keys.decrypt(&tampered).is_none());
        assert!(keys.decrypt(&ticket[..20]).is_none());
        assert!(keys.decrypt(&[]).is_none());
    }

    #[test]
    fn previous_key_decrypts_and_key_before_it_does_not() {
        let keys = TicketKeys::rotating(Duration::from_secs(3600)).unwrap();
        let ticket = keys.encrypt(b"x").unwrap();
        keys.rotate_now().unwrap();
        assert_eq!(keys.decrypt(&ticket).unwrap(), b"x");
        keys.rotate_now().unwrap();
        assert!(keys.decrypt(&ticket).is_none());
        assert_eq!(keys.key_count(), 2);
    }

    #[test]
    fn rotation_happens_when_the_period_elapses() {
        // A period long enough that a loaded machine (CI builds alongside)
        // cannot push the check past twice the period, when the first
        // ticket would rightly be refused.
        let keys = TicketKeys::rotating(Duration::from_millis(1000)).unwrap();
        let ticket = keys.encrypt(b"x").unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        let newer = keys.encrypt(b"y").unwrap();
        assert_ne!(ticket[..KEY_NAME_LEN], newer[..KEY_NAME_LEN]);
        assert_eq!(keys.decrypt(&ticket).unwrap(), b"x");
    }

    #[test]
    fn key_lines_decode_as_hex_and_base64() {
        let line = TicketKeys::generate_key_line();
        assert_eq!(line.len(), 96);
        let bytes = decode_key_line(&line).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        assert_eq!(decode_key_line(&b64).unwrap(), bytes);
        assert!(decode_key_line("not a key!")
            .unwrap_err()
            .contains("not 96 hex"));
        let short = base64::engine::general_purpose::STANDARD.encode([0u8; 40]);
        assert!(decode_key_line(&short)
            .unwrap_err()
            .contains("key is 40 bytes"));
    }

    #[test]
    fn keys_file_errors_name_file_and_line() {
        let path = Path::new("/etc/tern/tickets.keys");
        let text = format!(
            "# fleet keys\n\n{}\nnot-a-key\n",
            TicketKeys::generate_key_line()
        );
        let err = parse_keys_file(&text, path).err().unwrap().to_string();
        assert!(
            err.starts_with("ticket keys /etc/tern/tickets.keys line 4: "),
            "{err}"
        );
        let err = parse_keys_file("# only comments\n", path)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("no key found"), "{err}");
        let line = TicketKeys::generate_key_line();
        let err = parse_keys_file(&format!("{line}\n{line}\n"), path)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("line 2: duplicate key name"), "{err}");
    }

    #[test]
    fn file_keys_decrypt_with_any_listed_key_and_encrypt_with_the_first() {
        let dir = std::env::temp_dir().join(format!("tern-tickets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let old_line = TicketKeys::generate_key_line();
        let old_path = dir.join("old.keys");
        std::fs::write(&old_path, format!("{old_line}\n")).unwrap();
        let old = TicketKeys::from_file(&old_path, Duration::from_secs(600)).unwrap();
        let ticket = old.encrypt(b"x").unwrap();

        let new_path = dir.join("new.keys");
        let new_line = TicketKeys::generate_key_line();
        std::fs::write(
            &new_path,
            format!("{new_line}  # added today\n{old_line}\n"),
        )
        .unwrap();
        let new = TicketKeys::from_file(&new_path, Duration::from_secs(600)).unwrap();
        assert_eq!(new.decrypt(&ticket).unwrap(), b"x");
        let fresh = new.encrypt(b"y").unwrap();
        assert!(old.decrypt(&fresh).is_none());
        assert_eq!(ProducesTickets::lifetime(&*new), 600);
        assert!(new.rotate_now().is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
