//! Backends are picked by URL scheme, never by code edits.

use crate::{ConfigError, invalid};
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseBackend {
    Sqlite(PathBuf),
    Postgres(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueBackend {
    Memory,
    Amqp(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheBackend {
    Memory,
    Redis(String),
}

impl DatabaseBackend {
    pub fn parse(url: &str) -> Result<Self, ConfigError> {
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err(invalid("database.url", "sqlite:// needs a file path, e.g. sqlite://data/cova.db"));
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres(url.to_owned()));
        }
        Err(invalid("database.url", format!("`{}` must start with sqlite:// or postgres://", redact_url(url))))
    }
}

impl QueueBackend {
    pub fn parse(url: &str) -> Result<Self, ConfigError> {
        match url {
            "memory://" | "memory" => Ok(Self::Memory),
            u if u.starts_with("amqp://") || u.starts_with("amqps://") => Ok(Self::Amqp(u.to_owned())),
            u => Err(invalid("queue.url", format!("`{}` must be memory:// or start with amqp://", redact_url(u)))),
        }
    }
}

impl CacheBackend {
    pub fn parse(url: &str) -> Result<Self, ConfigError> {
        match url {
            "memory://" | "memory" => Ok(Self::Memory),
            u if u.starts_with("redis://") || u.starts_with("rediss://") => Ok(Self::Redis(u.to_owned())),
            u => Err(invalid("cache.url", format!("`{}` must be memory:// or start with redis://", redact_url(u)))),
        }
    }
}

/// The URL with any password replaced, safe for logs and error messages.
pub fn redact_url(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        Ok(u) => u.to_string(),
        Err(_) => raw.split('@').next_back().unwrap_or_default().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_printed() {
        assert_eq!(redact_url("postgres://cova:s3cret@db:5432/cova"), "postgres://cova:***@db:5432/cova");
        assert!(!redact_url("amqp://guest:guest@mq/%2f").contains("guest@"));
    }

    #[test]
    fn schemes() {
        assert_eq!(
            DatabaseBackend::parse("sqlite://data/x.db").expect("sqlite"),
            DatabaseBackend::Sqlite(PathBuf::from("data/x.db"))
        );
        assert!(matches!(QueueBackend::parse("amqp://h"), Ok(QueueBackend::Amqp(_))));
        assert!(matches!(CacheBackend::parse("memory://"), Ok(CacheBackend::Memory)));
    }
}
