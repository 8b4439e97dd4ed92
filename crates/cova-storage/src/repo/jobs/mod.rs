//! Jobs, both kinds: the row every job has, how a worker claims one (a lease, renewed while it
//! runs), fails it (charging nothing) and how its end is announced, and the reads of the API
//! and the operator. Creating and completing a job are each kind's own: [`analyze`] (comment
//! collection) and [`ai`] (an AI run), both through the one creation step of [`new`].

mod ai;
mod analyze;
pub mod new;
mod waiting;

pub use ai::{AiOutcome, AiOutput, NewAi, complete_ai, create_ai};
pub use analyze::{
    Cap, CreateOutcome, NewAnalyze, Scraped, SizeOutcome, StoredComment, append_comments, complete, create_analyze,
    size_hold,
};
pub use analyze::{create_analyze_in, created};
pub use waiting::{wake_stale, wake_waiting};

use super::balances::Closed;
use crate::schema::{analyses, job_comments, job_leases, jobs};
use crate::{Change, Db, Result, StorageError, Tx};
use cova_domain::{AnalysisStatus, JobKind, JobStatus};
use cova_messages::{AiCommand, AnalyzeCommand, JobError, JobEvent, JobEventType, Outgoing};
use diesel::dsl;
use diesel::prelude::*;
use diesel::query_dsl::methods;

/// A job: typed status and kind (stored as text, read through `cova_domain`'s mapping).
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable, serde::Serialize, serde::Deserialize)]
#[diesel(table_name = jobs)]
pub struct Job {
    pub id: String,
    pub account_id: String,
    /// The token that created it (`None` for jobs of a browser session or the scheduler).
    pub token_id: Option<String>,
    pub kind: JobKind,
    #[diesel(column_name = ref_)]
    pub r#ref: String,
    pub url: String,
    pub status: JobStatus,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub comments_collected: i64,
    pub comments_expected: Option<i64>,
    pub truncated: bool,
    pub error_code: Option<String>,
    pub error_detail: Option<String>,
    /// The batch it was started for, if any.
    pub batch_id: Option<String>,
    /// Comments new to the account's analysis of the post (a completed analyze job).
    pub comments_new: Option<i64>,
    /// Why fewer comments were kept than the post has, when `truncated` (`post_cap`, `balance`,
    /// `max_comments`).
    pub truncated_reason: Option<String>,
    /// Where it stands with the balance: its post not read yet, its hold sized, or waiting for
    /// the account's other jobs to give comments back.
    pub hold_stage: cova_domain::money::Stage,
    /// When a waiting job was last looked at.
    pub waiting_since: Option<i64>,
    /// The customer's cap on the comments collected (an analyze job).
    pub max_comments: Option<i64>,
    /// A session's new analysis: it may spend the free allowance, before the packs.
    pub free_allowance: bool,
    /// The browser session that created it (`None` for jobs of a token or the scheduler).
    pub session_id: Option<String>,
    /// The post's author turned its comments off: it completed with none to collect.
    pub comments_off: bool,
}

/// The job with this id, if any.
pub(crate) async fn find(tx: &mut crate::Tx<'_>, job_id: &str) -> Result<Option<Job>> {
    Ok(tx.first_as::<Job, _>(jobs::table.find(job_id)).await.optional()?)
}

/// Deletes the comments the job's last attempt stored, under the day it started (none when it
/// never started).
async fn discard_attempt(tx: &mut Tx<'_>, job_id: &str) -> Result<()> {
    let attempted = tx.first::<Option<i64>, _>(jobs::table.find(job_id).select(jobs::comments_day)).await?;
    if let Some(attempted) = attempted {
        tx.execute(diesel::delete(job_comments::table.filter(crate::repo::comment_days::rows_of(job_id, attempted))))
            .await?;
    }
    Ok(())
}

/// True when `owner` holds the job's lease (expired or not: nobody else took it over).
pub(crate) async fn holds_lease(tx: &mut Tx<'_>, job_id: &str, owner: &str) -> Result<bool> {
    let holder = tx.first::<String, _>(job_leases::table.find(job_id).select(job_leases::owner)).await.optional()?;
    Ok(holder.is_some_and(|o| o == owner))
}

/// The `job.complete` / `job.failed` event of a finished job: the job webhook's fields.
pub(crate) fn end_event(job: &Job) -> Outgoing {
    let (event_type, error) = match job.status {
        JobStatus::Complete => (JobEventType::Complete, None),
        _ => (
            JobEventType::Failed,
            Some(JobError {
                code: job.error_code.clone().unwrap_or_default(),
                detail: job.error_detail.clone().unwrap_or_default(),
            }),
        ),
    };
    Outgoing::event(&JobEvent {
        event_type,
        kind: job.kind.as_str().to_owned(),
        job_id: job.id.clone(),
        r#ref: job.r#ref.clone(),
        url: job.url.clone(),
        error,
    })
}

/// The job if it exists and belongs to the account (another account's job is "absent").
pub async fn get_for_account(db: &Db, job_id: &str, account_id: &str) -> Result<Option<Job>> {
    Ok(get(db, job_id).await?.filter(|job| job.account_id == account_id))
}

pub async fn get(db: &Db, job_id: &str) -> Result<Option<Job>> {
    find(&mut db.conn().await?.tx(), job_id).await
}

/// A job as a poll shows it: the row, whether its comments are its analysis' breakdown, and
/// for an AI job what it analyses and its result. Read in one query per kind (the cached copy
/// of it is refreshed through [`crate::changes`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Polled {
    pub job: Job,
    /// The analysis of the job's post names this job as the scrape its comments come from
    /// (a later scrape, the analysis' expiry or its removal releases them).
    pub current: bool,
    /// An AI job's quote, tasks and result.
    pub ai: Option<crate::repo::ai::AiJob>,
}

pub async fn poll(db: &Db, job_id: &str) -> Result<Option<Polled>> {
    Ok(poll_many(db, &[job_id]).await?.pop())
}

/// [`poll`] for many jobs at once (the jobs that exist, in no particular order).
pub async fn poll_many(db: &Db, job_ids: &[&str]) -> Result<Vec<Polled>> {
    use crate::schema::ai_jobs;
    if job_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut conn = db.read_conn().await?;
    let mut read = conn.read();
    let query = with_analysis().filter(jobs::id.eq_any(job_ids));
    let rows = read.load_as::<(Job, Option<AnalysisOf>), _>(query).await?;
    let ai_ids: Vec<&str> = rows.iter().filter(|(j, _)| j.kind == JobKind::Ai).map(|(j, _)| j.id.as_str()).collect();
    let mut ai: Vec<crate::repo::ai::AiJob> = if ai_ids.is_empty() {
        Vec::new()
    } else {
        read.load_as::<crate::repo::ai::AiJob, _>(ai_jobs::table.filter(ai_jobs::job_id.eq_any(&ai_ids))).await?
    };
    Ok(rows
        .into_iter()
        .map(|(job, analysis)| {
            let current = analysis.is_some_and(|a| a.breakdown_of(&job));
            let ai = ai.iter().position(|a| a.job_id == job.id).map(|i| ai.swap_remove(i));
            Polled { job, current, ai }
        })
        .collect())
}

/// What the analysis of a job's post says of the job's comments (read with the job, through
/// [`with_analysis`]).
#[derive(Queryable, Selectable)]
#[diesel(table_name = analyses)]
struct AnalysisOf {
    status: AnalysisStatus,
    last_job_id: Option<String>,
}

impl AnalysisOf {
    /// The analysis names this job as the scrape its comments come from.
    fn breakdown_of(&self, job: &Job) -> bool {
        super::analyses::breakdown_job(self.status, self.last_job_id.as_deref()) == Some(job.id.as_str())
    }
}

/// The account's analysis of the job's post.
type SamePost = dsl::And<dsl::Eq<analyses::account_id, jobs::account_id>, dsl::Eq<analyses::ref_, jobs::ref_>>;

/// Jobs, each with the account's analysis of its post when there is one ([`AnalysisOf`]).
fn with_analysis() -> dsl::LeftJoinOn<jobs::table, analyses::table, SamePost> {
    jobs::table
        .left_join(analyses::table.on(analyses::account_id.eq(jobs::account_id).and(analyses::ref_.eq(jobs::ref_))))
}

/// Analyses of the account that are queued or in progress.
pub async fn count_running(db: &Db, account_id: &str) -> Result<i64> {
    let query = jobs::table
        .filter(jobs::account_id.eq(account_id))
        .filter(jobs::kind.eq(JobKind::Analyze.as_str()))
        .filter(jobs::status.eq_any(JobStatus::RUNNING_STR))
        .count();
    Ok(db.conn().await?.tx().get_result::<i64, _>(query).await?)
}

/// What the scraper may do with a delivered command.
#[derive(Debug)]
pub enum Start {
    /// Collect the post: `max` is the hold (what new comments may be charged), `previous`
    /// the comments the account's analysis of the post already holds (a re-scrape charges only
    /// new ones). A redelivered, half-done job starts over clean.
    Collect {
        job: Job,
        max: i64,
        previous: i64,
    },
    /// Already complete or failed: a duplicate delivery, nothing to do.
    Finished(Job),
    /// Another worker holds a live lease on it until `until` (ms): try again then, or sooner
    /// in case the holder gives it up.
    Busy {
        until: i64,
    },
    Missing,
}

/// Claims the job for `owner` for `lease_ms` and moves it to `in_progress`.
pub async fn start(db: &Db, job_id: &str, owner: &str, lease_ms: i64, now: i64) -> Result<Start> {
    // This attempt's comments are stored under the day it starts.
    let day = crate::repo::comment_days::day_of(now);
    crate::repo::comment_days::ensure(db, day).await?;
    let mut t = db.begin().await?;
    let start = start_in(&mut t.tx(), job_id, owner, lease_ms, day, now).await?;
    t.commit().await?;
    if let Start::Collect { job, .. } = &start {
        db.changed(&[Change::Job(&job.id)]).await;
    }
    Ok(start)
}

/// The body of [`start`]'s transaction.
async fn start_in(tx: &mut Tx<'_>, job_id: &str, owner: &str, lease_ms: i64, day: i64, now: i64) -> Result<Start> {
    let Some(job) = find(tx, job_id).await? else {
        return Ok(Start::Missing);
    };
    if job.status.is_finished() {
        return Ok(Start::Finished(job));
    }
    let holder = tx
        .first::<(String, i64), _>(job_leases::table.find(job_id).select((job_leases::owner, job_leases::expires_at)))
        .await
        .optional()?;
    if let Some((holder, until)) = holder
        && holder != owner
        && until > now
    {
        return Ok(Start::Busy { until });
    }
    tx.execute(
        diesel::insert_into(job_leases::table)
            .values((
                job_leases::job_id.eq(job_id),
                job_leases::owner.eq(owner),
                job_leases::expires_at.eq(now + lease_ms),
            ))
            .on_conflict(job_leases::job_id)
            .do_update()
            .set((job_leases::owner.eq(owner), job_leases::expires_at.eq(now + lease_ms))),
    )
    .await?;
    // Whatever an interrupted attempt wrote (under the day it started) is discarded, so
    // nothing is counted twice.
    discard_attempt(tx, job_id).await?;
    tx.execute(diesel::update(jobs::table.find(job_id)).set((
        jobs::status.eq(JobStatus::InProgress.as_str()),
        jobs::started_at.eq(job.started_at.unwrap_or(now)),
        jobs::comments_collected.eq(0),
        jobs::comments_day.eq(day),
    )))
    .await?;
    use crate::schema::reservations;
    let max = tx
        .first::<i64, _>(
            reservations::table.find(job_id).filter(reservations::state.eq("held")).select(reservations::amount),
        )
        .await
        .optional()?
        .unwrap_or(0);
    let job = find(tx, job_id).await?.ok_or(StorageError::NotFound)?;
    let previous = tx
        .first::<i64, _>(
            analyses::table
                .find((&job.account_id, &job.r#ref))
                .filter(analyses::status.eq(AnalysisStatus::Ready.as_str()))
                .select(analyses::comment_count),
        )
        .await
        .optional()?
        .unwrap_or(0);
    Ok(Start::Collect { job, max, previous })
}

/// Extends `owner`'s lease to `now + lease_ms` while its worker is alive; false when another
/// worker holds the job now (this one's lease expired and was taken over).
pub async fn renew_lease(db: &Db, job_id: &str, owner: &str, lease_ms: i64, now: i64) -> Result<bool> {
    let renew = diesel::update(job_leases::table.find(job_id))
        .filter(job_leases::owner.eq(owner))
        .set(job_leases::expires_at.eq(now + lease_ms));
    let renewed = db.conn().await?.tx().execute(renew).await?;
    Ok(renewed == 1)
}

/// Gives the job up for now (a transient failure will be retried by any worker).
pub async fn release_lease(db: &Db, job_id: &str, owner: &str) -> Result<()> {
    let lease = job_leases::table.find(job_id).filter(job_leases::owner.eq(owner));
    db.conn().await?.tx().execute(diesel::delete(lease)).await?;
    Ok(())
}

/// Fails the job once with an API error code: releases the whole hold (nothing is charged),
/// drops partial comments, and queues the `job.failed` event. False on a duplicate.
pub async fn fail(db: &Db, job_id: &str, owner: &str, code: &str, detail: &str, trace: &str, now: i64) -> Result<bool> {
    let mut t = db.begin().await?;
    let done = fail_in(&mut t.tx(), job_id, owner, (code, detail), trace, now).await?;
    t.commit().await?;
    Ok(ended(db, job_id, done).await)
}

/// The body of [`fail`]'s transaction.
async fn fail_in(
    tx: &mut Tx<'_>,
    job_id: &str,
    owner: &str,
    (code, detail): (&str, &str),
    trace: &str,
    now: i64,
) -> Result<Option<Ended>> {
    if !holds_lease(tx, job_id, owner).await? {
        return Ok(None);
    }
    let done = tx
        .execute(diesel::update(jobs::table.find(job_id)).filter(jobs::status.eq_any(JobStatus::RUNNING_STR)).set((
            jobs::status.eq(JobStatus::Failed.as_str()),
            jobs::finished_at.eq(now),
            jobs::comments_collected.eq(0),
            jobs::error_code.eq(code),
            jobs::error_detail.eq(detail),
        )))
        .await?;
    if done == 0 {
        return Ok(None);
    }
    let closed = super::balances::close_in(tx, job_id, None, now).await?;
    discard_attempt(tx, job_id).await?;
    let job = find(tx, job_id).await?.ok_or(StorageError::NotFound)?;
    crate::repo::outbox::queue(tx, &end_event(&job), trace, now).await?;
    Ok(Some(Ended { closed, account_id: job.account_id, released: None }))
}

/// What ending a job committed: how its hold ended, its account, and the earlier job whose
/// comments it released (a newer scrape of the same analysis).
pub(crate) struct Ended {
    pub(crate) closed: Option<Closed>,
    pub(crate) account_id: String,
    pub(crate) released: Option<String>,
}

/// Records a committed end in the metrics and announces it; true when the transaction did its work.
pub(crate) async fn ended(db: &Db, job_id: &str, done: Option<Ended>) -> bool {
    let Some(end) = done else { return false };
    if let Some(closed) = &end.closed {
        closed.record();
    }
    // The job's own end is announced last: a client that sees it (a poll) then finds the
    // account's balance and the earlier scrape's release already in their copies.
    let mut changes: Vec<Change<'_>> = end.released.as_deref().map(Change::Job).into_iter().collect();
    changes.extend([Change::Account(&end.account_id), Change::Job(job_id)]);
    db.changed(&changes).await;
    true
}

/// Issues again, through the outbox, the command of every job of either kind that is queued or
/// in progress and was created at least `min_age_ms` before `now` (or only lists them when
/// `dry_run`): after a restart of the in-process queue, or a database restored from a dump
/// whose commands are gone from the broker. A command that was not lost after all is delivered
/// twice, which is harmless: a worker finds the job finished, or held, and lets it be.
pub async fn reissue_unfinished(db: &Db, min_age_ms: i64, dry_run: bool, now: i64) -> Result<Vec<Job>> {
    let mut conn = db.conn().await?;
    let mut tx = conn.tx();
    let query = jobs::table
        .filter(jobs::status.eq_any(JobStatus::RUNNING_STR))
        .filter(jobs::created_at.le(now - min_age_ms))
        .order(jobs::created_at.asc());
    let stuck = tx.load_as::<Job, _>(query).await?;
    if dry_run {
        return Ok(stuck);
    }
    for job in &stuck {
        let command = match job.kind {
            JobKind::Analyze => Outgoing::command(&AnalyzeCommand { job_id: job.id.clone() }),
            JobKind::Ai => Outgoing::command(&AiCommand { job_id: job.id.clone() }),
        };
        crate::repo::outbox::queue(&mut tx, &command, "{}", now).await?;
    }
    Ok(stuck)
}

/// Who started a job: a token or a browser session.
#[derive(Debug, Clone, Copy)]
pub enum StartedBy<'a> {
    Token(&'a str),
    Session(&'a str),
}

/// The most recent analyze job started with this credential.
pub async fn latest_started_by(db: &Db, account_id: &str, by: StartedBy<'_>) -> Result<Option<Job>> {
    let mut conn = db.conn().await?;
    let mut tx = conn.tx();
    let query = jobs::table
        .filter(jobs::account_id.eq(account_id))
        .filter(jobs::kind.eq(JobKind::Analyze.as_str()))
        .order(jobs::created_at.desc());
    let latest = match by {
        StartedBy::Token(id) => tx.first_as::<Job, _>(query.filter(jobs::token_id.eq(id))).await,
        StartedBy::Session(id) => tx.first_as::<Job, _>(query.filter(jobs::session_id.eq(id))).await,
    };
    Ok(latest.optional()?)
}

/// What a listing of an account's jobs keeps.
#[derive(Debug, Clone, Default)]
pub struct JobFilter<'a> {
    pub status: Option<JobStatus>,
    pub r#ref: Option<&'a str>,
    /// Created at or after / before (unix ms).
    pub created_after: Option<i64>,
    pub created_before: Option<i64>,
    pub batch_id: Option<&'a str>,
}

/// The account's jobs of `kind`, newest first, after `before` (the `(created_at, id)` of the
/// last job of the previous page); each with whether its comments are still its analysis'
/// breakdown (its result can be read).
pub async fn list(
    db: &Db,
    account_id: &str,
    kind: JobKind,
    filter: &JobFilter<'_>,
    before: Option<(i64, String)>,
    limit: i64,
) -> Result<Vec<(Job, bool)>> {
    use diesel_async::RunQueryDsl as Run;
    let query = with_analysis()
        .filter(jobs::account_id.eq(account_id))
        .filter(jobs::kind.eq(kind))
        .order((jobs::created_at.desc(), jobs::id.desc()))
        .limit(limit);
    type Row = (Job, Option<AnalysisOf>);
    // The filters vary, so the statement is boxed, and a boxed statement names its database.
    let mut conn = db.conn().await?;
    let rows: Vec<Row> = match conn.tx() {
        Tx::Pg(c) => {
            Run::load(narrowed(query.into_boxed(), filter, before.as_ref()).select(Row::as_select()), c).await?
        }
        Tx::Sqlite(c) => {
            Run::load(narrowed(query.into_boxed(), filter, before.as_ref()).select(Row::as_select()), c).await?
        }
    };
    Ok(rows
        .into_iter()
        .map(|(job, analysis)| {
            let current = match job.kind {
                JobKind::Analyze => analysis.is_some_and(|a| a.breakdown_of(&job)),
                // An AI job's result is its own, kept with it.
                JobKind::Ai => job.status == JobStatus::Complete,
            };
            (job, current)
        })
        .collect())
}

/// The keyset condition of a page: created before `(created_at, id)` in the listing's order.
type Older =
    dsl::Or<dsl::Lt<jobs::created_at, i64>, dsl::And<dsl::Eq<jobs::created_at, i64>, dsl::Lt<jobs::id, String>>>;

/// A listing's query narrowed by the filter and to the jobs after `before` (`(created_at, id)`).
fn narrowed<'a, Q>(mut q: Q, filter: &JobFilter<'a>, before: Option<&(i64, String)>) -> Q
where
    Q: methods::FilterDsl<dsl::Eq<jobs::status, JobStatus>, Output = Q>
        + methods::FilterDsl<dsl::Eq<jobs::ref_, &'a str>, Output = Q>
        + methods::FilterDsl<dsl::GtEq<jobs::created_at, i64>, Output = Q>
        + methods::FilterDsl<dsl::Lt<jobs::created_at, i64>, Output = Q>
        + methods::FilterDsl<dsl::Eq<jobs::batch_id, &'a str>, Output = Q>
        + methods::FilterDsl<Older, Output = Q>,
{
    if let Some(status) = filter.status {
        q = q.filter(jobs::status.eq(status));
    }
    if let Some(r#ref) = filter.r#ref {
        q = q.filter(jobs::ref_.eq(r#ref));
    }
    if let Some(after) = filter.created_after {
        q = q.filter(jobs::created_at.ge(after));
    }
    if let Some(before) = filter.created_before {
        q = q.filter(jobs::created_at.lt(before));
    }
    if let Some(batch_id) = filter.batch_id {
        q = q.filter(jobs::batch_id.eq(batch_id));
    }
    if let Some((at, id)) = before {
        q = q.filter(jobs::created_at.lt(*at).or(jobs::created_at.eq(*at).and(jobs::id.lt(id.clone()))));
    }
    q
}
