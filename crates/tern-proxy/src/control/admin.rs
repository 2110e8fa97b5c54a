//! The admin listener: Prometheus text at /metrics, liveness at /health.
//! Off by default and loopback only (it has no authentication).
//!
//! It runs on the control-plane runtime, away from the workers, on the
//! bounded one-request server of [`super::oneshot`]. It keeps answering while the
//! workers drain after SIGTERM, so a load balancer polling /health sees
//! 503 and takes tern out before the listeners are gone.
//!
//! | request                      | answer                                   |
//! |------------------------------|------------------------------------------|
//! | `GET /metrics`               | 200, Prometheus text format 0.0.4        |
//! | `GET /health`                | 200 `ok` while tern serves; 503 `draining` once it shuts down (in-flight requests finishing) |
//! | `HEAD` of either             | the same head, no body                   |
//! | another path                 | 404                                      |
//! | another method               | 405 with `Allow: GET, HEAD`              |
//! | a malformed head             | 400                                      |
//! | a head over [`MAX_HEAD_BYTES`] | 431                                    |

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::control::oneshot::{self, Request, Response};
use crate::control::server::Current;
use crate::metrics::Metrics;

/// Connections served at once; more are closed on accept. A scraper or two
/// and a health checker need a handful; the cap bounds what a runaway
/// local client can cost the control plane (which also runs reloads).
const MAX_CONNECTIONS: usize = 32;

/// Serves admin requests until the runtime stops. `draining` turns true
/// when tern begins to shut down.
pub(crate) async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    current: Current,
    draining: watch::Receiver<bool>,
) {
    let respond = move |request: &Request| {
        let draining = *draining.borrow();
        respond(request, &metrics, &current, draining)
    };
    oneshot::serve("admin", listener, MAX_CONNECTIONS, Arc::new(respond)).await;
}

fn respond(request: &Request, metrics: &Metrics, current: &Current, draining: bool) -> Response {
    if !request.is_get_or_head() {
        return Response::only_get_and_head();
    }
    match request.path.as_str() {
        "/metrics" => Response {
            status: 200,
            reason: "OK",
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            extra: String::new(),
            body: metrics.render(&backend_health(current), &acme_snapshots(current)),
            head_only: false,
        },
        "/health" if draining => Response::text(503, "Service Unavailable", "draining\n"),
        "/health" => {
            // ACME trouble does not stop serving (the current certificate
            // stays): still 200, with the detail after "ok".
            let detail = crate::metrics::acme_health_lines(&acme_snapshots(current));
            Response::text(200, "OK", &format!("ok\n{detail}"))
        }
        _ => Response::text(404, "Not Found", "not found: try /metrics or /health\n"),
    }
}

/// The running generation's ACME certificates.
fn acme_snapshots(current: &Current) -> Vec<tern_acme::StatusSnapshot> {
    let Ok(generation) = current.lock().map(|g| g.clone()) else {
        return Vec::new();
    };
    generation.acme.iter().map(|s| s.snapshot()).collect()
}

/// (upstream, server, up) for every server of the running generation.
fn backend_health(current: &Current) -> Vec<(String, crate::config::BackendAddr, bool)> {
    // Hold the lock only to take the generation, not while walking it.
    let Ok(generation) = current.lock().map(|g| g.clone()) else {
        return Vec::new();
    };
    generation
        .upstreams
        .iter()
        .flat_map(|u| {
            let name = &u.config.name;
            u.health_snapshot()
                .into_iter()
                .map(move |(addr, up)| (name.clone(), addr, up))
        })
        .collect()
}
