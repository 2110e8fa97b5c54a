//! The admin listener: Prometheus text at /metrics, liveness at /health.
//! Off by default and loopback only (it has no authentication).

use std::sync::Arc;

use tern_http::head::{find_head_end, parse_request};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::iobuf::IoBuf;
use crate::metrics::Metrics;
use crate::server::Current;

/// Serves admin requests until the runtime stops.
pub(crate) async fn serve(listener: TcpListener, metrics: Arc<Metrics>, current: Current) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(answer(stream, metrics.clone(), current.clone()));
    }
}

async fn answer(mut stream: TcpStream, metrics: Arc<Metrics>, current: Current) {
    let mut buf = IoBuf::new(1024, 8 * 1024);
    let mut scanned = 0;
    let len = loop {
        match find_head_end(buf.filled(), &mut scanned, 8 * 1024) {
            Ok(Some(n)) => break n,
            Ok(None) => {}
            Err(_) => return,
        }
        match tokio::time::timeout(
            std::time::Duration::from_secs(5),
            buf.fill_from(&mut stream),
        )
        .await
        {
            Ok(Ok(n)) if n > 0 => {}
            _ => return,
        }
    };
    let Ok(head) = parse_request(&buf.filled()[..len]) else {
        return;
    };
    let health: Vec<_> = current
        .lock()
        .map(|g| {
            g.upstreams
                .iter()
                .flat_map(|u| {
                    let name = u.config.name.clone();
                    u.health_snapshot()
                        .into_iter()
                        .map(move |(addr, up)| (name.clone(), addr, up))
                })
                .collect()
        })
        .unwrap_or_default();
    let (status, ctype, body) = match head.target() {
        "/metrics" => (
            "200 OK",
            "text/plain; version=0.0.4",
            metrics.render(&health),
        ),
        "/health" => ("200 OK", "text/plain", "ok\n".to_string()),
        _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
}
