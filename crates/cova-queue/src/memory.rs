//! In-process queue for the single-process embedded mode: one unbounded channel per role.

use crate::{Message, QueueError, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

struct RoleQueue {
    tx: mpsc::UnboundedSender<Message>,
    rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Message>>>,
}

#[derive(Clone)]
pub struct MemoryQueue {
    roles: Arc<HashMap<String, RoleQueue>>,
    dead: Arc<Mutex<Vec<(Message, String)>>>,
    events: tokio::sync::broadcast::Sender<Message>,
}

impl MemoryQueue {
    pub(crate) fn new(roles: &[&str]) -> Self {
        let roles = roles
            .iter()
            .map(|r| {
                let (tx, rx) = mpsc::unbounded_channel();
                ((*r).to_owned(), RoleQueue { tx, rx: Arc::new(tokio::sync::Mutex::new(rx)) })
            })
            .collect();
        let (events, _) = tokio::sync::broadcast::channel(1024);
        Self { roles: Arc::new(roles), dead: Arc::default(), events }
    }

    fn role(&self, key: &str) -> Result<&RoleQueue> {
        self.roles.get(key).ok_or_else(|| QueueError::Unroutable(key.to_owned()))
    }

    pub(crate) fn publish(&self, message: Message) -> Result<()> {
        self.role(&message.routing_key)?
            .tx
            .send(message)
            .map_err(|_| QueueError::Unavailable("in-process queue closed".into()))
    }

    pub(crate) fn publish_event(&self, message: Message) {
        // No subscriber is not an error: events are for whoever listens.
        let _ = self.events.send(message);
    }

    pub(crate) fn subscribe_events(&self) -> tokio::sync::broadcast::Receiver<Message> {
        self.events.subscribe()
    }

    pub(crate) fn consume(&self, role: &str) -> Result<MemoryConsumer> {
        let q = self.role(role)?;
        Ok(MemoryConsumer { rx: q.rx.clone(), queue: self.clone() })
    }

    /// Messages parked in dead-letter queues, with the reason (for operators and tests).
    pub fn dead_letters(&self) -> Vec<(Message, String)> {
        self.dead.lock().map(|d| d.clone()).unwrap_or_default()
    }
}

pub struct MemoryConsumer {
    rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Message>>>,
    queue: MemoryQueue,
}

impl MemoryConsumer {
    pub(crate) async fn next(&mut self) -> Option<MemoryDelivery> {
        let message = self.rx.lock().await.recv().await?;
        Some(MemoryDelivery { message, queue: self.queue.clone() })
    }
}

pub struct MemoryDelivery {
    pub(crate) message: Message,
    queue: MemoryQueue,
}

impl MemoryDelivery {
    pub(crate) fn retry(self, delay: Duration) -> Result<()> {
        let mut message = self.message;
        message.attempt += 1;
        let queue = self.queue;
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Err(e) = queue.publish(message) {
                tracing::error!(error = %e, "re-queueing a retried message failed");
            }
        });
        Ok(())
    }

    pub(crate) fn dead_letter(self, reason: &str) -> Result<()> {
        tracing::warn!(message.id = %self.message.id, reason, "message dead-lettered");
        if let Ok(mut dead) = self.queue.dead.lock() {
            dead.push((self.message, reason.to_owned()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn publish_consume_retry_dead_letter() {
        let q = MemoryQueue::new(&["scraper"]);
        assert!(matches!(q.publish(Message::new("nobody", vec![])), Err(QueueError::Unroutable(_))));
        q.publish(Message::new("scraper", b"one".to_vec())).expect("publish");
        let mut c = q.consume("scraper").expect("consumer");
        let d = c.next().await.expect("delivery");
        assert_eq!(d.message.payload, b"one");
        d.retry(Duration::from_millis(5)).expect("retry");
        let d = c.next().await.expect("redelivery");
        assert_eq!(d.message.attempt, 2);
        d.dead_letter("gave up").expect("dead letter");
        assert_eq!(q.dead_letters().len(), 1);
    }
}
