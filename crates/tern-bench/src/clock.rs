//! Whose clock is right: shards started with `--start-at` start together
//! only if their clocks agree, and a shard's own timestamps cannot show
//! that its clock is off (it started "on time" by the clock that is
//! wrong). The target is the one clock every shard talks to: each reads
//! the target's `Date` header over a second of small requests after its
//! run and bounds the target's clock minus its own. `tern report merge`
//! compares the bounds of the shards (two shards' clocks differ by
//! `offset_b - offset_a`).
//!
//! A `Date` value `d` (whole seconds) read on a request sent at `s` and
//! answered at `r` (this machine's clock) says the server's clock read
//! somewhere in `[d, d + 1 s)` at some moment in `[s, r]`, so the offset
//! lies in `[d - r, d + 1 s - s]`. Requests a few tens of milliseconds
//! apart across one of the server's second boundaries narrow the
//! intersection to about that spacing plus a round trip.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::{BenchConfig, ConnectionPlan, HttpVersion};
use crate::conn::Connector;
use crate::target::{Scheme, Target};
use crate::tls::KeyCache;

/// How long the reading lasts at most: over one second, so that it
/// crosses one of the server's second boundaries.
const READ_FOR: Duration = Duration::from_millis(1300);
/// Longest wait for the reading's connection.
const CONNECT_WITHIN: Duration = Duration::from_secs(5);
/// Time between two requests of the reading.
const SPACING: Duration = Duration::from_millis(20);
/// A reading is done once the bounds are this close.
const NARROW_ENOUGH_MS: i64 = 30;
/// Largest response head read.
const MAX_HEAD: usize = 16 * 1024;

/// The target's clock minus this machine's, bounded from its `Date`
/// header, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// The offset is at least this.
    pub low_ms: i64,
    /// The offset is at most this.
    pub high_ms: i64,
    /// Responses whose `Date` header was read.
    pub samples: u32,
}

impl ClockOffset {
    /// How far apart the clocks of two machines are at least, ms, by
    /// their readings of one target's clock (`self` of machine A, `other`
    /// of B); positive when B's clock is ahead of A's. 0 when the bounds
    /// allow the clocks to agree.
    pub fn certain_skew_ms(&self, other: &ClockOffset) -> i64 {
        // B ahead of A by x: A's offset minus B's offset is x.
        let low = self.low_ms - other.high_ms;
        let high = self.high_ms - other.low_ms;
        if low > 0 {
            low
        } else if high < 0 {
            high
        } else {
            0
        }
    }
}

/// Narrows the bounds with each response.
#[derive(Debug, Default)]
struct Bounds {
    low_ms: Option<i64>,
    high_ms: Option<i64>,
    samples: u32,
}

impl Bounds {
    fn add(&mut self, sent: SystemTime, received: SystemTime, date: SystemTime) {
        let ms = |t: SystemTime| match t.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_millis() as i64,
            Err(e) => -(e.duration().as_millis() as i64),
        };
        let (s, r, d) = (ms(sent), ms(received), ms(date));
        let low = d - r;
        let high = d + 1000 - s;
        self.low_ms = Some(self.low_ms.map_or(low, |l| l.max(low)));
        self.high_ms = Some(self.high_ms.map_or(high, |h| h.min(high)));
        self.samples += 1;
    }

    fn width_ms(&self) -> Option<i64> {
        Some(self.high_ms? - self.low_ms?)
    }

    fn finish(self) -> Result<ClockOffset, String> {
        match (self.low_ms, self.high_ms) {
            (Some(low_ms), Some(high_ms)) if low_ms <= high_ms => Ok(ClockOffset {
                low_ms,
                high_ms,
                samples: self.samples,
            }),
            (Some(_), Some(_)) => Err(
                "the target's Date header went backwards or jumped (not a clock to compare with)"
                    .into(),
            ),
            _ => Err("the target sent no Date header".into()),
        }
    }
}

/// Reads `target`'s clock against this machine's with small HTTP/1.1
/// `HEAD` requests on one connection (made as the run's are: TLS options,
/// `--laddr`, proxy). An error says why there is no reading (the target
/// sends no `Date`, speaks only HTTP/3, ...).
pub fn read(config: &BenchConfig, target: &Target) -> Result<ClockOffset, String> {
    let tls = match target.scheme {
        Scheme::Https => Some(Arc::new(
            crate::tls::client_config(
                &config.tls,
                ConnectionPlan::KeepAlive,
                HttpVersion::Http1,
                Arc::new(AtomicU64::new(0)),
            )
            .map_err(|e| e.to_string())?,
        )),
        Scheme::Http => None,
    };
    let connector = Connector::new(
        target,
        tls,
        config.tls.sni.as_deref(),
        config.proxy.as_deref(),
    )
    .map_err(|e| e.to_string())?
    .bind_to(config.local_addr);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let host = config
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map_or_else(|| target.authority(), |(_, v)| v.clone());
    let request = format!(
        "HEAD {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: tern-bench (clock)\r\n\r\n",
        target.path
    );
    rt.block_on(async {
        let mut bounds = Bounds::default();
        let mut key_cache = KeyCache::default();
        let connecting = tokio::time::timeout(CONNECT_WITHIN, connector.connect(&mut key_cache));
        let mut stream = connecting
            .await
            .map_err(|_| "no connection in time".to_string())?
            .map_err(|e| e.to_string())?
            .stream;
        let until = Instant::now() + READ_FOR;
        let mut head = Vec::with_capacity(1024);
        while Instant::now() < until && bounds.width_ms().is_none_or(|w| w > NARROW_ENOUGH_MS) {
            let sent = SystemTime::now();
            let exchange = async {
                stream.write_all(request.as_bytes()).await?;
                read_head(&mut stream, &mut head).await
            };
            // Out of time (a loaded machine): the answers so far are the
            // reading.
            let Ok(answered) = tokio::time::timeout_at(until.into(), exchange).await else {
                break;
            };
            let answered = match answered {
                Ok(n) => n,
                // The server closed the connection: the answers so far.
                Err(_) if bounds.samples > 0 => break,
                Err(e) => return Err(e.to_string()),
            };
            let received = SystemTime::now();
            match date_of(&head[..answered]) {
                Some(date) => bounds.add(sent, received, date),
                None => break,
            }
            head.drain(..answered);
            tokio::time::sleep(SPACING).await;
        }
        bounds.finish()
    })
}

/// Reads until a whole response head is in `buf`; returns its length.
async fn read_head(stream: &mut crate::conn::Stream, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(end + 4);
        }
        if buf.len() >= MAX_HEAD {
            return Err(std::io::Error::other("response head too large"));
        }
        let mut piece = [0u8; 2048];
        let n = stream.read(&mut piece).await?;
        if n == 0 {
            return Err(std::io::Error::other("closed"));
        }
        buf.extend_from_slice(&piece[..n]);
    }
}

/// The `Date` of a response head, if it has a valid one.
fn date_of(head: &[u8]) -> Option<SystemTime> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut fields);
    response.parse(head).ok()?;
    let value = response
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("date"))?
        .value;
    httpdate::parse_http_date(std::str::from_utf8(value).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn readings_across_a_second_boundary_pin_the_offset() {
        // The server's clock is 250 ms ahead: its second 101 begins at
        // our 100.750 s. Requests take 2 ms.
        let mut b = Bounds::default();
        for sent in (100_600..100_900).step_by(20) {
            let server = sent + 1 + 250;
            b.add(at(sent), at(sent + 2), at(server / 1000 * 1000));
        }
        let o = b.finish().unwrap();
        assert!(o.low_ms <= 250 && 250 <= o.high_ms, "{o:?}");
        assert!(o.high_ms - o.low_ms <= 25, "{o:?}");
    }

    #[test]
    fn skew_is_certain_only_when_the_bounds_part() {
        let a = ClockOffset {
            low_ms: 240,
            high_ms: 260,
            samples: 9,
        };
        let b_behind = ClockOffset {
            low_ms: 3240,
            high_ms: 3262,
            samples: 9,
        };
        // B's reading of the target is 3 s further ahead: B's clock is
        // 3 s behind A's.
        assert_eq!(a.certain_skew_ms(&b_behind), -2980);
        assert_eq!(b_behind.certain_skew_ms(&a), 2980);
        let near = ClockOffset {
            low_ms: 250,
            high_ms: 280,
            samples: 9,
        };
        assert_eq!(a.certain_skew_ms(&near), 0);
    }

    #[test]
    fn a_date_read_from_a_response_head() {
        let head = b"HTTP/1.1 200 OK\r\nDate: Thu, 26 Nov 2026 00:02:27 GMT\r\n\r\n";
        assert_eq!(
            date_of(head),
            Some(UNIX_EPOCH + Duration::from_secs(1_795_651_347))
        );
        assert_eq!(date_of(b"HTTP/1.1 200 OK\r\n\r\n"), None);
    }
}
