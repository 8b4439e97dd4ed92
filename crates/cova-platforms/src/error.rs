//! The one error type of the platform layer, and the one place where a platform failure is
//! given its API error code: the gateway answers with it, the scraper stores it on failed jobs.

use cova_errors::{ApiError, ErrorCode};

/// A failure of a platform operation, with a detail an integrator can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlatformError {
    /// Not a URL, an unsupported platform, or a URL that does not point at a post.
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    /// The author restricted the audience (private, friends only, login required).
    #[error("audience restricted: {0}")]
    AudienceRestricted(String),
    /// The post data could not be fetched or understood (not found, deleted, blocked).
    #[error("parse error: {0}")]
    Parse(String),
    /// The creator (account, channel) does not exist.
    #[error("not found: {0}")]
    Missing(String),
    /// A transient failure persisted after all retries (or the platform quota is spent):
    /// retry later, never charge the caller.
    #[error("platform unavailable: {0}")]
    Unavailable(String),
    /// The request was never sent: its asker was answered or went away while it waited for its
    /// turn (a request that timed out, a client that hung up, a job that stopped). Nothing to
    /// charge; worth asking again.
    #[error("request abandoned: {0}")]
    Abandoned(String),
}

impl PlatformError {
    /// The API error code this failure is reported under.
    pub const fn code(&self) -> ErrorCode {
        match self {
            Self::InvalidUrl(_) => ErrorCode::ValidationError,
            Self::AudienceRestricted(_) => ErrorCode::AudienceRestricted,
            Self::Parse(_) => ErrorCode::ParseError,
            Self::Missing(_) => ErrorCode::NotFound,
            Self::Unavailable(_) | Self::Abandoned(_) => ErrorCode::Unavailable,
        }
    }

    /// Worth trying again later (the platform was down, blocked us or ran out of quota);
    /// every other failure is final for this post.
    pub const fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable(_) | Self::Abandoned(_))
    }

    /// The answer an API caller gets. A transient failure never shows platform internals and
    /// tells the caller when to come back.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            Self::Unavailable(_) | Self::Abandoned(_) => {
                ApiError::new(ErrorCode::Unavailable, "The platform cannot be reached right now; retry later.")
                    .with_retry_after(30)
            }
            other => ApiError::new(other.code(), other.detail()),
        }
    }

    /// The human-readable detail without the variant prefix.
    pub fn detail(&self) -> &str {
        match self {
            Self::InvalidUrl(d)
            | Self::AudienceRestricted(d)
            | Self::Parse(d)
            | Self::Missing(d)
            | Self::Unavailable(d)
            | Self::Abandoned(d) => d,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_api_table() {
        assert_eq!(PlatformError::InvalidUrl("x".into()).code().as_str(), "validation_error");
        assert_eq!(PlatformError::AudienceRestricted("x".into()).code().as_str(), "audience_restricted");
        assert_eq!(PlatformError::Parse("x".into()).code().as_str(), "parse_error");
        assert_eq!(PlatformError::Unavailable("x".into()).code().as_str(), "unavailable");
        assert_eq!(PlatformError::Parse("gone".into()).detail(), "gone");
        let api = PlatformError::Unavailable("proxy 10.0.0.3 refused".into()).to_api_error();
        assert!(!api.detail.contains("10.0.0.3"), "internals stay in the log");
        assert_eq!((api.status(), api.retry_after), (503, Some(30)));
        assert!(PlatformError::Unavailable(String::new()).is_transient());
        assert!(!PlatformError::Parse(String::new()).is_transient());
    }
}
