//! In-process queue for the single-process embedded mode: one unbounded channel per consumed
//! queue, commands routed by role, events by topic pattern, retries as timers, dead letters
//! kept in memory. With a [`Journal`] (the embedded database) the queues survive a restart:
//! each message is written there before it is handed over, rewritten when it is retried and
//! deleted when it is acknowledged or dead-lettered, and [`MemoryQueue::restore`] hands what a
//! previous run left back to its queues.

use crate::{Binding, Journal, Message, QueueError, Result, topic_matches};
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
    journal: Option<Arc<dyn Journal>>,
}

impl MemoryQueue {
    pub(crate) fn new(bindings: &[Binding]) -> Self {
        let (events, _) = tokio::sync::broadcast::channel(1024);
        let q = Self { state: Arc::default(), events, journal: None };
        for binding in bindings {
            q.declare(binding);
        }
        q
    }

    /// The same queues, kept in `journal` from now on.
    pub(crate) fn with_journal(mut self, journal: Arc<dyn Journal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// Hands the messages a previous run left in the journal back to their queues; returns
    /// how many.
    pub(crate) async fn restore(&self) -> Result<usize> {
        let Some(journal) = &self.journal else { return Ok(0) };
        let kept = journal.load().await?;
        let mut restored = 0;
        for (queue, message) in kept {
            match self.send_to(&queue, message) {
                Ok(()) => restored += 1,
                // A queue this version no longer declares: nobody would consume it.
                Err(e) => tracing::warn!(queue, error = %e, "a kept message has no queue any more"),
            }
        }
        Ok(restored)
    }

    async fn keep(&self, queue: &str, message: &Message) -> Result<()> {
        match &self.journal {
            Some(journal) => journal.put(queue, message).await,
            None => Ok(()),
        }
    }

    async fn forget(&self, queue: &str, id: &str) -> Result<()> {
        match &self.journal {
            Some(journal) => journal.delete(queue, id).await,
            None => Ok(()),
        }
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

    pub(crate) async fn publish(&self, message: Message) -> Result<()> {
        let name = message.routing_key.clone();
        let is_role = matches!(self.lock().queues.get(&name).map(|q| &q.binding), Some(Binding::Role(_)));
        if !is_role {
            return Err(QueueError::Unroutable(name));
        }
        self.keep(&name, &message).await?;
        self.send_to(&name, message)
    }

    pub(crate) async fn publish_event(&self, message: Message) -> Result<()> {
        // No subscriber is not an error: events are for whoever listens.
        let _ = self.events.send(message.clone());
        let bound: Vec<String> = self
            .lock()
            .queues
            .values()
            .filter(|q| match &q.binding {
                Binding::Events { patterns, .. } => patterns.iter().any(|p| topic_matches(p, &message.routing_key)),
                Binding::Role(_) => false,
            })
            .map(|q| q.binding.name().to_owned())
            .collect();
        for name in &bound {
            self.keep(name, &message).await?;
        }
        for name in bound {
            self.send_to(&name, message.clone())?;
        }
        Ok(())
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
    pub(crate) async fn ack(self) -> Result<()> {
        self.queue.forget(&self.name, &self.message.id).await
    }

    /// Sends the message again after `delay`, as the next attempt when `next_attempt`.
    pub(crate) async fn requeue(self, delay: Duration, next_attempt: bool) -> Result<()> {
        let mut message = self.message;
        message.attempt += u32::from(next_attempt);
        // Kept with its new attempt number: a restart meanwhile hands it back at once.
        self.queue.keep(&self.name, &message).await?;
        let (queue, name) = (self.queue, self.name);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Err(e) = queue.send_to(&name, message) {
                tracing::error!(error = %e, "re-queueing a retried message failed");
            }
        });
        Ok(())
    }

    pub(crate) async fn dead_letter(self, reason: &str) -> Result<()> {
        tracing::warn!(message.id = %self.message.id, queue = %self.name, reason, "message dead-lettered");
        self.queue.forget(&self.name, &self.message.id).await?;
        self.queue.lock().dead.entry(self.name).or_default().push((self.message, reason.to_owned()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::future::BoxFuture;
    use std::collections::BTreeMap;

    #[tokio::test]
    async fn publish_consume_retry_dead_letter() {
        let q = MemoryQueue::new(&[Binding::Role("scraper".to_owned())]);
        assert!(matches!(q.publish(Message::new("nobody", vec![])).await, Err(QueueError::Unroutable(_))));
        q.publish(Message::new("scraper", b"one".to_vec())).await.expect("publish");
        let mut c = q.consume(&Binding::Role("scraper".into()));
        let d = c.next().await.expect("delivery");
        assert_eq!(d.message.payload, b"one");
        d.requeue(Duration::from_millis(5), true).await.expect("retry");
        let d = c.next().await.expect("redelivery");
        assert_eq!(d.message.attempt, 2);
        d.dead_letter("gave up").await.expect("dead letter");
        assert_eq!(q.dead_letters("scraper").len(), 1);
    }

    #[tokio::test]
    async fn event_queues_keep_what_arrives_while_nobody_consumes() {
        let q = MemoryQueue::new(&[]);
        let binding = Binding::Events { name: "notifier.events".into(), patterns: vec!["job.*".into()] };
        drop(q.consume(&binding));
        q.publish_event(Message::new("job.complete", b"kept".to_vec())).await.expect("publish");
        q.publish_event(Message::new("keyword.alert", b"not bound".to_vec())).await.expect("publish");
        let mut c = q.consume(&binding);
        let d = c.next().await.expect("kept event");
        assert_eq!(d.message.payload, b"kept");
        assert!(tokio::time::timeout(Duration::from_millis(50), c.next()).await.is_err());
    }

    /// A journal in memory, standing in for the database across a "restart".
    #[derive(Default)]
    struct Kept(Mutex<BTreeMap<(String, String), Message>>);

    impl Journal for Kept {
        fn put<'a>(&'a self, queue: &'a str, message: &'a Message) -> BoxFuture<'a, Result<()>> {
            self.0.lock().expect("lock").insert((queue.to_owned(), message.id.clone()), message.clone());
            Box::pin(async { Ok(()) })
        }

        fn delete<'a>(&'a self, queue: &'a str, id: &'a str) -> BoxFuture<'a, Result<()>> {
            self.0.lock().expect("lock").remove(&(queue.to_owned(), id.to_owned()));
            Box::pin(async { Ok(()) })
        }

        fn load(&self) -> BoxFuture<'_, Result<Vec<(String, Message)>>> {
            let all = self.0.lock().expect("lock").iter().map(|((q, _), m)| (q.clone(), m.clone())).collect();
            Box::pin(async { Ok(all) })
        }
    }

    #[tokio::test]
    async fn a_journal_hands_what_was_not_acknowledged_to_the_next_run() {
        let journal = Arc::new(Kept::default());
        let bindings = [
            Binding::Role("scraper".to_owned()),
            Binding::Events { name: "notifier.events".into(), patterns: vec!["job.*".into()] },
        ];
        let first = MemoryQueue::new(&bindings).with_journal(journal.clone());
        first.publish(Message::new("scraper", b"done".to_vec())).await.expect("publish");
        first.publish(Message::new("scraper", b"retried".to_vec())).await.expect("publish");
        first.publish_event(Message::new("job.complete", b"unhandled".to_vec())).await.expect("publish");
        let mut c = first.consume(&bindings[0]);
        let done = c.next().await.expect("delivery");
        done.ack().await.expect("ack");
        let retried = c.next().await.expect("delivery");
        retried.requeue(Duration::from_secs(3_600), true).await.expect("retry");
        drop(first);

        // The next run: what was acknowledged is gone, the rest is back, attempts kept.
        let second = MemoryQueue::new(&bindings).with_journal(journal.clone());
        assert_eq!(second.restore().await.expect("restore"), 2);
        let d = second.consume(&bindings[0]).next().await.expect("the retried command");
        assert_eq!((d.message.payload.as_slice(), d.message.attempt), (b"retried".as_slice(), 2));
        let e = second.consume(&bindings[1]).next().await.expect("the unhandled event");
        assert_eq!(e.message.payload, b"unhandled");
        e.ack().await.expect("ack");
        d.ack().await.expect("ack");
        assert!(journal.0.lock().expect("lock").is_empty());
    }
}
