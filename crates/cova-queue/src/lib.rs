//! The queue: commands to worker roles and events for whoever listens, each consumed with
//! manual acks, delayed retries and a dead-letter queue.
//!
//! Two implementations behind one interface, chosen by `queue.url`: an in-process queue for the
//! single-process embedded mode (`memory://`) and RabbitMQ (`amqp://`).
//!
//! Names (all under `queue.prefix`):
//! - exchange `<prefix>.commands` (direct): routing key = role; queue `<prefix>.<role>`.
//! - exchange `<prefix>.events` (topic): routing key = event type. `subscribe_events` gives a
//!   private stream of what is published from now on; `consume_events(name, bindings)` a
//!   durable queue `<prefix>.<name>` that keeps what is published while its consumer is away.
//! - every consumed queue `q` has retry queues `q.retry.<tier>` (one fixed TTL each, expiring
//!   back into `q`) and a dead-letter queue `q.dead`.

mod amqp;
mod memory;
mod topic;

use cova_config::{QueueBackend, QueueConfig};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::time::Duration;

pub use topic::topic_matches;

/// Retry delays are rounded up to one of these tiers. Each tier is its own queue with a fixed
/// TTL: with a per-message TTL in one queue, a long delay at the head holds back short ones.
pub const RETRY_TIERS: [Duration; 12] = [
    Duration::from_millis(100),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(5),
    Duration::from_secs(10),
    Duration::from_secs(30),
    Duration::from_secs(60),
    Duration::from_secs(120),
    Duration::from_secs(300),
    Duration::from_secs(600),
    Duration::from_secs(1_800),
    Duration::from_secs(3_600),
];

/// The tier a delay is parked in: the shortest that is not shorter than it (the longest
/// for anything beyond).
pub fn retry_tier(delay: Duration) -> Duration {
    RETRY_TIERS.into_iter().find(|t| *t >= delay).unwrap_or(RETRY_TIERS[RETRY_TIERS.len() - 1])
}

/// The tier a deferred message is parked in: the longest that is not longer than the delay
/// (the shortest for anything below it), so that a message waiting for a moment (a lease's
/// end) comes back no later than that moment, and waits again for what is left.
pub fn defer_tier(delay: Duration) -> Duration {
    RETRY_TIERS.into_iter().rev().find(|t| *t <= delay).unwrap_or(RETRY_TIERS[0])
}

fn tier_label(tier: Duration) -> String {
    match tier.as_millis() {
        ms if ms < 1_000 => format!("{ms}ms"),
        ms if ms < 60_000 => format!("{}s", ms / 1_000),
        ms if ms < 3_600_000 => format!("{}m", ms / 60_000),
        ms => format!("{}h", ms / 3_600_000),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The broker is down or refused the message: callers answer 503 or retry later.
    #[error("queue unavailable: {0}")]
    Unavailable(String),
    /// No queue is bound for this routing key: the message itself cannot be delivered.
    #[error("no queue is bound for routing key `{0}`")]
    Unroutable(String),
}

impl QueueError {
    /// True when the broker (not the message) is the problem.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, QueueError::Unavailable(_))
    }
}

pub type Result<T> = std::result::Result<T, QueueError>;

/// A message as published or delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: String,
    /// The role of a command, the type of an event.
    pub routing_key: String,
    pub payload: Vec<u8>,
    /// String headers, e.g. W3C `traceparent`.
    pub headers: BTreeMap<String, String>,
    /// 1 on first delivery; incremented by every [`Delivery::retry`].
    pub attempt: u32,
}

impl Message {
    pub fn new(routing_key: &str, payload: Vec<u8>) -> Self {
        Self {
            id: uuid::Uuid::now_v7().to_string(),
            routing_key: routing_key.to_owned(),
            payload,
            headers: BTreeMap::new(),
            attempt: 1,
        }
    }
}

/// Where the in-process queue keeps what it holds, so that a restart of the embedded process
/// loses nothing (cova keeps it in the embedded database): a message is put before it is
/// handed to its queue, put again when it is retried, deleted once acknowledged.
pub trait Journal: Send + Sync + 'static {
    fn put<'a>(&'a self, queue: &'a str, message: &'a Message) -> BoxFuture<'a, Result<()>>;
    fn delete<'a>(&'a self, queue: &'a str, id: &'a str) -> BoxFuture<'a, Result<()>>;
    /// Everything kept, as (queue, message), oldest first.
    fn load(&self) -> BoxFuture<'_, Result<Vec<(String, Message)>>>;
}

/// Which queue a consumer reads, by its name under the prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Binding {
    /// `<prefix>.<role>`, bound to the commands exchange with the role as key.
    Role(String),
    /// `<prefix>.<name>`, bound to the events exchange with these topic patterns.
    Events { name: String, patterns: Vec<String> },
}

impl Binding {
    pub(crate) fn name(&self) -> &str {
        match self {
            Binding::Role(role) => role,
            Binding::Events { name, .. } => name,
        }
    }
}

#[derive(Clone)]
pub enum Queue {
    Memory(memory::MemoryQueue),
    Amqp(amqp::AmqpQueue),
}

impl Queue {
    /// Connects lazily and declares the topology, with a queue for each of `roles` so that
    /// commands are routable before their consumers start. For RabbitMQ, a broker that is down
    /// only delays: publishing fails with `Unavailable` until the connection comes back.
    pub async fn connect(cfg: &QueueConfig, roles: &[&str]) -> Result<Self> {
        Self::connect_with(cfg, roles, &[]).await
    }

    /// As [`Queue::connect`], also declaring durable event queues `(name, patterns)`, so that
    /// events published before their consumer first starts wait for it.
    pub async fn connect_with(cfg: &QueueConfig, roles: &[&str], event_queues: &[(&str, &[&str])]) -> Result<Self> {
        let mut bindings: Vec<Binding> = roles.iter().map(|r| Binding::Role((*r).to_owned())).collect();
        bindings.extend(event_queues.iter().map(|(name, patterns)| Binding::Events {
            name: (*name).to_owned(),
            patterns: patterns.iter().map(|p| (*p).to_owned()).collect(),
        }));
        match QueueBackend::parse(&cfg.url).map_err(|e| QueueError::Unavailable(e.to_string()))? {
            QueueBackend::Memory => Ok(Queue::Memory(memory::MemoryQueue::new(&bindings))),
            QueueBackend::Amqp(url) => {
                Ok(Queue::Amqp(amqp::AmqpQueue::new(url, cfg.prefix.clone(), cfg.prefetch, bindings)))
            }
        }
    }

    /// An in-process queue that keeps its messages in `journal` from now on; a broker keeps
    /// its own, so other queues are returned as they are.
    pub fn with_journal(self, journal: std::sync::Arc<dyn Journal>) -> Self {
        match self {
            Queue::Memory(q) => Queue::Memory(q.with_journal(journal)),
            other => other,
        }
    }

    /// Hands what a previous run of the process left in the journal back to its queues (the
    /// in-process queue only); returns how many messages.
    pub async fn restore(&self) -> Result<usize> {
        match self {
            Queue::Memory(q) => q.restore().await,
            Queue::Amqp(_) => Ok(0),
        }
    }

    pub fn backend_name(&self) -> &'static str {
        match self {
            Queue::Memory(_) => "memory",
            Queue::Amqp(_) => "rabbitmq",
        }
    }

    /// Publishes a command to its role's queue and waits for the broker's confirmation; an
    /// unroutable command is an error.
    pub async fn publish(&self, message: Message) -> Result<()> {
        let key = message.routing_key.clone();
        match self {
            Queue::Memory(q) => q.publish(message).await,
            Queue::Amqp(q) => q.publish(message).await,
        }?;
        cova_metrics::queue_published(&key);
        Ok(())
    }

    /// Publishes an event (`job.complete`, …) to the events exchange; nobody needs to listen.
    pub async fn publish_event(&self, message: Message) -> Result<()> {
        let key = message.routing_key.clone();
        match self {
            Queue::Memory(q) => q.publish_event(message).await?,
            Queue::Amqp(q) => q.publish_event(message).await?,
        }
        cova_metrics::queue_published(&key);
        Ok(())
    }

    /// Receives every event published from now on, without acks (tests and tools).
    pub async fn subscribe_events(&self) -> Result<EventStream> {
        match self {
            Queue::Memory(q) => Ok(EventStream::Memory(q.subscribe_events())),
            Queue::Amqp(q) => q.subscribe_events().await.map(|e| EventStream::Amqp(Box::new(e))),
        }
    }

    /// Starts consuming the role's command queue.
    pub async fn consume(&self, role: &str) -> Result<Consumer> {
        self.consume_binding(Binding::Role(role.to_owned())).await
    }

    /// Starts consuming the durable event queue `<prefix>.<name>`, bound to the events whose
    /// routing key matches one of `patterns` (`*` one word, `#` any number). Events published
    /// while its consumer is away wait in the queue.
    pub async fn consume_events(&self, name: &str, patterns: &[&str]) -> Result<Consumer> {
        let patterns = patterns.iter().map(|p| (*p).to_owned()).collect();
        self.consume_binding(Binding::Events { name: name.to_owned(), patterns }).await
    }

    async fn consume_binding(&self, binding: Binding) -> Result<Consumer> {
        match self {
            Queue::Memory(q) => Ok(Consumer::Memory(q.consume(&binding))),
            Queue::Amqp(q) => q.consume(binding).await.map(Consumer::Amqp),
        }
    }

    /// Messages waiting in the queue of a role or an event queue (not yet delivered).
    pub async fn depth(&self, name: &str) -> Result<u64> {
        match self {
            Queue::Memory(q) => Ok(q.depth(name)),
            Queue::Amqp(q) => q.depth(name).await,
        }
    }

    /// Messages parked in the dead-letter queue of a role or an event queue.
    pub async fn dead_letter_count(&self, name: &str) -> Result<u64> {
        match self {
            Queue::Memory(q) => Ok(q.dead_letters(name).len() as u64),
            Queue::Amqp(q) => q.dead_letter_count(name).await,
        }
    }

    pub async fn ping(&self) -> Result<()> {
        match self {
            Queue::Memory(_) => Ok(()),
            Queue::Amqp(q) => q.ping().await,
        }
    }

    /// Removes this prefix's queues and exchanges from the broker (tests, decommissioning).
    pub async fn teardown(&self) -> Result<()> {
        match self {
            Queue::Memory(_) => Ok(()),
            Queue::Amqp(q) => q.teardown().await,
        }
    }
}

pub enum Consumer {
    Memory(memory::MemoryConsumer),
    Amqp(amqp::AmqpConsumer),
}

impl Consumer {
    /// The next delivery; `None` once the queue is closed.
    pub async fn next(&mut self) -> Option<Delivery> {
        match self {
            Consumer::Memory(c) => c.next().await.map(Delivery::Memory),
            Consumer::Amqp(c) => c.next().await.map(Delivery::Amqp),
        }
    }
}

pub enum Delivery {
    Memory(memory::MemoryDelivery),
    Amqp(amqp::AmqpDelivery),
}

impl Delivery {
    pub fn message(&self) -> &Message {
        match self {
            Delivery::Memory(d) => &d.message,
            Delivery::Amqp(d) => &d.message,
        }
    }

    /// Done: call only after the effect is committed.
    pub async fn ack(self) -> Result<()> {
        match self {
            Delivery::Memory(d) => d.ack().await,
            Delivery::Amqp(d) => d.ack().await,
        }
    }

    /// Transient failure: deliver again after `delay` (rounded up to its [`retry_tier`]) with
    /// `attempt + 1`.
    pub async fn retry(self, delay: Duration) -> Result<()> {
        let tier = retry_tier(delay);
        match self {
            Delivery::Memory(d) => d.requeue(tier, true).await,
            Delivery::Amqp(d) => d.requeue(tier, true).await,
        }
    }

    /// Not this message's failure (the job is held by another worker, cova's database is
    /// away): deliver it again after about `delay` (rounded down to its [`defer_tier`]) with
    /// the same attempt number.
    pub async fn defer(self, delay: Duration) -> Result<()> {
        let tier = defer_tier(delay);
        match self {
            Delivery::Memory(d) => d.requeue(tier, false).await,
            Delivery::Amqp(d) => d.requeue(tier, false).await,
        }
    }

    /// Poison or out of attempts: park it in the queue's dead-letter queue.
    pub async fn dead_letter(self, reason: &str) -> Result<()> {
        match self {
            Delivery::Memory(d) => d.dead_letter(reason).await,
            Delivery::Amqp(d) => d.dead_letter(reason).await,
        }
    }
}

pub enum EventStream {
    Memory(tokio::sync::broadcast::Receiver<Message>),
    Amqp(Box<amqp::AmqpEvents>),
}

impl EventStream {
    /// The next event; `None` once the stream is closed.
    pub async fn next(&mut self) -> Option<Message> {
        match self {
            EventStream::Memory(rx) => loop {
                match rx.recv().await {
                    Ok(m) => return Some(m),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            },
            EventStream::Amqp(e) => e.next().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_round_up_to_their_tier() {
        assert_eq!(retry_tier(Duration::from_millis(20)), Duration::from_millis(100));
        assert_eq!(retry_tier(Duration::from_secs(1)), Duration::from_secs(1));
        assert_eq!(retry_tier(Duration::from_secs(2)), Duration::from_secs(2));
        assert_eq!(retry_tier(Duration::from_secs(3)), Duration::from_secs(5));
        // The scraper's default backoff (2 s doubling) lands on 2, 5, 10, 30 s.
        let scraper: Vec<u64> = [2, 4, 8, 16].iter().map(|s| retry_tier(Duration::from_secs(*s)).as_secs()).collect();
        assert_eq!(scraper, [2, 5, 10, 30]);
        assert_eq!(retry_tier(Duration::from_secs(86_400)), Duration::from_secs(3_600));
        let labels: Vec<String> = RETRY_TIERS.iter().map(|t| tier_label(*t)).collect();
        assert_eq!(labels, ["100ms", "1s", "2s", "5s", "10s", "30s", "1m", "2m", "5m", "10m", "30m", "1h"]);
    }

    #[test]
    fn deferrals_round_down_to_their_tier() {
        let ms = Duration::from_millis;
        assert_eq!(defer_tier(ms(1_500)), ms(1_000));
        assert_eq!(defer_tier(ms(14_000)), ms(10_000));
        assert_eq!(defer_tier(ms(10)), ms(100), "never below the shortest tier");
        assert_eq!(defer_tier(Duration::from_secs(10_000)), Duration::from_secs(3_600));
    }
}
