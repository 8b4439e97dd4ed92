//! The ai-worker role: a handler on the worker runtime for AI commands. It claims the job
//! (a lease, so a redelivered command never runs it twice at once), reads at most the quoted
//! number of comments of the scrape that was quoted, runs the configured analyzer with the
//! analysis' watch phrases, and completes the job in one transaction with its result, its
//! charge and the `job.complete` event. A failed job charges nothing.

use cova_analyzers::{AnalyzeError, Analyzer, Comment};
use cova_config::AiConfig;
use cova_messages::AiCommand;
use cova_metrics::JobKind as JobMetric;
use cova_runtime::worker::backoff;
use cova_runtime::{Backends, Delivered, Handler, Outcome, Source};
use cova_storage::repo::jobs::{self, Start};
use cova_storage::repo::{ai, analyses, breakdown};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);
/// Comments read from the database at once.
const CHUNK: i64 = 1_000;

pub struct AiWorker {
    backends: Backends,
    analyzer: Box<dyn Analyzer>,
    config: AiConfig,
    outbox: Arc<Notify>,
}

/// Why a job ends failed, as the job's error code and detail.
struct Failed(&'static str, String);

impl Handler for AiWorker {
    type Message = AiCommand;

    fn name(&self) -> &'static str {
        "ai-worker"
    }

    fn source(&self) -> Source {
        Source::commands::<AiCommand>()
    }

    fn concurrency(&self) -> usize {
        self.config.concurrency
    }

    fn retry_delay(&self, attempt: u32) -> Duration {
        backoff(Duration::from_millis(self.config.retry_base_ms), attempt, MAX_RETRY_DELAY)
    }

    async fn handle(&self, command: AiCommand, delivery: Delivered) -> Outcome {
        self.process(&command.job_id, delivery.attempt).await
    }
}

impl AiWorker {
    pub fn new(backends: Backends, config: AiConfig, outbox: Arc<Notify>) -> Result<Self, String> {
        let analyzer = cova_analyzers::from_config(&config)?;
        Ok(Self { backends, analyzer, config, outbox })
    }

    fn now(&self) -> i64 {
        self.backends.clock.now_ms()
    }

    async fn process(&self, job_id: &str, attempt: u32) -> Outcome {
        let db = &self.backends.db;
        let owner = uuid::Uuid::new_v4().to_string();
        let lease_ms = i64::try_from(self.config.lease_ms).unwrap_or(i64::MAX);
        let job = match jobs::start(db, job_id, &owner, lease_ms, self.now()).await {
            Ok(Start::Collect { job, .. }) => job,
            Ok(Start::Finished(_)) => return Outcome::Done,
            Ok(Start::Busy) => return Outcome::Retry("another worker holds the job".into()),
            Ok(Start::Missing) => return Outcome::Poison(format!("no job {job_id}")),
            Err(e) => return Outcome::Retry(format!("database: {e}")),
        };
        let span = tracing::info_span!("job", job.id = %job.id, job.kind = "ai", job.r#ref = %job.r#ref, attempt);
        let started = std::time::Instant::now();
        span.in_scope(|| tracing::info!("job started"));
        let ran = tracing::Instrument::instrument(self.run(&job), span.clone()).await;
        // The span is entered by instrumenting what follows, never by a guard held across
        // an await (the task may resume on another thread).
        let end = async {
            let outcome = match ran {
                Ok(Ok((result, model, tokens))) => {
                    let stored = jobs::complete_ai(
                        db,
                        &job.id,
                        &owner,
                        jobs::AiOutput { result: &result, model: &model, tokens_used: tokens },
                        &cova_telemetry::current_trace_json(),
                        self.now(),
                    )
                    .await;
                    let announce = || {
                        let duration_ms = started.elapsed().as_millis() as u64;
                        tracing::info!(model, tokens, duration_ms, "job complete");
                        cova_metrics::job_finished(JobMetric::Ai, "complete", started.elapsed(), 0);
                    };
                    return Outcome::of_end(stored, &self.outbox, announce, Outcome::Done);
                }
                Ok(Err(failed)) => failed,
                Err(AnalyzeError::Transient(e)) if attempt < self.config.max_attempts => {
                    tracing::info!(error = %e, "job attempt failed; it will be retried");
                    if let Err(err) = jobs::release_lease(db, &job.id, &owner).await {
                        tracing::warn!(error = %err, "releasing the job lease failed; it will expire");
                    }
                    return Outcome::Retry(e);
                }
                Err(AnalyzeError::Transient(e)) => {
                    Failed("unavailable", format!("The model endpoint kept failing ({e}); nothing was charged."))
                }
                Err(AnalyzeError::Refused(e)) => {
                    tracing::error!(error = %e, "the model endpoint refused cova's request: check ai.openai.*");
                    Failed("unavailable", "The AI model is not available right now; nothing was charged.".into())
                }
                Err(AnalyzeError::Permanent(e)) => {
                    Failed("parse_error", format!("The analysis could not be completed: {e}; nothing was charged."))
                }
            };
            let Failed(code, detail) = outcome;
            let stored =
                jobs::fail(db, &job.id, &owner, code, &detail, &cova_telemetry::current_trace_json(), self.now()).await;
            let announce = || {
                let duration_ms = started.elapsed().as_millis() as u64;
                tracing::warn!(code, detail = %detail, duration_ms, "job failed");
                cova_metrics::job_finished(JobMetric::Ai, "failed", started.elapsed(), 0);
            };
            Outcome::of_end(stored, &self.outbox, announce, Outcome::Done)
        };
        tracing::Instrument::instrument(end, span).await
    }

    /// Reads the quoted comments and analyses them: the result (JSON), the model and the
    /// tokens used; or why the job cannot be done at all.
    #[allow(clippy::type_complexity)]
    async fn run(&self, job: &jobs::Job) -> Result<Result<(String, String, Option<i64>), Failed>, AnalyzeError> {
        let db = &self.backends.db;
        let database = |e: cova_storage::StorageError| AnalyzeError::Transient(format!("database: {e}"));
        let Some(spec) = ai::get_job(db, &job.id).await.map_err(database)? else {
            return Ok(Err(Failed("internal_error", "The AI job has no input.".into())));
        };
        let mut comments = self.read(&spec.source_job_id, spec.comments).await.map_err(database)?;
        if comments.is_empty() {
            // The post was collected again since the quote: its current comments, no more
            // than were quoted.
            let current = analyses::get(db, &job.account_id, &job.r#ref).await.map_err(database)?;
            if let Some(source) = current.as_ref().and_then(|a| a.breakdown_job()) {
                comments = self.read(source, spec.comments).await.map_err(database)?;
            }
        }
        if comments.is_empty() && spec.comments > 0 {
            return Ok(Err(Failed(
                "not_found",
                "The analysis' comments were deleted before the AI job ran; nothing was charged.".into(),
            )));
        }
        let phrases = ai::queries(db, &job.account_id, &job.r#ref).await.map_err(database)?;
        let started = std::time::Instant::now();
        let analysis = self.analyzer.analyze(&comments, &phrases).await?;
        tracing::info!(
            comments = comments.len(),
            model = %analysis.model,
            tokens = analysis.tokens_used,
            took_ms = started.elapsed().as_millis() as u64,
            "AI analysis done"
        );
        let json = serde_json::to_string(&analysis).map_err(|e| AnalyzeError::Permanent(e.to_string()))?;
        let tokens = analysis.tokens_used.map(|t| i64::try_from(t).unwrap_or(i64::MAX));
        Ok(Ok((json, analysis.model, tokens)))
    }

    /// Up to `most` comments of a scrape, in collection order.
    async fn read(&self, job_id: &str, most: i64) -> Result<Vec<Comment>, cova_storage::StorageError> {
        let mut comments: Vec<Comment> = Vec::new();
        let mut after = -1;
        while (comments.len() as i64) < most {
            let want = CHUNK.min(most - comments.len() as i64);
            let rows = breakdown::chunk(&self.backends.db, job_id, after, want).await?;
            let Some(last) = rows.last() else { break };
            after = last.position;
            for row in rows {
                let body = serde_json::from_str::<serde_json::Value>(&row.body).unwrap_or_default();
                let field = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
                comments.push(Comment {
                    id: row.comment_id,
                    text: field(&body["text"]),
                    author: field(&body["author"]["id"]),
                });
            }
        }
        Ok(comments)
    }
}
