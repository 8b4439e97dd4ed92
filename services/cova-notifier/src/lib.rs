//! The notifier role, in two parts that share a process:
//!
//! - [`Notifier`], a handler on the worker runtime, consumes the durable event queue
//!   `notifier.events`. A completed analyze job's new comments are matched against the
//!   account's keywords (alerts, each announced as a `keyword.alert` event); an alert becomes a
//!   delivery per enabled channel; a finished job becomes a job webhook delivery when the
//!   webhook has `job_events` on, and so does a finished batch. Deliveries are rows of the delivery log, written before the
//!   event is acknowledged, so nothing is lost while a receiver (or the notifier) is away.
//! - [`Deliverer`] sends due deliveries: at least once, with backoff over about a day, with a
//!   bound on deliveries in flight per process and per receiver; a receiver that answers 410,
//!   or fails every attempt, gets its channel turned off with the reason.

mod deliver;
mod text;

pub use deliver::{Deliverer, PASS};

use cova_domain::JobKind;
use cova_messages::{BatchEvent, CreatorEvent, Event, JobEvent, JobEventType, KeywordAlertEvent, SpikeAlertEvent};
use cova_runtime::worker::backoff;
use cova_runtime::{Backends, Delivered, Handler, Outcome, Source, keyword_alerts, spike_alerts};
use cova_storage::StorageError;
use cova_storage::repo::channels::{self, Channel};
use cova_storage::repo::deliveries::{self, NewDelivery};
use cova_storage::repo::jobs;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// The events the notifier reads.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Incoming {
    Job(JobEvent),
    Alert(KeywordAlertEvent),
    Batch(BatchEvent),
    Creator(CreatorEvent),
    Spike(SpikeAlertEvent),
}

pub struct Notifier {
    backends: Backends,
    concurrency: usize,
    /// Wakes the outbox relay (alert events) and the deliverer (new deliveries).
    outbox: Arc<Notify>,
    deliveries: Arc<Notify>,
}

impl Handler for Notifier {
    type Message = Incoming;

    fn name(&self) -> &'static str {
        "notifier"
    }

    fn source(&self) -> Source {
        let (name, patterns) = cova_messages::event_queues::NOTIFIER;
        Source::Events { name, patterns }
    }

    fn concurrency(&self) -> usize {
        self.concurrency
    }

    fn retry_delay(&self, attempt: u32) -> Duration {
        backoff(Duration::from_secs(1), attempt, Duration::from_secs(60))
    }

    async fn handle(&self, event: Incoming, delivery: Delivered) -> Outcome {
        let done = match &event {
            Incoming::Job(job) => self.job_ended(job, &delivery.message_id).await,
            Incoming::Alert(alert) => self.alerted(alert).await,
            Incoming::Batch(batch) => self.batch_ended(batch, &delivery.message_id).await,
            Incoming::Creator(found) => self.post_found(found, &delivery.message_id).await,
            Incoming::Spike(spike) => self.spiked(spike).await,
        };
        match done {
            Ok(()) => {
                self.deliveries.notify_one();
                Outcome::Done
            }
            Err(e) => Outcome::Retry(format!("database: {e}")),
        }
    }
}

impl Notifier {
    pub fn new(backends: Backends, concurrency: usize, outbox: Arc<Notify>, deliveries: Arc<Notify>) -> Self {
        Self { backends, concurrency, outbox, deliveries }
    }

    fn now(&self) -> i64 {
        self.backends.clock.now_ms()
    }

    /// A job ended: keyword alerts for its new comments, and the job webhook.
    async fn job_ended(&self, event: &JobEvent, event_id: &str) -> Result<(), StorageError> {
        let db = &self.backends.db;
        // A job that no longer exists (its account was deleted) has nobody to notify.
        let Some(job) = jobs::get(db, &event.job_id).await? else { return Ok(()) };
        if event.event_type == JobEventType::Complete && job.kind == JobKind::Analyze {
            self.match_keywords(&job).await?;
            // Judged at the collection's end, however late this event is handled.
            let at = job.finished_at.unwrap_or_else(|| self.now());
            if spike_alerts::check(db, &job.account_id, &job.r#ref, at).await? > 0 {
                self.outbox.notify_one();
            }
        }
        // Exactly the specification's job webhook fields, as the event carries them.
        let body = || serde_json::to_string(event).unwrap_or_default();
        self.job_events_webhook(&job.account_id, event_id, event.event_type.as_str(), body).await
    }

    /// The webhook of an event on the job-events switch (job ends, batch ends, found posts):
    /// a delivery when the account's webhook is on with `job_events`.
    async fn job_events_webhook(
        &self,
        account_id: &str,
        event_id: &str,
        event_type: &str,
        body: impl FnOnce() -> String,
    ) -> Result<(), StorageError> {
        let db = &self.backends.db;
        let channels = channels::get(db, account_id).await?;
        if channels.webhook_enabled && channels.webhook_job_events && channels.webhook_url.is_some() {
            let payload = body();
            let delivery =
                NewDelivery { account_id, event_id, event_type, channel: Channel::Webhook, payload: &payload };
            deliveries::enqueue(db, delivery, self.now()).await?;
        }
        Ok(())
    }

    /// A batch ended: its webhook, on the same switch as the job webhooks.
    async fn batch_ended(&self, event: &BatchEvent, event_id: &str) -> Result<(), StorageError> {
        let body = || text::batch_webhook_body(event);
        self.job_events_webhook(&event.account_id, event_id, event.routing_key(), body).await
    }

    /// A followed creator published a post: its webhook, on the same switch as the job webhooks.
    async fn post_found(&self, event: &CreatorEvent, event_id: &str) -> Result<(), StorageError> {
        let body = || text::creator_webhook_body(event);
        self.job_events_webhook(&event.account_id, event_id, event.routing_key(), body).await
    }

    /// Matches the comments this scrape found first against the account's keywords, when the
    /// post is in the account's library (each comment alerts once per keyword).
    async fn match_keywords(&self, job: &jobs::Job) -> Result<(), StorageError> {
        let Some(finished) = job.finished_at else { return Ok(()) };
        let which = keyword_alerts::Comments::FirstSeenAt(finished);
        if keyword_alerts::raise(&self.backends.db, &job.account_id, &job.r#ref, which, self.now()).await? > 0 {
            self.outbox.notify_one();
        }
        Ok(())
    }

    /// A keyword alert: one delivery per enabled channel.
    async fn alerted(&self, alert: &KeywordAlertEvent) -> Result<(), StorageError> {
        let payload = |channel| match channel {
            Channel::Telegram => text::alert_message(alert),
            Channel::Webhook => text::alert_webhook_body(alert),
        };
        self.on_channels(&alert.account_id, &alert.id, alert.routing_key(), payload).await
    }

    /// A spike alert: one delivery per enabled channel.
    async fn spiked(&self, alert: &SpikeAlertEvent) -> Result<(), StorageError> {
        let payload = |channel| match channel {
            Channel::Telegram => text::spike_message(alert),
            Channel::Webhook => text::spike_webhook_body(alert),
        };
        self.on_channels(&alert.account_id, &alert.id, alert.routing_key(), payload).await
    }

    async fn on_channels(
        &self,
        account_id: &str,
        event_id: &str,
        event_type: &str,
        payload: impl Fn(Channel) -> String,
    ) -> Result<(), StorageError> {
        let db = &self.backends.db;
        let channels = channels::get(db, account_id).await?;
        let now = self.now();
        let enabled = [
            (Channel::Telegram, channels.telegram_enabled && channels.telegram_chat_id.is_some()),
            (Channel::Webhook, channels.webhook_enabled && channels.webhook_url.is_some()),
        ];
        for (channel, _) in enabled.into_iter().filter(|(_, on)| *on) {
            let payload = payload(channel);
            let delivery = NewDelivery { account_id, event_id, event_type, channel, payload: &payload };
            deliveries::enqueue(db, delivery, now).await?;
        }
        Ok(())
    }
}
