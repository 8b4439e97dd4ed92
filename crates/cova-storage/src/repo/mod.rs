//! Repository functions, one module per aggregate. Each is written once for both databases.

pub mod accounts;
pub mod ai;
pub mod alerts;
pub mod analyses;
pub mod balances;
pub mod batches;
pub mod breakdown;
pub mod channels;
pub mod comment_days;
pub mod creators;
pub mod deliveries;
pub mod email_links;
pub mod jobs;
pub mod keywords;
pub mod media;
pub mod outbox;
pub mod purchases;
pub mod queue_journal;
pub mod search;
pub mod sessions;
pub mod spikes;
pub mod tokens;
pub mod watches;

/// Opaque, time-ordered identifiers (UUIDv7), never sequential integers.
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}
