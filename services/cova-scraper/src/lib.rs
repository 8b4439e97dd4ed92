//! The scraper role, a runner on the job step ([`cova_runtime::job`], which claims, renews,
//! retries, fails and announces). For each analyze job: read the post (which tells private,
//! restricted and deleted posts apart and how many comments to expect), size the job's hold to
//! the post by the money rules (or park the job until the account's other jobs give comments
//! back), collect its comments up to that hold (writing pages as they arrive), then complete it
//! (charge what was collected, bookmark, event).
//! While it collects, the cover and the comment images are downloaded into the media store;
//! a download that fails never fails the job (the image is fetched when first asked for).

use cova_config::{MediaConfig, ScraperConfig};
use cova_domain::JobKind;
use cova_errors::ErrorCode;
use cova_media::{Prefetcher, catalog};
use cova_messages::AnalyzeCommand;
use cova_metrics::JobKind as JobMetric;
use cova_platforms::{Comment, CommentSink, Demand, PlatformError, Platforms, PostRef};
use cova_runtime::{Backends, Claimed, JobError, JobRunner, JobSettings, known_counts};
use cova_storage::repo::jobs::{self, Job, Scraped, SizeOutcome, StoredComment};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

pub struct Scraper {
    backends: Backends,
    platforms: Platforms,
    config: ScraperConfig,
    /// Images downloaded at once per job, and how long a job waits for them at its end.
    prefetch: (usize, Duration),
    /// Nudges the outbox relay after a job ends, so its event leaves at once.
    outbox: Arc<Notify>,
}

/// A collected post, ready to store.
pub struct Collected {
    scraped: Scraped,
    comments: u64,
    pages: u32,
}

impl JobRunner for Scraper {
    type Command = AnalyzeCommand;
    type Output = Collected;

    const KIND: JobKind = JobKind::Analyze;

    fn job_id(command: &AnalyzeCommand) -> &str {
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

    async fn run(&self, claimed: &Claimed) -> Result<Collected, JobError> {
        let job = &claimed.job;
        // A job a person started (with a token or in the workspace) has its first pages before
        // background work; a watch run or a creator's post is background throughout.
        let demand = if job.token_id.is_some() || job.session_id.is_some() {
            Demand::first_interactive(&job.account_id, cova_domain::pace::JOB_FIRST_REQUESTS)
        } else {
            Demand::background(&job.account_id)
        };
        demand.scope(self.collect(job, &claimed.owner, claimed.hold, claimed.previous)).await
    }

    async fn complete(
        &self,
        claimed: &Claimed,
        output: &Collected,
        trace: &str,
        now: i64,
    ) -> Result<bool, cova_storage::StorageError> {
        jobs::complete(&self.backends.db, &claimed.job.id, &claimed.owner, &output.scraped, trace, now).await
    }

    fn completed(&self, output: &Collected, took: Duration) {
        tracing::info!(
            comments = output.comments,
            pages = output.pages,
            duration_ms = took.as_millis() as u64,
            truncated = output.scraped.truncated.map(|t| t.as_str()),
            "job complete"
        );
        cova_metrics::job_finished(JobMetric::Analyze, "complete", took, output.comments);
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
        let prefetch = (media.fetch_concurrency, Duration::from_millis(media.prefetch_wait_ms));
        Self { backends, platforms, config, prefetch, outbox }
    }

    fn now(&self) -> i64 {
        self.backends.clock.now_ms()
    }

    /// Collects the post. `previous` comments are already in the account's analysis of it: a
    /// re-scrape holds (and is charged) only for new ones.
    async fn collect(&self, job: &Job, owner: &str, held: i64, previous: i64) -> Result<Collected, JobError> {
        let post: PostRef = job.r#ref.parse().map_err(platform)?;
        // The post page first: it tells private, restricted and deleted posts apart (the
        // comment list alone may still answer for them) and how many comments to expect.
        let metadata = self.platforms.metadata(&post).await.map_err(platform)?;
        let prefetcher = self.backends.media.prefetcher(self.prefetch.0);
        let mut shown = serde_json::to_value(&metadata).unwrap_or_default();
        match catalog::attach_metadata(&self.backends.db, &job.account_id, &job.r#ref, &mut shown, self.now()).await {
            Ok(pending) => prefetcher.push(pending),
            Err(e) => tracing::warn!(error = %e, "listing the post's images failed; they are left out"),
        }
        if metadata.comments_off == Some(true) {
            // Its page says the comments are off: nothing to hold for, and no request is spent on
            // a list that is empty.
            prefetcher.finish(self.prefetch.1).await;
            let scraped = Scraped {
                truncated: None,
                metadata: Some(shown.to_string()),
                search: metadata.search_text(),
                comments_off: true,
            };
            return Ok(Collected { scraped, comments: 0, pages: 0 });
        }
        let reported = metadata.metrics.comments.and_then(|n| i64::try_from(n).ok());
        // What the post says of its count answers list previews for a while.
        let count =
            known_counts::Count { comments: reported, comments_off: metadata.comments_off, read_at: self.now() };
        known_counts::remember(&self.backends.cache, &job.r#ref, count).await;
        // The hold is sized to the post by the money rules: to what may be charged (the whole
        // post on a first scrape, its growth on a re-scrape, at most the customer's cap), or the
        // job waits while comments held by the account's other jobs may come back.
        // (Jobs it wakes are other jobs: their commands carry no trace of this one.)
        let sized = jobs::size_hold(&self.backends.db, &job.id, owner, reported, previous, "{}", self.now()).await;
        let collect = match sized {
            Ok(SizeOutcome::Collect(collect)) => collect,
            Ok(SizeOutcome::Waiting) => {
                prefetcher.finish(Duration::ZERO).await;
                return Err(JobError::Parked);
            }
            Ok(SizeOutcome::QuotaExceeded) => {
                prefetcher.finish(Duration::ZERO).await;
                return Err(JobError::permanent(ErrorCode::QuotaExceeded, QUOTA_DETAIL));
            }
            Ok(SizeOutcome::Lost) => {
                prefetcher.finish(Duration::ZERO).await;
                return Err(JobError::LeaseLost);
            }
            Err(e) => {
                prefetcher.finish(Duration::ZERO).await;
                return Err(JobError::Backend(format!("sizing the hold: {e}")));
            }
        };
        tracing::debug!(held, hold = collect.hold.amount, limit = collect.limit, "hold sized");
        if job.batch_id.is_some() {
            // Its `job.sized` event lets the flow start the URL after it.
            self.outbox.notify_one();
        }
        let limit = collect.limit;
        let expected = collect.expected;
        let mut sink = DbSink {
            backends: self.backends.clone(),
            job,
            prefetcher,
            owner: owner.to_owned(),
            lease_ms: self.config.lease_ms as i64,
            lease_lost: false,
            store_failed: None,
            expected,
            pages: 0,
        };
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        let collected = self.platforms.collect_comments(&post, limit, &mut sink).await;
        let DbSink { prefetcher, lease_lost, store_failed, pages, .. } = sink;
        match collected {
            Ok(outcome) => {
                prefetcher.finish(self.prefetch.1).await;
                let scraped = Scraped {
                    // Stopped at the limit with more to collect: the limit says why. Otherwise
                    // a platform that showed only part of the post, or stopped handing out
                    // pages it said it had, says so: never a silent `complete`.
                    truncated: if outcome.truncated {
                        Some(collect.stops_for)
                    } else if outcome.partial {
                        Some(cova_domain::Truncation::VisitorView)
                    } else {
                        outcome.cut_short.then_some(cova_domain::Truncation::PlatformStopped)
                    },
                    metadata: Some(shown.to_string()),
                    search: metadata.search_text(),
                    comments_off: outcome.comments_off,
                };
                Ok(Collected { scraped, comments: u64::from(outcome.collected), pages })
            }
            Err(e) => {
                prefetcher.finish(Duration::ZERO).await;
                Err(match (lease_lost, store_failed) {
                    (true, _) => JobError::LeaseLost,
                    (false, Some(reason)) => JobError::Backend(reason),
                    (false, None) => platform(e),
                })
            }
        }
    }
}

/// Why a job ends `quota_exceeded` once its post's size is known.
const QUOTA_DETAIL: &str =
    "The comment balance ran out before this post's comments could be collected; nothing was charged for it.";

/// A platform failure as the job step sees it: transient ones are retried, the rest are final.
fn platform(e: PlatformError) -> JobError {
    if e.is_transient() { JobError::transient(e.code(), e.detail()) } else { JobError::permanent(e.code(), e.detail()) }
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
    /// Why storing a page failed: cova's database, not the platform (the job resumes when the
    /// database answers, spending no attempt).
    store_failed: Option<String>,
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
                    terms: cova_analyzers::search::index_terms(&comment.text, comment.language.as_deref()),
                    language: comment.language.clone().filter(|l| !l.is_empty()),
                    author: comment.author.handle.as_deref().map(str::to_lowercase),
                    media: !comment.media.is_empty(),
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
                self.store_failed = Some(format!("storing a page: {e}"));
                Err(PlatformError::Unavailable("cova could not store the comments; it will retry".into()))
            }
        }
    }
}
