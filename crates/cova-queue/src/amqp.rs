//! RabbitMQ with lapin: durable topology, persistent messages, publisher confirms awaited,
//! `mandatory` publishes for commands, manual acks, small prefetch, and our own reconnect
//! loop (lapin's recovery is not relied on): a lost connection is re-opened with backoff, the
//! topology declared again and consumers resumed.
//!
//! Every consumed queue `q` gets retry queues `q.retry.<tier>`, each with a fixed
//! `x-message-ttl` and dead-lettering back into `q` through the default exchange, and a
//! dead-letter queue `q.dead`.

use crate::{Binding, Message, QueueError, RETRY_TIERS, Result, tier_label};
use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions,
    ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, mpsc};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);
const ATTEMPT_HEADER: &str = "x-cova-attempt";

fn unavailable(e: impl std::fmt::Display) -> QueueError {
    QueueError::Unavailable(e.to_string())
}

struct Link {
    conn: Arc<Connection>,
    publish: Channel,
}

struct Inner {
    url: String,
    prefix: String,
    prefetch: u16,
    /// Queues declared on every connection: the roles' command queues, the durable event
    /// queues, and every queue a consumer of this process declared.
    bindings: std::sync::Mutex<Vec<Binding>>,
    link: Mutex<Option<Link>>,
    /// Set by [`AmqpQueue::teardown`]: a publish or a consumer's reconnect afterwards would
    /// declare the deleted topology again, so none connects any more.
    torn_down: std::sync::atomic::AtomicBool,
}

#[derive(Clone)]
pub struct AmqpQueue {
    inner: Arc<Inner>,
}

impl AmqpQueue {
    pub(crate) fn new(url: String, prefix: String, prefetch: u16, bindings: Vec<Binding>) -> Self {
        let bindings = std::sync::Mutex::new(bindings);
        let torn_down = std::sync::atomic::AtomicBool::new(false);
        Self { inner: Arc::new(Inner { url, prefix, prefetch, bindings, link: Mutex::new(None), torn_down }) }
    }

    fn bindings(&self) -> Vec<Binding> {
        self.inner.bindings.lock().map(|b| b.clone()).unwrap_or_default()
    }

    fn remember(&self, binding: &Binding) {
        if let Ok(mut all) = self.inner.bindings.lock()
            && !all.contains(binding)
        {
            all.push(binding.clone());
        }
    }

    fn name(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.inner.prefix)
    }

    /// The live connection, opened (and the topology declared) when there is none.
    async fn link(&self) -> Result<(Arc<Connection>, Channel)> {
        let mut slot = self.inner.link.lock().await;
        if self.inner.torn_down.load(std::sync::atomic::Ordering::Acquire) {
            return Err(unavailable("this queue's topology was deleted"));
        }
        if let Some(link) = slot.as_ref()
            && link.conn.status().connected()
            && link.publish.status().connected()
        {
            return Ok((link.conn.clone(), link.publish.clone()));
        }
        *slot = None;
        let conn = tokio::time::timeout(
            CONNECT_TIMEOUT,
            Connection::connect(&self.inner.url, ConnectionProperties::default()),
        )
        .await
        .map_err(|_| unavailable("connecting to RabbitMQ timed out"))?
        .map_err(unavailable)?;
        let conn = Arc::new(conn);
        let publish = conn.create_channel().await.map_err(unavailable)?;
        self.declare_topology(&publish).await?;
        publish.confirm_select(ConfirmSelectOptions::default()).await.map_err(unavailable)?;
        *slot = Some(Link { conn: conn.clone(), publish: publish.clone() });
        Ok((conn, publish))
    }

    async fn declare_topology(&self, ch: &Channel) -> Result<()> {
        let durable_exchange = ExchangeDeclareOptions { durable: true, ..Default::default() };
        ch.exchange_declare(
            self.name("commands").into(),
            ExchangeKind::Direct,
            durable_exchange,
            FieldTable::default(),
        )
        .await
        .map_err(unavailable)?;
        ch.exchange_declare(self.name("events").into(), ExchangeKind::Topic, durable_exchange, FieldTable::default())
            .await
            .map_err(unavailable)?;
        for binding in self.bindings() {
            self.declare_queue(ch, &binding).await?;
        }
        Ok(())
    }

    /// The queue of `binding`, its bindings, its retry tiers and its dead-letter queue.
    async fn declare_queue(&self, ch: &Channel, binding: &Binding) -> Result<()> {
        let queue = self.name(binding.name());
        ch.queue_declare(queue.as_str().into(), QueueDeclareOptions::durable(), FieldTable::default())
            .await
            .map_err(unavailable)?;
        let (exchange, keys) = match binding {
            Binding::Role(role) => (self.name("commands"), vec![role.clone()]),
            Binding::Events { patterns, .. } => (self.name("events"), patterns.clone()),
        };
        for key in keys {
            ch.queue_bind(
                queue.as_str().into(),
                exchange.as_str().into(),
                key.as_str().into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(unavailable)?;
        }
        for tier in RETRY_TIERS {
            let mut args = FieldTable::default();
            args.insert("x-message-ttl".into(), AMQPValue::LongLongInt(tier.as_millis() as i64));
            args.insert("x-dead-letter-exchange".into(), AMQPValue::LongString("".into()));
            args.insert("x-dead-letter-routing-key".into(), AMQPValue::LongString(queue.as_str().into()));
            ch.queue_declare(retry_queue(&queue, tier).into(), QueueDeclareOptions::durable(), args)
                .await
                .map_err(unavailable)?;
        }
        ch.queue_declare(format!("{queue}.dead").into(), QueueDeclareOptions::durable(), FieldTable::default())
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    /// Publishes persistently and awaits the broker's confirm; a nack is an error, and so is a
    /// return (commands must reach a queue; events use `publish_with` and need not).
    async fn publish_to(&self, exchange: &str, routing_key: &str, message: &Message) -> Result<()> {
        self.publish_with(exchange, routing_key, message, true).await
    }

    async fn publish_with(&self, exchange: &str, routing_key: &str, message: &Message, mandatory: bool) -> Result<()> {
        let (_, ch) = self.link().await?;
        let mut headers = FieldTable::default();
        for (k, v) in &message.headers {
            headers.insert(k.as_str().into(), AMQPValue::LongString(v.as_str().into()));
        }
        headers.insert(ATTEMPT_HEADER.into(), AMQPValue::LongLongInt(i64::from(message.attempt)));
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(message.id.as_str().into())
            .with_content_type("application/json".into())
            .with_type(message.routing_key.as_str().into())
            .with_headers(headers);
        let options = BasicPublishOptions { mandatory, ..Default::default() };
        let confirm = ch
            .basic_publish(exchange.into(), routing_key.into(), options, &message.payload, props)
            .await
            .map_err(unavailable)?;
        let confirmation = tokio::time::timeout(CONFIRM_TIMEOUT, confirm)
            .await
            .map_err(|_| unavailable("RabbitMQ did not confirm the publish in time"))?
            .map_err(unavailable)?;
        if confirmation.is_nack() {
            return Err(unavailable("RabbitMQ refused the message (nack)"));
        }
        if confirmation.take_message().is_some() {
            return Err(QueueError::Unroutable(routing_key.to_owned()));
        }
        Ok(())
    }

    pub(crate) async fn publish(&self, message: Message) -> Result<()> {
        self.publish_to(&self.name("commands"), &message.routing_key.clone(), &message).await
    }

    pub(crate) async fn publish_event(&self, message: Message) -> Result<()> {
        self.publish_with(&self.name("events"), &message.routing_key.clone(), &message, false).await
    }

    /// A private, auto-deleted queue bound to every event.
    pub(crate) async fn subscribe_events(&self) -> Result<AmqpEvents> {
        let (conn, _) = self.link().await?;
        let ch = conn.create_channel().await.map_err(unavailable)?;
        let options = QueueDeclareOptions { exclusive: true, auto_delete: true, ..Default::default() };
        let queue = ch.queue_declare("".into(), options, FieldTable::default()).await.map_err(unavailable)?;
        let name = queue.name().clone();
        ch.queue_bind(
            name.clone(),
            self.name("events").into(),
            "#".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(unavailable)?;
        let options = BasicConsumeOptions { no_ack: true, ..Default::default() };
        let consumer =
            ch.basic_consume(name, "events".into(), options, FieldTable::default()).await.map_err(unavailable)?;
        Ok(AmqpEvents { consumer, _channel: ch })
    }

    pub(crate) async fn consume(&self, binding: Binding) -> Result<AmqpConsumer> {
        self.remember(&binding);
        // Declared now, so that what is published from here on is kept; and fail fast when the
        // broker is unreachable at start (later losses are retried forever).
        let (_, ch) = self.link().await?;
        self.declare_queue(&ch, &binding).await?;
        let (tx, rx) = mpsc::channel(usize::from(self.inner.prefetch.max(1)));
        tokio::spawn(consume_loop(self.clone(), binding.name().to_owned(), tx));
        Ok(AmqpConsumer { rx })
    }

    /// Messages waiting in the dead-letter queue of `name`.
    pub(crate) async fn dead_letter_count(&self, name: &str) -> Result<u64> {
        let (conn, _) = self.link().await?;
        let ch = conn.create_channel().await.map_err(unavailable)?;
        let dead = format!("{}.dead", self.name(name));
        let declared = ch
            .queue_declare(dead.into(), QueueDeclareOptions::durable(), FieldTable::default())
            .await
            .map_err(unavailable)?;
        let _ = ch.close(200, "done".into()).await;
        Ok(u64::from(declared.message_count()))
    }

    pub(crate) async fn depth(&self, name: &str) -> Result<u64> {
        let (conn, _) = self.link().await?;
        let ch = conn.create_channel().await.map_err(unavailable)?;
        // Passive: reads the queue as declared, whatever its arguments.
        let options = QueueDeclareOptions { passive: true, ..QueueDeclareOptions::default() };
        let declared = ch.queue_declare(self.name(name).into(), options, FieldTable::default()).await;
        let _ = ch.close(200, "done".into()).await;
        Ok(u64::from(declared.map_err(unavailable)?.message_count()))
    }

    pub(crate) async fn ping(&self) -> Result<()> {
        self.link().await.map(|_| ())
    }

    /// Deletes every queue and exchange under the prefix (tests and decommissioned deployments).
    pub(crate) async fn teardown(&self) -> Result<()> {
        let (_, ch) = self.link().await?;
        for binding in self.bindings() {
            let queue = self.name(binding.name());
            let mut names = vec![queue.clone(), format!("{queue}.dead")];
            names.extend(RETRY_TIERS.iter().map(|t| retry_queue(&queue, *t)));
            for name in names {
                ch.queue_delete(name.into(), QueueDeleteOptions::default()).await.map_err(unavailable)?;
            }
        }
        for exchange in ["commands", "events"] {
            ch.exchange_delete(self.name(exchange).into(), ExchangeDeleteOptions::default())
                .await
                .map_err(unavailable)?;
        }
        let mut slot = self.inner.link.lock().await;
        self.inner.torn_down.store(true, std::sync::atomic::Ordering::Release);
        if let Some(link) = slot.take() {
            let _ = link.conn.close(200, "torn down".into()).await;
        }
        Ok(())
    }
}

fn retry_queue(queue: &str, tier: Duration) -> String {
    format!("{queue}.retry.{}", tier_label(tier))
}

/// How long a consumer reconnects quietly (WARN) before a broker that stays away is an ERROR.
const BROKER_AWAY_ALERT: Duration = Duration::from_secs(60);

/// Keeps one consumer alive across connection losses; ends when the receiving side is dropped.
async fn consume_loop(queue: AmqpQueue, name: String, tx: mpsc::Sender<AmqpDelivery>) {
    let mut backoff = Duration::from_millis(200);
    let mut lost = false;
    // Since when the broker has been away, and whether a person has been told.
    let mut away: Option<(std::time::Instant, bool)> = None;
    while !tx.is_closed() {
        match consume_once(&queue, &name, &tx, &mut lost).await {
            Ok(()) => backoff = Duration::from_millis(200),
            Err(e) if !lost => {
                // Consuming again had started: this is a new loss.
                away = None;
                lost = true;
                tracing::warn!(queue.name = %name, error = %e, backoff_ms = backoff.as_millis() as u64, "consumer lost its connection; reconnecting");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
            Err(e) => {
                let (since, told) = away.get_or_insert((std::time::Instant::now(), false));
                if !*told && since.elapsed() >= BROKER_AWAY_ALERT {
                    *told = true;
                    tracing::error!(queue.name = %name, error = %e, away_s = since.elapsed().as_secs(), "the broker has been unreachable for a minute; jobs are not being consumed");
                }
                tracing::debug!(queue.name = %name, error = %e, backoff_ms = backoff.as_millis() as u64, "consumer still reconnecting");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Consumes until the connection is lost; `lost` says that an earlier connection was, and is
/// cleared once consuming again.
async fn consume_once(queue: &AmqpQueue, name: &str, tx: &mpsc::Sender<AmqpDelivery>, lost: &mut bool) -> Result<()> {
    let (conn, _) = queue.link().await?;
    let ch = conn.create_channel().await.map_err(unavailable)?;
    ch.basic_qos(queue.inner.prefetch, BasicQosOptions::default()).await.map_err(unavailable)?;
    let tag = format!("{name}-{}", uuid::Uuid::new_v4());
    let mut consumer = ch
        .basic_consume(queue.name(name).into(), tag.into(), BasicConsumeOptions::default(), FieldTable::default())
        .await
        .map_err(unavailable)?;
    if std::mem::take(lost) {
        tracing::info!(queue.name = %name, "consumer reconnected");
    }
    loop {
        // A consumer whose receiving side is gone stops; its unacked deliveries go back.
        let item = tokio::select! {
            item = consumer.next() => item,
            _ = tx.closed() => {
                let _ = ch.close(200, "consumer stopped".into()).await;
                return Ok(());
            }
        };
        let Some(item) = item else { break };
        let delivery = item.map_err(unavailable)?;
        let message = decode(&delivery);
        let out = AmqpDelivery { message, acker: delivery.acker, queue: queue.clone(), name: name.to_owned() };
        if tx.send(out).await.is_err() {
            let _ = ch.close(200, "consumer stopped".into()).await;
            return Ok(());
        }
    }
    Err(unavailable("consumer stream ended"))
}

/// The message as published: the routing key travels in the `type` property, because a
/// retried message reaches its queue again through the default exchange.
fn decode(delivery: &lapin::message::Delivery) -> Message {
    let props = &delivery.properties;
    let mut headers = BTreeMap::new();
    let mut attempt = 1;
    if let Some(table) = props.headers() {
        for (k, v) in table.inner() {
            match (k.as_str(), v) {
                (ATTEMPT_HEADER, AMQPValue::LongLongInt(n)) => attempt = u32::try_from(*n).unwrap_or(1),
                (key, AMQPValue::LongString(s)) => {
                    headers.insert(key.to_owned(), String::from_utf8_lossy(s.as_bytes()).into_owned());
                }
                _ => {}
            }
        }
    }
    let routing_key = props.kind().as_ref().map_or_else(|| delivery.routing_key.to_string(), ShortString::to_string);
    Message {
        id: props.message_id().as_ref().map(ShortString::to_string).unwrap_or_default(),
        routing_key,
        payload: delivery.data.clone(),
        headers,
        attempt,
    }
}

pub struct AmqpConsumer {
    rx: mpsc::Receiver<AmqpDelivery>,
}

impl AmqpConsumer {
    pub(crate) async fn next(&mut self) -> Option<AmqpDelivery> {
        self.rx.recv().await
    }
}

pub struct AmqpDelivery {
    pub(crate) message: Message,
    acker: lapin::Acker,
    queue: AmqpQueue,
    /// The queue it came from, under the prefix.
    name: String,
}

impl AmqpDelivery {
    pub(crate) async fn ack(self) -> Result<()> {
        self.acker.ack(BasicAckOptions::default()).await.map(|_| ()).map_err(unavailable)
    }

    /// Parks a copy in the retry queue of `tier` (expiring back to the work queue), as the next
    /// attempt when `next_attempt`, then acks the original. If the copy cannot be published
    /// the original is requeued instead, so nothing is lost.
    pub(crate) async fn requeue(self, tier: Duration, next_attempt: bool) -> Result<()> {
        let mut copy = self.message.clone();
        copy.attempt += u32::from(next_attempt);
        let retry = retry_queue(&self.queue.name(&self.name), tier);
        match self.queue.publish_to("", &retry, &copy).await {
            Ok(()) => self.ack().await,
            Err(e) => {
                let _ = self.acker.nack(BasicNackOptions { requeue: true, ..Default::default() }).await;
                Err(e)
            }
        }
    }

    pub(crate) async fn dead_letter(self, reason: &str) -> Result<()> {
        let mut copy = self.message.clone();
        copy.headers.insert("x-cova-dead-reason".into(), reason.to_owned());
        let dead_queue = format!("{}.dead", self.queue.name(&self.name));
        match self.queue.publish_to("", &dead_queue, &copy).await {
            Ok(()) => self.ack().await,
            Err(e) => {
                let _ = self.acker.nack(BasicNackOptions { requeue: true, ..Default::default() }).await;
                Err(e)
            }
        }
    }
}

pub struct AmqpEvents {
    consumer: lapin::Consumer,
    _channel: Channel,
}

impl AmqpEvents {
    pub(crate) async fn next(&mut self) -> Option<Message> {
        let delivery = self.consumer.next().await?.ok()?;
        Some(decode(&delivery))
    }
}
