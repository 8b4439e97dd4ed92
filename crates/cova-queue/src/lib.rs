//! The job queue: publish with confirmation, consume with ack / delayed retry / dead-letter.
//!
//! Two implementations behind one interface, chosen by `queue.url`: an in-process queue for the
//! single-process embedded mode (`memory://`) and RabbitMQ (`amqp://`). Each worker role has its
//! own queue, `<prefix>.<role>`; commands are routed to it by the role name.

mod amqp;
mod memory;

use cova_config::{QueueBackend, QueueConfig};
use std::collections::BTreeMap;
use std::time::Duration;

/// The worker roles that consume commands.
pub const ROLES: [&str; 4] = ["scraper", "ai-worker", "scheduler", "notifier"];

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The broker is down or refused the message: callers answer 503 or retry later.
    #[error("queue unavailable: {0}")]
    Unavailable(String),
    #[error("no queue is bound for routing key `{0}`")]
    Unroutable(String),
}

pub type Result<T> = std::result::Result<T, QueueError>;

/// A message as delivered to a consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: String,
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

#[derive(Clone)]
pub enum Queue {
    Memory(memory::MemoryQueue),
    Amqp(amqp::AmqpQueue),
}

impl Queue {
    /// Connects and declares the topology. For RabbitMQ, a broker that is down only delays:
    /// publishing fails with `Unavailable` until the connection comes back.
    pub async fn connect(cfg: &QueueConfig) -> Result<Self> {
        match QueueBackend::parse(&cfg.url).map_err(|e| QueueError::Unavailable(e.to_string()))? {
            QueueBackend::Memory => Ok(Queue::Memory(memory::MemoryQueue::new(&ROLES))),
            QueueBackend::Amqp(url) => Ok(Queue::Amqp(amqp::AmqpQueue::new(url, cfg.prefix.clone(), cfg.prefetch))),
        }
    }

    pub fn backend_name(&self) -> &'static str {
        match self {
            Queue::Memory(_) => "memory",
            Queue::Amqp(_) => "rabbitmq",
        }
    }

    /// Publishes and waits for the broker's confirmation; an unroutable message is an error.
    pub async fn publish(&self, message: Message) -> Result<()> {
        match self {
            Queue::Memory(q) => q.publish(message),
            Queue::Amqp(q) => q.publish(message).await,
        }
    }

    /// Publishes an event (`job.complete`, …) to the events exchange; nobody needs to listen.
    pub async fn publish_event(&self, message: Message) -> Result<()> {
        match self {
            Queue::Memory(q) => {
                q.publish_event(message);
                Ok(())
            }
            Queue::Amqp(q) => q.publish_event(message).await,
        }
    }

    /// Receives every event published from now on (for outside consumers and tests).
    pub async fn subscribe_events(&self) -> Result<EventStream> {
        match self {
            Queue::Memory(q) => Ok(EventStream::Memory(q.subscribe_events())),
            Queue::Amqp(q) => q.subscribe_events().await.map(|e| EventStream::Amqp(Box::new(e))),
        }
    }

    /// Starts consuming the role's queue.
    pub async fn consume(&self, role: &str) -> Result<Consumer> {
        match self {
            Queue::Memory(q) => q.consume(role).map(Consumer::Memory),
            Queue::Amqp(q) => q.consume(role).await.map(Consumer::Amqp),
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
            Delivery::Memory(_) => Ok(()),
            Delivery::Amqp(d) => d.ack().await,
        }
    }

    /// Transient failure: deliver again after `delay` with `attempt + 1`.
    pub async fn retry(self, delay: Duration) -> Result<()> {
        match self {
            Delivery::Memory(d) => d.retry(delay),
            Delivery::Amqp(d) => d.retry(delay).await,
        }
    }

    /// Poison or out of attempts: park it in the role's dead-letter queue.
    pub async fn dead_letter(self, reason: &str) -> Result<()> {
        match self {
            Delivery::Memory(d) => d.dead_letter(reason),
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
