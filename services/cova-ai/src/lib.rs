//! The ai-worker role: a runner on the job step ([`cova_runtime::job`], which claims the job
//! under a renewed lease, retries, fails and announces). It reads at most the quoted number of
//! comments of the scrape that was quoted, runs the configured analyzer with the analysis'
//! watch phrases, and completes the job in one transaction with its result, its charge and the
//! `job.complete` event. A failed job charges nothing.

use cova_analyzers::{AnalyzeError, Analyzer, Comment, Label};
use cova_config::AiConfig;
use cova_domain::JobKind;
use cova_errors::ErrorCode;
use cova_messages::AiCommand;
use cova_metrics::JobKind as JobMetric;
use cova_runtime::{Backends, Claimed, JobError, JobRunner, JobSettings};
use cova_storage::repo::jobs;
use cova_storage::repo::{ai, analyses, breakdown};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Comments read from the database at once.
const CHUNK: i64 = 1_000;

pub struct AiWorker {
    backends: Backends,
    analyzer: Box<dyn Analyzer>,
    config: AiConfig,
    outbox: Arc<Notify>,
}

/// An analysis, ready to store.
pub struct Analysed {
    /// The result (JSON).
    result: String,
    model: String,
    tokens: Option<i64>,
    /// Sentiments the offline analyzer judged of comments that had none stored: the scrape's
    /// job id and `(comment id, code)`, kept once the job is complete.
    judged: Option<(String, Vec<(String, i16)>)>,
}

impl JobRunner for AiWorker {
    type Command = AiCommand;
    type Output = Analysed;

    const KIND: JobKind = JobKind::Ai;

    fn job_id(command: &AiCommand) -> &str {
        &command.job_id
    }

    fn settings(&self) -> JobSettings {
        JobSettings {
            concurrency: self.config.concurrency,
            max_attempts: self.config.max_attempts,
            retry_base: Duration::from_millis(self.config.retry_base_ms),
            lease: Duration::from_millis(self.config.lease_ms),
        }
    }

    fn backends(&self) -> &Backends {
        &self.backends
    }

    fn outbox(&self) -> &Notify {
        &self.outbox
    }

    async fn run(&self, claimed: &Claimed) -> Result<Analysed, JobError> {
        self.analyse(&claimed.job).await
    }

    async fn complete(
        &self,
        claimed: &Claimed,
        output: &Analysed,
        trace: &str,
        now: i64,
    ) -> Result<bool, cova_storage::StorageError> {
        let stored = jobs::AiOutput { result: &output.result, model: &output.model, tokens_used: output.tokens };
        jobs::complete_ai(&self.backends.db, &claimed.job.id, &claimed.owner, stored, trace, now).await
    }

    fn completed(&self, output: &Analysed, took: Duration) {
        tracing::info!(
            model = output.model,
            tokens = output.tokens,
            duration_ms = took.as_millis() as u64,
            "job complete"
        );
        cova_metrics::job_finished(JobMetric::Ai, "complete", took, 0);
        if let Some((job_id, judged)) = output.judged.clone() {
            keep_sentiments(self.backends.db.clone(), job_id, judged);
        }
    }
}

impl AiWorker {
    pub fn new(backends: Backends, config: AiConfig, outbox: Arc<Notify>) -> Result<Self, String> {
        let analyzer = cova_analyzers::from_config(&config)?;
        Ok(Self { backends, analyzer, config, outbox })
    }

    /// Reads the quoted comments and analyses them.
    async fn analyse(&self, job: &jobs::Job) -> Result<Analysed, JobError> {
        let db = &self.backends.db;
        let Some(spec) = ai::get_job(db, &job.id).await? else {
            return Err(JobError::permanent(ErrorCode::InternalError, "The AI job has no input."));
        };
        let mut source = spec.source_job_id.clone();
        let mut comments = self.read(&source, spec.comments).await?;
        if comments.is_empty() {
            // The post was collected again since the quote: its current comments, no more
            // than were quoted.
            let current = analyses::get(db, &job.account_id, &job.r#ref).await?;
            if let Some(current) = current.as_ref().and_then(|a| a.breakdown_job()) {
                source = current.to_owned();
                comments = self.read(&source, spec.comments).await?;
            }
        }
        if comments.is_empty() && spec.comments > 0 {
            return Err(JobError::permanent(
                ErrorCode::NotFound,
                "The analysis' comments were deleted before the AI job ran; nothing was charged.",
            ));
        }
        let phrases = ai::queries(db, &job.account_id, &job.r#ref).await?;
        let started = std::time::Instant::now();
        let analysis = self.analyzer.analyze(&comments, &phrases).await.map_err(|e| match e {
            AnalyzeError::Transient(e) => JobError::transient(
                ErrorCode::Unavailable,
                format!("The model endpoint kept failing ({e}); nothing was charged."),
            ),
            AnalyzeError::Refused(e) => {
                tracing::error!(error = %e, "the model endpoint refused cova's request: check ai.openai.*");
                JobError::permanent(
                    ErrorCode::Unavailable,
                    "The AI model is not available right now; nothing was charged.",
                )
            }
            AnalyzeError::Permanent(e) => JobError::permanent(
                ErrorCode::ParseError,
                format!("The analysis could not be completed: {e}; nothing was charged."),
            ),
        })?;
        tracing::info!(
            comments = comments.len(),
            model = %analysis.model,
            tokens = analysis.tokens_used,
            took_ms = started.elapsed().as_millis() as u64,
            "AI analysis done"
        );
        let result = serde_json::to_string(&analysis).map_err(|e| {
            JobError::permanent(ErrorCode::InternalError, format!("The result could not be stored: {e}"))
        })?;
        let tokens = analysis.tokens_used.map(|t| i64::try_from(t).unwrap_or(i64::MAX));
        let judged: Vec<(String, i16)> =
            analysis.newly_judged(&comments).into_iter().map(|(id, label)| (id, label.code())).collect();
        let judged = (!judged.is_empty()).then_some((source, judged));
        Ok(Analysed { result, model: analysis.model, tokens, judged })
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
                    sentiment: row.sentiment.and_then(Label::from_code),
                });
            }
        }
        Ok(comments)
    }
}

/// Stores judged sentiments after the job completed (its wait does not grow), so that no later
/// spike check or AI job judges them again. Best effort: a label not written is judged by the
/// next check.
fn keep_sentiments(db: cova_storage::Db, job_id: String, judged: Vec<(String, i16)>) {
    tokio::spawn(async move {
        if let Err(e) = breakdown::store_sentiments(&db, &job_id, &judged).await {
            tracing::warn!(error = %e, job.id = %job_id, "the judged sentiments were not kept; a later check judges them");
        }
    });
}
