//! Turning backend failures and framework rejections into catalogue errors.

use crate::error::{HttpError, HttpResult};
use actix_web::error::{PathError, QueryPayloadError};
use actix_web::{HttpRequest, web};
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

/// A snapshot that could be neither read from the cache nor from the database.
pub fn snapshot(e: cova_snapshots::SnapshotError) -> ApiError {
    match e {
        cova_snapshots::SnapshotError::Storage(e) => storage(e),
        cova_snapshots::SnapshotError::Cache(e) => cache(e),
    }
}

pub fn path_config() -> web::PathConfig {
    web::PathConfig::default().error_handler(|err: PathError, _req| {
        HttpError(ApiError::validation(format!("Invalid path parameter: {err}"))).into()
    })
}

pub fn query_config() -> web::QueryConfig {
    web::QueryConfig::default().error_handler(|err, _req| HttpError(query(err)).into())
}

/// A query string that does not parse.
pub fn query(err: QueryPayloadError) -> ApiError {
    ApiError::validation(format!("Invalid query parameters: {err}"))
}

pub async fn route_not_found(req: HttpRequest) -> HttpResult {
    let path = crate::loggable_path(req.path());
    Err(ApiError::not_found(format!("No endpoint at {} {path}.", req.method())).into())
}

/// 405, with the methods the path serves in `Allow` (RFC 9110) and in words.
pub async fn method_not_allowed(req: HttpRequest, allow: String) -> HttpResult {
    let path = crate::loggable_path(req.path());
    let detail = format!("{} is not allowed on {path}; it answers {allow}.", req.method());
    Err(ApiError::new(ErrorCode::MethodNotAllowed, detail).with_header("allow", allow).into())
}
