//! Comment-collection jobs: creation with dedup, idempotency, payment and concurrency checks
//! in one transaction (with the command written to the outbox), the scraper's pages as they
//! arrive, and completion, which turns the collected comments into the account's analysis of
//! the post and charges only the comments new to it.

use super::new::lock_account;
use super::{Ended, Job, end_event, ended, find_job, holds_lease};
use crate::repo::balances::{account_in, close_in, held_in, move_hold_in};
use crate::repo::comment_days::rows_of;
use crate::repo::outbox::insert_in as outbox_in;
use crate::schema::{analyses, job_comments, job_leases, jobs, reservations};
use crate::{Change, Db, Result, StorageError, in_transaction};
use cova_domain::money::{self, Hold, Sized, Sizing, Stage};
use cova_domain::time::month_of;
use cova_domain::{AnalysisStatus, Dedup, JobStatus};
use cova_messages::{AnalyzeCommand, Outgoing};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

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
    /// The batch the job is started for.
    pub batch_id: Option<&'a str>,
    /// The customer's cap on the comments collected.
    pub max_comments: Cap,
}

/// The customer's cap on a collection (`max_comments`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// The cap of the analysis' last scrape: a re-scrape not asked otherwise.
    Kept,
    /// This cap (`None`: none).
    Set(Option<i64>),
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

/// Inside a transaction: the creation of an analyze job as [`create_analyze`] describes it,
/// with `$job_id` for a new job. Evaluates to `Result<CreateOutcome>`.
macro_rules! create_analyze_in {
    ($c:ident, $new:expr, $job_id:expr, $month:expr, $trace:expr, $now:expr) => {{
        use cova_domain::money::{self, Admission, AnalyzeRequest, Stage};
        use cova_domain::{Dedup, JobKind, JobStatus};
        use cova_messages::{AnalyzeCommand, Outgoing};
        use $crate::repo::balances::{account_in, reserve_in};
        use $crate::repo::jobs::new::{NewJob, Repeat, insert_job, lock_account, remember_key, repeated};
        use $crate::repo::jobs::{Cap, CreateOutcome, Job, NewAnalyze};
        use $crate::schema::{analyses, jobs};
        let (new, job_id, month, trace_headers, now): (&NewAnalyze<'_>, &str, &str, &str, i64) =
            ($new, $job_id, $month, $trace, $now);
        let outcome: $crate::Result<CreateOutcome> = async {
            lock_account!($c, new.account_id);

            match repeated!($c, new.account_id, new.idempotency_key, new.r#ref, now) {
                Some(Repeat::Conflict) => return Ok(CreateOutcome::IdempotencyConflict),
                Some(Repeat::Same(job)) => return Ok(CreateOutcome::Repeated(job)),
                None => {}
            }

            let latest = jobs::table
                .filter(jobs::account_id.eq(new.account_id))
                .filter(jobs::kind.eq(JobKind::Analyze.as_str()))
                .filter(jobs::ref_.eq(new.r#ref))
                .filter(jobs::status.ne(JobStatus::Failed.as_str()))
                .order(jobs::created_at.desc())
                .select(Job::as_select())
                .first($c)
                .await
                .optional()?;
            if let Some(job) = latest
                && let Some(dedup) = Dedup::of(job.status, job.finished_at, now)
                && !(new.refresh && dedup == Dedup::RecentResult)
            {
                remember_key!($c, new.account_id, new.idempotency_key, &job.id, new.r#ref, now);
                return Ok(CreateOutcome::Deduplicated(job, dedup));
            }

            let max_comments = match new.max_comments {
                Cap::Set(cap) => cap,
                Cap::Kept => analyses::table
                    .find((new.account_id, new.r#ref))
                    .select(analyses::max_comments)
                    .first::<Option<i64>>($c)
                    .await
                    .optional()?
                    .flatten(),
            };
            let account = account_in!($c, new.account_id, month)?;
            let request = AnalyzeRequest {
                refresh: new.refresh,
                session: new.session_id.is_some(),
                known_comments: new.known_comments,
                max_comments,
            };
            let hold = match money::admit_analyze(&account, &request) {
                Admission::Admit(hold) => hold,
                Admission::PaymentRequired => return Ok(CreateOutcome::PaymentRequired),
                Admission::QuotaExceeded => return Ok(CreateOutcome::QuotaExceeded),
                Admission::ConcurrencyLimit => return Ok(CreateOutcome::ConcurrencyLimit),
            };
            // Decided under the lock: the conditional updates only guard against a bug.
            if !reserve_in!($c, new.account_id, job_id, month, hold, now) {
                return Err($crate::StorageError::Conflict("a balance changed under the account lock".into()));
            }
            let row = NewJob {
                id: job_id,
                account_id: new.account_id,
                token_id: new.token_id,
                session_id: new.session_id,
                kind: JobKind::Analyze,
                r#ref: new.r#ref,
                url: new.url,
                comments_expected: None,
                batch_id: new.batch_id,
                hold_stage: Stage::Opening,
                max_comments,
                free_allowance: request.free_allowance(),
            };
            let command = Outgoing::command(&AnalyzeCommand { job_id: job_id.to_owned() });
            let job = insert_job!($c, &row, new.idempotency_key, new.r#ref, &command, trace_headers, now)?;
            Ok(CreateOutcome::Created { job, reserved: hold.amount })
        }
        .await;
        outcome
    }};
}
pub(crate) use create_analyze_in;

/// Creates an analyze job, or answers why not. Every check and the writes share one
/// transaction that first locks the account row, so concurrent requests of one account are
/// serialised: exact dedup, idempotency, balance and concurrency under any parallelism. Whether
/// it may start and what it holds are the money rules' ([`money::admit_analyze`]).
///
/// The new job holds only its opening hold: the scraper sizes it once the post reports its
/// size ([`size_hold`]), so one job never blocks the account's other analyses while it waits
/// for a scraper.
pub async fn create_analyze(db: &Db, new: NewAnalyze<'_>, trace_headers: &str, now: i64) -> Result<CreateOutcome> {
    let month = month_of(now);
    let job_id = crate::repo::new_id();
    let mut conn = db.conn().await?;
    let outcome = in_transaction!(&mut conn, |c| create_analyze_in!(c, &new, &job_id, &month, trace_headers, now))?;
    drop(conn);
    created(db, &outcome).await;
    Ok(outcome)
}

/// Records a committed creation in the metrics and the snapshots.
pub(crate) async fn created(db: &Db, outcome: &CreateOutcome) {
    if let CreateOutcome::Created { job, reserved } = outcome {
        cova_metrics::balance(cova_metrics::Movement::Reserved, *reserved);
        db.changed(&[Change::Account(&job.account_id), Change::Job(&job.id)]).await;
    }
}

/// What sizing a job's hold to its post came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeOutcome {
    /// Collect under this hold.
    Collect(money::Collect),
    /// The job waits for the account's other jobs to give comments back: it is parked (its
    /// lease given up) and sized again when one of them ends.
    Waiting,
    /// Nothing is left on the balance and nothing can come back: the job ends
    /// `quota_exceeded`, charged nothing.
    QuotaExceeded,
    /// This worker no longer holds the job, or its hold was closed: nothing to do.
    Lost,
}

/// Sizes the job's hold to its post by the money rules ([`money::size_hold`]), in one
/// transaction under the account's lock: the hold is moved (lowered, or raised from what the
/// balance has), or the job parks holding nothing, waking the account's other waiting jobs when
/// the rules say so, or (nothing left, nothing to come back) it is answered `QuotaExceeded`. `reported` is the post's comment count, `previous` the comments the account's analysis
/// already has.
pub async fn size_hold(
    db: &Db,
    job_id: &str,
    owner: &str,
    reported: Option<i64>,
    previous: i64,
    trace: &str,
    now: i64,
) -> Result<SizeOutcome> {
    let mut conn = db.conn().await?;
    // (account, outcome, jobs woken, change of the hold)
    type Done = (String, SizeOutcome, Vec<String>, i64);
    let outcome: Option<Done> = in_transaction!(&mut conn, |c| {
        if !holds_lease!(c, job_id, owner) {
            return Ok(None);
        }
        let Some(job) = find_job!(c, job_id)? else { return Ok(None) };
        if !job.status.is_running() {
            return Ok(None);
        }
        lock_account!(c, &job.account_id);
        let Some((hold, month)) = held_in!(c, job_id)? else { return Ok(None) };
        let account = account_in!(c, &job.account_id, &month)?;
        let sizing =
            Sizing { reported, previous, max_comments: job.max_comments, hold, free_allowance: job.free_allowance };
        match money::size_hold(&account, job_id, &sizing) {
            Sized::Collect(collect) => {
                if !move_hold_in!(c, &job.account_id, job_id, &month, hold, collect.hold) {
                    return Err(StorageError::Conflict("a balance changed under the account lock".into()));
                }
                diesel::update(jobs::table.find(job_id))
                    .set((
                        jobs::hold_stage.eq(Stage::Sized),
                        jobs::waiting_since.eq(None::<i64>),
                        jobs::comments_expected.eq(collect.expected),
                    ))
                    .execute(c)
                    .await?;
                let change = collect.hold.amount - hold.amount;
                Ok(Some((job.account_id, SizeOutcome::Collect(collect), Vec::new(), change)))
            }
            Sized::QuotaExceeded => Ok(Some((job.account_id, SizeOutcome::QuotaExceeded, Vec::new(), 0))),
            Sized::Wait { wake } => {
                // It waits holding nothing: its opening hold goes back for the jobs before it.
                if !move_hold_in!(c, &job.account_id, job_id, &month, hold, Hold::default()) {
                    return Err(StorageError::Conflict("a balance changed under the account lock".into()));
                }
                diesel::update(jobs::table.find(job_id))
                    .set((
                        jobs::hold_stage.eq(Stage::Waiting),
                        jobs::waiting_since.eq(now),
                        jobs::comments_expected.eq(reported.map(money::expected)),
                    ))
                    .execute(c)
                    .await?;
                // Parked: the job is delivered again when woken, to any worker.
                diesel::delete(job_leases::table.find(job_id).filter(job_leases::owner.eq(owner))).execute(c).await?;
                for id in &wake {
                    outbox_in!(c, &Outgoing::command(&AnalyzeCommand { job_id: id.clone() }), trace, now);
                }
                Ok(Some((job.account_id, SizeOutcome::Waiting, wake, -hold.amount)))
            }
        }
    })?;
    drop(conn);
    let Some((account_id, outcome, woken, change)) = outcome else { return Ok(SizeOutcome::Lost) };
    if change > 0 {
        cova_metrics::balance(cova_metrics::Movement::Reserved, change);
    } else if change < 0 {
        cova_metrics::balance(cova_metrics::Movement::Released, -change);
    }
    let mut changes = vec![Change::Account(&account_id), Change::Job(job_id)];
    changes.extend(woken.iter().map(|id| Change::Job(id)));
    db.changed(&changes).await;
    Ok(outcome)
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
        // The day this attempt started under (set by `start`): on PostgreSQL its partition.
        let day = jobs::table
            .find(job_id)
            .select(jobs::comments_day)
            .first::<Option<i64>>(c)
            .await?
            .ok_or_else(|| StorageError::Conflict("the job was not started".into()))?;
        let stored = job_comments::table.filter(rows_of(job_id, day));
        let base = stored.count().get_result::<i64>(c).await?;
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
                    job_comments::comments_day.eq(day),
                ))
                .on_conflict_do_nothing()
                .execute(c)
                .await?;
        }
        let total = stored.count().get_result::<i64>(c).await?;
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
    /// The post had more comments than were collected: why (the per-post cap or the hold).
    pub truncated: Option<cova_domain::Truncation>,
    /// The post's metadata (JSON) as read by this scrape.
    pub metadata: Option<String>,
    /// Lower-cased title and author, for searching the library.
    pub search: String,
    /// The post's author turned its comments off.
    pub comments_off: bool,
}

/// Completes the job once, in one transaction: the collected comments become the account's
/// analysis of the post (comments already known keep their `first_seen_at`; the previous
/// breakdown is released); only comments new to the analysis are charged, at most the hold
/// (new comments beyond it are not kept, and the job reports `truncated`); the rest of the
/// hold returns to the balance; a token's job is bookmarked; the `job.complete` event is
/// queued. Returns false when the job was not in progress (a duplicate delivery).
pub async fn complete(db: &Db, job_id: &str, owner: &str, scraped: &Scraped, trace: &str, now: i64) -> Result<bool> {
    // Each statement names the days of the scrapes it reads (see `comment_days`).
    let carry_sql = crate::pool::bind_params(
        db.is_postgres(),
        "UPDATE job_comments SET first_seen_at = (SELECT p.first_seen_at FROM job_comments p \
         WHERE p.job_id = ? AND p.comments_day = ? AND p.comment_id = job_comments.comment_id) \
         WHERE job_id = ? AND comments_day = ?",
    );
    let thread_sql = crate::pool::bind_params(
        db.is_postgres(),
        "UPDATE job_comments SET thread = COALESCE((SELECT p.position FROM job_comments p \
         WHERE p.job_id = job_comments.job_id AND p.comments_day = job_comments.comments_day \
         AND p.comment_id = job_comments.parent_id), position) WHERE job_id = ? AND comments_day = ?",
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
        let day = jobs::table.find(job_id).select(jobs::comments_day).first::<Option<i64>>(c).await?.unwrap_or(0);
        let existing = analyses::table
            .find((&job.account_id, &job.r#ref))
            .select((analyses::status, analyses::last_job_id, analyses::saved_at, analyses::comments_day))
            .first::<(String, Option<String>, Option<i64>, Option<i64>)>(c)
            .await
            .optional()?;
        // The breakdown this scrape replaces, and the day its comments are stored under.
        let previous_job = existing
            .as_ref()
            .filter(|(status, _, _, _)| status == AnalysisStatus::Ready.as_str())
            .and_then(|(_, last, _, previous_day)| Some((last.clone()?, previous_day.unwrap_or(0))))
            .filter(|(last, _)| last != job_id);
        if let Some((previous, previous_day)) = &previous_job {
            diesel::sql_query(&carry_sql)
                .bind::<diesel::sql_types::Text, _>(previous)
                .bind::<diesel::sql_types::BigInt, _>(previous_day)
                .bind::<diesel::sql_types::Text, _>(job_id)
                .bind::<diesel::sql_types::BigInt, _>(day)
                .execute(c)
                .await?;
        }
        let stored = job_comments::table.filter(rows_of(job_id, day));
        // Comments new to the analysis, in collection order (a parent before its replies).
        let new_rows: Vec<(String, Option<String>)> = stored
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
        let dropped = money::beyond_hold(&new_rows, hold);
        for chunk in dropped.chunks(500) {
            diesel::delete(stored.filter(job_comments::comment_id.eq_any(chunk))).execute(c).await?;
        }
        let new_count = (new_rows.len() - dropped.len()) as i64;
        // The comments kept, nested by position: see `breakdown::page`.
        diesel::sql_query(&thread_sql)
            .bind::<diesel::sql_types::Text, _>(job_id)
            .bind::<diesel::sql_types::BigInt, _>(day)
            .execute(c)
            .await?;
        diesel::update(stored.filter(job_comments::first_seen_at.is_null()))
            .set(job_comments::first_seen_at.eq(now))
            .execute(c)
            .await?;
        let collected = stored.count().get_result::<i64>(c).await?;
        let top_level = stored.filter(job_comments::parent_id.is_null()).count().get_result::<i64>(c).await?;
        // New comments beyond the hold: the balance stopped them.
        let truncation = if dropped.is_empty() { scraped.truncated } else { Some(cova_domain::Truncation::Balance) };
        diesel::update(jobs::table.find(job_id))
            .set((
                jobs::status.eq(JobStatus::Complete.as_str()),
                jobs::finished_at.eq(now),
                jobs::comments_collected.eq(collected),
                jobs::comments_new.eq(new_count),
                jobs::truncated.eq(truncation.is_some()),
                jobs::truncated_reason.eq(truncation.map(|t| t.as_str())),
                jobs::comments_off.eq(scraped.comments_off),
            ))
            .execute(c)
            .await?;
        let closed = close_in!(c, job_id, Some(new_count), now)?;
        if let Some((previous, previous_day)) = &previous_job {
            diesel::delete(job_comments::table.filter(rows_of(previous, *previous_day))).execute(c).await?;
        }
        // A token's completed job is bookmarked (if absent); a session's job is not.
        let saved_at = existing.as_ref().and_then(|(_, _, saved, _)| *saved).or(job.token_id.as_ref().map(|_| now));
        let scrape = crate::repo::analyses::Scrape {
            job: &job,
            comments_day: Some(day),
            saved_at,
            comments: collected,
            top_level,
            new: new_count,
            metadata: scraped.metadata.as_deref().map(|m| (m, scraped.search.as_str())),
        };
        crate::repo::analyses::record_scrape_in!(c, existing.is_none(), &scrape, now);
        let job = find_job!(c, job_id)?.ok_or(StorageError::NotFound)?;
        outbox_in!(c, &end_event(&job), trace, now);
        Ok(Some(Ended { closed, account_id: job.account_id, released: previous_job.map(|(job, _)| job) }))
    })?;
    drop(conn);
    Ok(ended(db, job_id, done).await)
}
