//! The scraper role. For each analyze command: claim the job, collect its comments through
//! the platform adapter up to the reservation (writing pages as they arrive), then complete it
//! (charge what was collected, bookmark, event) or fail it (charge nothing, event), and ack
//! only after that commit. Transient failures retry with backoff, then fail the job.

use cova_config::ScraperConfig;
use cova_messages::{AnalyzeCommand, JobError, JobEvent};
use cova_platforms::{Comment, CommentSink, PlatformError, Platforms, PostRef};
use cova_queue::Delivery;
use cova_runtime::Backends;
use cova_storage::clock::now_ms;
use cova_storage::repo::jobs::{self, Job, SCRAPER_ROLE, Start, StoredComment};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

#[derive(Clone)]
pub struct Scraper {
    backends: Backends,
    platforms: Platforms,
    config: ScraperConfig,
    /// Nudges the outbox relay after a job ends, so its event leaves at once.
    outbox: Arc<Notify>,
}

#[derive(Debug)]
enum Outcome {
    /// Committed (or nothing to do): acknowledge.
    Done,
    /// Transient: deliver again later.
    Retry(String),
    /// Cannot ever be processed.
    Poison(String),
    /// Out of attempts: the job is failed; the command is parked in the dead-letter queue.
    GaveUp(String),
}

impl Scraper {
    pub fn new(backends: Backends, platforms: Platforms, config: ScraperConfig, outbox: Arc<Notify>) -> Self {
        Self { backends, platforms, config, outbox }
    }

    /// Consumes analyze commands until `stop` is cancelled; jobs in flight then finish first.
    pub async fn run(self, stop: CancellationToken) -> Result<(), cova_queue::QueueError> {
        // A broker that is down at start only delays consuming.
        let mut wait = Duration::from_millis(500);
        let mut consumer = loop {
            match self.backends.queue.consume(SCRAPER_ROLE).await {
                Ok(c) => break c,
                Err(e) => {
                    tracing::warn!(error = %e, retry_ms = wait.as_millis() as u64, "cannot consume analyze commands yet");
                    tokio::select! {
                        _ = stop.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(wait) => {}
                    }
                    wait = (wait * 2).min(Duration::from_secs(10));
                }
            }
        };
        let slots = Arc::new(Semaphore::new(self.config.concurrency));
        tracing::info!(concurrency = self.config.concurrency, "scraper consuming");
        loop {
            let permit = tokio::select! {
                _ = stop.cancelled() => break,
                p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            };
            let delivery = tokio::select! {
                _ = stop.cancelled() => break,
                d = consumer.next() => match d { Some(d) => d, None => break },
            };
            let this = self.clone();
            tokio::spawn(async move {
                this.handle(delivery).await;
                drop(permit);
            });
        }
        // Wait for running jobs to reach a commit and ack.
        let _ = slots.acquire_many(self.config.concurrency as u32).await;
        tracing::info!("scraper stopped");
        Ok(())
    }

    async fn handle(&self, delivery: Delivery) {
        let attempt = delivery.message().attempt;
        let span = tracing::info_span!("analyze_command", message.id = %delivery.message().id, attempt);
        cova_telemetry::follow(&span, &delivery.message().headers);
        let outcome = match serde_json::from_slice::<AnalyzeCommand>(&delivery.message().payload) {
            Ok(cmd) => tracing::Instrument::instrument(self.process(&cmd.job_id, attempt), span).await,
            Err(e) => Outcome::Poison(format!("malformed analyze command: {e}")),
        };
        let acked = match outcome {
            Outcome::Done => delivery.ack().await,
            Outcome::Retry(reason) => {
                let delay = self.backoff(attempt);
                tracing::info!(attempt, delay_ms = delay.as_millis() as u64, reason, "job will be retried");
                delivery.retry(delay).await
            }
            Outcome::Poison(reason) => {
                tracing::error!(reason, "analyze command dead-lettered");
                delivery.dead_letter(&reason).await
            }
            Outcome::GaveUp(reason) => {
                tracing::warn!(attempt, reason, "job failed after its last attempt; command dead-lettered");
                delivery.dead_letter(&reason).await
            }
        };
        if let Err(e) = acked {
            // The broker redelivers an unacknowledged message; processing is idempotent.
            tracing::warn!(error = %e, "acknowledging failed");
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u64.saturating_pow(attempt.saturating_sub(1).min(10));
        Duration::from_millis(self.config.retry_base_ms.saturating_mul(factor).min(300_000))
    }

    async fn process(&self, job_id: &str, attempt: u32) -> Outcome {
        let db = &self.backends.db;
        let owner = uuid::Uuid::new_v4().to_string();
        let lease_ms = self.config.lease_ms as i64;
        let (job, max) = match jobs::start(db, job_id, &owner, lease_ms, now_ms()).await {
            Ok(Start::Collect { job, max }) => (job, max),
            Ok(Start::Finished(_)) => return Outcome::Done,
            Ok(Start::Busy) => return Outcome::Retry("another worker holds the job".into()),
            Ok(Start::Missing) => return Outcome::Poison(format!("no job {job_id}")),
            Err(e) => return Outcome::Retry(format!("database: {e}")),
        };
        let span = tracing::info_span!("job", job.id = %job.id, job.r#ref = %job.r#ref);
        let result = tracing::Instrument::instrument(self.collect(&job, &owner, max), span).await;
        let now = now_ms();
        match result {
            Ok(truncated) => match jobs::complete(db, &job.id, &owner, truncated, &event_json, now).await {
                Ok(_) => {
                    self.outbox.notify_one();
                    Outcome::Done
                }
                Err(e) => Outcome::Retry(format!("database: {e}")),
            },
            Err(Failure::LeaseLost) => Outcome::Done,
            Err(Failure::Platform(e)) if is_transient(&e) && attempt < self.config.max_attempts => {
                // Let the retry (on whichever worker) claim the job at once; a lease left
                // behind would only make it wait for the expiry.
                if let Err(err) = jobs::release_lease(db, &job.id, &owner).await {
                    tracing::warn!(error = %err, "releasing the job lease failed; it will expire");
                }
                Outcome::Retry(e.to_string())
            }
            Err(Failure::Platform(e)) => {
                let gave_up = is_transient(&e);
                let detail = if gave_up {
                    format!("{} (gave up after {attempt} attempts)", e.detail())
                } else {
                    e.detail().to_owned()
                };
                match jobs::fail(db, &job.id, &owner, e.code(), &detail, &event_json, now).await {
                    Ok(_) => {
                        self.outbox.notify_one();
                        if gave_up { Outcome::GaveUp(detail) } else { Outcome::Done }
                    }
                    Err(e) => Outcome::Retry(format!("database: {e}")),
                }
            }
        }
    }

    async fn collect(&self, job: &Job, owner: &str, max: i64) -> Result<bool, Failure> {
        if max <= 0 {
            return Err(Failure::Platform(PlatformError::Unavailable("no comments were reserved for this job".into())));
        }
        let post: PostRef = job.r#ref.parse().map_err(Failure::Platform)?;
        // The post page first: it tells private, restricted and deleted posts apart (the
        // comment list alone may still answer for them) and how many comments to expect.
        let metadata = self.platforms.metadata(&post).await.map_err(Failure::Platform)?;
        let reported = metadata.metrics.comments.and_then(|n| i64::try_from(n).ok());
        let mut max = max;
        if let Some(n) = reported {
            // Hold only what the post can yield (with room for comments added meanwhile and
            // rounded counts), so the rest of the balance is free for other jobs at once.
            let needed = n.saturating_add((n / 10).max(50));
            if needed < max {
                match cova_storage::repo::balances::shrink(&self.backends.db, &job.id, needed).await {
                    Ok(Some(held)) => max = held,
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "lowering the hold failed");
                        return Err(Failure::Platform(PlatformError::Unavailable(
                            "cova's database is unavailable".into(),
                        )));
                    }
                }
            }
        }
        let expected = reported.map(|n| n.min(max));
        let mut sink = DbSink {
            backends: self.backends.clone(),
            job_id: job.id.clone(),
            owner: owner.to_owned(),
            lease_ms: self.config.lease_ms as i64,
            lease_lost: false,
            expected,
        };
        let limit = u32::try_from(max).unwrap_or(u32::MAX);
        match self.platforms.collect_comments(&post, limit, &mut sink).await {
            Ok(outcome) => Ok(outcome.truncated),
            Err(_) if sink.lease_lost => Err(Failure::LeaseLost),
            Err(e) => Err(Failure::Platform(e)),
        }
    }
}

enum Failure {
    Platform(PlatformError),
    LeaseLost,
}

fn is_transient(e: &PlatformError) -> bool {
    matches!(e, PlatformError::Unavailable(_))
}

fn event_json(job: &Job) -> String {
    let error = job
        .error_code
        .as_ref()
        .map(|code| JobError { code: code.clone(), detail: job.error_detail.clone().unwrap_or_default() });
    JobEvent {
        kind_of_event: if job.status == "complete" { "job.complete" } else { "job.failed" }.into(),
        kind: job.kind.clone(),
        job_id: job.id.clone(),
        r#ref: job.r#ref.clone(),
        url: job.url.clone(),
        error,
    }
    .to_json()
}

/// Writes each page as it arrives, so memory stays flat and progress is visible while polling.
struct DbSink {
    backends: Backends,
    job_id: String,
    owner: String,
    lease_ms: i64,
    lease_lost: bool,
    /// What the platform reports (capped by the reservation), shown as progress.
    expected: Option<i64>,
}

#[async_trait::async_trait]
impl CommentSink for DbSink {
    async fn page(&mut self, batch: Vec<Comment>) -> Result<(), PlatformError> {
        let rows: Vec<StoredComment> = batch
            .into_iter()
            .map(|mut comment| {
                comment.replies.clear();
                StoredComment {
                    comment_id: comment.id.clone(),
                    parent_id: comment.parent_id.clone(),
                    body: serde_json::to_string(&comment).unwrap_or_default(),
                }
            })
            .collect();
        match jobs::append_comments(
            &self.backends.db,
            &self.job_id,
            (&self.owner, self.lease_ms),
            &rows,
            self.expected,
            now_ms(),
        )
        .await
        {
            Ok(_) => Ok(()),
            Err(cova_storage::StorageError::Conflict(msg)) => {
                self.lease_lost = true;
                Err(PlatformError::Unavailable(msg))
            }
            Err(e) => {
                // The cause stays in the log; a job's error detail is public.
                tracing::warn!(error = %e, "storing a page of comments failed");
                Err(PlatformError::Unavailable("cova could not store the comments; it will retry".into()))
            }
        }
    }
}
