//! Comment-collection jobs: creation with dedup, idempotency, payment and concurrency checks
//! in one transaction (with the command written to the outbox), the scraper's pages as they
//! arrive, and completion, which turns the collected comments into the account's analysis of
//! the post and charges only the comments new to it.

use super::new::{NewJob, Repeat, insert_job, lock, remember_key, repeated};
use super::{Ended, Job, end_event, ended, find, holds_lease};
use crate::repo::balances;
use crate::repo::comment_days::rows_of;
use crate::schema::{analyses, job_comments, job_leases, jobs, reservations};
use crate::{Change, Db, Result, StorageError, Tx};
use cova_domain::money::{self, Admission, AnalyzeRequest, Hold, Sized, Sizing, Stage};
use cova_domain::time::month_of;
use cova_domain::{AnalysisStatus, Dedup, JobKind, JobStatus};
use cova_messages::{AnalyzeCommand, Outgoing};
use diesel::prelude::*;

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

/// The creation of an analyze job as [`create_analyze`] describes it, in the caller's
/// transaction, with `job_id` for a new job.
pub async fn create_analyze_in(
    tx: &mut Tx<'_>,
    wanted: &NewAnalyze<'_>,
    job_id: &str,
    month: &str,
    trace: &str,
    now: i64,
) -> Result<CreateOutcome> {
    lock(tx, wanted.account_id).await?;
    match repeated(tx, wanted.account_id, wanted.idempotency_key, wanted.r#ref, now).await? {
        Some(Repeat::Conflict) => return Ok(CreateOutcome::IdempotencyConflict),
        Some(Repeat::Same(job)) => return Ok(CreateOutcome::Repeated(job)),
        None => {}
    }
    let latest = tx
        .first_as::<Job, _>(
            jobs::table
                .filter(jobs::account_id.eq(wanted.account_id))
                .filter(jobs::kind.eq(JobKind::Analyze.as_str()))
                .filter(jobs::ref_.eq(wanted.r#ref))
                .filter(jobs::status.ne(JobStatus::Failed.as_str()))
                .order(jobs::created_at.desc()),
        )
        .await
        .optional()?;
    if let Some(job) = latest
        && let Some(dedup) = Dedup::of(job.status, job.finished_at, now)
        && !(wanted.refresh && dedup == Dedup::RecentResult)
    {
        remember_key(tx, wanted.account_id, wanted.idempotency_key, &job.id, wanted.r#ref, now).await?;
        return Ok(CreateOutcome::Deduplicated(job, dedup));
    }
    let max_comments = match wanted.max_comments {
        Cap::Set(cap) => cap,
        Cap::Kept => tx
            .first::<Option<i64>, _>(
                analyses::table.find((wanted.account_id, wanted.r#ref)).select(analyses::max_comments),
            )
            .await
            .optional()?
            .flatten(),
    };
    let account = balances::account_in(tx, wanted.account_id, month).await?;
    let request = AnalyzeRequest {
        refresh: wanted.refresh,
        session: wanted.session_id.is_some(),
        known_comments: wanted.known_comments,
        max_comments,
    };
    let hold = match money::admit_analyze(&account, &request) {
        Admission::Admit(hold) => hold,
        Admission::PaymentRequired => return Ok(CreateOutcome::PaymentRequired),
        Admission::QuotaExceeded => return Ok(CreateOutcome::QuotaExceeded),
        Admission::ConcurrencyLimit => return Ok(CreateOutcome::ConcurrencyLimit),
    };
    // Decided under the lock: the conditional updates only guard against a bug.
    if !balances::reserve_in(tx, wanted.account_id, job_id, month, hold, now).await? {
        return Err(StorageError::Conflict("a balance changed under the account lock".into()));
    }
    let row = NewJob {
        id: job_id,
        account_id: wanted.account_id,
        token_id: wanted.token_id,
        session_id: wanted.session_id,
        kind: JobKind::Analyze,
        r#ref: wanted.r#ref,
        url: wanted.url,
        comments_expected: None,
        batch_id: wanted.batch_id,
        hold_stage: Stage::Opening,
        max_comments,
        free_allowance: request.free_allowance(),
    };
    let command = Outgoing::command(&AnalyzeCommand { job_id: job_id.to_owned() });
    let job = insert_job(tx, &row, (wanted.idempotency_key, wanted.r#ref), &command, trace, now).await?;
    Ok(CreateOutcome::Created { job, reserved: hold.amount })
}

/// Creates an analyze job, or answers why not. Every check and the writes share one
/// transaction that first locks the account row, so concurrent requests of one account are
/// serialised: exact dedup, idempotency, balance and concurrency under any parallelism. Whether
/// it may start and what it holds are the money rules' ([`money::admit_analyze`]).
///
/// The new job holds only its opening hold: the scraper sizes it once the post reports its
/// size ([`size_hold`]), so one job never blocks the account's other analyses while it waits
/// for a scraper.
pub async fn create_analyze(db: &Db, wanted: NewAnalyze<'_>, trace_headers: &str, now: i64) -> Result<CreateOutcome> {
    let month = month_of(now);
    let job_id = crate::repo::new_id();
    let mut t = db.begin().await?;
    let outcome = create_analyze_in(&mut t.tx(), &wanted, &job_id, &month, trace_headers, now).await?;
    t.commit().await?;
    created(db, &outcome).await;
    Ok(outcome)
}

/// Records a committed creation in the metrics and the snapshots.
pub async fn created(db: &Db, outcome: &CreateOutcome) {
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
    let mut t = db.begin().await?;
    let outcome = size_hold_in(&mut t.tx(), job_id, owner, (reported, previous), trace, now).await?;
    t.commit().await?;
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

/// What sizing committed: the account, the outcome, the jobs woken and the change of the hold.
type Sizing_ = (String, SizeOutcome, Vec<String>, i64);

/// The body of [`size_hold`]'s transaction; `None` when this worker no longer holds the job.
async fn size_hold_in(
    tx: &mut Tx<'_>,
    job_id: &str,
    owner: &str,
    (reported, previous): (Option<i64>, i64),
    trace: &str,
    now: i64,
) -> Result<Option<Sizing_>> {
    if !holds_lease(tx, job_id, owner).await? {
        return Ok(None);
    }
    let Some(job) = find(tx, job_id).await? else { return Ok(None) };
    if !job.status.is_running() {
        return Ok(None);
    }
    lock(tx, &job.account_id).await?;
    let Some((hold, month)) = balances::held_in(tx, job_id).await? else { return Ok(None) };
    let account = balances::account_in(tx, &job.account_id, &month).await?;
    let sizing =
        Sizing { reported, previous, max_comments: job.max_comments, hold, free_allowance: job.free_allowance };
    match money::size_hold(&account, job_id, &sizing) {
        Sized::Collect(collect) => {
            if !balances::move_hold_in(tx, &job.account_id, job_id, &month, (hold, collect.hold)).await? {
                return Err(StorageError::Conflict("a balance changed under the account lock".into()));
            }
            tx.execute(diesel::update(jobs::table.find(job_id)).set((
                jobs::hold_stage.eq(Stage::Sized),
                jobs::waiting_since.eq(None::<i64>),
                jobs::comments_expected.eq(collect.expected),
            )))
            .await?;
            if job.batch_id.is_some() {
                // Its size is known: the URL after it in its list may start (the flow's).
                crate::repo::outbox::queue(tx, &sized_event(&job), trace, now).await?;
            }
            let change = collect.hold.amount - hold.amount;
            Ok(Some((job.account_id, SizeOutcome::Collect(collect), Vec::new(), change)))
        }
        Sized::QuotaExceeded => Ok(Some((job.account_id, SizeOutcome::QuotaExceeded, Vec::new(), 0))),
        Sized::Wait { wake } => {
            // It waits holding nothing: its opening hold goes back for the jobs before it.
            if !balances::move_hold_in(tx, &job.account_id, job_id, &month, (hold, Hold::default())).await? {
                return Err(StorageError::Conflict("a balance changed under the account lock".into()));
            }
            tx.execute(diesel::update(jobs::table.find(job_id)).set((
                jobs::hold_stage.eq(Stage::Waiting),
                jobs::waiting_since.eq(now),
                jobs::comments_expected.eq(reported.map(money::expected)),
            )))
            .await?;
            // Parked: the job is delivered again when woken, to any worker.
            tx.execute(diesel::delete(job_leases::table.find(job_id).filter(job_leases::owner.eq(owner)))).await?;
            for id in &wake {
                let command = Outgoing::command(&AnalyzeCommand { job_id: id.clone() });
                crate::repo::outbox::queue(tx, &command, trace, now).await?;
            }
            Ok(Some((job.account_id, SizeOutcome::Waiting, wake, -hold.amount)))
        }
    }
}

/// The `job.sized` event of a list's job, for the flow.
fn sized_event(job: &Job) -> Outgoing {
    Outgoing::event(&cova_messages::JobEvent {
        event_type: cova_messages::JobEventType::Sized,
        kind: job.kind.as_str().to_owned(),
        job_id: job.id.clone(),
        r#ref: job.r#ref.clone(),
        url: job.url.clone(),
        error: None,
    })
}

/// One collected comment, ready to store.
#[derive(Debug, Clone, Default)]
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
    /// The words as the full-text search indexes them (`cova_analyzers::search::index_terms`).
    pub terms: String,
    /// The comment's language (ISO 639-1), when known.
    pub language: Option<String>,
    /// The author's handle, lower-cased, when known.
    pub author: Option<String>,
    /// Images are attached.
    pub media: bool,
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
    let mut t = db.begin().await?;
    let total = append_in(&mut t.tx(), job_id, lease, batch, expected, now).await?;
    t.commit().await?;
    db.changed(&[Change::Job(job_id)]).await;
    Ok(total)
}

/// The body of [`append_comments`]' transaction.
async fn append_in(
    tx: &mut Tx<'_>,
    job_id: &str,
    (owner, lease_ms): (&str, i64),
    batch: &[StoredComment],
    expected: Option<i64>,
    now: i64,
) -> Result<i64> {
    let renewed = tx
        .execute(
            diesel::update(job_leases::table.find(job_id))
                .filter(job_leases::owner.eq(owner))
                .set(job_leases::expires_at.eq(now + lease_ms)),
        )
        .await?;
    if renewed == 0 {
        return Err(StorageError::Conflict("another worker took this job over".into()));
    }
    // The day this attempt started under (set by `start`): on PostgreSQL its partition.
    let day = tx
        .first::<Option<i64>, _>(jobs::table.find(job_id).select(jobs::comments_day))
        .await?
        .ok_or_else(|| StorageError::Conflict("the job was not started".into()))?;
    let stored = job_comments::table.filter(rows_of(job_id, day));
    let base = tx.get_result::<i64, _>(stored.count()).await?;
    let last_row = crate::repo::search::last_row(tx).await?;
    // Row by row: SQLite has no multi-row insert with ON CONFLICT in diesel; inside one
    // transaction this is cheap.
    for (i, item) in batch.iter().enumerate() {
        tx.execute(
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
                    job_comments::terms.eq(&item.terms),
                    job_comments::language.eq(item.language.as_deref()),
                    job_comments::author.eq(item.author.as_deref()),
                    job_comments::media.eq(item.media),
                ))
                .on_conflict_do_nothing(),
        )
        .await?;
    }
    // Searchable with the page: the new rows enter SQLite's full-text index together.
    crate::repo::search::index_rows_after(tx, last_row).await?;
    let total = tx.get_result::<i64, _>(stored.count()).await?;
    tx.execute(
        diesel::update(jobs::table.find(job_id))
            .filter(jobs::status.eq(JobStatus::InProgress.as_str()))
            .set((jobs::comments_collected.eq(total), jobs::comments_expected.eq(expected))),
    )
    .await?;
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
/// analysis of the post (comments already known keep their `first_seen_at` and sentiment; the previous
/// breakdown is released); only comments new to the analysis are charged, at most the hold
/// (new comments beyond it are not kept, and the job reports `truncated`); the rest of the
/// hold returns to the balance; a token's job is bookmarked; the `job.complete` event is
/// queued. Returns false when the job was not in progress (a duplicate delivery).
pub async fn complete(db: &Db, job_id: &str, owner: &str, scraped: &Scraped, trace: &str, now: i64) -> Result<bool> {
    // Each statement names the days of the scrapes it reads (see `comment_days`).
    let carry_sql = crate::pool::bind_params(
        db.is_postgres(),
        "UPDATE job_comments SET (first_seen_at, sentiment) = (SELECT p.first_seen_at, p.sentiment \
         FROM job_comments p WHERE p.job_id = ? AND p.comments_day = ? \
         AND p.comment_id = job_comments.comment_id) WHERE job_id = ? AND comments_day = ?",
    );
    let thread_sql = crate::pool::bind_params(
        db.is_postgres(),
        "UPDATE job_comments SET thread = COALESCE((SELECT p.position FROM job_comments p \
         WHERE p.job_id = job_comments.job_id AND p.comments_day = job_comments.comments_day \
         AND p.comment_id = job_comments.parent_id), position) WHERE job_id = ? AND comments_day = ?",
    );
    let mut t = db.begin().await?;
    let done = complete_in(&mut t.tx(), job_id, owner, scraped, (&carry_sql, &thread_sql), trace, now).await?;
    t.commit().await?;
    Ok(ended(db, job_id, done).await)
}

/// The body of [`complete`]'s transaction; `None` when the job was not this worker's to end.
async fn complete_in(
    tx: &mut Tx<'_>,
    job_id: &str,
    owner: &str,
    scraped: &Scraped,
    (carry_sql, thread_sql): (&str, &str),
    trace: &str,
    now: i64,
) -> Result<Option<Ended>> {
    use diesel::sql_types::{BigInt, Text};
    if !holds_lease(tx, job_id, owner).await? {
        return Ok(None);
    }
    let Some(job) = find(tx, job_id).await? else { return Ok(None) };
    if job.status != JobStatus::InProgress {
        return Ok(None);
    }
    let day = tx.first::<Option<i64>, _>(jobs::table.find(job_id).select(jobs::comments_day)).await?.unwrap_or(0);
    let existing = tx
        .first::<(String, Option<String>, Option<i64>, Option<i64>), _>(
            analyses::table.find((&job.account_id, &job.r#ref)).select((
                analyses::status,
                analyses::last_job_id,
                analyses::saved_at,
                analyses::comments_day,
            )),
        )
        .await
        .optional()?;
    // The breakdown this scrape replaces, and the day its comments are stored under.
    let previous_job = existing
        .as_ref()
        .filter(|(status, _, _, _)| status == AnalysisStatus::Ready.as_str())
        .and_then(|(_, last, _, previous_day)| Some((last.clone()?, previous_day.unwrap_or(0))))
        .filter(|(last, _)| last != job_id);
    if let Some((previous, previous_day)) = &previous_job {
        let carry = diesel::sql_query(carry_sql)
            .bind::<Text, _>(previous)
            .bind::<BigInt, _>(previous_day)
            .bind::<Text, _>(job_id)
            .bind::<BigInt, _>(day);
        tx.execute(carry).await?;
    }
    let stored = job_comments::table.filter(rows_of(job_id, day));
    // Comments new to the analysis, in collection order (a parent before its replies).
    let new_rows: Vec<(String, Option<String>)> = tx
        .load(
            stored
                .filter(job_comments::first_seen_at.is_null())
                .order(job_comments::position.asc())
                .select((job_comments::comment_id, job_comments::parent_id)),
        )
        .await?;
    let hold = tx
        .first::<i64, _>(
            reservations::table.find(job_id).filter(reservations::state.eq("held")).select(reservations::amount),
        )
        .await
        .optional()?
        .unwrap_or(0);
    let dropped = money::beyond_hold(&new_rows, hold);
    for chunk in dropped.chunks(500) {
        tx.execute(diesel::delete(stored.filter(job_comments::comment_id.eq_any(chunk)))).await?;
    }
    let new_count = (new_rows.len() - dropped.len()) as i64;
    // The comments kept, nested by position: see `breakdown::page`.
    tx.execute(diesel::sql_query(thread_sql).bind::<Text, _>(job_id).bind::<BigInt, _>(day)).await?;
    tx.execute(
        diesel::update(stored.filter(job_comments::first_seen_at.is_null())).set(job_comments::first_seen_at.eq(now)),
    )
    .await?;
    let collected = tx.get_result::<i64, _>(stored.count()).await?;
    let top_level = tx.get_result::<i64, _>(stored.filter(job_comments::parent_id.is_null()).count()).await?;
    // New comments beyond the hold: the balance stopped them.
    let truncation = if dropped.is_empty() { scraped.truncated } else { Some(cova_domain::Truncation::Balance) };
    tx.execute(diesel::update(jobs::table.find(job_id)).set((
        jobs::status.eq(JobStatus::Complete.as_str()),
        jobs::finished_at.eq(now),
        jobs::comments_collected.eq(collected),
        jobs::comments_new.eq(new_count),
        jobs::truncated.eq(truncation.is_some()),
        jobs::truncated_reason.eq(truncation.map(|t| t.as_str())),
        jobs::comments_off.eq(scraped.comments_off),
    )))
    .await?;
    let closed = balances::close_in(tx, job_id, Some(new_count), now).await?;
    if let Some((previous, previous_day)) = &previous_job {
        tx.execute(diesel::delete(job_comments::table.filter(rows_of(previous, *previous_day)))).await?;
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
    crate::repo::analyses::record_scrape_in(tx, existing.is_none(), &scrape, now).await?;
    let job = find(tx, job_id).await?.ok_or(StorageError::NotFound)?;
    crate::repo::outbox::queue(tx, &end_event(&job), trace, now).await?;
    Ok(Some(Ended { closed, account_id: job.account_id, released: previous_job.map(|(job, _)| job) }))
}
