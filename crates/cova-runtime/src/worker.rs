//! The worker runtime: the one consumer loop behind every queue-consuming role.
//!
//! A role is a [`Handler`]: which queue it reads ([`Source`]), how many messages it works on
//! at once, and what one message does. The runtime connects (with backoff while the broker
//! is away), decodes each delivery (a body that does not decode is poison), runs the handler in
//! the trace of the message, and then acknowledges, retries with backoff or dead-letters by the
//! handler's [`Outcome`]. A handler returns only after its effects are committed, so the ack
//! never comes before the commit. On stop it takes no more deliveries and waits for the
//! running ones, saying how many.

use cova_messages::Command;
use cova_metrics::Settled;
use cova_queue::{Consumer, Delivery, Queue};
use serde::de::DeserializeOwned;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Where a role's messages come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The command queue of a role (`<prefix>.<role>`).
    Commands { role: &'static str },
    /// A durable queue `<prefix>.<name>` on the events exchange, bound with these patterns.
    Events { name: &'static str, patterns: &'static [&'static str] },
}

impl Source {
    /// The queue of the role that consumes `C`.
    pub fn commands<C: Command>() -> Self {
        Source::Commands { role: C::ROLE }
    }

    /// The queue's name under the prefix (its dead-letter queue is `<name>.dead`).
    pub fn queue_name(&self) -> &'static str {
        match self {
            Source::Commands { role } => role,
            Source::Events { name, .. } => name,
        }
    }

    async fn consume(&self, queue: &Queue) -> cova_queue::Result<Consumer> {
        match self {
            Source::Commands { role } => queue.consume(role).await,
            Source::Events { name, patterns } => queue.consume_events(name, patterns).await,
        }
    }
}

/// What became of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Committed, or nothing to do (a duplicate): acknowledge.
    Done,
    /// Transient failure: deliver again after the handler's backoff, as the next attempt.
    Retry(String),
    /// Not this message's failure (its job is held by another worker until its lease ends,
    /// cova's database is away): deliver it again after about this long, spending no attempt.
    Wait(Duration, String),
    /// Can never be processed: park it in the dead-letter queue.
    Poison(String),
    /// Out of attempts; the handler recorded the failure: park it in the dead-letter queue.
    GaveUp(String),
}

/// About the delivery being handled.
#[derive(Debug, Clone)]
pub struct Delivered {
    pub message_id: String,
    /// 1 on the first delivery.
    pub attempt: u32,
}

/// One queue-consuming role.
pub trait Handler: Send + Sync + 'static {
    type Message: DeserializeOwned + Send + 'static;

    /// The role's name, in logs.
    fn name(&self) -> &'static str;
    fn source(&self) -> Source;
    /// Messages handled at once by this process.
    fn concurrency(&self) -> usize;
    /// The delay before the next delivery after a transient failure on `attempt`.
    fn retry_delay(&self, attempt: u32) -> Duration;
    /// Handles one message; returns once its effects are committed.
    fn handle(&self, message: Self::Message, delivery: Delivered) -> impl Future<Output = Outcome> + Send;
}

/// Exponential backoff: `base × 2^(attempt − 1)`, at most `max`.
pub fn backoff(base: Duration, attempt: u32, max: Duration) -> Duration {
    base.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1).min(16))).min(max)
}

/// Consumes the handler's queue until `stop` is cancelled, then drains.
pub async fn run<H: Handler>(backends: crate::Backends, handler: Arc<H>, stop: CancellationToken) {
    let (queue, progress) = (backends.queue, backends.progress);
    let name = handler.name();
    let source = handler.source();
    // A broker that is down at start only delays consuming.
    let mut wait = Duration::from_millis(500);
    let mut consumer = loop {
        match source.consume(&queue).await {
            Ok(c) => break c,
            Err(e) => {
                tracing::warn!(role = name, error = %e, retry_ms = wait.as_millis() as u64, "cannot consume yet; retrying");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
                wait = (wait * 2).min(Duration::from_secs(10));
            }
        }
    };
    let concurrency = handler.concurrency().max(1);
    let slots = Arc::new(Semaphore::new(concurrency));
    tracing::info!(role = name, queue = source.queue_name(), concurrency, "{name} consuming");
    loop {
        let permit = tokio::select! {
            _ = stop.cancelled() => break,
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
        };
        let delivery = tokio::select! {
            _ = stop.cancelled() => break,
            d = consumer.next() => match d { Some(d) => d, None => break },
        };
        let (handler, progress) = (handler.clone(), progress.clone());
        tokio::spawn(async move {
            handle_one(handler.as_ref(), delivery, &progress).await;
            drop(permit);
        });
    }
    // Unstarted deliveries go back to the broker with the consumer.
    drop(consumer);
    let running = concurrency - slots.available_permits();
    if running > 0 {
        tracing::info!(role = name, running, "{name} stopping: waiting for {running} running job(s) to reach a commit");
    }
    let _ = slots.acquire_many(concurrency as u32).await;
    tracing::info!(role = name, "{name} stopped");
}

async fn handle_one<H: Handler>(handler: &H, delivery: Delivery, progress: &crate::Progress) {
    let message = delivery.message();
    let attempt = message.attempt;
    let span = tracing::info_span!("message", role = handler.name(), message.id = %message.id, attempt);
    cova_telemetry::follow(&span, &message.headers);
    let outcome = match serde_json::from_slice::<H::Message>(&message.payload) {
        Ok(body) => {
            let delivered = Delivered { message_id: message.id.clone(), attempt };
            tracing::Instrument::instrument(handler.handle(body, delivered), span.clone()).await
        }
        Err(e) => Outcome::Poison(format!("malformed {} message: {e}", handler.name())),
    };
    // The span is entered by instrumenting what follows, never by a guard held across
    // an await (the task may resume on another thread).
    let end = async {
        let queue = handler.source().queue_name();
        let how = match outcome {
            Outcome::Done => Settled::Acked,
            Outcome::Retry(_) | Outcome::Wait(..) => Settled::Retried,
            Outcome::Poison(_) | Outcome::GaveUp(_) => Settled::DeadLettered,
        };
        let settled = match outcome {
            Outcome::Done => delivery.ack().await,
            Outcome::Retry(reason) => {
                let delay = handler.retry_delay(attempt);
                tracing::info!(attempt, delay_ms = delay.as_millis() as u64, reason, "will be retried");
                delivery.retry(delay).await
            }
            Outcome::Wait(delay, reason) => {
                tracing::debug!(attempt, delay_ms = delay.as_millis() as u64, reason, "will be delivered again");
                delivery.defer(delay).await
            }
            Outcome::Poison(reason) => {
                tracing::error!(reason, "dead-lettered: the message cannot be processed");
                delivery.dead_letter(&reason).await
            }
            Outcome::GaveUp(reason) => {
                tracing::warn!(attempt, reason, "dead-lettered after the last attempt");
                delivery.dead_letter(&reason).await
            }
        };
        match settled {
            Ok(()) => {
                cova_metrics::queue_settled(queue, how);
                progress.note(&format!("settled:{queue}"));
            }
            // The broker redelivers an unacknowledged message; handlers are idempotent.
            Err(e) => tracing::warn!(error = %e, "settling the delivery failed; it will be redelivered"),
        }
    };
    tracing::Instrument::instrument(end, span).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_bound() {
        let base = Duration::from_millis(100);
        let max = Duration::from_secs(1);
        let delays: Vec<u128> = (1..=6).map(|a| backoff(base, a, max).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(backoff(base, 0, max), base);
        assert_eq!(backoff(base, u32::MAX, max), max);
    }
}
