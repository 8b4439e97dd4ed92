//! Settings of the three backends (`database.*`, `queue.*`, `cache.*`); which backend a URL
//! picks is `backend.rs`'s business.

use crate::redact_url;
use serde::{Deserialize, Serialize};

#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `sqlite://<path>` (embedded) or `postgres://…`.
    pub url: String,
    pub pool_size: usize,
    /// How long a request waits for a pooled connection before answering 503.
    pub acquire_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    /// PostgreSQL `statement_timeout`; SQLite `busy_timeout`.
    pub statement_timeout_ms: u64,
    /// PostgreSQL: how long sent data may go unacknowledged, and an idle connection unanswered
    /// by keepalives, before the connection is given up (`TCP_USER_TIMEOUT`, TCP keepalives):
    /// a network partition is noticed within it instead of at the system's TCP timeout.
    pub io_timeout_ms: u64,
    /// PostgreSQL: the longest a request's read of the state it answers from (a poll,
    /// `/usage`, a token) waits for the database before answering from the kept copies; a
    /// read that takes longer marks the database unreachable.
    pub request_wait_ms: u64,
    /// PostgreSQL: while the database is marked unreachable, requests do not try it and a
    /// background probe tries it this often, marking it reachable again once it answers.
    pub probe_interval_ms: u64,
    /// The keys that seal stored secrets (webhook secrets, Telegram chat ids), base64 of 32
    /// bytes each, the current one first, older ones after it for reading. Required with
    /// PostgreSQL; on SQLite, empty means a key kept in `encryption.key` beside the database file.
    #[serde(skip_serializing)]
    pub encryption_keys: Option<secrecy::SecretString>,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: "sqlite://data/cova.db".into(),
            pool_size: 8,
            acquire_timeout_ms: 2_000,
            connect_timeout_ms: 1_000,
            statement_timeout_ms: 10_000,
            io_timeout_ms: 2_000,
            request_wait_ms: 500,
            probe_interval_ms: 500,
            encryption_keys: None,
        }
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    /// `memory://` (in-process) or `amqp://…`.
    pub url: String,
    /// Prefix of every exchange and queue name, so deployments (and tests) can share a broker.
    pub prefix: String,
    /// Unacknowledged messages a consumer holds at once.
    pub prefetch: u16,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self { url: "memory://".into(), prefix: "cova".into(), prefetch: 4 }
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// `memory://` (in-process) or `redis://…`.
    pub url: String,
    /// Prefix of every key, so deployments (and tests) can share a Redis.
    pub prefix: String,
    /// Bound on one cache round trip; a slower cache answers 503.
    pub timeout_ms: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self { url: "memory://".into(), prefix: "cova".into(), timeout_ms: 2_000 }
    }
}

/// Backend URLs may carry passwords: their `Debug` shows them redacted.
macro_rules! redacted_debug {
    ($ty:ident { $($field:ident),* }) => {
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("url", &redact_url(&self.url))
                    $(.field(stringify!($field), &self.$field))*
                    .finish()
            }
        }
    };
}
redacted_debug!(DatabaseConfig {
    pool_size,
    acquire_timeout_ms,
    connect_timeout_ms,
    statement_timeout_ms,
    io_timeout_ms,
    request_wait_ms,
    probe_interval_ms
});
redacted_debug!(QueueConfig { prefix, prefetch });
redacted_debug!(CacheConfig { prefix, timeout_ms });
