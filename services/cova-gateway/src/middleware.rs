//! Request-wide concerns: request ids, access logs, the request time bound, CORS, and the
//! refusal of URLs that carry a token or a control character.

use crate::AppState;
use crate::error::{HttpError, render};
use actix_cors::Cors;
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{Error, web};
use cova_errors::{ApiError, ErrorCode};
use std::borrow::Cow;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub const REQUEST_ID: &str = "x-request-id";

/// Query parameter names that would carry a credential.
const CREDENTIAL_PARAMS: &[&str] = &["token", "access_token", "api_key", "apikey", "auth", "authorization", "bearer"];

fn respond(req: ServiceRequest, err: &ApiError) -> ServiceResponse<BoxBody> {
    req.into_response(render(err))
}

/// The path as it may be logged: percent-decoded, with anything that looks like a token
/// (`cova_…`) replaced, so a token pasted into a URL never reaches the logs.
pub fn loggable_path(path: &str) -> Cow<'_, str> {
    let decoded = percent_decode(path);
    let prefix = cova_auth::TOKEN_PREFIX;
    if !decoded.contains(prefix) {
        return decoded;
    }
    let mut out = String::with_capacity(decoded.len());
    let mut rest: &str = &decoded;
    while let Some(at) = rest.find(prefix) {
        out.push_str(&rest[..at]);
        out.push_str(prefix);
        out.push_str("[redacted]");
        let tail = &rest[at + prefix.len()..];
        let end = tail.find(|c: char| !c.is_ascii_alphanumeric() && c != '_').unwrap_or(tail.len());
        rest = &tail[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

fn percent_decode(s: &str) -> Cow<'_, str> {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy()
}

/// Error answers produced by the framework or its middleware (CORS refusals, malformed
/// requests) come as plain text; rewrite them into the catalogue's `{detail, code}` body.
async fn normalise_error_body(res: ServiceResponse<BoxBody>) -> ServiceResponse<BoxBody> {
    let status = res.status();
    let is_json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return res;
    }
    let code = match status.as_u16() {
        401 => ErrorCode::Unauthorized,
        404 => ErrorCode::NotFound,
        405 => ErrorCode::MethodNotAllowed,
        408 => ErrorCode::RequestTimeout,
        413 => ErrorCode::PayloadTooLarge,
        431 => ErrorCode::HeadersTooLarge,
        429 => ErrorCode::RateLimited,
        503 => ErrorCode::Unavailable,
        s if s >= 500 => ErrorCode::InternalError,
        _ => ErrorCode::ValidationError,
    };
    let (req, res) = res.into_parts();
    let headers = res.headers().clone();
    let text =
        actix_web::body::to_bytes_limited(res.into_body(), 4096).await.ok().and_then(Result::ok).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let detail = if code == ErrorCode::InternalError || text.trim().is_empty() {
        code.default_message().to_owned()
    } else {
        text.trim().to_owned()
    };
    let mut rebuilt = render(&ApiError::new(code, detail));
    *rebuilt.status_mut() = status;
    for (name, value) in headers.iter().filter(|(n, _)| *n != header::CONTENT_TYPE && *n != header::CONTENT_LENGTH) {
        rebuilt.headers_mut().insert(name.clone(), value.clone());
    }
    ServiceResponse::new(req, rebuilt)
}

/// Assigns a request id (or keeps a sane one from the client), bounds the handling time, and
/// logs one line per request: method, path without its query string, status, duration.
pub async fn request_context(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let started = Instant::now();
    let request_id = req
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .map(str::to_owned)
        // From the thread's generator: a system call for each id would cost more than the rest.
        .unwrap_or_else(|| uuid::Builder::from_random_bytes(rand::random()).into_uuid().to_string());
    let timeout = req
        .app_data::<web::Data<AppState>>()
        .map_or(Duration::from_secs(30), |s| Duration::from_millis(s.config.http.request_timeout_ms));
    let method = req.method().clone();
    let path = loggable_path(req.path()).into_owned();
    // The route template, not the path: ids in paths would make a series per id.
    let route = req.match_pattern().unwrap_or_else(|| "unmatched".to_owned());
    let observe = |status: u16| cova_metrics::http_request(&route, method.as_str(), status, started.elapsed());
    let span = tracing::info_span!("request", request.id = %request_id, http.method = %method, http.path = %path);
    // The handler runs as its own task: when the time bound (or a client hang-up) abandons the
    // request, the work underneath still finishes instead of being dropped mid-transaction. Its
    // platform requests are the request's (named by authentication): those not sent yet when
    // it is answered or the client hangs up (this future dropped) never are.
    let answered = CancellationToken::new();
    let _hung_up = answered.clone().drop_guard();
    let demand = cova_platforms::Demand::interactive("").answered_by(answered.clone());
    let task = actix_web::rt::spawn(demand.scope(tracing::Instrument::instrument(next.call(req), span)));
    // The answers the handler never gave (time bound, panic) still carry the request id.
    let with_id = |mut e: ApiError| {
        e.headers.push((REQUEST_ID, request_id.clone()));
        Error::from(HttpError(e))
    };
    let mut res = match tokio::time::timeout(timeout, task).await {
        Ok(Ok(Ok(res))) => normalise_error_body(res.map_into_boxed_body()).await,
        Ok(Ok(Err(e))) => {
            tracing::warn!(request.id = %request_id, http.method = %method, http.path = %path, error = %e, "request failed");
            observe(e.as_response_error().status_code().as_u16());
            return Err(e);
        }
        Ok(Err(join)) => {
            tracing::error!(request.id = %request_id, http.method = %method, http.path = %path, error = %join, "request handler panicked");
            observe(500);
            return Err(with_id(ApiError::internal()));
        }
        Err(_) => {
            answered.cancel();
            tracing::warn!(request.id = %request_id, http.method = %method, http.path = %path, duration_ms = started.elapsed().as_secs_f64() * 1000.0, "request exceeded http.request_timeout_ms");
            observe(503);
            return Err(with_id(ApiError::unavailable()));
        }
    };
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        res.headers_mut().insert(HeaderName::from_static(REQUEST_ID), v);
    }
    // Every answer is what its Content-Type says: a browser must never guess another type.
    res.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    let status = res.status().as_u16();
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    observe(status);
    if status >= 500 {
        tracing::warn!(request.id = %request_id, http.method = %method, http.path = %path, http.status = status, duration_ms, "request");
    } else if is_probe(&path) {
        // Orchestrators probe every few seconds; at INFO they would drown the requests.
        tracing::debug!(request.id = %request_id, http.method = %method, http.path = %path, http.status = status, duration_ms, "request");
    } else {
        tracing::info!(request.id = %request_id, http.method = %method, http.path = %path, http.status = status, duration_ms, "request");
    }
    Ok(res)
}

fn is_probe(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz")
}

/// Refuses URLs before anything else looks at the request: a token in the query leaks into
/// logs, proxies and browser history (401, and the query string is never logged); a control
/// character in the path or the query (a NUL byte, say) is never valid input (400).
pub async fn guard_url(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    if query_carries_token(req.query_string()) {
        let err = ApiError::new(
            ErrorCode::Unauthorized,
            "Tokens are accepted only in the Authorization header, never in the URL. Revoke a token that was sent in a URL.",
        );
        return Ok(respond(req, &err));
    }
    let query_has_control = url::form_urlencoded::parse(req.query_string().as_bytes())
        .any(|(k, v)| crate::input::has_control(&k) || crate::input::has_control(&v));
    if crate::input::has_control(&percent_decode(req.path())) || query_has_control {
        let err = ApiError::validation("The URL must not contain control characters.");
        return Ok(respond(req, &err));
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

fn query_carries_token(query: &str) -> bool {
    if query.is_empty() {
        return false;
    }
    // Decoded first, so `%74oken=` is caught like `token=`.
    url::form_urlencoded::parse(query.as_bytes()).any(|(name, value)| {
        let name = name.to_ascii_lowercase();
        CREDENTIAL_PARAMS.contains(&name.as_str())
            || value.contains(cova_auth::TOKEN_PREFIX)
            || name.contains(cova_auth::TOKEN_PREFIX)
    })
}

/// Bearer requests work from any origin without credentials; cookies are never allowed
/// cross-origin (the workspace's own origins get their own policy with the cookie session).
pub fn cors() -> Cors {
    Cors::default()
        .allow_any_origin()
        .send_wildcard()
        .allowed_methods(["GET", "POST", "PUT", "DELETE"])
        .allowed_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::HeaderName::from_static("idempotency-key"),
            header::HeaderName::from_static(REQUEST_ID),
            header::HeaderName::from_static(crate::session::CSRF_HEADER),
            header::HeaderName::from_static(crate::session::PAGE_TOKEN_HEADER),
            // Conditional and partial requests of the media endpoints.
            header::IF_NONE_MATCH,
            header::RANGE,
            header::IF_RANGE,
        ])
        .expose_headers([
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-quota-limit",
            "x-quota-remaining",
            "retry-after",
            "content-disposition",
            "etag",
            "content-range",
            "accept-ranges",
            REQUEST_ID,
        ])
        .max_age(600)
}

/// Credentialed CORS for the origins of `workspace.allowed_origins` only: their answers name
/// the origin and allow credentials, so their pages may send the session cookie (with its
/// CSRF header). Every other origin keeps the credential-less `*` of [`cors`].
pub async fn credentialed_cors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let origin = req.headers().get(header::ORIGIN).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let listed = origin.as_ref().is_some_and(|o| {
        req.app_data::<web::Data<crate::AppState>>()
            .is_some_and(|state| state.config.workspace.allowed_origins.iter().any(|a| a == o))
    });
    let mut res = next.call(req).await?.map_into_boxed_body();
    if listed
        && let Some(origin) = origin
        && res.headers().contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN)
        && let Ok(value) = HeaderValue::from_str(&origin)
    {
        let headers = res.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
        headers.insert(header::ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
        headers.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::{loggable_path, query_carries_token};

    #[test]
    fn tokens_in_paths_are_redacted_for_the_log() {
        let token = "cova_4bN0q8cZk1m2n3p4r5s6t7u8v9w0x1y2z3A4B5Cd";
        assert_eq!(loggable_path(&format!("/api/v1/analyze/{token}")), "/api/v1/analyze/cova_[redacted]");
        assert_eq!(loggable_path(&format!("/x/%63ova_abc/{token}/y")), "/x/cova_[redacted]/cova_[redacted]/y");
        assert_eq!(loggable_path("/api/v1/analyze/0198-abc"), "/api/v1/analyze/0198-abc");
    }

    #[test]
    fn tokens_in_queries_are_spotted() {
        assert!(query_carries_token("token=abc"));
        assert!(query_carries_token("x=1&API_KEY=abc"));
        assert!(query_carries_token("q=cova_0123456789"));
        assert!(query_carries_token("%74oken=abc"));
        assert!(query_carries_token("q=cova%5F0123"));
        assert!(!query_carries_token(""));
        assert!(!query_carries_token("limit=10&cursor=abc"));
    }
}
