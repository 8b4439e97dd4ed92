//! The outbox relay: publishes what transactions wrote to the outbox, then marks it sent.
//!
//! Delivery is at least once (a crash between publish and mark repeats it); every consumer is
//! idempotent, and the message id is the outbox row id so duplicates are recognisable. Relays
//! of several replicas claim disjoint batches. A row the broker refuses (unroutable, say) is
//! retried with backoff and parked after `outbox::MAX_ATTEMPTS`, while the relay goes on with
//! the rows behind it; a broker that is down stops the batch without counting against rows.

use crate::Backends;
use crate::periodic::{Pass, Periodic};
use crate::worker::backoff;
use cova_messages::Destination;
use cova_queue::Message;
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
const ROW_RETRY_BASE: Duration = Duration::from_secs(1);
const ROW_RETRY_MAX: Duration = Duration::from_secs(300);

/// Runs until `stop` is cancelled. `wake` lets writers skip the poll delay.
pub async fn relay(backends: Backends, wake: Arc<Notify>, stop: CancellationToken) {
    let pacing =
        Periodic { name: "outbox relay", period: POLL, wake: Some(wake), max_backoff: Duration::from_secs(10) };
    pacing.run(backends.progress.clone(), stop, Relay { backends, rounds: 0 }).await;
}

/// One relay's state between passes.
struct Relay {
    backends: Backends,
    rounds: u64,
}

impl Pass for Relay {
    async fn pass(&mut self) -> Result<(), String> {
        self.rounds += 1;
        if self.rounds.is_multiple_of(600) {
            let _ = outbox::prune(&self.backends.db, self.backends.clock.now_ms() - KEEP_SENT_MS).await;
        }
        drain(&self.backends).await
    }
}

/// Publishes every due row; `Err` when the broker or the database is unavailable.
async fn drain(backends: &Backends) -> Result<(), String> {
    loop {
        let batch = outbox::claim(&backends.db, BATCH, backends.clock.now_ms()).await.map_err(|e| e.to_string())?;
        if batch.is_empty() {
            return Ok(());
        }
        for (i, row) in batch.iter().enumerate() {
            match publish(backends, row).await {
                Ok(()) => outbox::mark_sent(&backends.db, &row.id, backends.clock.now_ms())
                    .await
                    .map_err(|e| e.to_string())?,
                Err(e) if e.is_unavailable() => {
                    let unsent: Vec<String> = batch[i..].iter().map(|r| r.id.clone()).collect();
                    if let Err(release) = outbox::release(&backends.db, &unsent).await {
                        tracing::debug!(error = %release, "releasing the claim failed; it expires by itself");
                    }
                    return Err(format!("{} {}: {e}", row.destination, row.routing_key));
                }
                Err(e) => {
                    let attempt = u32::try_from(row.attempts).unwrap_or(0) + 1;
                    let retry_in = backoff(ROW_RETRY_BASE, attempt, ROW_RETRY_MAX).as_millis() as i64;
                    let parked = outbox::record_failure(
                        &backends.db,
                        &row.id,
                        &e.to_string(),
                        retry_in,
                        backends.clock.now_ms(),
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                    if parked {
                        tracing::error!(outbox.id = %row.id, routing_key = %row.routing_key, attempt, error = %e, "outbox row parked after repeated failures; the relay goes on without it");
                    } else {
                        tracing::warn!(outbox.id = %row.id, routing_key = %row.routing_key, attempt, retry_in_ms = retry_in, error = %e, "outbox row not published; retrying later");
                    }
                }
            }
        }
        if (batch.len() as i64) < BATCH {
            return Ok(());
        }
    }
}

async fn publish(backends: &Backends, row: &OutboxMessage) -> cova_queue::Result<()> {
    // The publish is a span of the trace that wrote the row (the request, the job), and the
    // message carries this span on to its consumer.
    let stored: BTreeMap<String, String> = serde_json::from_str(&row.headers).unwrap_or_default();
    let span = tracing::info_span!("outbox_publish", otel.kind = "producer", routing_key = %row.routing_key, outbox.id = %row.id);
    cova_telemetry::follow(&span, &stored);
    let headers = if stored.is_empty() { stored } else { span.in_scope(cova_telemetry::current_trace_headers) };
    let message = Message {
        id: row.id.clone(),
        routing_key: row.routing_key.clone(),
        payload: row.payload.clone().into_bytes(),
        headers,
        attempt: 1,
    };
    let sent = async {
        match Destination::parse(&row.destination) {
            Some(Destination::Event) => backends.queue.publish_event(message).await,
            Some(Destination::Command) => backends.queue.publish(message).await,
            None => Err(cova_queue::QueueError::Unroutable(format!("destination `{}`", row.destination))),
        }
    };
    tracing::Instrument::instrument(sent, span).await
}
