//! Sending due deliveries.

use cova_config::NotifierConfig;
use cova_domain::limits::delivery_retry;
use cova_notify::{Outcome, Refusal, SendError, Sender};
use cova_runtime::periodic::Pass;
use cova_runtime::{Backends, Periodic};
use cova_storage::repo::channels::{self, Channel};
use cova_storage::repo::deliveries::{self, Attempt, Delivery};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// The deliverer's periodic task, as [`cova_runtime::Progress`] counts its passes.
pub const PASS: &str = "deliveries";

pub struct Deliverer {
    backends: Backends,
    sender: Arc<Sender>,
    config: NotifierConfig,
    /// Woken when deliveries were queued.
    wake: Arc<Notify>,
    /// Deliveries in flight per receiver.
    receivers: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Deliverer {
    pub fn new(backends: Backends, sender: Arc<Sender>, config: NotifierConfig, wake: Arc<Notify>) -> Self {
        Self { backends, sender, config, wake, receivers: Mutex::default() }
    }

    /// Sends due deliveries until `stop`; sends in flight then finish (each is bounded by the
    /// receiver timeout).
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let slots = Arc::new(Semaphore::new(self.config.concurrency));
        let sending = JoinSet::new();
        let tick = Duration::from_millis(self.config.tick_ms);
        tracing::info!(
            concurrency = self.config.concurrency,
            per_receiver = self.config.per_receiver,
            "deliveries running"
        );
        let pacing = Periodic { name: PASS, period: tick, wake: Some(self.wake.clone()), max_backoff: tick };
        let progress = self.backends.progress.clone();
        let mut rounds = pacing.run(progress, stop, Rounds { deliverer: self, slots, sending }).await;
        while rounds.sending.join_next().await.is_some() {}
    }

    /// Claims as many due deliveries as there are free slots and starts sending them.
    async fn pass(self: Arc<Self>, slots: &Arc<Semaphore>, sending: &mut JoinSet<()>) -> cova_storage::Result<()> {
        loop {
            let free = slots.available_permits();
            if free == 0 {
                return Ok(());
            }
            let due = deliveries::claim_due(
                &self.backends.db,
                self.backends.clock.now_ms(),
                free as i64,
                self.config.claim_ms(),
            )
            .await?;
            let claimed = due.len();
            let mut busy = Vec::new();
            for delivery in due {
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    busy.push(delivery.id);
                    continue;
                };
                let (receiver, channels) = self.receiver_of(&delivery).await;
                let Some(turn) = self.turn(&receiver) else {
                    // This receiver has enough in flight: leave it for a later pass.
                    busy.push(delivery.id);
                    continue;
                };
                let this = self.clone();
                let free_slots = slots.clone();
                sending.spawn(async move {
                    this.send(delivery, channels).await;
                    drop((turn, slot));
                    // Slots are free: look for due deliveries now, not at the tick; under load,
                    // once an eighth of the slots are, so that one claim fills many.
                    if free_slots.available_permits() >= this.config.concurrency.div_ceil(8) {
                        this.wake.notify_one();
                    }
                });
            }
            if !busy.is_empty() {
                deliveries::release(&self.backends.db, &busy).await?;
            }
            if claimed < free || !busy.is_empty() {
                return Ok(());
            }
        }
    }

    /// The receiver a delivery goes to (the webhook's host, or Telegram) and the account's
    /// channels as read now, which the send then uses.
    async fn receiver_of(&self, delivery: &Delivery) -> (String, cova_storage::Result<channels::Channels>) {
        let read = channels::get(&self.backends.db, &delivery.account_id).await;
        let receiver = match delivery.channel {
            Channel::Telegram => "telegram".to_owned(),
            Channel::Webhook => read
                .as_ref()
                .ok()
                .and_then(|c| c.webhook_url.as_deref())
                .and_then(|u| url::Url::parse(u).ok()?.host_str().map(str::to_owned))
                .unwrap_or_default(),
        };
        (receiver, read)
    }

    fn turn(&self, receiver: &str) -> Option<OwnedSemaphorePermit> {
        let mut receivers = self.receivers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if receivers.len() > 10_000 {
            receivers.retain(|_, s| s.available_permits() < self.config.per_receiver);
        }
        let semaphore =
            receivers.entry(receiver.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(self.config.per_receiver)));
        semaphore.clone().try_acquire_owned().ok()
    }

    /// One attempt with the account's `channels` as read at the claim, and what it means for
    /// the delivery and its channel.
    async fn send(&self, delivery: Delivery, channels: cova_storage::Result<channels::Channels>) {
        let db = &self.backends.db;
        let now = self.backends.clock.now_ms();
        let channels = match channels {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "reading the channels failed; the delivery is retried");
                // Nothing was sent: the attempt the claim counted is given back (if the
                // database does not answer, the claim expires and the count stays one high).
                let _ = deliveries::release(db, std::slice::from_ref(&delivery.id)).await;
                return;
            }
        };
        let sent = match delivery.channel {
            Channel::Webhook => match (&channels.webhook_url, &channels.webhook_secret) {
                (Some(url), Some(secret)) if channels.webhook_enabled => {
                    self.sender.webhook(url, secret, &delivery.event_id, delivery.payload.as_bytes(), now / 1000).await
                }
                _ => Err(SendError::NotConfigured("the webhook channel is off")),
            },
            Channel::Telegram => match &channels.telegram_chat_id {
                Some(chat) if channels.telegram_enabled => self.sender.telegram(chat, &delivery.payload).await,
                _ => Err(SendError::NotConfigured("the Telegram channel is off")),
            },
        };
        // The claim counted this attempt.
        let attempt = u32::try_from(delivery.attempts).unwrap_or(1);
        let last = attempt >= self.config.max_attempts;
        let channel = delivery.channel;
        let (verdict, disable) = match &sent {
            Ok(outcome) if outcome.delivered() => (Verdict::Delivered(i32::from(outcome.status)), None),
            Ok(outcome) => {
                let status = Some(i32::from(outcome.status));
                let error = answer(outcome);
                if gone(channel, outcome) {
                    let reason = format!("The receiver answered {error}");
                    (Verdict::Failed(status, error), Some(reason))
                } else if last {
                    let reason = format!("{attempt} deliveries failed; the last answer was {error}");
                    (Verdict::Failed(status, error), Some(reason))
                } else {
                    (Verdict::Retry(status, error), None)
                }
            }
            // A name that does not resolve now may resolve later (a resolver outage).
            Err(e @ SendError::Refused(Refusal::Unresolvable(_))) if !last => {
                (Verdict::Retry(None, e.to_string()), None)
            }
            Err(e @ SendError::Operator(_)) => (Verdict::Retry(None, e.to_string()), None),
            Err(e @ SendError::Refused(_)) => {
                (Verdict::Failed(None, e.to_string()), Some(format!("The webhook URL may not be contacted: {e}")))
            }
            Err(e @ SendError::NotConfigured(_)) => (Verdict::Failed(None, e.to_string()), None),
            Err(e @ SendError::Network(_)) if last => {
                (Verdict::Failed(None, e.to_string()), Some(format!("{attempt} deliveries failed; the last one: {e}")))
            }
            Err(e @ SendError::Network(_)) => (Verdict::Retry(None, e.to_string()), None),
        };
        let record = match &verdict {
            Verdict::Delivered(status) => Attempt::Delivered { status: *status },
            Verdict::Retry(status, error) => {
                Attempt::Retry { status: *status, error, next_at: now + self.retry_in(attempt) }
            }
            Verdict::Failed(status, error) => Attempt::Failed { status: *status, error },
        };
        let delivered = matches!(record, Attempt::Delivered { .. });
        if let Err(e) = deliveries::record(db, &delivery.id, record, now).await {
            tracing::warn!(error = %e, "recording a delivery attempt failed; its claim expires");
            return;
        }
        let outcome = match (&verdict, &disable) {
            (Verdict::Delivered(_), _) => "delivered",
            (_, Some(_)) => "disabled",
            (Verdict::Retry(..), None) => "retrying",
            (Verdict::Failed(..), None) => "failed",
        };
        cova_metrics::delivery(channel.as_str(), outcome);
        if let Some(reason) = &disable
            && let Err(e) = channels::disable(db, &delivery.account_id, channel, reason, now).await
        {
            tracing::warn!(error = %e, "turning a failing channel off failed");
        }
        tracing::info!(
            delivery.id = %delivery.id,
            event.id = %delivery.event_id,
            channel = channel.as_str(),
            attempt,
            delivered,
            disabled = disable.is_some(),
            "delivery attempt"
        );
    }

    /// The backoff before the next attempt, with ±10 % jitter so retries do not bunch up.
    fn retry_in(&self, attempt: u32) -> i64 {
        let base = delivery_retry(attempt).as_millis() as f64;
        (base * (0.9 + 0.2 * rand::random::<f64>())) as i64
    }
}

/// The deliverer between passes: its free slots and the sends in flight.
struct Rounds {
    deliverer: Arc<Deliverer>,
    slots: Arc<Semaphore>,
    sending: JoinSet<()>,
}

impl Pass for Rounds {
    async fn pass(&mut self) -> Result<(), String> {
        let passed = self.deliverer.clone().pass(&self.slots, &mut self.sending).await;
        while self.sending.try_join_next().is_some() {}
        passed.map_err(|e| format!("looking for due deliveries: {e}"))
    }
}

/// What one attempt came to.
enum Verdict {
    Delivered(i32),
    /// Try again later (status, what went wrong).
    Retry(Option<i32>, String),
    Failed(Option<i32>, String),
}

/// A receiver that will never take this event: 410 from a webhook; a refusal of the chat
/// from Telegram (unknown chat, bot blocked or removed). A 401 there means cova's bot token is
/// wrong, which is the operator's to fix: retried, never the customer's channel turned off.
fn gone(channel: Channel, outcome: &Outcome) -> bool {
    match channel {
        Channel::Webhook => outcome.status == 410,
        Channel::Telegram => matches!(outcome.status, 400 | 403 | 404),
    }
}

fn answer(outcome: &Outcome) -> String {
    let body: String = outcome.body.chars().take(200).collect();
    if body.trim().is_empty() {
        format!("HTTP {}", outcome.status)
    } else {
        format!("HTTP {}: {}", outcome.status, body.trim())
    }
}
