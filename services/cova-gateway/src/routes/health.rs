use crate::AppState;
use crate::error::HttpResult;
use actix_web::{HttpResponse, web};
use cova_errors::ApiError;
use serde_json::json;

/// Liveness: the process answers.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// Readiness: every configured backend answers; otherwise 503 naming the ones that do not.
pub async fn readyz(state: web::Data<AppState>) -> HttpResult {
    let readiness = state.backends.readiness(cova_runtime::PROBE_TIMEOUT).await;
    if readiness.ready() {
        let checks: serde_json::Map<_, _> =
            readiness.checks.iter().map(|(name, _)| (name.to_string(), json!("ok"))).collect();
        return Ok(HttpResponse::Ok().json(json!({"status": "ready", "checks": checks})));
    }
    for (name, r) in &readiness.checks {
        if let Err(e) = r {
            tracing::warn!(backend = name, error = %e, "readiness check failed");
        }
    }
    Err(ApiError::new(cova_errors::ErrorCode::Unavailable, readiness.down()).with_retry_after(5).into())
}
