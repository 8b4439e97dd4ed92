//! Repository functions, one module per aggregate. Each is written once for both databases.

pub mod accounts;
pub mod balances;
pub mod jobs;
pub mod outbox;
pub mod tokens;

/// Opaque, time-ordered identifiers (UUIDv7), never sequential integers.
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}
