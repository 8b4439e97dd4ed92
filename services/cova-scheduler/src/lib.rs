//! The scheduler role. Every `scheduler.tick_ms` it
//! - claims due watches (several replicas claim disjoint ones) and starts each one's refresh
//!   job through the outbox, like `POST /analyses/{ref}/refresh` would; a watch that cannot run
//!   (no pack, empty balance) is skipped until its next interval with the reason on the entry;
//! - claims due creators (followed TikTok accounts, YouTube channels) and lists each one's new
//!   posts on a pass of its own ([`CREATOR_TICK`]), so a slow platform never holds up watches
//!   and purges; the posts are kept and collected by `cova_creators::run`;
//! - ends the watches of posts found through a creator once their follow is over;
//! - runs the janitor: breakdowns 14 days past their last full scrape are purged and their
//!   entries marked `expired`; their images (and the stored bytes no other image shares) go
//!   with them, as do images that no scrape or metadata read listed for 14 days; sessions,
//!   e-mailed links and AI quotes that ended a day ago are deleted.
//!
//! Time comes from the backends' clock, so tests move it by hand; the next run is one
//! interval after the run (plus jitter), so a scheduler that was down starts one catch-up run.

use cova_config::SchedulerConfig;
use cova_domain::library;
use cova_domain::limits::{MAX_RUNNING_ANALYSES, WATCH_BUSY_RETRY, in_words, ms};
use cova_platforms::Platforms;
use cova_runtime::periodic::Pass;
use cova_runtime::{Backends, Periodic};
use cova_storage::StorageError;
use cova_storage::repo::comment_days;
use cova_storage::repo::creators;
use cova_storage::repo::watches::{self, DueWatch, NextRun, RunStart};
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The scheduler's periodic task, as [`cova_runtime::Progress`] counts its ticks.
pub const TICK: &str = "scheduler tick";
/// The pass that lists due creators.
pub const CREATOR_TICK: &str = "creator tick";

pub struct Scheduler {
    backends: Backends,
    config: SchedulerConfig,
    /// Wakes the outbox relay after runs were started.
    outbox: Arc<Notify>,
    platforms: Platforms,
    /// When (ms, on the clock) the janitor next looks at the days of comments.
    days_due_at: std::sync::atomic::AtomicI64,
}

/// Lists due creators, `creator_concurrency` at once.
struct Creators {
    backends: Backends,
    platforms: Platforms,
    config: SchedulerConfig,
    outbox: Arc<Notify>,
}

impl Pass for Creators {
    async fn pass(&mut self) -> Result<(), String> {
        let db = &self.backends.db;
        let now = self.backends.clock.now_ms();
        let limit = i64::try_from(self.config.creator_concurrency).unwrap_or(i64::MAX).max(1);
        let mut listed = 0usize;
        loop {
            let due = creators::claim_due(db, now, limit).await.map_err(|e| e.to_string())?;
            let scheduled = cova_creators::Occasion::Scheduled;
            // Nobody waits for a scheduled listing: its requests go after people's.
            let runs = due.iter().map(|row| {
                cova_platforms::Demand::background(&row.account_id).scope(cova_creators::run(
                    db,
                    &self.platforms,
                    row,
                    scheduled,
                    "{}",
                    now,
                ))
            });
            for (row, result) in due.iter().zip(futures::future::join_all(runs).await) {
                match result {
                    Ok(_) => listed += 1,
                    // The run gave its claim back: a later pass tries again.
                    Err(e) => {
                        tracing::warn!(creator.r#ref = %row.r#ref, error = %e, "recording a creator's run failed")
                    }
                }
            }
            if (due.len() as i64) < limit {
                break;
            }
        }
        if listed > 0 {
            tracing::info!(listed, "creators listed");
            self.outbox.notify_one();
        }
        Ok(())
    }
}

/// A job waiting for the balance is woken by the end of a job of its account; one that nothing
/// woke within this long, while its account runs no job that could give comments back, is woken
/// by the tick.
pub const WAITING_RECHECK: Duration = Duration::from_secs(10);

/// Due watches started in one transaction: one statement each for its reschedule and one
/// per account for its hold, the rest set-based; a group stays short enough that the accounts
/// it locks wait for it only a few milliseconds.
pub const RUNS_PER_TRANSACTION: usize = 50;

/// Groups of due watches ([`RUNS_PER_TRANSACTION`]) one tick starts at once:
/// `scheduler.start_concurrency` on PostgreSQL; one at a time on SQLite, which has one writer.
pub fn starts_at_once(config: &SchedulerConfig, db: &cova_storage::Db) -> usize {
    if db.is_postgres() { config.start_concurrency.max(1) } else { 1 }
}

/// What one tick did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tick {
    /// Refresh jobs started.
    pub started: usize,
    /// Due watches whose post was already being collected (the run joined that job).
    pub joined: usize,
    /// Due watches that could not run now (no pack, no balance, three analyses running).
    pub skipped: usize,
    /// Jobs waiting for the balance that nothing else would have woken.
    pub woken: usize,
    /// Breakdowns purged by the janitor.
    pub expired: usize,
    /// Days of comments dropped whole by the janitor (PostgreSQL's partitions).
    pub comment_days_dropped: usize,
    /// Images deleted by the janitor.
    pub media_deleted: usize,
    /// Ended sessions, used or expired e-mailed links and expired AI quotes purged.
    pub ended: usize,
}

impl Pass for Scheduler {
    async fn pass(&mut self) -> Result<(), String> {
        let t = self.tick().await.map_err(|e| e.to_string())?;
        if t != Tick::default() {
            tracing::info!(
                started = t.started,
                joined = t.joined,
                skipped = t.skipped,
                woken = t.woken,
                expired = t.expired,
                comment_days_dropped = t.comment_days_dropped,
                media_deleted = t.media_deleted,
                ended = t.ended,
                "scheduler tick"
            );
        }
        Ok(())
    }
}

impl Scheduler {
    pub fn new(backends: Backends, config: SchedulerConfig, outbox: Arc<Notify>, platforms: Platforms) -> Self {
        Self { backends, config, outbox, platforms, days_due_at: Default::default() }
    }

    /// Ticks until `stop` is cancelled; a tick in progress finishes first.
    pub async fn run(self, stop: CancellationToken) {
        tracing::info!(tick_ms = self.config.tick_ms, "scheduler running");
        let period = Duration::from_millis(self.config.tick_ms);
        let creators = Creators {
            backends: self.backends.clone(),
            platforms: self.platforms.clone(),
            config: self.config.clone(),
            outbox: self.outbox.clone(),
        };
        let progress = self.backends.progress.clone();
        let pacing = Periodic { name: TICK, period, wake: None, max_backoff: period };
        let listing = Periodic { name: CREATOR_TICK, period, wake: None, max_backoff: period * 30 };
        tokio::join!(pacing.run(progress.clone(), stop.clone(), self), listing.run(progress, stop, creators));
        tracing::info!("scheduler stopped");
    }

    /// Starts every due watch and purges every expired breakdown, in batches.
    pub async fn tick(&self) -> Result<Tick, StorageError> {
        let db = &self.backends.db;
        let batch = self.config.batch;
        let now = self.backends.clock.now_ms();
        let mut tick = Tick::default();
        watches::end_followed(db, now).await?;
        let concurrency = starts_at_once(&self.config, db);
        loop {
            let mut due = watches::claim_due(db, now, batch).await?;
            // One account's watches together, so its lock is taken by as few groups as may be.
            due.sort_by(|a, b| a.account_id.cmp(&b.account_id));
            // Collected first: a stream over a borrowing closure is not `Send` to the compiler.
            let groups: Vec<_> = due.chunks(RUNS_PER_TRANSACTION).map(|group| self.start(group, now)).collect();
            let mut groups = futures::stream::iter(groups).buffer_unordered(concurrency);
            while let Some(outcomes) = groups.next().await {
                for outcome in outcomes {
                    match outcome {
                        RunStart::Started { .. } => tick.started += 1,
                        RunStart::Joined => tick.joined += 1,
                        _ => tick.skipped += 1,
                    }
                }
            }
            if (due.len() as i64) < batch {
                break;
            }
        }
        // Batch URLs waiting for a slot, and jobs waiting for the balance, go on when a job of
        // their account ends (`cova_runtime::flow`); should that have failed, they go on here.
        for account_id in cova_storage::repo::batches::accounts_waiting(db, batch).await? {
            tick.started += cova_runtime::flow::advance(db, &account_id, "{}", now).await?;
        }
        cova_runtime::flow::end_open_lists(db, now, batch).await?;
        tick.woken = cova_storage::repo::jobs::wake_stale(db, ms(WAITING_RECHECK), batch, now).await?;
        if tick.started + tick.woken > 0 {
            self.outbox.notify_one();
        }
        loop {
            let expired = cova_storage::repo::analyses::expire_due(db, now, batch).await?;
            tick.expired += expired;
            if (expired as i64) < batch {
                break;
            }
        }
        // Days change once a day: looking at them on every tick would only load the database.
        if now >= self.days_due_at.load(std::sync::atomic::Ordering::Relaxed) {
            match comment_days::drop_unused(db, now).await {
                Ok(days) => {
                    tick.comment_days_dropped += days.len();
                    self.days_due_at.store(now + comment_days::LOOK_EVERY_MS, std::sync::atomic::Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "dropping the unused days of comments failed; trying again next tick")
                }
            }
        }
        // Sessions, e-mailed links and AI quotes that ended a day ago are only clutter.
        let ended = [
            cova_storage::repo::sessions::purge_ended(db, now).await,
            cova_storage::repo::email_links::purge(db, now).await,
            cova_storage::repo::ai::purge_quotes(db, now).await,
        ];
        for purged in ended {
            match purged {
                Ok(n) => tick.ended += n,
                Err(e) => tracing::warn!(error = %e, "purging what has ended failed; trying again next tick"),
            }
        }
        loop {
            match cova_media::catalog::purge_expired(db, self.backends.media.store(), now, batch).await {
                Ok(deleted) => {
                    tick.media_deleted += deleted;
                    if (deleted as i64) < batch {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "purging expired images failed; trying again next tick");
                    break;
                }
            }
        }
        Ok(tick)
    }

    /// Starts a group of watches' runs and schedules each one's next. Nothing when the group
    /// could not be recorded: the claims expire and a later tick tries again.
    async fn start(&self, group: &[DueWatch], now: i64) -> Vec<RunStart> {
        let started = watches::start_runs(&self.backends.db, group, "{}", now, |watch, outcome| {
            let next = library::next_run_at(now, i64::from(watch.interval_min), rand::random::<f64>());
            let skipped = |error: &str| NextRun { at: next, ran_at: None, error: Some(error.to_owned()) };
            match outcome {
                RunStart::Started { .. } | RunStart::Joined => NextRun { at: next, ran_at: Some(now), error: None },
                RunStart::PaymentRequired => skipped(
                    "Watching needs a comment pack this month; this run was skipped and the next one tries again.",
                ),
                RunStart::QuotaExceeded => skipped("The comment balance is empty; this run was skipped."),
                RunStart::ConcurrencyLimit => NextRun {
                    at: now + ms(WATCH_BUSY_RETRY),
                    ran_at: None,
                    error: Some(format!(
                        "{MAX_RUNNING_ANALYSES} analyses were running; this run is retried in {}.",
                        in_words(WATCH_BUSY_RETRY)
                    )),
                },
            }
        })
        .await;
        match started {
            Ok(outcomes) => {
                for (watch, outcome) in group.iter().zip(&outcomes) {
                    if let RunStart::Started { job_id } = outcome {
                        tracing::info!(job.id = %job_id, job.r#ref = %watch.r#ref, "watch run started");
                    }
                }
                outcomes
            }
            Err(e) => {
                tracing::warn!(watches = group.len(), error = %e, "starting watch runs failed; their claims expire");
                Vec::new()
            }
        }
    }
}
