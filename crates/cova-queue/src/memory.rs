//! In-process queue for the single-process embedded mode: one unbounded channel per consumed
//! queue, commands routed by role, events by topic pattern, retries as timers, dead letters
//! kept in memory. Queues live as long as the process.

use crate::{Binding, Message, QueueError, Result, topic_matches};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::mpsc;

struct NamedQueue {
    binding: Binding,
    /// Sent and not yet received: the receiver is held by a waiting consumer, so its length
    /// cannot be read.
    waiting: Arc<AtomicU64>,
    tx: mpsc::UnboundedSender<Message>,
    rx: Receiver,
}

type Receiver = Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Message>>>;

#[derive(Default)]
struct State {
    queues: HashMap<String, NamedQueue>,
    dead: HashMap<String, Vec<(Message, String)>>,
}

#[derive(Clone)]
pub struct MemoryQueue {
    state: Arc<Mutex<State>>,
    events: tokio::sync::broadcast::Sender<Message>,
}

impl MemoryQueue {
    pub(crate) fn new(bindings: &[Binding]) -> Self {
        let (events, _) = tokio::sync::broadcast::channel(1024);
        let q = Self { state: Arc::default(), events };
        for binding in bindings {
            q.declare(binding);
        }
        q
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain data: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn declare(&self, binding: &Binding) -> (Receiver, Arc<AtomicU64>) {
        let mut state = self.lock();
        let queue = state.queues.entry(binding.name().to_owned()).or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            NamedQueue {
                binding: binding.clone(),
                waiting: Arc::default(),
                tx,
                rx: Arc::new(tokio::sync::Mutex::new(rx)),
            }
        });
        // Declaring again with other patterns adds them, as a broker's extra bindings would.
        if let (Binding::Events { patterns, .. }, Binding::Events { patterns: more, .. }) =
            (&mut queue.binding, binding)
        {
            for p in more {
                if !patterns.contains(p) {
                    patterns.push(p.clone());
                }
            }
        }
        (queue.rx.clone(), queue.waiting.clone())
    }

    fn send_to(&self, name: &str, message: Message) -> Result<()> {
        let state = self.lock();
        let queue = state.queues.get(name).ok_or_else(|| QueueError::Unroutable(name.to_owned()))?;
        queue.tx.send(message).map_err(|_| QueueError::Unavailable("in-process queue closed".into()))?;
        queue.waiting.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn publish(&self, message: Message) -> Result<()> {
        let name = message.routing_key.clone();
        let is_role = matches!(self.lock().queues.get(&name).map(|q| &q.binding), Some(Binding::Role(_)));
        if !is_role {
            return Err(QueueError::Unroutable(name));
        }
        self.send_to(&name, message)
    }

    pub(crate) fn publish_event(&self, message: Message) {
        // No subscriber is not an error: events are for whoever listens.
        let _ = self.events.send(message.clone());
        let state = self.lock();
        for queue in state.queues.values() {
            if let Binding::Events { patterns, .. } = &queue.binding
                && patterns.iter().any(|p| topic_matches(p, &message.routing_key))
                && queue.tx.send(message.clone()).is_ok()
            {
                queue.waiting.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn subscribe_events(&self) -> tokio::sync::broadcast::Receiver<Message> {
        self.events.subscribe()
    }

    pub(crate) fn consume(&self, binding: &Binding) -> MemoryConsumer {
        let (rx, waiting) = self.declare(binding);
        MemoryConsumer { rx, waiting, queue: self.clone(), name: binding.name().to_owned() }
    }

    /// Messages sent to a queue and not yet received by its consumer.
    pub(crate) fn depth(&self, name: &str) -> u64 {
        self.lock().queues.get(name).map_or(0, |q| q.waiting.load(Ordering::Relaxed))
    }

    /// Messages parked in a queue's dead-letter queue, with the reason.
    pub fn dead_letters(&self, name: &str) -> Vec<(Message, String)> {
        self.lock().dead.get(name).cloned().unwrap_or_default()
    }
}

pub struct MemoryConsumer {
    rx: Receiver,
    waiting: Arc<AtomicU64>,
    queue: MemoryQueue,
    name: String,
}

impl MemoryConsumer {
    pub(crate) async fn next(&mut self) -> Option<MemoryDelivery> {
        let message = self.rx.lock().await.recv().await?;
        let _ = self.waiting.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n.saturating_sub(1)));
        Some(MemoryDelivery { message, queue: self.queue.clone(), name: self.name.clone() })
    }
}

pub struct MemoryDelivery {
    pub(crate) message: Message,
    queue: MemoryQueue,
    name: String,
}

impl MemoryDelivery {
    /// Sends the message again after `delay`, as the next attempt when `next_attempt`.
    pub(crate) fn requeue(self, delay: Duration, next_attempt: bool) -> Result<()> {
        let mut message = self.message;
        message.attempt += u32::from(next_attempt);
        let (queue, name) = (self.queue, self.name);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Err(e) = queue.send_to(&name, message) {
                tracing::error!(error = %e, "re-queueing a retried message failed");
            }
        });
        Ok(())
    }

    pub(crate) fn dead_letter(self, reason: &str) -> Result<()> {
        tracing::warn!(message.id = %self.message.id, queue = %self.name, reason, "message dead-lettered");
        self.queue.lock().dead.entry(self.name).or_default().push((self.message, reason.to_owned()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn publish_consume_retry_dead_letter() {
        let q = MemoryQueue::new(&[Binding::Role("scraper".to_owned())]);
        assert!(matches!(q.publish(Message::new("nobody", vec![])), Err(QueueError::Unroutable(_))));
        q.publish(Message::new("scraper", b"one".to_vec())).expect("publish");
        let mut c = q.consume(&Binding::Role("scraper".into()));
        let d = c.next().await.expect("delivery");
        assert_eq!(d.message.payload, b"one");
        d.requeue(Duration::from_millis(5), true).expect("retry");
        let d = c.next().await.expect("redelivery");
        assert_eq!(d.message.attempt, 2);
        d.dead_letter("gave up").expect("dead letter");
        assert_eq!(q.dead_letters("scraper").len(), 1);
    }

    #[tokio::test]
    async fn event_queues_keep_what_arrives_while_nobody_consumes() {
        let q = MemoryQueue::new(&[]);
        let binding = Binding::Events { name: "notifier.events".into(), patterns: vec!["job.*".into()] };
        drop(q.consume(&binding));
        q.publish_event(Message::new("job.complete", b"kept".to_vec()));
        q.publish_event(Message::new("keyword.alert", b"not bound".to_vec()));
        let mut c = q.consume(&binding);
        let d = c.next().await.expect("kept event");
        assert_eq!(d.message.payload, b"kept");
        assert!(tokio::time::timeout(Duration::from_millis(50), c.next()).await.is_err());
    }
}
