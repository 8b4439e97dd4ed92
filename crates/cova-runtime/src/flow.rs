//! What a job's end lets happen next for its account: the workflow of the balance and the
//! batches, driven by job ends.
//!
//! [`Flow`] is a handler on the durable event queue `flow.events` (bound to `job.complete` and
//! `job.failed`, of either kind). For the ended job's account it
//! - wakes the jobs that wait for the balance (comments came back, or a slot freed), which a
//!   scraper then sizes again;
//! - starts the waiting URLs of its batches, one [`batches::step`] at a time, while the money
//!   rules let them start;
//! - ends the batches the job answered once every URL of theirs has ended.
//!
//! [`start_waiting`] is also called where a batch is created (the gateway, a creator's run), and
//! by the scheduler's tick as the safety net for an end whose handling failed.

use crate::Backends;
use crate::worker::{Delivered, Handler, Outcome, Source, backoff};
use cova_messages::JobEvent;
use cova_storage::repo::batches::{self, Step};
use cova_storage::repo::jobs;
use cova_storage::{Db, Result};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Starts the account's waiting batch URLs while the money rules let them start, refuses the
/// rest of a batch the balance cannot pay for, and ends the batches so touched once every URL
/// of theirs has ended. Answers how many URLs started.
pub async fn start_waiting(db: &Db, account_id: &str, trace: &str, now: i64) -> Result<usize> {
    let mut started = 0;
    let mut touched: Vec<String> = Vec::new();
    loop {
        let batch_id = match batches::step(db, account_id, trace, now).await? {
            Step::Idle | Step::Waits => break,
            Step::Started { batch_id } => {
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
        batches::settle(db, &batch_id, now).await?;
    }
    Ok(started)
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

    async fn job_ended(&self, event: &JobEvent) -> Result<()> {
        let db = &self.backends.db;
        // A job that no longer exists (its account was deleted) lets nothing happen.
        let Some(job) = jobs::get(db, &event.job_id).await? else { return Ok(()) };
        let now = self.backends.clock.now_ms();
        let trace = cova_telemetry::current_trace_json();
        let woken = jobs::wake_waiting(db, &job.account_id, &trace, now).await?;
        let started = start_waiting(db, &job.account_id, &trace, now).await?;
        batches::settle_for_job(db, &job.id, now).await?;
        if woken + started > 0 {
            tracing::debug!(account.id = %job.account_id, woken, started, "a job's end let work go on");
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
        match self.job_ended(&event).await {
            Ok(()) => Outcome::Done,
            Err(e) => Outcome::Retry(format!("database: {e}")),
        }
    }
}
