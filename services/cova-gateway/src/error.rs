//! Rendering the error catalogue as HTTP answers: `{detail, code}`, the status of the code,
//! `Retry-After` when the error has one, and the headers gathered for the answer.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use cova_errors::ApiError;

/// An [`ApiError`] on its way out of a handler.
#[derive(Debug)]
pub struct HttpError(pub ApiError);

pub type HttpResult = Result<HttpResponse, HttpError>;

impl From<ApiError> for HttpError {
    fn from(e: ApiError) -> Self {
        Self(e)
    }
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl ResponseError for HttpError {
    fn status_code(&self) -> StatusCode {
        status_of(&self.0)
    }

    fn error_response(&self) -> HttpResponse {
        render(&self.0)
    }
}

fn status_of(e: &ApiError) -> StatusCode {
    StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The HTTP answer of an error.
pub fn render(e: &ApiError) -> HttpResponse {
    let mut res = HttpResponse::build(status_of(e));
    res.insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"));
    if let Some(secs) = e.retry_after {
        res.insert_header((header::RETRY_AFTER, secs.to_string()));
    }
    for (name, value) in &e.headers {
        if let Ok(v) = HeaderValue::from_str(value) {
            res.insert_header((*name, v));
        }
    }
    res.json(e.body())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cova_errors::ErrorCode;

    #[test]
    fn limits_render_with_retry_after_and_their_headers() {
        let e = ApiError::of(ErrorCode::RateLimited).with_retry_after(7).with_header("x-ratelimit-remaining", "0");
        let res = render(&e);
        assert_eq!(res.status(), 429);
        assert_eq!(res.headers().get("retry-after").and_then(|v| v.to_str().ok()), Some("7"));
        assert_eq!(res.headers().get("x-ratelimit-remaining").and_then(|v| v.to_str().ok()), Some("0"));
        assert_eq!(res.headers().get("content-type").and_then(|v| v.to_str().ok()), Some("application/json"));
        assert_eq!(res.headers().get("x-content-type-options").and_then(|v| v.to_str().ok()), Some("nosniff"));
    }
}
