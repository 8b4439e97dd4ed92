//! The job step: what every role that runs jobs does around its own work, written once.
//!
//! A role that runs jobs (the scraper, the ai-worker) is a [`JobRunner`]: it says how to run a
//! claimed job and how to store its result. [`JobStep`] makes it a [`Handler`] on the worker
//! runtime and does the rest, the same way for every kind of job:
//!
//! - **claim** the job with a lease ([`jobs::start`]): a job already finished is a duplicate
//!   (acknowledged), one held by another worker is deferred until its lease ends (no attempt
//!   spent), a database that does not answer defers it too;
//! - **renew** the lease while the job runs (every third of it), so that a lease can be short:
//!   a killed worker's job is taken over within one lease, a live one's never;
//! - **end** it: a result is stored by the runner in one transaction; a permanent failure, or a
//!   transient one on the last attempt, fails the job with a code of the catalogue (charging
//!   nothing); a transient one earlier gives the lease up and retries with backoff; cova's own
//!   database failing defers the job, spending no attempt, and gives the lease up as soon as
//!   the database answers again, so the retry does not wait for the lease to expire;
//! - **announce** an end this attempt stored (log line, metrics) and nudge the outbox relay so
//!   its event leaves at once.

use crate::Backends;
use crate::worker::{Delivered, Handler, Outcome, Source, backoff};
use cova_domain::JobKind;
use cova_errors::ErrorCode;
use cova_messages::Command;
use cova_metrics::JobKind as JobMetric;
use cova_storage::StorageError;
use cova_storage::repo::jobs::{self, Job, Start};
use serde::de::DeserializeOwned;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Longest wait between two attempts of one job.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);
/// How soon a job is delivered again while cova's database does not answer.
pub const BACKEND_RETRY: Duration = Duration::from_secs(1);
/// A job held by another worker is looked at again at least this often, in case its holder
/// gives it up before the lease ends (a failed attempt releasing it).
pub const BUSY_RECHECK: Duration = Duration::from_secs(2);

/// How a role runs its jobs (from its section of the configuration).
#[derive(Debug, Clone, Copy)]
pub struct JobSettings {
    /// Jobs run at once by one process.
    pub concurrency: usize,
    /// Attempts of a job whose failures are transient, before it fails for good.
    pub max_attempts: u32,
    /// The first retry's delay; each next one doubles, up to [`MAX_RETRY_DELAY`].
    pub retry_base: Duration,
    /// How long a claim holds without renewal.
    pub lease: Duration,
}

/// A job this worker holds: its row, its hold, and the lease it runs under.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub job: Job,
    /// The comments held on the balance for this job.
    pub hold: i64,
    /// Comments the account's analysis of the post already has (a re-scrape pays for new ones).
    pub previous: i64,
    /// 1 on the first attempt.
    pub attempt: u32,
    /// The lease's owner: writes that need the lease name it.
    pub owner: String,
    pub lease_ms: i64,
}

/// Why a run did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobError {
    /// May pass (the platform or the model failed for now): retried while attempts remain, then
    /// the job fails with this code.
    Transient { code: ErrorCode, detail: String },
    /// Can never succeed: the job fails now with this code; `detail` is public.
    Permanent { code: ErrorCode, detail: String },
    /// cova's own database failed: deferred until it answers, no attempt spent.
    Backend(String),
    /// Another worker took the job over (this one's lease had expired): nothing to store.
    LeaseLost,
    /// The job waits for the balance: it was parked (its lease given up) and is delivered
    /// again when a job of its account ends. Nothing to store.
    Parked,
}

impl JobError {
    pub fn transient(code: ErrorCode, detail: impl Into<String>) -> Self {
        JobError::Transient { code, detail: detail.into() }
    }

    pub fn permanent(code: ErrorCode, detail: impl Into<String>) -> Self {
        JobError::Permanent { code, detail: detail.into() }
    }
}

impl From<StorageError> for JobError {
    fn from(e: StorageError) -> Self {
        JobError::Backend(e.to_string())
    }
}

/// One role's jobs: how to run a claimed job and how to store its result.
pub trait JobRunner: Send + Sync + 'static {
    /// The command that names a job of this kind.
    type Command: Command + DeserializeOwned + Send + 'static;
    /// What a run produces, stored by [`JobRunner::complete`].
    type Output: Send + Sync + 'static;

    const KIND: JobKind;

    fn job_id(command: &Self::Command) -> &str;
    fn settings(&self) -> JobSettings;
    fn backends(&self) -> &Backends;
    /// Nudged after a job's end was stored, so that its event leaves at once.
    fn outbox(&self) -> &Notify;

    /// Runs the claimed job; the lease is renewed meanwhile.
    fn run(&self, claimed: &Claimed) -> impl Future<Output = Result<Self::Output, JobError>> + Send;

    /// Stores the result in one transaction; false when this attempt no longer held the job.
    fn complete(
        &self,
        claimed: &Claimed,
        output: &Self::Output,
        trace: &str,
        now: i64,
    ) -> impl Future<Output = Result<bool, StorageError>> + Send;

    /// Logs (inside the job's span) and counts a completion this attempt stored, and starts
    /// what may follow it out of the job's wait.
    fn completed(&self, output: &Self::Output, took: Duration);
}

/// A [`JobRunner`] as a handler of the worker runtime.
pub struct JobStep<R>(Arc<R>);

impl<R: JobRunner> JobStep<R> {
    pub fn new(runner: R) -> Self {
        Self(Arc::new(runner))
    }

    pub fn runner(&self) -> &R {
        &self.0
    }
}

fn metric(kind: JobKind) -> JobMetric {
    match kind {
        JobKind::Analyze => JobMetric::Analyze,
        JobKind::Ai => JobMetric::Ai,
    }
}

impl<R: JobRunner> Handler for JobStep<R> {
    type Message = R::Command;

    fn name(&self) -> &'static str {
        <R::Command as Command>::ROLE
    }

    fn source(&self) -> Source {
        Source::commands::<R::Command>()
    }

    fn concurrency(&self) -> usize {
        self.0.settings().concurrency
    }

    fn retry_delay(&self, attempt: u32) -> Duration {
        backoff(self.0.settings().retry_base, attempt, MAX_RETRY_DELAY)
    }

    async fn handle(&self, command: R::Command, delivery: Delivered) -> Outcome {
        let runner = &self.0;
        let backends = runner.backends();
        let settings = runner.settings();
        let lease_ms = i64::try_from(settings.lease.as_millis()).unwrap_or(i64::MAX);
        let owner = uuid::Uuid::new_v4().to_string();
        let job_id = R::job_id(&command);
        let now = backends.clock.now_ms();
        let (job, hold, previous) = match jobs::start(&backends.db, job_id, &owner, lease_ms, now).await {
            Ok(Start::Collect { job, max, previous }) => (job, max, previous),
            Ok(Start::Finished(_)) => return Outcome::Done,
            Ok(Start::Busy { until }) => {
                let left = Duration::from_millis(u64::try_from(until - now).unwrap_or(0));
                return Outcome::Wait(left.min(BUSY_RECHECK), "another worker holds the job".into());
            }
            Ok(Start::Missing) => return Outcome::Poison(format!("no job {job_id}")),
            Err(e) => return Outcome::Wait(BACKEND_RETRY, format!("database: {e}")),
        };
        let claimed = Claimed { job, hold, previous, attempt: delivery.attempt, owner, lease_ms };
        let span = tracing::info_span!(
            "job",
            job.id = %claimed.job.id,
            job.kind = R::KIND.as_str(),
            job.r#ref = %claimed.job.r#ref,
            attempt = claimed.attempt
        );
        let started = Instant::now();
        span.in_scope(|| tracing::info!(hold = claimed.hold, "job started"));
        let renewing = renew_while_running(backends, &claimed);
        let ran = tracing::Instrument::instrument(runner.run(&claimed), span.clone()).await;
        renewing.stop().await;
        // The span is entered by instrumenting what follows, never by a guard held across an
        // await (the task may resume on another thread).
        tracing::Instrument::instrument(self.end(&claimed, ran, settings, started), span).await
    }
}

impl<R: JobRunner> JobStep<R> {
    async fn end(
        &self,
        claimed: &Claimed,
        ran: Result<R::Output, JobError>,
        settings: JobSettings,
        started: Instant,
    ) -> Outcome {
        let runner = &self.0;
        let backends = runner.backends();
        let trace = cova_telemetry::current_trace_json();
        let (code, detail, then) = match ran {
            Ok(output) => {
                let stored = runner.complete(claimed, &output, &trace, backends.clock.now_ms()).await;
                return self
                    .ended(claimed, stored, Outcome::Done, || runner.completed(&output, started.elapsed()))
                    .await;
            }
            Err(JobError::LeaseLost) => return Outcome::Done,
            Err(JobError::Parked) => {
                tracing::info!("job waits for the balance: comments held by the account's other jobs may come back");
                self.0.outbox().notify_one();
                return Outcome::Done;
            }
            Err(JobError::Backend(reason)) => {
                tracing::info!(reason, "job attempt stopped: cova's database did not answer; it will be resumed");
                give_up_lease(backends, claimed);
                return Outcome::Wait(BACKEND_RETRY, reason);
            }
            Err(JobError::Transient { code, detail }) if claimed.attempt < settings.max_attempts => {
                tracing::info!(code = code.as_str(), detail, "job attempt failed; it will be retried");
                // The retry (on whichever worker) claims the job at once; a lease left behind
                // would only make it wait for the expiry.
                give_up_lease(backends, claimed);
                return Outcome::Retry(detail);
            }
            Err(JobError::Transient { code, detail }) => {
                let detail = format!("{detail} (gave up after {} attempts)", claimed.attempt);
                (code, detail.clone(), Outcome::GaveUp(detail))
            }
            Err(JobError::Permanent { code, detail }) => (code, detail, Outcome::Done),
        };
        let now = backends.clock.now_ms();
        let stored =
            jobs::fail(&backends.db, &claimed.job.id, &claimed.owner, code.as_str(), &detail, &trace, now).await;
        self.ended(claimed, stored, then, || {
            let took = started.elapsed();
            tracing::warn!(code = code.as_str(), detail, duration_ms = took.as_millis() as u64, "job failed");
            cova_metrics::job_finished(metric(R::KIND), "failed", took, 0);
        })
        .await
    }

    /// The outcome of storing a job's end: `stored` says whether this attempt ended the job
    /// (false: another attempt already had), and then `announce` logs and counts it (its event,
    /// in the outbox, lets the account's work go on: see [`crate::flow`]). The outbox relay is
    /// nudged either way; a database failure defers the message, and the lease is given up as
    /// soon as the database answers.
    async fn ended(
        &self,
        claimed: &Claimed,
        stored: Result<bool, StorageError>,
        then: Outcome,
        announce: impl FnOnce(),
    ) -> Outcome {
        match stored {
            Ok(ended) => {
                if ended {
                    announce();
                }
                self.0.outbox().notify_one();
                then
            }
            Err(e) => {
                give_up_lease(self.0.backends(), claimed);
                Outcome::Wait(BACKEND_RETRY, format!("database: {e}"))
            }
        }
    }
}

/// Renews the claim's lease every third of it until stopped.
struct Renewal {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Renewal {
    /// Stops renewing, after a renewal in flight has finished (a statement is never dropped
    /// half-way).
    async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

fn renew_while_running(backends: &Backends, claimed: &Claimed) -> Renewal {
    let stop = CancellationToken::new();
    let (backends, job_id, owner, lease_ms) =
        (backends.clone(), claimed.job.id.clone(), claimed.owner.clone(), claimed.lease_ms);
    let every = Duration::from_millis(u64::try_from(lease_ms / 3).unwrap_or(1).max(1));
    let stopped = stop.clone();
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stopped.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            match jobs::renew_lease(&backends.db, &job_id, &owner, lease_ms, backends.clock.now_ms()).await {
                Ok(true) => {}
                Ok(false) => {
                    // Its writes will find the job taken over and stop there.
                    tracing::warn!(job.id = %job_id, "the job's lease was taken over by another worker");
                    return;
                }
                Err(e) => {
                    tracing::debug!(job.id = %job_id, error = %e, "renewing the job's lease failed; trying again")
                }
            }
        }
    });
    Renewal { stop, task }
}

/// Gives the job's lease up so that its next attempt, on any worker, claims it at once. While
/// the database does not answer this keeps trying in the background (until the lease would
/// have expired anyway), so that the job resumes as soon as the database is back.
fn give_up_lease(backends: &Backends, claimed: &Claimed) {
    let (backends, job_id, owner) = (backends.clone(), claimed.job.id.clone(), claimed.owner.clone());
    let until = Instant::now() + Duration::from_millis(u64::try_from(claimed.lease_ms).unwrap_or(0));
    tokio::spawn(async move {
        let mut wait = Duration::from_millis(100);
        loop {
            match jobs::release_lease(&backends.db, &job_id, &owner).await {
                Ok(()) => return,
                Err(e) if Instant::now() >= until => {
                    tracing::debug!(job.id = %job_id, error = %e, "the job's lease expires by itself");
                    return;
                }
                Err(_) => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_millis(500));
                }
            }
        }
    });
}
