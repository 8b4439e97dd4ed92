//! Turning backend failures and framework rejections into catalogue errors.

use actix_web::error::{JsonPayloadError, PathError, QueryPayloadError};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_errors::{ApiError, ErrorCode};

/// A database failure: 503 when it is down or slow, else a logged 500 without internals.
pub fn storage(e: cova_storage::StorageError) -> ApiError {
    if e.is_unavailable() {
        tracing::warn!(error = %e, "database unavailable");
        ApiError::unavailable()
    } else {
        tracing::error!(error = %e, "database error");
        ApiError::internal()
    }
}

pub fn cache(e: cova_cache::CacheError) -> ApiError {
    tracing::warn!(error = %e, "cache unavailable");
    ApiError::unavailable()
}

pub fn json_config(limit: usize) -> web::JsonConfig {
    web::JsonConfig::default().limit(limit).error_handler(|err, _req| {
        let api = match &err {
            JsonPayloadError::Overflow { limit } | JsonPayloadError::OverflowKnownLength { limit, .. } => {
                ApiError::new(ErrorCode::PayloadTooLarge, format!("The JSON body is larger than {limit} bytes."))
            }
            JsonPayloadError::ContentType => {
                ApiError::validation("The body must be JSON with Content-Type: application/json.")
            }
            JsonPayloadError::Deserialize(e) => ApiError::validation(format!("Invalid JSON body: {e}")),
            other => ApiError::validation(format!("Invalid JSON body: {other}")),
        };
        api.into()
    })
}

pub fn path_config() -> web::PathConfig {
    web::PathConfig::default()
        .error_handler(|err: PathError, _req| ApiError::validation(format!("Invalid path parameter: {err}")).into())
}

pub fn query_config() -> web::QueryConfig {
    web::QueryConfig::default().error_handler(|err, _req| query(err).into())
}

/// A query string that does not parse.
pub fn query(err: QueryPayloadError) -> ApiError {
    ApiError::validation(format!("Invalid query parameters: {err}"))
}

pub async fn route_not_found(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::not_found(format!("No endpoint at {} {}.", req.method(), req.path())))
}

pub async fn method_not_allowed(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::new(ErrorCode::MethodNotAllowed, format!("{} is not allowed on {}.", req.method(), req.path())))
}
