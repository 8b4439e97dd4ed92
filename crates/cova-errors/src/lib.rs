//! The one error catalogue of the cova API.
//!
//! Every machine code is declared exactly once, with its HTTP status and a default message.
//! Codes are part of the public API: never rename or reuse one. The catalogue knows no web
//! framework: the gateway renders [`ApiError`] as an HTTP answer, and workers use the same
//! codes for the errors they store on failed jobs.

use serde::Serialize;
use std::fmt;

macro_rules! catalogue {
    ($( $variant:ident => ($status:literal, $code:literal, $message:literal) ),* $(,)?) => {
        /// Machine-readable error codes, each with its HTTP status.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode { $( $variant ),* }

        impl ErrorCode {
            /// Every code, in catalogue order.
            pub const ALL: &'static [ErrorCode] = &[ $( ErrorCode::$variant ),* ];

            pub const fn as_str(self) -> &'static str {
                match self { $( ErrorCode::$variant => $code ),* }
            }

            pub const fn status_u16(self) -> u16 {
                match self { $( ErrorCode::$variant => $status ),* }
            }

            /// The message used when the caller has nothing more specific to say.
            pub const fn default_message(self) -> &'static str {
                match self { $( ErrorCode::$variant => $message ),* }
            }
        }
    };
}

catalogue! {
    // From the interface specification's error table.
    Unauthorized => (401, "unauthorized", "Missing, revoked or invalid token. Send it as `Authorization: Bearer <token>`."),
    ForbiddenScope => (403, "forbidden_scope", "The token lacks the scope this endpoint requires."),
    QuotaExceeded => (402, "quota_exceeded", "No comments are left on this month's balance."),
    PaymentRequired => (402, "payment_required", "This feature needs a comment pack for the current month."),
    RateLimited => (429, "rate_limited", "Request limit exceeded; retry after the number of seconds in Retry-After."),
    ConcurrencyLimit => (429, "concurrency_limit", "The account's limit of analyses running at once is reached."),
    ValidationError => (400, "validation_error", "The request is invalid."),
    AudienceRestricted => (422, "audience_restricted", "The author restricted the post's audience."),
    ParseError => (502, "parse_error", "The post data could not be fetched."),
    NotFound => (404, "not_found", "Not found."),
    // Added by the product decisions.
    MethodNotAllowed => (405, "method_not_allowed", "This method is not allowed on this path."),
    IdempotencyConflict => (409, "idempotency_conflict", "This Idempotency-Key was already used with a different request."),
    TokenLimit => (409, "token_limit", "This account already has its maximum of active tokens; revoke one first."),
    CreatorLimit => (409, "creator_limit", "This account already follows its maximum of creators; remove one first."),
    RunInProgress => (409, "run_in_progress", "A listing of this creator is running; its posts appear when it ends."),
    PayloadTooLarge => (413, "payload_too_large", "The request body is too large."),
    InternalError => (500, "internal_error", "Internal error. It has been logged; retry later."),
    Unavailable => (503, "unavailable", "A backend service is unavailable; retry later."),
    RequestTimeout => (408, "request_timeout", "The request was not received in time; send it again."),
    HeadersTooLarge => (431, "headers_too_large", "The request headers are too large."),
    RangeNotSatisfiable => (416, "range_not_satisfiable", "The requested byte range is outside the file."),
    // The workspace (cookie sessions).
    CsrfFailed => (403, "csrf_failed", "A request with the session cookie needs the X-CSRF-Token header of the session and must come from the workspace's own origin."),
    SessionRequired => (403, "session_required", "This endpoint is only for the workspace's cookie session, not for tokens."),
    PaymentRefused => (502, "payment_refused", "The payment provider refused to open the checkout."),
    EmailUnconfirmed => (403, "email_unconfirmed", "Confirm the account's e-mail address first."),
}

impl ErrorCode {
    /// The code named `code`, if the catalogue has it (e.g. one stored on a failed job).
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.as_str() == code)
    }

    pub const fn is_client_error(self) -> bool {
        self.status_u16() < 500
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The JSON body of every error answer.
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a> {
    pub detail: &'a str,
    pub code: &'a str,
}

/// An error as the API answers it: a code, a message safe to show, and optional headers.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: ErrorCode,
    pub detail: String,
    /// Seconds for `Retry-After` (always sent on 429 and 503).
    pub retry_after: Option<u64>,
    /// Extra headers such as `X-RateLimit-*` that belong to the failed answer.
    pub headers: Vec<(&'static str, String)>,
}

impl ApiError {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        let retry_after = match code {
            ErrorCode::RateLimited | ErrorCode::ConcurrencyLimit | ErrorCode::Unavailable => Some(1),
            _ => None,
        };
        Self { code, detail: detail.into(), retry_after, headers: Vec::new() }
    }

    /// The code with its catalogue message.
    pub fn of(code: ErrorCode) -> Self {
        Self::new(code, code.default_message())
    }

    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds.max(1));
        self
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn validation(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::ValidationError, detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, detail)
    }

    /// A backend is down: 503 with a short Retry-After. The cause is logged by the caller, never shown.
    pub fn unavailable() -> Self {
        Self::of(ErrorCode::Unavailable).with_retry_after(5)
    }

    pub fn internal() -> Self {
        Self::of(ErrorCode::InternalError)
    }

    pub const fn status(&self) -> u16 {
        self.code.status_u16()
    }

    /// The answer's body, `{detail, code}`.
    pub fn body(&self) -> ErrorBody<'_> {
        ErrorBody { detail: &self.detail, code: self.code.as_str() }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.detail)
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_code_is_unique_and_has_an_error_status() {
        let mut seen = HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "duplicate code {code}");
            assert!((400..600).contains(&code.status_u16()), "{code}");
            assert_eq!(ErrorCode::parse(code.as_str()), Some(*code));
        }
        assert_eq!(seen.len(), ErrorCode::ALL.len());
    }

    #[test]
    fn spec_table_statuses() {
        let expect = [
            ("unauthorized", 401),
            ("forbidden_scope", 403),
            ("quota_exceeded", 402),
            ("payment_required", 402),
            ("rate_limited", 429),
            ("concurrency_limit", 429),
            ("validation_error", 400),
            ("audience_restricted", 422),
            ("parse_error", 502),
            ("not_found", 404),
        ];
        for (code, status) in expect {
            let found = ErrorCode::ALL.iter().find(|c| c.as_str() == code).expect("code in catalogue");
            assert_eq!(found.status_u16(), status, "{code}");
        }
    }

    #[test]
    fn limits_and_outages_carry_retry_after() {
        assert_eq!(ApiError::of(ErrorCode::RateLimited).with_retry_after(7).retry_after, Some(7));
        assert_eq!(ApiError::of(ErrorCode::Unavailable).retry_after, Some(1));
        assert_eq!(ApiError::of(ErrorCode::NotFound).retry_after, None);
        assert_eq!(ApiError::of(ErrorCode::RateLimited).with_retry_after(0).retry_after, Some(1));
    }
}
