//! Request input, read and checked after authentication so that the order of checks holds
//! (401 → 403 → 400): the framework's extractors would run before the handler.
//!
//! Every text that comes in is refused with 400 `validation_error` when it holds a control
//! character (a NUL byte would otherwise reach the database).

use crate::AppState;
use actix_web::web::{self, Bytes};
use cova_errors::{ApiError, ErrorCode};
use serde::Deserialize;
use std::time::Duration;

/// Reads the whole body, at most `http.body_limit_bytes` (else 413), within
/// `http.body_timeout_ms` (else 408: the client sends too slowly, the server is fine).
pub async fn read_body(state: &AppState, payload: web::Payload) -> Result<Bytes, ApiError> {
    let limit = state.config.http.body_limit_bytes;
    let timeout = Duration::from_millis(state.config.http.body_timeout_ms);
    match tokio::time::timeout(timeout, payload.to_bytes_limited(limit)).await {
        Err(_) => Err(ApiError::new(
            ErrorCode::RequestTimeout,
            format!("The request body was not received within {} ms.", timeout.as_millis()),
        )),
        Ok(Err(_)) => {
            Err(ApiError::new(ErrorCode::PayloadTooLarge, format!("The request body is larger than {limit} bytes.")))
        }
        Ok(Ok(Err(e))) => Err(ApiError::validation(format!("The request body could not be read: {e}"))),
        Ok(Ok(Ok(bytes))) => Ok(bytes),
    }
}

/// True when `s` holds a control character (C0, DEL or C1), NUL included.
pub fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// Refuses a text field holding a control character.
pub fn text<'a>(field: &str, value: &'a str) -> Result<&'a str, ApiError> {
    if has_control(value) {
        return Err(ApiError::validation(format!("`{field}` must not contain control characters.")));
    }
    Ok(value)
}

/// A JSON body of type `T`; an empty or malformed body is 400 naming the problem.
pub fn json<T: serde::de::DeserializeOwned>(body: &Bytes, shape: &str) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::validation(format!("The body must be JSON: {shape}.")));
    }
    serde_json::from_slice(body).map_err(|e| ApiError::validation(format!("Invalid JSON body: {e}")))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UrlBody {
    url: String,
}

/// Longest URL accepted (real post URLs are far shorter).
const MAX_URL_LEN: usize = 2_048;

/// Whether `If-None-Match` names `etag` (a weak `W/` form too) or is `*`: the client's copy
/// is current, and the answer is 304.
pub fn etag_matches(req: &actix_web::HttpRequest, etag: &str) -> bool {
    req.headers()
        .get_all(actix_web::http::header::IF_NONE_MATCH)
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').map(str::trim).any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag))
}

/// The `{"url": …}` body of the metadata and analyze endpoints.
pub fn url_body(body: &Bytes) -> Result<String, ApiError> {
    let parsed: UrlBody = json(body, r#"{"url": "<post URL>"}"#)?;
    let url = text("url", parsed.url.trim())?;
    if url.is_empty() {
        return Err(ApiError::validation("`url` must not be empty."));
    }
    if url.len() > MAX_URL_LEN {
        return Err(ApiError::validation(format!("`url` is longer than {MAX_URL_LEN} characters.")));
    }
    Ok(url.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_refused() {
        for bad in ["https://www.tiktok.com/@a/video/1\u{0}", "a\u{7f}", "a\u{85}b", "tab\there"] {
            let body = Bytes::from(serde_json::json!({ "url": bad }).to_string());
            assert_eq!(url_body(&body).expect_err(bad).code, ErrorCode::ValidationError, "{bad:?}");
        }
        let ok = Bytes::from(r#"{"url": "https://www.tiktok.com/@a/video/1 "}"#);
        assert_eq!(url_body(&ok).expect("valid"), "https://www.tiktok.com/@a/video/1");
        assert!(!has_control("émoji 🎉 ok"));
    }
}
