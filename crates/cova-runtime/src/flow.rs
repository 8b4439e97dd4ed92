//! What lets an account's work go on: the jobs waiting for the balance, and its lists.
//!
//! [`advance`] is the one place that moves an account's lists forward: it takes the account's
//! next waiting URL and does what the money rules say ([`money::next_batch_step`]): start its
//! job as `POST /analyze` would, leave it waiting, or refuse the rest of a list the balance
//! cannot pay for; then it ends the lists so touched once every URL of theirs has ended
//! ([`end_list`]). Each step is one transaction under the account's lock, so two at once
//! start nothing twice.
//!
//! One call per trigger: [`Flow`], a handler on the durable event queue `flow.events`, for a
//! job's end (`job.complete`, `job.failed`: it also wakes the jobs waiting for the balance)
//! and a list's job sized (`job.sized`: the URL after it may start); the gateway for a list
//! created; `cova_creators::run` for a creator's new posts; the scheduler's tick as the safety
//! net for a trigger whose handling failed.

use crate::Backends;
use crate::worker::{Delivered, Handler, Outcome, Source, backoff};
use cova_domain::money::{self, BatchItem, BatchStep};
use cova_domain::time::month_of;
use cova_domain::{JobStatus, list_ended};
use cova_messages::{BatchEvent, BatchEventType, JobEvent, JobEventType, Outgoing};
use cova_storage::repo::batches::{self, Moved, Waiting};
use cova_storage::repo::jobs::{self, Cap, CreateOutcome, NewAnalyze};
use cova_storage::repo::{balances, outbox};
use cova_storage::{Change, Db, Result, Tx};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// What one step of an account's lists did.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// No URL of the account waits.
    Idle,
    /// The next URL waits (for a slot, for the balance).
    Waits,
    /// The next URL was started (a new job, or one that already covered its post), or refused
    /// alone (it names no post).
    Moved { batch_id: String },
    /// The balance is gone and nothing can come back: the list's waiting URLs were refused.
    Refused { batch_id: String },
}

/// What a URL refused for the balance says.
const QUOTA_DETAIL: &str = "The comment balance ran out before this post could start; nothing was charged for it.";

/// Moves the account's lists forward while the money rules let their URLs start, refuses the
/// rest of a list the balance cannot pay for, and ends the lists so touched once every URL of
/// theirs has ended. Answers how many URLs started.
pub async fn advance(db: &Db, account_id: &str, trace: &str, now: i64) -> Result<usize> {
    let mut started = 0;
    let mut touched: Vec<String> = Vec::new();
    loop {
        let batch_id = match step(db, account_id, trace, now).await? {
            Step::Idle | Step::Waits => break,
            Step::Moved { batch_id } => {
                started += 1;
                batch_id
            }
            Step::Refused { batch_id } => batch_id,
        };
        if !touched.contains(&batch_id) {
            touched.push(batch_id);
        }
    }
    for batch_id in touched {
        end_list(db, &batch_id, now).await?;
    }
    Ok(started)
}

/// One step, in one transaction under the account's lock.
async fn step(db: &Db, account_id: &str, trace: &str, now: i64) -> Result<Step> {
    let month = month_of(now);
    let job_id = cova_storage::repo::new_id();
    let mut t = db.begin().await?;
    let (step, created) = step_in(&mut t.tx(), account_id, (&job_id, &month), trace, now).await?;
    t.commit().await?;
    if let Some(outcome) = &created {
        jobs::created(db, outcome).await;
    }
    match &step {
        Step::Refused { batch_id } => db.changed(&[Change::Account(account_id), Change::Batch(batch_id)]).await,
        Step::Moved { batch_id } => db.changed(&[Change::Batch(batch_id)]).await,
        Step::Idle | Step::Waits => {}
    }
    Ok(step)
}

async fn step_in(
    tx: &mut Tx<'_>,
    account_id: &str,
    (job_id, month): (&str, &str),
    trace: &str,
    now: i64,
) -> Result<(Step, Option<CreateOutcome>)> {
    jobs::new::lock(tx, account_id).await?;
    let Some(item) = batches::next_waiting(tx, account_id).await? else { return Ok((Step::Idle, None)) };
    let moved = Step::Moved { batch_id: item.batch_id.clone() };
    let Some(r#ref) = item.r#ref.as_deref() else {
        batches::mark(tx, &item, Moved::Refused("validation_error", "Not a post URL.")).await?;
        return Ok((moved, None));
    };
    let account = balances::account_in(tx, account_id, month).await?;
    let next = BatchItem {
        batch_id: &item.batch_id,
        known_comments: item.known_comments,
        max_comments: item.max_comments,
        session: item.session_id.is_some(),
    };
    match money::next_batch_step(&account, &next) {
        BatchStep::Wait => Ok((Step::Waits, None)),
        BatchStep::RefuseBatch => {
            batches::refuse_rest(tx, &item.batch_id, ("quota_exceeded", QUOTA_DETAIL)).await?;
            Ok((Step::Refused { batch_id: item.batch_id.clone() }, None))
        }
        BatchStep::Start => {
            let outcome = start(tx, account_id, &item, r#ref, (job_id, month), trace, now).await?;
            match &outcome {
                CreateOutcome::Created { job, .. } | CreateOutcome::Repeated(job) => {
                    batches::mark(tx, &item, Moved::Started { job_id: &job.id, deduplicated: None }).await?;
                }
                CreateOutcome::Deduplicated(job, dedup) => {
                    let started = Moved::Started { job_id: &job.id, deduplicated: Some(dedup.as_str()) };
                    batches::mark(tx, &item, started).await?;
                }
                // The rules let it start, so these do not happen; it waits for the next trigger.
                CreateOutcome::ConcurrencyLimit | CreateOutcome::QuotaExceeded => return Ok((Step::Waits, None)),
                CreateOutcome::PaymentRequired | CreateOutcome::IdempotencyConflict => {
                    batches::mark(tx, &item, Moved::Refused("payment_required", "This post could not be started."))
                        .await?;
                }
            }
            Ok((moved, Some(outcome)))
        }
    }
}

/// Starts a list's URL as `POST /analyze` would start it.
async fn start(
    tx: &mut Tx<'_>,
    account_id: &str,
    item: &Waiting,
    r#ref: &str,
    (job_id, month): (&str, &str),
    trace: &str,
    now: i64,
) -> Result<CreateOutcome> {
    let new = NewAnalyze {
        account_id,
        token_id: item.token_id.as_deref(),
        session_id: item.session_id.as_deref(),
        r#ref,
        url: &item.url,
        idempotency_key: None,
        known_comments: item.known_comments,
        refresh: false,
        batch_id: Some(&item.batch_id),
        max_comments: Cap::Set(item.max_comments),
    };
    jobs::create_analyze_in(tx, &new, job_id, month, trace, now).await
}

/// Ends the list once every URL has ended, writing its `batch.complete` event once.
pub async fn end_list(db: &Db, batch_id: &str, now: i64) -> Result<()> {
    let mut t = db.begin().await?;
    let mut tx = t.tx();
    let Some(open) = batches::open(&mut tx, batch_id).await? else { return Ok(()) };
    if !list_ended(&open.items, &open.statuses) {
        return Ok(());
    }
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let in_state = |state| count(open.items.iter().filter(|s| **s == state).count());
    let event = BatchEvent {
        event_type: BatchEventType::Complete,
        batch_id: batch_id.to_owned(),
        account_id: open.account_id.clone(),
        total: count(open.items.len()),
        complete: count(open.statuses.iter().filter(|s| **s == JobStatus::Complete).count()),
        failed: count(open.statuses.iter().filter(|s| **s == JobStatus::Failed).count()),
        refused: in_state(cova_domain::BatchItemState::Refused),
        cancelled: in_state(cova_domain::BatchItemState::Cancelled),
    };
    if batches::finish(&mut tx, batch_id, now).await? {
        outbox::queue(&mut tx, &Outgoing::event(&event), "{}", now).await?;
    }
    t.commit().await?;
    db.changed(&[Change::Account(&open.account_id), Change::Batch(batch_id)]).await;
    Ok(())
}

/// Ends the open lists none of whose URLs still waits (the scheduler's safety net, should the
/// ending at a job's end have failed); answers how many it looked at.
pub async fn end_open_lists(db: &Db, now: i64, limit: i64) -> Result<usize> {
    let open = batches::open_without_waiting(db, limit).await?;
    for batch_id in &open {
        end_list(db, batch_id, now).await?;
    }
    Ok(open.len())
}

/// The handler of job ends; see the module.
pub struct Flow {
    backends: Backends,
    /// Wakes the outbox relay once commands were written.
    outbox: Arc<Notify>,
}

/// The durable queue the flow reads, and what it is bound to.
pub const QUEUE: (&str, &[&str]) = cova_messages::event_queues::FLOW;

impl Flow {
    pub fn new(backends: Backends, outbox: Arc<Notify>) -> Self {
        Self { backends, outbox }
    }

    async fn job_moved(&self, event: &JobEvent) -> Result<()> {
        let db = &self.backends.db;
        // A job that no longer exists (its account was deleted) lets nothing happen.
        let Some(job) = jobs::get(db, &event.job_id).await? else { return Ok(()) };
        let now = self.backends.clock.now_ms();
        let trace = cova_telemetry::current_trace_json();
        // A job sized holds what it needs: only the URL after it may start.
        let woken = match event.event_type {
            JobEventType::Sized => 0,
            _ => jobs::wake_waiting(db, &job.account_id, &trace, now).await?,
        };
        let started = advance(db, &job.account_id, &trace, now).await?;
        if event.event_type != JobEventType::Sized {
            for batch_id in batches::open_for_job(db, &job.id).await? {
                end_list(db, &batch_id, now).await?;
            }
        }
        if woken + started > 0 {
            tracing::debug!(account.id = %job.account_id, woken, started, "a job's move let work go on");
            self.outbox.notify_one();
        }
        Ok(())
    }
}

impl Handler for Flow {
    type Message = JobEvent;

    fn name(&self) -> &'static str {
        "flow"
    }

    fn source(&self) -> Source {
        let (name, patterns) = QUEUE;
        Source::Events { name, patterns }
    }

    fn concurrency(&self) -> usize {
        4
    }

    fn retry_delay(&self, attempt: u32) -> Duration {
        backoff(Duration::from_millis(500), attempt, Duration::from_secs(30))
    }

    async fn handle(&self, event: JobEvent, _delivery: Delivered) -> Outcome {
        match self.job_moved(&event).await {
            Ok(()) => Outcome::Done,
            Err(e) => Outcome::Retry(format!("database: {e}")),
        }
    }
}
