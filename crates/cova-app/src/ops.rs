//! The operations listener every process serves on `metrics.addr`, apart from the public API:
//! `/metrics` (Prometheus), `/healthz` (the process answers) and `/readyz` (its database,
//! cache and queue answer). Worker roles have no other HTTP port, so this is how an
//! orchestrator sees a scraper that cannot reach the broker.

use actix_web::{App, HttpResponse, HttpServer, web};
use cova_runtime::Backends;
use serde_json::json;
use std::net::TcpListener;
use std::time::Duration;

/// How long one gauge read may take: as long as a probe.
const PROBE_TIMEOUT: Duration = cova_runtime::PROBE_TIMEOUT;

pub(crate) fn server(backends: Backends, listener: TcpListener) -> std::io::Result<actix_web::dev::Server> {
    cova_metrics::install();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(backends.clone()))
            .route("/metrics", web::get().to(metrics))
            .route("/healthz", web::get().to(healthz))
            .route("/readyz", web::get().to(readyz))
            .default_service(web::to(not_found))
    })
    .workers(1)
    .disable_signals()
    .shutdown_timeout(1)
    .listen(listener)?
    .run();
    Ok(server)
}

async fn metrics(backends: web::Data<Backends>) -> HttpResponse {
    refresh_gauges(&backends).await;
    HttpResponse::Ok().content_type("text/plain; version=0.0.4; charset=utf-8").body(cova_metrics::render())
}

/// Gauges read from the backends at scrape time: queue depths and the outbox backlog. A
/// backend that is down leaves the last value (and `/readyz` says why).
async fn refresh_gauges(backends: &Backends) {
    let queues = cova_messages::roles::ALL.iter().copied().chain(cova_messages::event_queues::ALL.iter().map(|q| q.0));
    for name in queues {
        let read = async {
            Ok::<_, cova_queue::QueueError>((
                backends.queue.depth(name).await?,
                backends.queue.dead_letter_count(name).await?,
            ))
        };
        match tokio::time::timeout(PROBE_TIMEOUT, read).await {
            Ok(Ok((waiting, dead))) => cova_metrics::queue_depth(name, waiting, dead),
            Ok(Err(e)) => tracing::debug!(queue = name, error = %e, "reading the queue depth failed"),
            Err(_) => tracing::debug!(queue = name, "reading the queue depth timed out"),
        }
    }
    match tokio::time::timeout(PROBE_TIMEOUT, cova_storage::repo::outbox::backlog(&backends.db)).await {
        Ok(Ok(rows)) => cova_metrics::outbox_backlog(rows),
        Ok(Err(e)) => tracing::debug!(error = %e, "reading the outbox backlog failed"),
        Err(_) => tracing::debug!("reading the outbox backlog timed out"),
    }
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

async fn readyz(backends: web::Data<Backends>) -> HttpResponse {
    let readiness = backends.readiness(PROBE_TIMEOUT).await;
    let checks: serde_json::Map<_, _> = readiness
        .checks
        .iter()
        .map(|(name, r)| (name.to_string(), json!(r.as_ref().map_or_else(|e| e.clone(), |()| "ok".to_owned()))))
        .collect();
    if readiness.ready() {
        return HttpResponse::Ok().json(json!({"status": "ready", "checks": checks}));
    }
    let down = readiness.down();
    tracing::warn!(down, "not ready");
    HttpResponse::ServiceUnavailable().insert_header(("Retry-After", "5")).json(json!({
        "detail": down,
        "code": cova_errors::ErrorCode::Unavailable.as_str(),
        "checks": checks,
    }))
}

async fn not_found() -> HttpResponse {
    HttpResponse::NotFound().json(json!({
        "detail": "The metrics address serves /metrics, /healthz and /readyz.",
        "code": cova_errors::ErrorCode::NotFound.as_str(),
    }))
}
