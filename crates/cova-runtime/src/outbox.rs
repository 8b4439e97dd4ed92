//! The outbox relay: publishes what transactions wrote to the outbox, then marks it sent.
//! Delivery is at least once (a crash between publish and mark repeats it); every consumer is
//! idempotent, and the message id is the outbox row id so duplicates are recognisable.

use crate::Backends;
use cova_queue::Message;
use cova_storage::clock::now_ms;
use cova_storage::repo::outbox::{self, OutboxMessage};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const BATCH: i64 = 100;
const POLL: Duration = Duration::from_millis(500);
/// Sent rows are kept a day for inspection, then deleted.
const KEEP_SENT_MS: i64 = 24 * 60 * 60 * 1000;

/// Runs until `stop` is cancelled. `wake` lets writers skip the poll delay.
pub async fn relay(backends: Backends, wake: Arc<Notify>, stop: CancellationToken) {
    let mut backoff = POLL;
    let mut rounds: u64 = 0;
    loop {
        match drain(&backends).await {
            Ok(()) => backoff = POLL,
            Err(e) => {
                tracing::warn!(error = %e, backoff_ms = backoff.as_millis() as u64, "outbox relay: publishing failed; will retry");
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
        rounds += 1;
        if rounds.is_multiple_of(600) {
            let _ = outbox::prune(&backends.db, now_ms() - KEEP_SENT_MS).await;
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = wake.notified() => {}
            _ = tokio::time::sleep(backoff) => {}
        }
    }
}

async fn drain(backends: &Backends) -> Result<(), String> {
    loop {
        let batch = outbox::pending(&backends.db, BATCH).await.map_err(|e| e.to_string())?;
        if batch.is_empty() {
            return Ok(());
        }
        for row in &batch {
            let message = to_message(row);
            let published = match row.destination.as_str() {
                "event" => backends.queue.publish_event(message).await,
                _ => backends.queue.publish(message).await,
            };
            published.map_err(|e| format!("{} {}: {e}", row.destination, row.routing_key))?;
            outbox::mark_sent(&backends.db, &row.id, now_ms()).await.map_err(|e| e.to_string())?;
        }
        if (batch.len() as i64) < BATCH {
            return Ok(());
        }
    }
}

fn to_message(row: &OutboxMessage) -> Message {
    let headers: BTreeMap<String, String> = serde_json::from_str(&row.headers).unwrap_or_default();
    Message {
        id: row.id.clone(),
        routing_key: row.routing_key.clone(),
        payload: row.payload.clone().into_bytes(),
        headers,
        attempt: 1,
    }
}
