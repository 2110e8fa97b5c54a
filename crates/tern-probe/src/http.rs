//! HTTP/1.1 over an established probe connection: keepalive and the
//! split-write penalty.

use std::io;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::handshake::Established;
use crate::probe::{ms, Target};
use crate::report::{Http, IdleTimeout, KeepaliveLatency, Negotiated, SplitWrite};
use crate::ProbeError;

/// Requests sent before the split-write samples. Linux acknowledges the first
/// segments of a connection at once (quick-ack mode), which would hide the
/// delayed ACK that the penalty comes from.
const SPLIT_WRITE_WARM_UP: usize = 4;

/// Body size of the probe's POST: small, as in the API calls that paid the
/// penalty in practice.
pub const POST_BODY_LEN: usize = 64;

/// A parsed response head and where the message ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    /// Total message length (head + body) when the framing says so.
    pub message_len: Option<usize>,
    /// The server asked to close the connection after this response.
    pub close: bool,
    /// `Keep-Alive: timeout=N` when the server announces one.
    pub keepalive_timeout: Option<u64>,
    /// The Alt-Svc field, as sent.
    pub alt_svc: Option<String>,
}

/// Parses a response head from the start of `buf`; `None` until complete.
pub fn parse_head(buf: &[u8]) -> Option<ResponseHead> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        _ => return None,
    };
    let status = resp.code?;
    let mut content_length = None;
    let mut chunked = false;
    let mut close = resp.version == Some(0);
    let mut keepalive_timeout = None;
    let mut alt_svc = None;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("alt-svc") {
            alt_svc = Some(String::from_utf8_lossy(h.value).trim().to_string());
        }
        let value = String::from_utf8_lossy(h.value).to_ascii_lowercase();
        if h.name.eq_ignore_ascii_case("content-length") {
            content_length = value.trim().parse::<usize>().ok();
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.contains("chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            close = value.contains("close");
        } else if h.name.eq_ignore_ascii_case("keep-alive") {
            keepalive_timeout = value
                .split(',')
                .filter_map(|p| p.trim().strip_prefix("timeout="))
                .find_map(|v| v.trim().parse().ok());
        }
    }
    let no_body = status == 204 || status == 304 || (100..200).contains(&status);
    let message_len = if no_body {
        Some(head_len)
    } else if chunked {
        find(&buf[head_len..], b"0\r\n\r\n").map(|end| head_len + end + 5)
    } else {
        content_length.map(|n| head_len + n)
    };
    if chunked && message_len.is_none() {
        return None;
    }
    Some(ResponseHead {
        status,
        message_len,
        close,
        keepalive_timeout,
        alt_svc,
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// True once `buf` holds a whole response (or a head without framing, which
/// ends at close).
fn response_complete(buf: &[u8]) -> bool {
    match parse_head(buf) {
        Some(h) => h.message_len.is_some_and(|n| buf.len() >= n),
        None => false,
    }
}

/// Sends one request (in one or two writes) and waits for the response.
/// Returns the latency from the first write to the complete response.
pub fn request(
    conn: &mut Established,
    head: &[u8],
    body: &[u8],
    split: bool,
) -> std::io::Result<(Duration, Option<ResponseHead>)> {
    let start = Instant::now();
    if split {
        conn.send(head)?;
        conn.send(body)?;
    } else {
        let mut one = Vec::with_capacity(head.len() + body.len());
        one.extend_from_slice(head);
        one.extend_from_slice(body);
        conn.send(&one)?;
    }
    let resp = conn.receive_until(response_complete)?;
    Ok((start.elapsed(), parse_head(&resp)))
}

/// The request head of the probe's GET.
pub fn get_head(host: &str, close: bool) -> Vec<u8> {
    let conn = if close { "close" } else { "keep-alive" };
    format!(
        "GET / HTTP/1.1\r\nHost: {host}\r\nUser-Agent: tern-probe\r\nConnection: {conn}\r\n\r\n"
    )
    .into_bytes()
}

/// The request head of the probe's POST, for a body of [`POST_BODY_LEN`].
pub fn post_head(host: &str) -> Vec<u8> {
    format!(
        "POST / HTTP/1.1\r\nHost: {host}\r\nUser-Agent: tern-probe\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {POST_BODY_LEN}\r\n\r\n"
    )
    .into_bytes()
}

/// Median of a non-empty set of durations.
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// ALPN from the browser-like offer, keepalive and the split-write penalty.
pub(crate) fn measure(target: &Target, browser: &Negotiated, notes: &mut Vec<String>) -> Http {
    let mut h = Http {
        alpn: browser.alpn.clone(),
        h2: browser.alpn.as_deref() == Some("h2"),
        ..Http::default()
    };
    let config = match target.config(rustls::ALL_VERSIONS, &[b"http/1.1"], false) {
        Ok(c) => c,
        Err(e) => {
            notes.push(format!("HTTP checks: {e}"));
            return h;
        }
    };
    // Keepalive: two GETs on one connection.
    match target.connect(config.clone(), true) {
        Ok(mut conn) => match request(&mut conn, &get_head(&target.host, false), &[], false) {
            Ok((_, Some(head))) if !head.close => {
                h.keepalive_timeout_s = head.keepalive_timeout;
                h.alt_svc = head.alt_svc.clone();
                let second = request(&mut conn, &get_head(&target.host, false), &[], false);
                h.keepalive = Some(matches!(second, Ok((_, Some(_)))));
            }
            Ok((_, Some(head))) => {
                h.alt_svc = head.alt_svc;
                h.keepalive = Some(false);
            }
            Ok((_, None)) => notes.push("HTTP: no HTTP/1.1 response to GET /".into()),
            Err(e) => notes.push(format!("HTTP: {e}")),
        },
        Err(e) => notes.push(format!("HTTP: {e}")),
    }
    if h.keepalive == Some(true) {
        match keepalive_latency(target, config.clone()) {
            Ok(kl) => h.keepalive_get = Some(kl),
            Err(e) => notes.push(format!("keepalive latency: {e}")),
        }
    }
    match split_write_penalty(target, config) {
        Ok(sw) => h.split_write = Some(sw),
        Err(e) => notes.push(format!("split-write penalty: {e}")),
    }
    h
}

/// Small GETs back to back on one keepalive connection, each in one write
/// with TCP_NODELAY, timed after warm-up requests (a new connection's first
/// segments are acknowledged at once, which would hide a delayed ACK).
/// Behind a terminator, a backend that writes its response head and body
/// apart with Nagle on shows here as ~40 ms per request: its body waits for
/// the terminator's delayed ACK of the head.
fn keepalive_latency(
    target: &Target,
    config: Arc<rustls::ClientConfig>,
) -> Result<KeepaliveLatency, ProbeError> {
    let head = get_head(&target.host, false);
    let mut conn = target.connect(config, true)?;
    let mut times = Vec::with_capacity(target.samples);
    for i in 0..(SPLIT_WRITE_WARM_UP + target.samples) {
        let (took, resp) = request(&mut conn, &head, &[], false).map_err(ProbeError::Http)?;
        let resp = resp.ok_or(ProbeError::NoHttpResponse)?;
        if i >= SPLIT_WRITE_WARM_UP {
            times.push(took);
        }
        if resp.close {
            break;
        }
    }
    let min = times.iter().min().copied().unwrap_or_default();
    Ok(KeepaliveLatency {
        samples: times.len(),
        min_ms: ms(min),
        times_ms: times.iter().map(|t| ms(*t)).collect(),
        median_ms: ms(median(times)),
    })
}

/// POSTs with Nagle on (as old HTTP clients did): head and body in one
/// write on one keepalive connection, in two writes on another, taking turns;
/// medians of `target.samples` each after warm-up requests.
///
/// Each variant keeps its own connection because the penalty does not always
/// land on the request that caused it: a server that answers after the head
/// alone leaves our body unacknowledged, and Nagle then holds the *next*
/// request until the server's delayed ACK. Separate connections charge that
/// wait to the split-write connection, where it belongs.
fn split_write_penalty(
    target: &Target,
    config: Arc<rustls::ClientConfig>,
) -> Result<SplitWrite, ProbeError> {
    let head = post_head(&target.host);
    let body = vec![b'x'; POST_BODY_LEN];
    let mut timings: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut conns: [Option<Established>; 2] = [None, None];
    for i in 0..(SPLIT_WRITE_WARM_UP + target.samples) {
        for (variant, is_split) in [(0, false), (1, true)] {
            let mut c = match conns[variant].take() {
                Some(c) => c,
                None => target.connect(config.clone(), false)?,
            };
            let (took, resp) = request(&mut c, &head, &body, is_split).map_err(ProbeError::Http)?;
            let resp = resp.ok_or(ProbeError::NoHttpResponse)?;
            if i >= SPLIT_WRITE_WARM_UP {
                timings[variant].push(took);
            }
            if !resp.close {
                conns[variant] = Some(c);
            }
        }
    }
    let [one, split] = timings;
    let one_write_ms = ms(median(one));
    let split_write_ms = ms(median(split));
    Ok(SplitWrite {
        one_write_ms,
        split_write_ms,
        penalty_ms: split_write_ms - one_write_ms,
        samples: target.samples,
    })
}

/// Opens a keepalive connection, makes one request and watches, on its own
/// thread, for up to `wait` until the server closes it. The thread inherits
/// the caller's network namespace, like every socket of the probe.
pub(crate) fn watch_idle(
    target: &Target,
    wait: Duration,
) -> JoinHandle<Result<IdleTimeout, ProbeError>> {
    let target = target.clone();
    thread::spawn(move || {
        let config = target.config(rustls::ALL_VERSIONS, &[b"http/1.1"], false)?;
        let mut conn = target.connect(config, true)?;
        let (_, head) = request(&mut conn, &get_head(&target.host, false), &[], false)
            .map_err(ProbeError::Http)?;
        if head.ok_or(ProbeError::NoHttpResponse)?.close {
            return Err(ProbeError::Http(io::Error::other(
                "the server does not keep connections alive",
            )));
        }
        let idle_since = Instant::now();
        let deadline = idle_since + wait;
        let mut buf = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(IdleTimeout {
                    watched_s: wait.as_secs_f64(),
                    closed_after_s: None,
                });
            }
            conn.sock
                .inner
                .set_read_timeout(Some(left))
                .map_err(ProbeError::Http)?;
            match io::Read::read(&mut conn.sock.inner, &mut buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                // EOF, a reset, or a close_notify/alert record: all mean the
                // server is closing the idle connection.
                _ => {
                    return Ok(IdleTimeout {
                        watched_s: wait.as_secs_f64(),
                        closed_after_s: Some(idle_since.elapsed().as_secs_f64()),
                    })
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_response_ends_after_its_body() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nKeep-Alive: timeout=5, max=100\r\n\r\nab";
        let h = parse_head(r).unwrap();
        assert_eq!(h.status, 200);
        assert_eq!(h.message_len, Some(r.len() + 1));
        assert_eq!(h.keepalive_timeout, Some(5));
        assert!(!response_complete(r));
        assert!(response_complete(
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
        ));
    }

    #[test]
    fn chunked_response_ends_at_last_chunk_and_close_is_seen() {
        let r = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nab\r\n0\r\n\r\n";
        let h = parse_head(r).unwrap();
        assert_eq!(h.message_len, Some(r.len()));
        assert!(h.close);
        assert!(
            parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n")
                .is_none()
        );
    }

    #[test]
    fn median_picks_the_middle() {
        let ms = Duration::from_millis;
        assert_eq!(median(vec![ms(9), ms(1), ms(5)]), ms(5));
    }
}
