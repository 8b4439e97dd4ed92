//! Exit codes of `cova client`, one per class of error, so that a script can branch on `$?`.
//!
//! | Code | Class | When |
//! |---|---|---|
//! | 0 | success | The command did what it was asked. |
//! | 1 | other | Anything else: the output file cannot be written, the client config file is malformed, an answer that is not what the API documents. |
//! | 2 | usage | Bad arguments (clap's convention), a `--url` that is not an `http(s)` URL, options that do not go together. |
//! | 3 | authentication | No token, a malformed token, 401 `unauthorized`, 403 `forbidden_scope`. |
//! | 4 | bad input or not found | 400, 404, 405, 409, 413, 415, 416, 422, 431; `validation_error`, `not_found`, `audience_restricted`, `parse_error` (the post cannot be read: deleted, missing, blocked). |
//! | 5 | balance or quota | 402 `quota_exceeded` / `payment_required`, 429 `rate_limited` / `concurrency_limit`, an AI charge over `--max-charge`. |
//! | 6 | job failed | The analyze or AI job ended `failed`. |
//! | 7 | unavailable | 503 `unavailable`, 500 `internal_error`, 408 and other 5xx, connection errors, timeouts, an answer cut short. |
//!
//! The `code` of the `{detail, code}` error body decides when it is a known code; otherwise the
//! HTTP status does.

use std::process::ExitCode;

/// The exit code of `cova client`; see the module's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    Other = 1,
    Usage = 2,
    Auth = 3,
    Input = 4,
    Balance = 5,
    JobFailed = 6,
    Unavailable = 7,
}

impl Exit {
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The class of an error answer: its machine `code` when it is one of the catalogue's,
    /// else its HTTP `status`.
    pub fn from_answer(status: u16, code: Option<&str>) -> Self {
        use cova_errors::ErrorCode as E;
        // Every code of the catalogue has its class here: a new code cannot be forgotten.
        match code.and_then(E::parse) {
            Some(E::Unauthorized | E::ForbiddenScope | E::CsrfFailed | E::SessionRequired | E::EmailUnconfirmed) => {
                Exit::Auth
            }
            Some(
                E::ValidationError
                | E::NotFound
                | E::MethodNotAllowed
                | E::IdempotencyConflict
                | E::TokenLimit
                | E::CreatorLimit
                | E::PayloadTooLarge
                | E::HeadersTooLarge
                | E::RangeNotSatisfiable
                | E::AudienceRestricted
                | E::ParseError,
            ) => Exit::Input,
            Some(E::QuotaExceeded | E::PaymentRequired | E::RateLimited | E::ConcurrencyLimit) => Exit::Balance,
            Some(E::Unavailable | E::InternalError | E::RequestTimeout | E::PaymentRefused | E::RunInProgress) => {
                Exit::Unavailable
            }
            None => match status {
                401 | 403 => Exit::Auth,
                400 | 404 | 405 | 409 | 413 | 415 | 416 | 422 | 431 => Exit::Input,
                402 | 429 => Exit::Balance,
                408 | 500..=599 => Exit::Unavailable,
                _ => Exit::Other,
            },
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit.code())
    }
}

/// The exit code for an error that ended the binary: a client error's class, else 1.
pub fn exit_code(error: &anyhow::Error) -> ExitCode {
    class(error).into()
}

fn class(error: &anyhow::Error) -> Exit {
    error.downcast_ref::<super::ClientError>().map_or(Exit::Other, |e| e.exit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_documented_numbers() {
        let all = [
            (Exit::Success, 0),
            (Exit::Other, 1),
            (Exit::Usage, 2),
            (Exit::Auth, 3),
            (Exit::Input, 4),
            (Exit::Balance, 5),
            (Exit::JobFailed, 6),
            (Exit::Unavailable, 7),
        ];
        for (exit, code) in all {
            assert_eq!(exit.code(), code, "{exit:?}");
        }
    }

    #[test]
    fn every_catalogue_code_has_its_class() {
        let cases = [
            (401, "unauthorized", Exit::Auth),
            (403, "forbidden_scope", Exit::Auth),
            (402, "quota_exceeded", Exit::Balance),
            (402, "payment_required", Exit::Balance),
            (429, "rate_limited", Exit::Balance),
            (429, "concurrency_limit", Exit::Balance),
            (400, "validation_error", Exit::Input),
            (422, "audience_restricted", Exit::Input),
            (502, "parse_error", Exit::Input),
            (404, "not_found", Exit::Input),
            (405, "method_not_allowed", Exit::Input),
            (409, "idempotency_conflict", Exit::Input),
            (409, "token_limit", Exit::Input),
            (413, "payload_too_large", Exit::Input),
            (408, "request_timeout", Exit::Unavailable),
            (431, "headers_too_large", Exit::Input),
            (416, "range_not_satisfiable", Exit::Input),
            (500, "internal_error", Exit::Unavailable),
            (503, "unavailable", Exit::Unavailable),
        ];
        for (status, code, exit) in cases {
            assert_eq!(Exit::from_answer(status, Some(code)), exit, "{status} {code}");
        }
    }

    #[test]
    fn without_a_known_code_the_status_decides() {
        let cases = [
            (401, Exit::Auth),
            (403, Exit::Auth),
            (400, Exit::Input),
            (404, Exit::Input),
            (405, Exit::Input),
            (409, Exit::Input),
            (413, Exit::Input),
            (415, Exit::Input),
            (416, Exit::Input),
            (422, Exit::Input),
            (402, Exit::Balance),
            (429, Exit::Balance),
            (408, Exit::Unavailable),
            (500, Exit::Unavailable),
            (502, Exit::Unavailable),
            (503, Exit::Unavailable),
            (504, Exit::Unavailable),
            (418, Exit::Other),
            (302, Exit::Other),
        ];
        for (status, exit) in cases {
            assert_eq!(Exit::from_answer(status, None), exit, "{status}");
            assert_eq!(Exit::from_answer(status, Some("a_future_code")), exit, "{status} with an unknown code");
        }
    }

    #[test]
    fn a_client_error_inside_anyhow_keeps_its_class() {
        let error = anyhow::Error::from(super::super::ClientError::new(Exit::JobFailed, "job failed"));
        assert_eq!(class(&error), Exit::JobFailed);
        let wrapped = error.context("while waiting");
        assert_eq!(class(&wrapped), Exit::JobFailed, "context keeps the class");
        assert_eq!(class(&anyhow::anyhow!("disk full")), Exit::Other);
    }
}
