//! Comment-collection jobs: creation with dedup, idempotency, payment and concurrency checks
//! in one transaction (with the command written to the outbox), then the scraper's
//! start → progress → complete / fail transitions, each happening at most once.

use super::balances::{Closed, close_in, reserve_in, reserve_split_in};
use super::outbox::insert_in as outbox_in;
use crate::StorageError;
use crate::schema::{
    accounts, ai_consents, ai_jobs, ai_quotes, analyses, balances, idempotency_keys, job_comments, job_leases, jobs,
    reservations,
};
use crate::{Change, Db, Result, in_transaction, with_conn, with_read_conn};
use cova_domain::limits::{self, MAX_RUNNING_ANALYSES, hold};
use cova_domain::time::month_of;
use cova_domain::{AnalysisStatus, Dedup, JobKind, JobStatus};
use cova_messages::{AiCommand, AnalyzeCommand, JobError, JobEvent, JobEventType, Outgoing};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

/// A job as the rest of cova sees it: typed status and kind.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Job {
    pub id: String,
    pub account_id: String,
    /// The token that created it (`None` for jobs of a browser session or the scheduler).
    pub token_id: Option<String>,
    pub kind: JobKind,
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
}

/// The stored row; [`Job`] is what leaves this module.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = jobs)]
struct JobRow {
    id: String,
    account_id: String,
    token_id: Option<String>,
    kind: String,
    #[diesel(column_name = ref_)]
    r#ref: String,
    url: String,
    status: String,
    created_at: i64,
    started_at: Option<i64>,
    finished_at: Option<i64>,
    comments_collected: i64,
    comments_expected: Option<i64>,
    truncated: bool,
    error_code: Option<String>,
    error_detail: Option<String>,
}

impl TryFrom<JobRow> for Job {
    type Error = StorageError;

    fn try_from(row: JobRow) -> Result<Self> {
        let status = JobStatus::parse(&row.status)
            .ok_or_else(|| StorageError::Database(format!("job {} has unknown status `{}`", row.id, row.status)))?;
        let kind = JobKind::parse(&row.kind)
            .ok_or_else(|| StorageError::Database(format!("job {} has unknown kind `{}`", row.id, row.kind)))?;
        Ok(Job {
            id: row.id,
            account_id: row.account_id,
            token_id: row.token_id,
            kind,
            r#ref: row.r#ref,
            url: row.url,
            status,
            created_at: row.created_at,
            started_at: row.started_at,
            finished_at: row.finished_at,
            comments_collected: row.comments_collected,
            comments_expected: row.comments_expected,
            truncated: row.truncated,
            error_code: row.error_code,
            error_detail: row.error_detail,
        })
    }
}

/// Inside a connection: the job with this id, if any. Evaluates to `Result<Option<Job>>`.
macro_rules! find_job {
    ($c:ident, $job_id:expr) => {
        jobs::table.find($job_id).select(JobRow::as_select()).first($c).await.optional()?.map(Job::try_from).transpose()
    };
}

/// The `job.complete` / `job.failed` event of a finished job: the job webhook's fields.
fn end_event(job: &Job) -> Outgoing {
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

pub struct NewAnalyze<'a> {
    pub account_id: &'a str,
    pub token_id: Option<&'a str>,
    /// The cookie session that asked: such a job may spend the free allowance (before packs)
    /// and is not saved to the library by itself.
    pub session_id: Option<&'a str>,
    pub r#ref: &'a str,
    pub url: &'a str,
    pub idempotency_key: Option<&'a str>,
    /// The post's comment count when already known (cached metadata); sizes the opening hold.
    pub known_comments: Option<i64>,
    /// A re-scrape of an analysis (on demand or by its watch): never answered with a recent
    /// result, and a paid feature (needs a pack this month).
    pub refresh: bool,
}

#[derive(Debug)]
pub enum CreateOutcome {
    /// A new job, queued, with `reserved` comments held on the balance.
    Created {
        job: Job,
        reserved: i64,
    },
    /// An existing job of the same ref returned instead; no quota spent.
    Deduplicated(Job, Dedup),
    /// The same Idempotency-Key was used for this request before: the same job.
    Repeated(Job),
    /// The same Idempotency-Key was used for another URL.
    IdempotencyConflict,
    /// A refresh without a comment pack this month.
    PaymentRequired,
    QuotaExceeded,
    ConcurrencyLimit,
}

/// Inside a transaction: remembers that `key` answered with `job_id`.
macro_rules! remember_key {
    ($c:ident, $account_id:expr, $key:expr, $job_id:expr, $ref:expr, $now:expr) => {
        if let Some(key) = $key {
            diesel::insert_into(idempotency_keys::table)
                .values((
                    idempotency_keys::account_id.eq($account_id),
                    idempotency_keys::key.eq(key),
                    idempotency_keys::job_id.eq($job_id),
                    idempotency_keys::ref_.eq($ref),
                    idempotency_keys::created_at.eq($now),
                ))
                .on_conflict_do_nothing()
                .execute($c)
                .await?;
        }
    };
}

/// Inside a transaction: what an Idempotency-Key answered before, as (job id, ref), after
/// forgetting the account's keys older than [`limits::IDEMPOTENCY`].
macro_rules! earlier_key {
    ($c:ident, $account_id:expr, $key:expr, $now:expr) => {{
        diesel::delete(idempotency_keys::table)
            .filter(idempotency_keys::account_id.eq($account_id))
            .filter(idempotency_keys::created_at.le($now - limits::ms(limits::IDEMPOTENCY)))
            .execute($c)
            .await?;
        idempotency_keys::table
            .find(($account_id, $key))
            .select((idempotency_keys::job_id, idempotency_keys::ref_))
            .first::<(String, String)>($c)
            .await
            .optional()?
    }};
}

/// Inside a transaction: takes the account's row lock with a no-op update (PostgreSQL; SQLite
/// is already serialised), so the account's concurrent job requests run one after another.
macro_rules! lock_account {
    ($c:ident, $account_id:expr) => {
        diesel::update(accounts::table.find($account_id))
            .set(accounts::active_tokens.eq(accounts::active_tokens))
            .execute($c)
            .await?;
    };
}

/// Inside a transaction: (granted, available) of the account's balance for `month`.
macro_rules! month_balance {
    ($c:ident, $account_id:expr, $month:expr) => {
        balances::table
            .find(($account_id, $month))
            .select((balances::granted, balances::granted - balances::reserved - balances::spent))
            .first::<(i64, i64)>($c)
            .await
            .optional()?
            .unwrap_or((0, 0))
    };
}

/// Creates an analyze job, or answers why not. Every check and the writes share one
/// transaction that first locks the account row, so concurrent requests of one account are
/// serialised: exact dedup, idempotency, balance and concurrency under any parallelism.
///
/// The new job holds only its opening hold ([`hold::opening`]): the scraper raises it to what
/// the post needs once the post reports its size, so one job never blocks the account's
/// other analyses while it waits for a scraper.
pub async fn create_analyze(db: &Db, new: NewAnalyze<'_>, trace_headers: &str, now: i64) -> Result<CreateOutcome> {
    let month = month_of(now);
    let job_id = super::new_id();
    let mut conn = db.conn().await?;
    let outcome = in_transaction!(&mut conn, |c| {
        lock_account!(c, new.account_id);

        if let Some(key) = new.idempotency_key
            && let Some((earlier_job, earlier_ref)) = earlier_key!(c, new.account_id, key, now)
        {
            if earlier_ref != new.r#ref {
                return Ok(CreateOutcome::IdempotencyConflict);
            }
            if let Some(job) = find_job!(c, &earlier_job)? {
                return Ok(CreateOutcome::Repeated(job));
            }
        }

        let latest = jobs::table
            .filter(jobs::account_id.eq(new.account_id))
            .filter(jobs::kind.eq(JobKind::Analyze.as_str()))
            .filter(jobs::ref_.eq(new.r#ref))
            .filter(jobs::status.ne(JobStatus::Failed.as_str()))
            .order(jobs::created_at.desc())
            .select(JobRow::as_select())
            .first(c)
            .await
            .optional()?
            .map(Job::try_from)
            .transpose()?;
        if let Some(job) = latest
            && let Some(dedup) = Dedup::of(job.status, job.finished_at, now)
            && !(new.refresh && dedup == Dedup::RecentResult)
        {
            remember_key!(c, new.account_id, new.idempotency_key, &job.id, new.r#ref, now);
            return Ok(CreateOutcome::Deduplicated(job, dedup));
        }

        let (granted, pack_available) = month_balance!(c, new.account_id, &month);
        if new.refresh && granted <= 0 {
            return Ok(CreateOutcome::PaymentRequired);
        }
        let free = match new.session_id {
            Some(_) if !new.refresh => {
                accounts::table.find(new.account_id).select(accounts::free_comments_left).first::<i64>(c).await?
            }
            _ => 0,
        };
        let available = pack_available.max(0) + free;
        if available <= 0 {
            return Ok(CreateOutcome::QuotaExceeded);
        }
        let running = jobs::table
            .filter(jobs::account_id.eq(new.account_id))
            .filter(jobs::kind.eq(JobKind::Analyze.as_str()))
            .filter(jobs::status.eq_any(JobStatus::RUNNING_STR))
            .count()
            .get_result::<i64>(c)
            .await?;
        if running >= MAX_RUNNING_ANALYSES {
            return Ok(CreateOutcome::ConcurrencyLimit);
        }

        let reserved = hold::opening(new.known_comments, available);
        if reserved <= 0 || !reserve_split_in!(c, new.account_id, &job_id, &month, reserved, free, now) {
            return Ok(CreateOutcome::QuotaExceeded);
        }
        diesel::insert_into(jobs::table)
            .values((
                jobs::id.eq(&job_id),
                jobs::account_id.eq(new.account_id),
                jobs::token_id.eq(new.token_id),
                jobs::session_id.eq(new.session_id),
                jobs::kind.eq(JobKind::Analyze.as_str()),
                jobs::ref_.eq(new.r#ref),
                jobs::url.eq(new.url),
                jobs::status.eq(JobStatus::Queued.as_str()),
                jobs::created_at.eq(now),
                jobs::comments_collected.eq(0),
                jobs::truncated.eq(false),
            ))
            .execute(c)
            .await?;
        remember_key!(c, new.account_id, new.idempotency_key, &job_id, new.r#ref, now);
        let command = Outgoing::command(&AnalyzeCommand { job_id: job_id.clone() });
        outbox_in!(c, &command, trace_headers, now);
        let job = find_job!(c, &job_id)?.ok_or(StorageError::NotFound)?;
        Ok(CreateOutcome::Created { job, reserved })
    })?;
    drop(conn);
    if let CreateOutcome::Created { job, reserved } = &outcome {
        cova_metrics::balance(cova_metrics::Movement::Reserved, *reserved);
        db.changed(&[Change::Account(&job.account_id), Change::Job(&job.id)]).await;
    }
    Ok(outcome)
}

/// The job if it exists and belongs to the account (another account's job is "absent").
pub async fn get_for_account(db: &Db, job_id: &str, account_id: &str) -> Result<Option<Job>> {
    Ok(get(db, job_id).await?.filter(|job| job.account_id == account_id))
}

pub async fn get(db: &Db, job_id: &str) -> Result<Option<Job>> {
    let mut conn = db.conn().await?;
    with_conn!(&mut conn, |c| find_job!(c, job_id))
}

/// A job and whether its comments are its analysis' breakdown: what a poll shows, read in one
/// query (the cached copy of it is refreshed through [`crate::changes`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Polled {
    pub job: Job,
    /// The analysis of the job's post names this job as the scrape its comments come from
    /// (a later scrape, the analysis' expiry or its removal releases them).
    pub current: bool,
}

pub async fn poll(db: &Db, job_id: &str) -> Result<Option<Polled>> {
    let mut conn = db.read_conn().await?;
    type Row = (JobRow, Option<String>, Option<String>);
    let row: Option<Row> = with_read_conn!(&mut conn, |c| {
        jobs::table
            .left_join(analyses::table.on(analyses::account_id.eq(jobs::account_id).and(analyses::ref_.eq(jobs::ref_))))
            .filter(jobs::id.eq(job_id))
            .select((JobRow::as_select(), analyses::status.nullable(), analyses::last_job_id.nullable()))
            .first::<Row>(c)
            .await
            .optional()
    })?;
    let Some((job, analysis_status, last_job_id)) = row else {
        return Ok(None);
    };
    let job = Job::try_from(job)?;
    let current = analysis_status
        .as_deref()
        .and_then(AnalysisStatus::parse)
        .and_then(|status| super::analyses::breakdown_job(status, last_job_id.as_deref()))
        == Some(job.id.as_str());
    Ok(Some(Polled { job, current }))
}

/// Analyses of the account that are queued or in progress.
pub async fn count_running(db: &Db, account_id: &str) -> Result<i64> {
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        jobs::table
            .filter(jobs::account_id.eq(account_id))
            .filter(jobs::kind.eq(JobKind::Analyze.as_str()))
            .filter(jobs::status.eq_any(JobStatus::RUNNING_STR))
            .count()
            .get_result::<i64>(c)
            .await
    })?)
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
    let mut conn = db.conn().await?;
    let start = in_transaction!(&mut conn, |c| {
        let Some(job) = find_job!(c, job_id)? else {
            return Ok(Start::Missing);
        };
        if job.status.is_finished() {
            return Ok(Start::Finished(job));
        }
        let holder = job_leases::table
            .find(job_id)
            .select((job_leases::owner, job_leases::expires_at))
            .first::<(String, i64)>(c)
            .await
            .optional()?;
        if let Some((holder, until)) = holder
            && holder != owner
            && until > now
        {
            return Ok(Start::Busy { until });
        }
        diesel::insert_into(job_leases::table)
            .values((
                job_leases::job_id.eq(job_id),
                job_leases::owner.eq(owner),
                job_leases::expires_at.eq(now + lease_ms),
            ))
            .on_conflict(job_leases::job_id)
            .do_update()
            .set((job_leases::owner.eq(owner), job_leases::expires_at.eq(now + lease_ms)))
            .execute(c)
            .await?;
        // Whatever an interrupted attempt wrote is discarded, so nothing is counted twice.
        diesel::delete(job_comments::table.filter(job_comments::job_id.eq(job_id))).execute(c).await?;
        diesel::update(jobs::table.find(job_id))
            .set((
                jobs::status.eq(JobStatus::InProgress.as_str()),
                jobs::started_at.eq(job.started_at.unwrap_or(now)),
                jobs::comments_collected.eq(0),
            ))
            .execute(c)
            .await?;
        let max = crate::schema::reservations::table
            .find(job_id)
            .filter(crate::schema::reservations::state.eq("held"))
            .select(crate::schema::reservations::amount)
            .first::<i64>(c)
            .await
            .optional()?
            .unwrap_or(0);
        let job = find_job!(c, job_id)?.ok_or(StorageError::NotFound)?;
        let previous = analyses::table
            .find((&job.account_id, &job.r#ref))
            .filter(analyses::status.eq(AnalysisStatus::Ready.as_str()))
            .select(analyses::comment_count)
            .first::<i64>(c)
            .await
            .optional()?
            .unwrap_or(0);
        Ok(Start::Collect { job, max, previous })
    })?;
    drop(conn);
    if let Start::Collect { job, .. } = &start {
        db.changed(&[Change::Job(&job.id)]).await;
    }
    Ok(start)
}

/// Inside a transaction: true when `owner` holds the job's lease (expired or not: nobody
/// else took it over).
macro_rules! holds_lease {
    ($c:ident, $job_id:expr, $owner:expr) => {
        job_leases::table
            .find($job_id)
            .select(job_leases::owner)
            .first::<String>($c)
            .await
            .optional()?
            .is_some_and(|o| o == $owner)
    };
}

/// Extends `owner`'s lease to `now + lease_ms` while its worker is alive; false when another
/// worker holds the job now (this one's lease expired and was taken over).
pub async fn renew_lease(db: &Db, job_id: &str, owner: &str, lease_ms: i64, now: i64) -> Result<bool> {
    let mut conn = db.conn().await?;
    let renewed = with_conn!(&mut conn, |c| {
        diesel::update(job_leases::table.find(job_id))
            .filter(job_leases::owner.eq(owner))
            .set(job_leases::expires_at.eq(now + lease_ms))
            .execute(c)
            .await
    })?;
    Ok(renewed == 1)
}

/// Gives the job up for now (a transient failure will be retried by any worker).
pub async fn release_lease(db: &Db, job_id: &str, owner: &str) -> Result<()> {
    let mut conn = db.conn().await?;
    with_conn!(&mut conn, |c| {
        diesel::delete(job_leases::table.find(job_id).filter(job_leases::owner.eq(owner))).execute(c).await
    })?;
    Ok(())
}

/// One collected comment, ready to store.
pub struct StoredComment {
    pub comment_id: String,
    pub parent_id: Option<String>,
    /// The comment as the API shows it (JSON, without `replies`).
    pub body: String,
    pub likes: i64,
    /// When the comment was posted (unix ms; 0 when unknown).
    pub posted_at: i64,
    /// Lower-cased text and author, for searching the breakdown.
    pub search: String,
}

/// Appends a page of comments (duplicates by id are ignored), records progress and renews
/// the lease. Returns the number stored so far; `Conflict` when the lease was lost.
pub async fn append_comments(
    db: &Db,
    job_id: &str,
    lease: (&str, i64),
    batch: &[StoredComment],
    expected: Option<i64>,
    now: i64,
) -> Result<i64> {
    let mut conn = db.conn().await?;
    let total = in_transaction!(&mut conn, |c| {
        let renewed = diesel::update(job_leases::table.find(job_id))
            .filter(job_leases::owner.eq(lease.0))
            .set(job_leases::expires_at.eq(now + lease.1))
            .execute(c)
            .await?;
        if renewed == 0 {
            return Err(StorageError::Conflict("another worker took this job over".into()));
        }
        let base = job_comments::table.filter(job_comments::job_id.eq(job_id)).count().get_result::<i64>(c).await?;
        // Row by row: SQLite has no multi-row insert with ON CONFLICT in diesel; inside one
        // transaction this is cheap.
        for (i, item) in batch.iter().enumerate() {
            diesel::insert_into(job_comments::table)
                .values((
                    job_comments::job_id.eq(job_id),
                    job_comments::comment_id.eq(&item.comment_id),
                    job_comments::parent_id.eq(item.parent_id.as_deref()),
                    job_comments::position.eq(base + i as i64),
                    job_comments::body.eq(&item.body),
                    job_comments::likes.eq(item.likes),
                    job_comments::posted_at.eq(item.posted_at),
                    job_comments::search.eq(&item.search),
                ))
                .on_conflict_do_nothing()
                .execute(c)
                .await?;
        }
        let total = job_comments::table.filter(job_comments::job_id.eq(job_id)).count().get_result::<i64>(c).await?;
        diesel::update(jobs::table.find(job_id))
            .filter(jobs::status.eq(JobStatus::InProgress.as_str()))
            .set((jobs::comments_collected.eq(total), jobs::comments_expected.eq(expected)))
            .execute(c)
            .await?;
        Ok(total)
    })?;
    drop(conn);
    db.changed(&[Change::Job(job_id)]).await;
    Ok(total)
}

/// What the scraper learnt about the post besides its comments.
#[derive(Debug, Clone, Default)]
pub struct Scraped {
    /// The post had more comments than were collected (the per-post cap or the hold).
    pub truncated: bool,
    /// The post's metadata (JSON) as read by this scrape.
    pub metadata: Option<String>,
    /// Lower-cased title and author, for searching the library.
    pub search: String,
}

/// Completes the job once, in one transaction: the collected comments become the account's
/// analysis of the post (comments already known keep their `first_seen_at`; the previous
/// breakdown is released); only comments new to the analysis are charged, at most the hold
/// (new comments beyond it are not kept, and the job reports `truncated`); the rest of the
/// hold returns to the balance; a token's job is bookmarked; the `job.complete` event is
/// queued. Returns false when the job was not in progress (a duplicate delivery).
pub async fn complete(db: &Db, job_id: &str, owner: &str, scraped: &Scraped, trace: &str, now: i64) -> Result<bool> {
    let carry_sql = crate::pool::bind_params(
        db.is_postgres(),
        "UPDATE job_comments SET first_seen_at = (SELECT p.first_seen_at FROM job_comments p \
         WHERE p.job_id = ? AND p.comment_id = job_comments.comment_id) WHERE job_id = ?",
    );
    let thread_sql = crate::pool::bind_params(
        db.is_postgres(),
        "UPDATE job_comments SET thread = COALESCE((SELECT p.position FROM job_comments p \
         WHERE p.job_id = job_comments.job_id AND p.comment_id = job_comments.parent_id), position) \
         WHERE job_id = ?",
    );
    let mut conn = db.conn().await?;
    let done: Option<Ended> = in_transaction!(&mut conn, |c| {
        if !holds_lease!(c, job_id, owner) {
            return Ok(None);
        }
        let Some(job) = find_job!(c, job_id)? else { return Ok(None) };
        if job.status != JobStatus::InProgress {
            return Ok(None);
        }
        let existing = analyses::table
            .find((&job.account_id, &job.r#ref))
            .select((analyses::status, analyses::last_job_id, analyses::saved_at))
            .first::<(String, Option<String>, Option<i64>)>(c)
            .await
            .optional()?;
        let previous_job = existing
            .as_ref()
            .filter(|(status, _, _)| status == AnalysisStatus::Ready.as_str())
            .and_then(|(_, last, _)| last.clone())
            .filter(|last| last != job_id);
        if let Some(previous) = &previous_job {
            diesel::sql_query(&carry_sql)
                .bind::<diesel::sql_types::Text, _>(previous)
                .bind::<diesel::sql_types::Text, _>(job_id)
                .execute(c)
                .await?;
        }
        // Comments new to the analysis, in collection order (a parent before its replies).
        let new_rows: Vec<(String, Option<String>)> = job_comments::table
            .filter(job_comments::job_id.eq(job_id))
            .filter(job_comments::first_seen_at.is_null())
            .order(job_comments::position.asc())
            .select((job_comments::comment_id, job_comments::parent_id))
            .load(c)
            .await?;
        let hold = reservations::table
            .find(job_id)
            .filter(reservations::state.eq("held"))
            .select(reservations::amount)
            .first::<i64>(c)
            .await
            .optional()?
            .unwrap_or(0);
        let dropped = beyond_budget(&new_rows, hold);
        for chunk in dropped.chunks(500) {
            diesel::delete(
                job_comments::table
                    .filter(job_comments::job_id.eq(job_id))
                    .filter(job_comments::comment_id.eq_any(chunk)),
            )
            .execute(c)
            .await?;
        }
        let new_count = (new_rows.len() - dropped.len()) as i64;
        // The comments kept, nested by position: see `breakdown::page`.
        diesel::sql_query(&thread_sql).bind::<diesel::sql_types::Text, _>(job_id).execute(c).await?;
        diesel::update(
            job_comments::table.filter(job_comments::job_id.eq(job_id)).filter(job_comments::first_seen_at.is_null()),
        )
        .set(job_comments::first_seen_at.eq(now))
        .execute(c)
        .await?;
        let collected =
            job_comments::table.filter(job_comments::job_id.eq(job_id)).count().get_result::<i64>(c).await?;
        let top_level = job_comments::table
            .filter(job_comments::job_id.eq(job_id))
            .filter(job_comments::parent_id.is_null())
            .count()
            .get_result::<i64>(c)
            .await?;
        let truncated = scraped.truncated || !dropped.is_empty();
        diesel::update(jobs::table.find(job_id))
            .set((
                jobs::status.eq(JobStatus::Complete.as_str()),
                jobs::finished_at.eq(now),
                jobs::comments_collected.eq(collected),
                jobs::truncated.eq(truncated),
            ))
            .execute(c)
            .await?;
        let closed = close_in!(c, job_id, Some(new_count), now)?;
        if let Some(previous) = &previous_job {
            diesel::delete(job_comments::table.filter(job_comments::job_id.eq(previous))).execute(c).await?;
        }
        let platform = job.r#ref.split(':').next().unwrap_or_default().to_owned();
        let expires_at = cova_domain::library::expires_at(now);
        // A token's completed job is bookmarked (if absent); a session's job is not.
        let saved_at = existing.as_ref().and_then(|(_, _, saved)| *saved).or(job.token_id.as_ref().map(|_| now));
        if existing.is_none() {
            diesel::insert_into(analyses::table)
                .values((
                    analyses::id.eq(super::new_id()),
                    analyses::account_id.eq(&job.account_id),
                    analyses::ref_.eq(&job.r#ref),
                    analyses::url.eq(&job.url),
                    analyses::platform.eq(&platform),
                    analyses::status.eq(AnalysisStatus::Ready.as_str()),
                    analyses::created_at.eq(now),
                ))
                .execute(c)
                .await?;
        }
        diesel::update(analyses::table.find((&job.account_id, &job.r#ref)))
            .set((
                analyses::url.eq(&job.url),
                analyses::status.eq(AnalysisStatus::Ready.as_str()),
                analyses::saved_at.eq(saved_at),
                analyses::last_scraped_at.eq(now),
                analyses::expires_at.eq(expires_at),
                analyses::last_job_id.eq(job_id),
                analyses::comment_count.eq(collected),
                analyses::top_level_count.eq(top_level),
                analyses::new_count.eq(new_count),
            ))
            .execute(c)
            .await?;
        if let Some(metadata) = &scraped.metadata {
            diesel::update(analyses::table.find((&job.account_id, &job.r#ref)))
                .set((analyses::metadata.eq(metadata), analyses::search.eq(&scraped.search)))
                .execute(c)
                .await?;
        }
        let job = find_job!(c, job_id)?.ok_or(StorageError::NotFound)?;
        outbox_in!(c, &end_event(&job), trace, now);
        Ok(Some(Ended { closed, account_id: job.account_id, released: previous_job }))
    })?;
    drop(conn);
    Ok(ended(db, job_id, done).await)
}

/// The new comments that do not fit the hold: in collection order, a new comment is kept
/// while the hold has room and its parent (if any) is kept or already known.
fn beyond_budget(new_rows: &[(String, Option<String>)], hold: i64) -> Vec<String> {
    let mut kept = std::collections::HashSet::new();
    let is_new: std::collections::HashSet<&str> = new_rows.iter().map(|(id, _)| id.as_str()).collect();
    let mut dropped = Vec::new();
    for (id, parent) in new_rows {
        let parent_ok = parent.as_deref().is_none_or(|p| !is_new.contains(p) || kept.contains(p));
        if parent_ok && (kept.len() as i64) < hold {
            kept.insert(id.as_str());
        } else {
            dropped.push(id.clone());
        }
    }
    dropped
}

/// Fails the job once with an API error code: releases the whole hold (nothing is charged),
/// drops partial comments, and queues the `job.failed` event. False on a duplicate.
pub async fn fail(db: &Db, job_id: &str, owner: &str, code: &str, detail: &str, trace: &str, now: i64) -> Result<bool> {
    let mut conn = db.conn().await?;
    let done: Option<Ended> = in_transaction!(&mut conn, |c| {
        if !holds_lease!(c, job_id, owner) {
            return Ok(None);
        }
        let done = diesel::update(jobs::table.find(job_id))
            .filter(jobs::status.eq_any(JobStatus::RUNNING_STR))
            .set((
                jobs::status.eq(JobStatus::Failed.as_str()),
                jobs::finished_at.eq(now),
                jobs::comments_collected.eq(0),
                jobs::error_code.eq(code),
                jobs::error_detail.eq(detail),
            ))
            .execute(c)
            .await?;
        if done == 0 {
            return Ok(None);
        }
        let closed = close_in!(c, job_id, None, now)?;
        diesel::delete(job_comments::table.filter(job_comments::job_id.eq(job_id))).execute(c).await?;
        let job = find_job!(c, job_id)?.ok_or(StorageError::NotFound)?;
        outbox_in!(c, &end_event(&job), trace, now);
        Ok(Some(Ended { closed, account_id: job.account_id, released: None }))
    })?;
    drop(conn);
    Ok(ended(db, job_id, done).await)
}

/// What ending a job committed: how its hold ended, its account, and the earlier job whose
/// comments it released (a newer scrape of the same analysis).
struct Ended {
    closed: Option<Closed>,
    account_id: String,
    released: Option<String>,
}

/// Records a committed end in the metrics and announces it; true when the transaction did its work.
async fn ended(db: &Db, job_id: &str, done: Option<Ended>) -> bool {
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
    let stuck: Vec<Job> = with_conn!(&mut conn, |c| {
        jobs::table
            .filter(jobs::status.eq_any(JobStatus::RUNNING_STR))
            .filter(jobs::created_at.le(now - min_age_ms))
            .order(jobs::created_at.asc())
            .select(JobRow::as_select())
            .load::<JobRow>(c)
            .await
    })?
    .into_iter()
    .map(Job::try_from)
    .collect::<Result<_>>()?;
    if dry_run {
        return Ok(stuck);
    }
    for job in &stuck {
        let command = match job.kind {
            JobKind::Analyze => Outgoing::command(&AnalyzeCommand { job_id: job.id.clone() }),
            JobKind::Ai => Outgoing::command(&AiCommand { job_id: job.id.clone() }),
        };
        with_conn!(&mut conn, |c| {
            outbox_in!(c, &command, "{}", now);
            Ok::<(), StorageError>(())
        })?;
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
    let row: Option<JobRow> = with_conn!(&mut conn, |c| {
        let query = jobs::table.filter(jobs::account_id.eq(account_id)).into_boxed();
        let query = match by {
            StartedBy::Token(id) => query.filter(jobs::token_id.eq(id)),
            StartedBy::Session(id) => query.filter(jobs::session_id.eq(id)),
        };
        query
            .filter(jobs::kind.eq(JobKind::Analyze.as_str()))
            .order(jobs::created_at.desc())
            .select(JobRow::as_select())
            .first(c)
            .await
            .optional()
    })?;
    row.map(Job::try_from).transpose()
}

pub struct NewAi<'a> {
    pub account_id: &'a str,
    /// The token whose call is the consent to send the comments to the model.
    pub token_id: Option<&'a str>,
    pub quote_id: &'a str,
    pub idempotency_key: Option<&'a str>,
}

#[derive(Debug)]
pub enum AiOutcome {
    /// A new AI job, queued, with the quote's charge held on the balance.
    Created(Job),
    /// The same Idempotency-Key ran this quote before: the same job.
    Repeated(Job),
    /// No such quote for this account.
    UnknownQuote,
    Expired,
    /// The quote already started a job.
    Used,
    /// The analysis was collected again (or removed) since the quote.
    Stale,
    IdempotencyConflict,
    PaymentRequired,
    QuotaExceeded,
    /// [`limits::MAX_RUNNING_AI_JOBS`] AI jobs of the account are queued or running.
    ConcurrencyLimit,
}

/// Runs a quote: in one transaction that locks the account row, checks the quote, reserves
/// its charge, records the consent and queues the AI job (its command in the outbox).
pub async fn create_ai(db: &Db, new: NewAi<'_>, trace_headers: &str, now: i64) -> Result<AiOutcome> {
    let month = month_of(now);
    let job_id = super::new_id();
    // Keys are shared with /analyze; an AI run remembers its quote in place of a ref.
    let key_ref = format!("quote:{}", new.quote_id);
    // Set inside the transaction, recorded once it has committed.
    let reserved = std::sync::atomic::AtomicI64::new(0);
    let mut conn = db.conn().await?;
    let outcome = in_transaction!(&mut conn, |c| {
        lock_account!(c, new.account_id);
        if let Some(key) = new.idempotency_key
            && let Some((earlier_job, earlier_ref)) = earlier_key!(c, new.account_id, key, now)
        {
            if earlier_ref != key_ref {
                return Ok(AiOutcome::IdempotencyConflict);
            }
            if let Some(job) = find_job!(c, &earlier_job)? {
                return Ok(AiOutcome::Repeated(job));
            }
        }
        let quote = ai_quotes::table
            .find(new.quote_id)
            .filter(ai_quotes::account_id.eq(new.account_id))
            .select(super::ai::Quote::as_select())
            .first(c)
            .await
            .optional()?;
        let Some(quote) = quote else { return Ok(AiOutcome::UnknownQuote) };
        if quote.job_id.is_some() {
            return Ok(AiOutcome::Used);
        }
        if quote.expires_at <= now {
            return Ok(AiOutcome::Expired);
        }
        let source = analyses::table
            .find((new.account_id, &quote.r#ref))
            .filter(analyses::status.eq(AnalysisStatus::Ready.as_str()))
            .select((analyses::last_job_id, analyses::url))
            .first::<(Option<String>, String)>(c)
            .await
            .optional()?;
        let url = match source {
            Some((Some(job), url)) if job == quote.source_job_id => url,
            _ => return Ok(AiOutcome::Stale),
        };
        let (granted, available) = month_balance!(c, new.account_id, &month);
        if granted <= 0 {
            return Ok(AiOutcome::PaymentRequired);
        }
        if available < quote.charge {
            return Ok(AiOutcome::QuotaExceeded);
        }
        let running = jobs::table
            .filter(jobs::account_id.eq(new.account_id))
            .filter(jobs::kind.eq(JobKind::Ai.as_str()))
            .filter(jobs::status.eq_any(JobStatus::RUNNING_STR))
            .count()
            .get_result::<i64>(c)
            .await?;
        if running >= limits::MAX_RUNNING_AI_JOBS {
            return Ok(AiOutcome::ConcurrencyLimit);
        }
        if !reserve_in!(c, new.account_id, &job_id, &month, quote.charge, now) {
            return Ok(AiOutcome::QuotaExceeded);
        }
        diesel::insert_into(jobs::table)
            .values((
                jobs::id.eq(&job_id),
                jobs::account_id.eq(new.account_id),
                jobs::token_id.eq(new.token_id),
                jobs::kind.eq(JobKind::Ai.as_str()),
                jobs::ref_.eq(&quote.r#ref),
                jobs::url.eq(&url),
                jobs::status.eq(JobStatus::Queued.as_str()),
                jobs::created_at.eq(now),
                jobs::comments_collected.eq(0),
                jobs::comments_expected.eq(quote.comments),
                jobs::truncated.eq(false),
            ))
            .execute(c)
            .await?;
        diesel::insert_into(ai_jobs::table)
            .values((
                ai_jobs::job_id.eq(&job_id),
                ai_jobs::quote_id.eq(&quote.id),
                ai_jobs::source_job_id.eq(&quote.source_job_id),
                ai_jobs::tasks.eq(&quote.tasks),
                ai_jobs::comments.eq(quote.comments),
                ai_jobs::charge.eq(quote.charge),
            ))
            .execute(c)
            .await?;
        diesel::update(ai_quotes::table.find(&quote.id)).set(ai_quotes::job_id.eq(&job_id)).execute(c).await?;
        diesel::insert_into(ai_consents::table)
            .values((
                ai_consents::id.eq(super::new_id()),
                ai_consents::account_id.eq(new.account_id),
                ai_consents::token_id.eq(new.token_id),
                ai_consents::ref_.eq(&quote.r#ref),
                ai_consents::job_id.eq(&job_id),
                ai_consents::created_at.eq(now),
            ))
            .execute(c)
            .await?;
        remember_key!(c, new.account_id, new.idempotency_key, &job_id, &key_ref, now);
        let command = Outgoing::command(&AiCommand { job_id: job_id.clone() });
        outbox_in!(c, &command, trace_headers, now);
        let job = find_job!(c, &job_id)?.ok_or(StorageError::NotFound)?;
        reserved.store(quote.charge, std::sync::atomic::Ordering::Relaxed);
        Ok(AiOutcome::Created(job))
    })?;
    drop(conn);
    if let AiOutcome::Created(job) = &outcome {
        cova_metrics::balance(cova_metrics::Movement::Reserved, reserved.into_inner());
        db.changed(&[Change::Account(&job.account_id), Change::Job(&job.id)]).await;
    }
    Ok(outcome)
}

/// What an AI job produced.
#[derive(Debug, Clone, Copy)]
pub struct AiOutput<'a> {
    /// The result (JSON).
    pub result: &'a str,
    pub model: &'a str,
    pub tokens_used: Option<i64>,
}

/// Completes an AI job once: stores its result, charges the quoted charge (held at run) and
/// queues the `job.complete` event. False on a duplicate or a lost lease.
pub async fn complete_ai(
    db: &Db,
    job_id: &str,
    owner: &str,
    output: AiOutput<'_>,
    trace: &str,
    now: i64,
) -> Result<bool> {
    let AiOutput { result, model, tokens_used } = output;
    let mut conn = db.conn().await?;
    let done: Option<Ended> = in_transaction!(&mut conn, |c| {
        if !holds_lease!(c, job_id, owner) {
            return Ok(None);
        }
        let charge = ai_jobs::table
            .find(job_id)
            .select((ai_jobs::charge, ai_jobs::comments))
            .first::<(i64, i64)>(c)
            .await
            .optional()?;
        let Some((charge, comments)) = charge else { return Ok(None) };
        let done = diesel::update(jobs::table.find(job_id))
            .filter(jobs::status.eq(JobStatus::InProgress.as_str()))
            .set((
                jobs::status.eq(JobStatus::Complete.as_str()),
                jobs::finished_at.eq(now),
                jobs::comments_collected.eq(comments),
            ))
            .execute(c)
            .await?;
        if done == 0 {
            return Ok(None);
        }
        diesel::update(ai_jobs::table.find(job_id))
            .set((ai_jobs::result.eq(result), ai_jobs::model.eq(model), ai_jobs::tokens_used.eq(tokens_used)))
            .execute(c)
            .await?;
        let closed = close_in!(c, job_id, Some(charge), now)?;
        diesel::delete(job_leases::table.find(job_id)).execute(c).await?;
        let job = find_job!(c, job_id)?.ok_or(StorageError::NotFound)?;
        outbox_in!(c, &end_event(&job), trace, now);
        Ok(Some(Ended { closed, account_id: job.account_id, released: None }))
    })?;
    drop(conn);
    Ok(ended(db, job_id, done).await)
}
