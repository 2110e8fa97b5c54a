//! Active health checks: every interval, each server gets a real HTTP/1.1
//! `GET <path>` on a fresh TCP connection (`Connection: close`; for h2c
//! and h2 groups an HTTP/2 GET on a fresh session, over TLS for h2), and a
//! 2xx/3xx status within the timeout counts as a success. `rise` successes
//! in a row mark a down server up, `fall` failures in a row mark an up
//! server down; each transition is logged once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{BackendStream, ConnectError, Server, UpstreamShared};
use crate::config::{BackendAddr, BackendTls, HealthCheck};

/// Most bytes read while looking for the status line.
const MAX_STATUS_LINE: usize = 1024;

impl UpstreamShared {
    /// Runs active health checks until `shutdown` turns true (returns at
    /// once when the group has none). Spawned on the control-plane runtime.
    pub async fn run_health_checks(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let Some(check) = self.config.health.clone() else {
            let _ = shutdown.wait_for(|s| *s).await;
            return;
        };
        // Per server address; a server starts from its current verdict: a
        // reload may have inherited one that is down, and only `rise`
        // successes may bring it back.
        let mut streaks: HashMap<BackendAddr, Streak> = HashMap::new();
        let mut ticker = tokio::time::interval(check.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.wait_for(|s| *s) => return,
                _ = ticker.tick() => {}
            }
            let round = check_all(&self, &check);
            let results = tokio::select! {
                _ = shutdown.wait_for(|s| *s) => return,
                results = round => results,
            };
            // Servers that left the group (DNS) are forgotten.
            streaks.retain(|addr, _| results.iter().any(|(s, _)| s.addr == *addr));
            for (checked, result) in results {
                let streak = streaks
                    .entry(checked.addr)
                    .or_insert_with(|| Streak::new(checked.is_up()));
                let Some(up) = streak.record(result.is_ok(), check.rise, check.fall) else {
                    continue;
                };
                checked.set_up(up);
                let server = checked.addr;
                let upstream = &self.config.name;
                match result {
                    Ok(status) => tracing::info!(
                        %upstream, %server,
                        "backend up: {} health checks in a row passed (GET {} answered {status})",
                        check.rise, check.path
                    ),
                    Err(e) => tracing::warn!(
                        %upstream, %server,
                        "backend down: {} health checks in a row failed (GET {}: {e})",
                        check.fall, check.path
                    ),
                }
            }
        }
    }
}

/// Checks every server of `shared` at once; each check is bounded by the
/// check's timeout, so the round is too.
async fn check_all(
    shared: &Arc<UpstreamShared>,
    check: &HealthCheck,
) -> Vec<(Arc<Server>, Result<u16, CheckError>)> {
    let servers = shared.servers().servers.clone();
    let mut set = JoinSet::new();
    for server in &servers {
        let (server, path, timeout) = (server.clone(), check.path.clone(), check.timeout);
        let shared = shared.clone();
        set.spawn(async move {
            let config = &shared.config;
            let target = Target {
                addr: server.addr,
                origin: server.origin,
                tls: config.tls.as_ref(),
            };
            let result = if config.protocol.is_http2() {
                check_once_h2(target, &path, timeout).await
            } else {
                check_once(target, &path, timeout).await
            };
            (server, result)
        });
    }
    let mut results = Vec::with_capacity(servers.len());
    while let Some(joined) = set.join_next().await {
        if let Ok(result) = joined {
            results.push(result);
        }
    }
    results
}

/// Why one health check failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum CheckError {
    #[error("connect: {0}")]
    Connect(std::io::Error),
    /// The TLS handshake failed or did not select h2 (the message says which).
    #[error("{0}")]
    Tls(std::io::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("I/O: {0}")]
    Io(std::io::Error),
    #[error("closed before a status line")]
    Closed,
    #[error("not an HTTP/1.x status line")]
    Malformed,
    #[error("status {0}")]
    Status(u16),
}

/// The server one check is for.
#[derive(Debug, Clone, Copy)]
pub(super) struct Target<'a> {
    /// Its address.
    pub addr: BackendAddr,
    /// The configuration entry it comes from (its TLS name).
    pub origin: usize,
    /// The group's TLS settings, if it has TLS.
    pub tls: Option<&'a BackendTls>,
}

impl Target<'_> {
    /// A connection to the server the way requests reach it (TCP or Unix,
    /// TLS when the group has it), within `timeout`.
    async fn connect(&self, timeout: Duration) -> Result<BackendStream, CheckError> {
        super::connect::connect(self.addr, self.origin, self.tls, timeout)
            .await
            .map_err(|e| match e {
                ConnectError::Tls(_, e) => CheckError::Tls(e),
                ConnectError::Timeout(_) => CheckError::Timeout(timeout),
                ConnectError::Io(_, e) => CheckError::Connect(e),
                ConnectError::AllDown(_) => CheckError::Closed,
            })
    }

    /// The authority a check names: the TLS server name, else the address
    /// (`localhost` for a Unix socket).
    fn authority(&self) -> String {
        match self.tls.and_then(|tls| tls.server_names.get(self.origin)) {
            Some(name) => name.to_str().into_owned(),
            None => self.addr.authority(),
        }
    }
}

/// One check: connect, `GET path`, read the status line; `Ok(status)` for
/// 2xx and 3xx.
pub(super) async fn check_once(
    target: Target<'_>,
    path: &str,
    timeout: Duration,
) -> Result<u16, CheckError> {
    let exchange = async {
        let mut stream = target.connect(timeout).await?;
        let host = target.authority();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: tern-health-check\r\n\
             Connection: close\r\n\r\n"
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(CheckError::Io)?;
        let mut buf = Vec::with_capacity(256);
        let mut chunk = [0u8; 256];
        loop {
            if let Some(end) = buf.windows(2).position(|w| w == b"\r\n") {
                return parse_status_line(&buf[..end]);
            }
            if buf.len() >= MAX_STATUS_LINE {
                return Err(CheckError::Malformed);
            }
            let n = stream.read(&mut chunk).await.map_err(CheckError::Io)?;
            if n == 0 {
                return Err(CheckError::Closed);
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    let status = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| CheckError::Timeout(timeout))??;
    if (200..400).contains(&status) {
        Ok(status)
    } else {
        Err(CheckError::Status(status))
    }
}

/// One check of an HTTP/2 server (h2c, or h2 over TLS): connect, TLS
/// handshake for h2, HTTP/2 preface, `GET path` on a session of its own
/// (so a check never queues behind requests), `Ok(status)` for 2xx and
/// 3xx.
pub(super) async fn check_once_h2(
    target: Target<'_>,
    path: &str,
    timeout: Duration,
) -> Result<u16, CheckError> {
    let exchange = async {
        let stream = target.connect(timeout).await?;
        let scheme = if target.tls.is_some() {
            "https"
        } else {
            "http"
        };
        get_status_h2(stream, scheme, &target.authority(), path, timeout).await
    };
    let status = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| CheckError::Timeout(timeout))??;
    if (200..400).contains(&status) {
        Ok(status)
    } else {
        Err(CheckError::Status(status))
    }
}

/// The status of `GET path` on a new HTTP/2 session over `stream`. The
/// session's connection task ends with the check (dropping the sender
/// closes the session) and never outlives `timeout`.
async fn get_status_h2<S>(
    stream: S,
    scheme: &str,
    authority: &str,
    path: &str,
    timeout: Duration,
) -> Result<u16, CheckError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let h2_error = |e: h2::Error| CheckError::Io(std::io::Error::other(e));
    let (sender, connection) = h2::client::handshake(stream).await.map_err(h2_error)?;
    tokio::spawn(tokio::time::timeout(timeout, connection));
    let request = http::Request::get(format!("{scheme}://{authority}{path}"))
        .header(http::header::USER_AGENT, "tern-health-check")
        .body(())
        .map_err(|_| CheckError::Malformed)?;
    let mut sender = sender.ready().await.map_err(h2_error)?;
    let (response, _) = sender.send_request(request, true).map_err(h2_error)?;
    let response = response.await.map_err(h2_error)?;
    Ok(response.status().as_u16())
}

/// `HTTP/1.x SSS reason` → SSS.
fn parse_status_line(line: &[u8]) -> Result<u16, CheckError> {
    let rest = line.strip_prefix(b"HTTP/1.").ok_or(CheckError::Malformed)?;
    match rest {
        [minor, b' ', a, b, c, tail @ ..]
            if minor.is_ascii_digit()
                && [a, b, c].iter().all(|d| d.is_ascii_digit())
                && (tail.is_empty() || tail[0] == b' ') =>
        {
            Ok(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => Err(CheckError::Malformed),
    }
}

/// Consecutive results of one server and its current verdict.
#[derive(Debug, Clone, Copy)]
struct Streak {
    up: bool,
    successes: u32,
    failures: u32,
}

impl Streak {
    /// A streak of nothing yet, from verdict `up` (a fresh group starts
    /// up, so it serves at once).
    fn new(up: bool) -> Self {
        Streak {
            up,
            successes: 0,
            failures: 0,
        }
    }

    /// Counts one result; returns the new verdict when it changed.
    fn record(&mut self, ok: bool, rise: u32, fall: u32) -> Option<bool> {
        if ok {
            self.failures = 0;
            self.successes = self.successes.saturating_add(1);
            if !self.up && self.successes >= rise {
                self.up = true;
                return Some(true);
            }
        } else {
            self.successes = 0;
            self.failures = self.failures.saturating_add(1);
            if self.up && self.failures >= fall {
                self.up = false;
                return Some(false);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use tokio::net::TcpListener;

    fn plain(addr: SocketAddr) -> Target<'static> {
        Target {
            addr: BackendAddr::Tcp(addr),
            origin: 0,
            tls: None,
        }
    }

    #[test]
    fn fall_failures_mark_down_then_rise_successes_mark_up() {
        let mut s = Streak::new(true);
        assert_eq!(s.record(false, 2, 3), None);
        assert_eq!(s.record(false, 2, 3), None);
        assert_eq!(s.record(false, 2, 3), Some(false));
        assert_eq!(s.record(false, 2, 3), None, "a transition is reported once");
        assert_eq!(s.record(true, 2, 3), None);
        assert_eq!(s.record(true, 2, 3), Some(true));
        assert_eq!(s.record(true, 2, 3), None);
    }

    #[test]
    fn a_server_inherited_down_needs_rise_successes() {
        let mut s = Streak::new(false);
        assert_eq!(s.record(false, 2, 3), None, "already down: no transition");
        assert_eq!(s.record(true, 2, 3), None);
        assert_eq!(s.record(true, 2, 3), Some(true));
    }

    #[test]
    fn a_success_breaks_a_failure_streak() {
        let mut s = Streak::new(true);
        assert_eq!(s.record(false, 1, 2), None);
        assert_eq!(s.record(true, 1, 2), None);
        assert_eq!(s.record(false, 1, 2), None);
        assert_eq!(s.record(false, 1, 2), Some(false));
    }

    #[test]
    fn status_lines() {
        assert_eq!(parse_status_line(b"HTTP/1.1 200 OK").ok(), Some(200));
        assert_eq!(parse_status_line(b"HTTP/1.0 302").ok(), Some(302));
        assert!(parse_status_line(b"HTTP/2 200").is_err());
        assert!(parse_status_line(b"HTTP/1.1 20 OK").is_err());
        assert!(parse_status_line(b"HTTP/1.1 2000 OK").is_err());
        assert!(parse_status_line(b"SSH-2.0-OpenSSH").is_err());
    }

    /// A one-shot server answering `response` to the first request, and
    /// the request it received.
    async fn answer_once(
        response: &'static [u8],
    ) -> (SocketAddr, tokio::task::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut request = Vec::new();
            let mut chunk = [0u8; 512];
            while !request.ends_with(b"\r\n\r\n") {
                let n = stream.read(&mut chunk).await.expect("read");
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&chunk[..n]);
            }
            stream.write_all(response).await.expect("write");
            request
        });
        (addr, task)
    }

    #[tokio::test]
    async fn check_sends_get_with_host_and_close_and_accepts_2xx() {
        let (addr, server) = answer_once(b"HTTP/1.1 204 No Content\r\n\r\n").await;
        let status = check_once(plain(addr), "/healthz?deep=1", Duration::from_secs(2)).await;
        assert_eq!(status.ok(), Some(204));
        let request = String::from_utf8(server.await.expect("server")).expect("utf-8");
        assert!(
            request.starts_with("GET /healthz?deep=1 HTTP/1.1\r\n"),
            "{request}"
        );
        assert!(
            request.contains(&format!("\r\nHost: {addr}\r\n")),
            "{request}"
        );
        assert!(request.contains("\r\nConnection: close\r\n"), "{request}");
    }

    #[tokio::test]
    async fn check_fails_on_500() {
        let (addr, _server) = answer_once(b"HTTP/1.1 500 Internal Server Error\r\n\r\n").await;
        let result = check_once(plain(addr), "/", Duration::from_secs(2)).await;
        assert!(matches!(result, Err(CheckError::Status(500))), "{result:?}");
    }

    #[tokio::test]
    async fn check_fails_on_refused_connection() {
        let addr = {
            let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            l.local_addr().expect("addr")
        };
        let result = check_once(plain(addr), "/", Duration::from_secs(2)).await;
        assert!(matches!(result, Err(CheckError::Connect(_))), "{result:?}");
    }

    #[tokio::test]
    async fn check_times_out_on_a_silent_server() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let started = std::time::Instant::now();
        let result = check_once(plain(addr), "/", Duration::from_millis(200)).await;
        assert!(matches!(result, Err(CheckError::Timeout(_))), "{result:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
        drop(listener);
    }
}
