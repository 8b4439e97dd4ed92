//! The one error type of the platform layer; each variant maps to one API error code.

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
    /// A transient failure persisted after all retries (or the platform quota is spent):
    /// retry later, never charge the caller.
    #[error("platform unavailable: {0}")]
    Unavailable(String),
}

impl PlatformError {
    /// The API error code this failure is reported under.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidUrl(_) => "validation_error",
            Self::AudienceRestricted(_) => "audience_restricted",
            Self::Parse(_) => "parse_error",
            Self::Unavailable(_) => "unavailable",
        }
    }

    /// The human-readable detail without the variant prefix.
    pub fn detail(&self) -> &str {
        match self {
            Self::InvalidUrl(d) | Self::AudienceRestricted(d) | Self::Parse(d) | Self::Unavailable(d) => d,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_api_table() {
        assert_eq!(PlatformError::InvalidUrl("x".into()).code(), "validation_error");
        assert_eq!(PlatformError::AudienceRestricted("x".into()).code(), "audience_restricted");
        assert_eq!(PlatformError::Parse("x".into()).code(), "parse_error");
        assert_eq!(PlatformError::Unavailable("x".into()).code(), "unavailable");
        assert_eq!(PlatformError::Parse("gone".into()).detail(), "gone");
    }
}
