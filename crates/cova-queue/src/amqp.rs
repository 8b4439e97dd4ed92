//! RabbitMQ with lapin: durable topology, persistent messages, publisher confirms awaited,
//! `mandatory` publishes, manual acks, small prefetch, and our own reconnect loop (lapin's
//! recovery is not relied on): a lost connection is re-opened with backoff, the topology
//! declared again and consumers resumed.
//!
//! Names: exchange `<prefix>.commands` (direct, routing key = role); per role a queue
//! `<prefix>.<role>`, a retry queue `<prefix>.<role>.retry` whose expired messages dead-letter
//! back to the commands exchange, and a dead-letter queue `<prefix>.<role>.dead`;
//! exchange `<prefix>.events` (topic) for job events.

use crate::{Message, QueueError, ROLES, Result};
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
    link: Mutex<Option<Link>>,
}

#[derive(Clone)]
pub struct AmqpQueue {
    inner: Arc<Inner>,
}

impl AmqpQueue {
    pub(crate) fn new(url: String, prefix: String, prefetch: u16) -> Self {
        Self { inner: Arc::new(Inner { url, prefix, prefetch, link: Mutex::new(None) }) }
    }

    fn name(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.inner.prefix)
    }

    /// The live connection, opened (and the topology declared) when there is none.
    async fn link(&self) -> Result<(Arc<Connection>, Channel)> {
        let mut slot = self.inner.link.lock().await;
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
        let commands = self.name("commands");
        let durable_exchange = ExchangeDeclareOptions { durable: true, ..Default::default() };
        ch.exchange_declare(commands.as_str().into(), ExchangeKind::Direct, durable_exchange, FieldTable::default())
            .await
            .map_err(unavailable)?;
        ch.exchange_declare(self.name("events").into(), ExchangeKind::Topic, durable_exchange, FieldTable::default())
            .await
            .map_err(unavailable)?;
        for role in ROLES {
            let queue = self.name(role);
            ch.queue_declare(queue.as_str().into(), QueueDeclareOptions::durable(), FieldTable::default())
                .await
                .map_err(unavailable)?;
            ch.queue_bind(
                queue.into(),
                commands.as_str().into(),
                role.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(unavailable)?;
            let mut retry_args = FieldTable::default();
            retry_args.insert("x-dead-letter-exchange".into(), AMQPValue::LongString(commands.as_str().into()));
            retry_args.insert("x-dead-letter-routing-key".into(), AMQPValue::LongString(role.into()));
            ch.queue_declare(self.name(&format!("{role}.retry")).into(), QueueDeclareOptions::durable(), retry_args)
                .await
                .map_err(unavailable)?;
            ch.queue_declare(
                self.name(&format!("{role}.dead")).into(),
                QueueDeclareOptions::durable(),
                FieldTable::default(),
            )
            .await
            .map_err(unavailable)?;
        }
        Ok(())
    }

    /// Publishes persistently and awaits the broker's confirm; a nack is an error, and so is a
    /// return (commands must reach a queue; events use `publish_with` and need not).
    async fn publish_to(
        &self,
        exchange: &str,
        routing_key: &str,
        message: &Message,
        expiration: Option<Duration>,
    ) -> Result<()> {
        self.publish_with(exchange, routing_key, message, expiration, true).await
    }

    async fn publish_with(
        &self,
        exchange: &str,
        routing_key: &str,
        message: &Message,
        expiration: Option<Duration>,
        mandatory: bool,
    ) -> Result<()> {
        let (_, ch) = self.link().await?;
        let mut headers = FieldTable::default();
        for (k, v) in &message.headers {
            headers.insert(k.as_str().into(), AMQPValue::LongString(v.as_str().into()));
        }
        headers.insert(ATTEMPT_HEADER.into(), AMQPValue::LongLongInt(i64::from(message.attempt)));
        let mut props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(message.id.as_str().into())
            .with_content_type("application/json".into())
            .with_type(message.routing_key.as_str().into())
            .with_headers(headers);
        if let Some(ttl) = expiration {
            props = props.with_expiration(ttl.as_millis().max(1).to_string().into());
        }
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
        self.publish_to(&self.name("commands"), &message.routing_key.clone(), &message, None).await
    }

    pub(crate) async fn publish_event(&self, message: Message) -> Result<()> {
        self.publish_with(&self.name("events"), &message.routing_key.clone(), &message, None, false).await
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

    pub(crate) async fn consume(&self, role: &str) -> Result<AmqpConsumer> {
        if !ROLES.contains(&role) {
            return Err(QueueError::Unroutable(role.to_owned()));
        }
        // Fail fast when the broker is unreachable at start; later losses are retried forever.
        self.link().await?;
        let (tx, rx) = mpsc::channel(usize::from(self.inner.prefetch.max(1)));
        tokio::spawn(consume_loop(self.clone(), role.to_owned(), tx));
        Ok(AmqpConsumer { rx })
    }

    pub(crate) async fn ping(&self) -> Result<()> {
        self.link().await.map(|_| ())
    }

    /// Deletes every queue and exchange under the prefix (tests and decommissioned deployments).
    pub(crate) async fn teardown(&self) -> Result<()> {
        let (_, ch) = self.link().await?;
        for role in ROLES {
            for suffix in ["", ".retry", ".dead"] {
                ch.queue_delete(self.name(&format!("{role}{suffix}")).into(), QueueDeleteOptions::default())
                    .await
                    .map_err(unavailable)?;
            }
        }
        for exchange in ["commands", "events"] {
            ch.exchange_delete(self.name(exchange).into(), ExchangeDeleteOptions::default())
                .await
                .map_err(unavailable)?;
        }
        *self.inner.link.lock().await = None;
        Ok(())
    }
}

/// Keeps one consumer alive across connection losses; ends when the receiving side is dropped.
async fn consume_loop(queue: AmqpQueue, role: String, tx: mpsc::Sender<AmqpDelivery>) {
    let mut backoff = Duration::from_millis(200);
    while !tx.is_closed() {
        match consume_once(&queue, &role, &tx).await {
            Ok(()) => backoff = Duration::from_millis(200),
            Err(e) => {
                tracing::warn!(queue.role = %role, error = %e, backoff_ms = backoff.as_millis() as u64, "consumer lost its connection; reconnecting");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

async fn consume_once(queue: &AmqpQueue, role: &str, tx: &mpsc::Sender<AmqpDelivery>) -> Result<()> {
    let (conn, _) = queue.link().await?;
    let ch = conn.create_channel().await.map_err(unavailable)?;
    ch.basic_qos(queue.inner.prefetch, BasicQosOptions::default()).await.map_err(unavailable)?;
    let tag = format!("{role}-{}", uuid::Uuid::new_v4());
    let mut consumer = ch
        .basic_consume(queue.name(role).into(), tag.into(), BasicConsumeOptions::default(), FieldTable::default())
        .await
        .map_err(unavailable)?;
    while let Some(item) = consumer.next().await {
        let delivery = item.map_err(unavailable)?;
        let message = decode(role, &delivery);
        let out = AmqpDelivery { message, acker: delivery.acker, queue: queue.clone(), role: role.to_owned() };
        if tx.send(out).await.is_err() {
            return Ok(());
        }
    }
    Err(unavailable("consumer stream ended"))
}

fn decode(role: &str, delivery: &lapin::message::Delivery) -> Message {
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
    Message {
        id: props.message_id().as_ref().map(ShortString::to_string).unwrap_or_default(),
        routing_key: role.to_owned(),
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
    role: String,
}

impl AmqpDelivery {
    pub(crate) async fn ack(self) -> Result<()> {
        self.acker.ack(BasicAckOptions::default()).await.map(|_| ()).map_err(unavailable)
    }

    /// Parks a copy in the retry queue (expiring back to the work queue), then acks the original.
    /// If the copy cannot be published the original is requeued instead, so nothing is lost.
    pub(crate) async fn retry(self, delay: Duration) -> Result<()> {
        let mut copy = self.message.clone();
        copy.attempt += 1;
        let retry_queue = self.queue.name(&format!("{}.retry", self.role));
        match self.queue.publish_to("", &retry_queue, &copy, Some(delay)).await {
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
        let dead_queue = self.queue.name(&format!("{}.dead", self.role));
        match self.queue.publish_to("", &dead_queue, &copy, None).await {
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
        let routing_key = delivery.routing_key.to_string();
        let mut message = decode(&routing_key, &delivery);
        message.routing_key = routing_key;
        Some(message)
    }
}
