//! Request bodies, parsed after authentication so that the order of checks holds
//! (401 → 403 → 400): the framework's extractors would run before the handler.

use actix_web::web::Bytes;
use cova_errors::ApiError;
use cova_platforms::PlatformError;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UrlBody {
    pub url: String,
}

/// Longest URL accepted (real post URLs are far shorter).
const MAX_URL_LEN: usize = 2_048;

pub fn url_body(body: &Bytes) -> Result<String, ApiError> {
    if body.is_empty() {
        return Err(ApiError::validation("The body must be JSON: {\"url\": \"<post URL>\"}."));
    }
    let parsed: UrlBody =
        serde_json::from_slice(body).map_err(|e| ApiError::validation(format!("Invalid JSON body: {e}")))?;
    let url = parsed.url.trim();
    if url.is_empty() {
        return Err(ApiError::validation("`url` must not be empty."));
    }
    if url.len() > MAX_URL_LEN {
        return Err(ApiError::validation(format!("`url` is longer than {MAX_URL_LEN} characters.")));
    }
    Ok(url.to_owned())
}

/// The API error for a platform failure.
pub fn platform_error(e: PlatformError) -> ApiError {
    use cova_errors::ErrorCode;
    match e {
        PlatformError::InvalidUrl(d) => ApiError::validation(d),
        PlatformError::AudienceRestricted(d) => ApiError::new(ErrorCode::AudienceRestricted, d),
        PlatformError::Parse(d) => ApiError::new(ErrorCode::ParseError, d),
        PlatformError::Unavailable(d) => {
            tracing::warn!(detail = %d, "platform unavailable");
            ApiError::new(ErrorCode::Unavailable, "The platform cannot be reached right now; retry later.")
                .with_retry_after(30)
        }
    }
}
