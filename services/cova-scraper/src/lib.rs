//! The scraper role, a handler on the worker runtime. For each analyze command: claim the job,
//! read the post (which tells private, restricted and deleted posts apart and how many comments
//! to expect), size the job's hold to the post, collect its comments up to that hold (writing
//! pages as they arrive), then complete it (charge what was collected, bookmark, event) or fail
//! it (charge nothing, event). Transient failures retry with backoff, then fail the job.
//! While it collects, the cover and the comment images are downloaded into the media store;
//! a download that fails never fails the job (the image is fetched when first asked for).

use cova_config::{MediaConfig, ScraperConfig};
use cova_domain::limits::{MAX_COMMENTS_PER_POST, hold};
use cova_media::{Prefetcher, catalog};
use cova_messages::AnalyzeCommand;
use cova_metrics::JobKind as JobMetric;
use cova_platforms::{Comment, CommentSink, PlatformError, Platforms, PostRef};
use cova_runtime::worker::backoff;
use cova_runtime::{Backends, Delivered, Handler, Outcome, Source};
use cova_storage::repo::jobs::{self, Job, Scraped, Start, StoredComment};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Longest wait between two deliveries of one job.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);

pub struct Scraper {
    backends: Backends,
    platforms: Platforms,
    config: ScraperConfig,
    /// Images downloaded at once per job, and how long a job waits for them at its end.
    prefetch: (usize, Duration),
    /// Nudges the outbox relay after a job ends, so its event leaves at once.
    outbox: Arc<Notify>,
}

impl Handler for Scraper {
    type Message = AnalyzeCommand;

    fn name(&self) -> &'static str {
        "scraper"
    }

    fn source(&self) -> Source {
        Source::commands::<AnalyzeCommand>()
    }

    fn concurrency(&self) -> usize {
        self.config.concurrency
    }

    fn retry_delay(&self, attempt: u32) -> Duration {
        backoff(Duration::from_millis(self.config.retry_base_ms), attempt, MAX_RETRY_DELAY)
    }

    async fn handle(&self, command: AnalyzeCommand, delivery: Delivered) -> Outcome {
        self.process(&command.job_id, delivery.attempt).await
    }
}

impl Scraper {
    pub fn new(
        backends: Backends,
        platforms: Platforms,
        config: ScraperConfig,
        media: &MediaConfig,
        outbox: Arc<Notify>,
    ) -> Self {
        // The wait is bounded by half the job's lease (renewed by the last page written), so
        // that no other scraper takes the job over while its images finish.
        let wait = media.prefetch_wait_ms.min(config.lease_ms / 2);
        let prefetch = (media.fetch_concurrency, Duration::from_millis(wait));
        Self { backends, platforms, config, prefetch, outbox }
    }

    fn now(&self) -> i64 {
        self.backends.clock.now_ms()
    }

    async fn process(&self, job_id: &str, attempt: u32) -> Outcome {
        let db = &self.backends.db;
        let owner = uuid::Uuid::new_v4().to_string();
        let lease_ms = self.config.lease_ms as i64;
        let (job, held, previous) = match jobs::start(db, job_id, &owner, lease_ms, self.now()).await {
            Ok(Start::Collect { job, max, previous }) => (job, max, previous),
            Ok(Start::Finished(_)) => return Outcome::Done,
            Ok(Start::Busy) => return Outcome::Retry("another worker holds the job".into()),
            Ok(Start::Missing) => return Outcome::Poison(format!("no job {job_id}")),
            Err(e) => return Outcome::Retry(format!("database: {e}")),
        };
        let span = tracing::info_span!("job", job.id = %job.id, job.kind = "analyze", job.r#ref = %job.r#ref, attempt);
        let started = std::time::Instant::now();
        span.in_scope(|| tracing::info!(hold = held, "job started"));
        let result = tracing::Instrument::instrument(self.collect(&job, &owner, held, previous), span.clone()).await;
        // The span is entered by instrumenting what follows, never by a guard held across
        // an await (the task may resume on another thread).
        let end = async {
            let finished = |status: &'static str, comments: u64| {
                cova_metrics::job_finished(JobMetric::Analyze, status, started.elapsed(), comments);
            };
            match result {
                Ok((scraped, stats)) => {
                    let stored = jobs::complete(
                        db,
                        &job.id,
                        &owner,
                        &scraped,
                        &cova_telemetry::current_trace_json(),
                        self.now(),
                    )
                    .await;
                    let announce = || {
                        let duration_ms = started.elapsed().as_millis() as u64;
                        tracing::info!(
                            comments = stats.comments,
                            pages = stats.pages,
                            duration_ms,
                            truncated = scraped.truncated,
                            "job complete"
                        );
                        finished("complete", stats.comments);
                    };
                    Outcome::of_end(stored, &self.outbox, announce, Outcome::Done)
                }
                Err(Failure::LeaseLost) => Outcome::Done,
                Err(Failure::Platform(e)) if e.is_transient() && attempt < self.config.max_attempts => {
                    tracing::info!(code = e.code().as_str(), error = %e, "job attempt failed; it will be retried");
                    // Let the retry (on whichever worker) claim the job at once; a lease left
                    // behind would only make it wait for the expiry.
                    if let Err(err) = jobs::release_lease(db, &job.id, &owner).await {
                        tracing::warn!(error = %err, "releasing the job lease failed; it will expire");
                    }
                    Outcome::Retry(e.to_string())
                }
                Err(Failure::Platform(e)) => {
                    let gave_up = e.is_transient();
                    let detail = if gave_up {
                        format!("{} (gave up after {attempt} attempts)", e.detail())
                    } else {
                        e.detail().to_owned()
                    };
                    let stored = jobs::fail(
                        db,
                        &job.id,
                        &owner,
                        e.code().as_str(),
                        &detail,
                        &cova_telemetry::current_trace_json(),
                        self.now(),
                    )
                    .await;
                    let then = if gave_up { Outcome::GaveUp(detail.clone()) } else { Outcome::Done };
                    let announce = || {
                        let duration_ms = started.elapsed().as_millis() as u64;
                        tracing::warn!(code = e.code().as_str(), detail, duration_ms, "job failed");
                        finished("failed", 0);
                    };
                    Outcome::of_end(stored, &self.outbox, announce, then)
                }
            }
        };
        tracing::Instrument::instrument(end, span).await
    }

    /// Collects the post. `previous` comments are already in the account's analysis of it: a
    /// re-scrape holds (and is charged) only for new ones.
    async fn collect(&self, job: &Job, owner: &str, held: i64, previous: i64) -> Result<(Scraped, Stats), Failure> {
        let post: PostRef = job.r#ref.parse().map_err(Failure::Platform)?;
        // The post page first: it tells private, restricted and deleted posts apart (the
        // comment list alone may still answer for them) and how many comments to expect.
        let metadata = self.platforms.metadata(&post).await.map_err(Failure::Platform)?;
        let prefetcher = self.backends.media.prefetcher(self.prefetch.0);
        let mut shown = serde_json::to_value(&metadata).unwrap_or_default();
        match catalog::attach_metadata(&self.backends.db, &job.account_id, &job.r#ref, &mut shown, self.now()).await {
            Ok(pending) => prefetcher.push(pending),
            Err(e) => tracing::warn!(error = %e, "listing the post's images failed; they are left out"),
        }
        let reported = metadata.metrics.comments.and_then(|n| i64::try_from(n).ok());
        // Size the hold to what may be charged: the whole post on a first scrape, its growth on
        // a re-scrape. Lower it (the rest is free for the account's other jobs at once) or
        // raise it as far as the balance allows; what it cannot cover is truncated.
        let needed = if previous > 0 { hold::needed_for_rescrape(reported, previous) } else { hold::needed(reported) };
        let max = match cova_storage::repo::balances::adjust_hold(&self.backends.db, &job.id, needed).await {
            Ok(Some(hold)) => hold,
            Ok(None) => held,
            Err(e) => {
                tracing::warn!(error = %e, "sizing the hold failed");
                return Err(Failure::Platform(PlatformError::Unavailable("cova's database is unavailable".into())));
            }
        };
        if max <= 0 {
            return Err(Failure::Platform(PlatformError::Unavailable("no comments were reserved for this job".into())));
        }
        // Known comments are collected again free of charge: the hold bounds only new ones.
        let limit = (max + previous).min(MAX_COMMENTS_PER_POST);
        let expected = reported.map(|n| n.min(limit));
        let mut sink = DbSink {
            backends: self.backends.clone(),
            job,
            prefetcher,
            owner: owner.to_owned(),
            lease_ms: self.config.lease_ms as i64,
            lease_lost: false,
            expected,
            pages: 0,
        };
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        let collected = self.platforms.collect_comments(&post, limit, &mut sink).await;
        let DbSink { prefetcher, lease_lost, pages, .. } = sink;
        match collected {
            Ok(outcome) => {
                prefetcher.finish(self.prefetch.1).await;
                let scraped = Scraped {
                    truncated: outcome.truncated,
                    metadata: Some(shown.to_string()),
                    search: metadata.search_text(),
                };
                Ok((scraped, Stats { comments: u64::from(outcome.collected), pages }))
            }
            Err(e) => {
                prefetcher.finish(Duration::ZERO).await;
                Err(if lease_lost { Failure::LeaseLost } else { Failure::Platform(e) })
            }
        }
    }
}

enum Failure {
    Platform(PlatformError),
    LeaseLost,
}

/// What a collection did, for its log line and metrics.
struct Stats {
    comments: u64,
    pages: u32,
}

/// Writes each page as it arrives, so memory stays flat and progress is visible while polling.
struct DbSink<'a> {
    backends: Backends,
    job: &'a Job,
    /// Downloads the comment images as pages arrive.
    prefetcher: Prefetcher,
    owner: String,
    lease_ms: i64,
    lease_lost: bool,
    /// What the platform reports (capped by the hold), shown as progress.
    expected: Option<i64>,
    /// Pages written so far.
    pages: u32,
}

#[async_trait::async_trait]
impl CommentSink for DbSink<'_> {
    async fn page(&mut self, mut batch: Vec<Comment>) -> Result<(), PlatformError> {
        self.pages += 1;
        let now = self.backends.clock.now_ms();
        match catalog::attach_comments(&self.backends.db, &self.job.account_id, &self.job.r#ref, &mut batch, now).await
        {
            Ok(pending) => self.prefetcher.push(pending),
            Err(e) => tracing::warn!(error = %e, "listing comment images failed; they are left out"),
        }
        let rows: Vec<StoredComment> = batch
            .into_iter()
            .map(|mut comment| {
                comment.replies.clear();
                StoredComment {
                    comment_id: comment.id.clone(),
                    parent_id: comment.parent_id.clone(),
                    body: serde_json::to_string(&comment).unwrap_or_default(),
                    likes: i64::try_from(comment.likes).unwrap_or(i64::MAX),
                    posted_at: cova_domain::time::parse_rfc3339(&comment.created_at).unwrap_or(0),
                    search: comment.search_text(),
                }
            })
            .collect();
        match jobs::append_comments(
            &self.backends.db,
            &self.job.id,
            (&self.owner, self.lease_ms),
            &rows,
            self.expected,
            now,
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
