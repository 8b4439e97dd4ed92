//! Batches: many post URLs at once. Each valid URL becomes an analyze job when the money rules
//! let it start ([`cova_domain::money::next_batch_step`]: a free slot, no job waiting for the
//! balance, the balance it needs not held by running jobs), paid as it starts, exactly as
//! `POST /analyze` would start it; when the balance is gone and nothing can come back, the rest
//! of the batch is refused with `quota_exceeded`. A cancelled batch starts nothing more. When
//! every URL has ended, the batch's `batch.complete` event is written.
//!
//! This module stores batches and takes one [`step`] at a time; when to step (a batch created,
//! a job ended, the scheduler's safety net) is the runtime's `flow`. Two steps at once for one
//! account start nothing twice: each runs under the account's lock, and a URL is marked started
//! with the job `create_analyze` answered (a second start of the same post joins that job).

use super::balances::account_in;
use super::jobs::new::lock_account;
use super::jobs::{self, Cap, CreateOutcome, NewAnalyze, create_analyze_in};
use super::outbox::insert_in as outbox_in;
use crate::schema::{batch_items, batches, jobs as jobs_t};
use crate::{Change, Db, Result, in_transaction, with_conn};
use cova_domain::money::{self, BatchItem, BatchStep};
use cova_domain::time::month_of;
use cova_domain::{BatchItemState, JobStatus};
use cova_messages::{BatchEvent, BatchEventType, Outgoing};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

/// The stored states of an item; what the API shows ([`BatchItemState`]) adds the job's.
const WAITING: &str = "waiting";
const STARTED: &str = "started";
const REFUSED: &str = "refused";
const CANCELLED: &str = "cancelled";

/// One URL of a new batch: its post, or why it was refused at once.
#[derive(Debug, Clone)]
pub struct NewItem {
    pub url: String,
    /// `Ok(ref)` for a URL of a supported post; `Err((code, detail))` otherwise.
    pub post: std::result::Result<String, (String, String)>,
    /// The post's comment count when already known (cached metadata, a creator's listing).
    pub known_comments: Option<i64>,
}

pub struct NewBatch<'a> {
    pub account_id: &'a str,
    pub token_id: Option<&'a str>,
    pub session_id: Option<&'a str>,
    pub idempotency_key: Option<&'a str>,
    /// A digest of the request's URL list: the same key with another list is a conflict.
    pub request_digest: &'a str,
    pub items: Vec<NewItem>,
    /// The customer's cap on the comments collected per post.
    pub max_comments: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// A new batch; its URLs wait for [`start_waiting`].
    New(String),
    /// The same `Idempotency-Key` created this batch before, for the same URLs.
    Repeated(String),
    /// The same `Idempotency-Key` was used for another request.
    Conflict,
}

/// Records a batch and its URLs (valid ones waiting, others refused), once per key.
pub async fn create(db: &Db, new: NewBatch<'_>, now: i64) -> Result<Created> {
    let id = super::new_id();
    let mut conn = db.conn().await?;
    let created = in_transaction!(&mut conn, |c| {
        if let Some(key) = new.idempotency_key {
            let earlier = batches::table
                .filter(batches::account_id.eq(new.account_id))
                .filter(batches::idempotency_key.eq(key))
                .filter(batches::created_at.gt(now - cova_domain::limits::ms(cova_domain::limits::IDEMPOTENCY)))
                .select((batches::id, batches::request_digest))
                .first::<(String, String)>(c)
                .await
                .optional()?;
            match earlier {
                Some((earlier, digest)) if digest == new.request_digest => return Ok(Created::Repeated(earlier)),
                Some(_) => return Ok(Created::Conflict),
                // A key older than a day is forgotten: the new batch takes it over.
                None => {
                    diesel::update(batches::table)
                        .filter(batches::account_id.eq(new.account_id))
                        .filter(batches::idempotency_key.eq(key))
                        .set(batches::idempotency_key.eq(None::<String>))
                        .execute(c)
                        .await?;
                }
            }
        }
        diesel::insert_into(batches::table)
            .values((
                batches::id.eq(&id),
                batches::account_id.eq(new.account_id),
                batches::token_id.eq(new.token_id),
                batches::session_id.eq(new.session_id),
                batches::idempotency_key.eq(new.idempotency_key),
                batches::request_digest.eq(new.request_digest),
                batches::created_at.eq(now),
                batches::max_comments.eq(new.max_comments),
            ))
            .execute(c)
            .await?;
        for (position, item) in new.items.iter().enumerate() {
            let (r#ref, state, code, detail) = match &item.post {
                Ok(r#ref) => (Some(r#ref.as_str()), WAITING, None, None),
                Err((code, detail)) => (None, REFUSED, Some(code.as_str()), Some(detail.as_str())),
            };
            diesel::insert_into(batch_items::table)
                .values((
                    batch_items::batch_id.eq(&id),
                    batch_items::position.eq(i32::try_from(position).unwrap_or(i32::MAX)),
                    batch_items::account_id.eq(new.account_id),
                    batch_items::url.eq(&item.url),
                    batch_items::ref_.eq(r#ref),
                    batch_items::state.eq(state),
                    batch_items::error_code.eq(code),
                    batch_items::error_detail.eq(detail),
                    batch_items::queued_at.eq(now),
                    batch_items::known_comments.eq(item.known_comments),
                ))
                .execute(c)
                .await?;
        }
        Ok(Created::New(id.clone()))
    })?;
    drop(conn);
    if let Created::New(id) = &created {
        db.changed(&[Change::Batch(id)]).await;
    }
    Ok(created)
}

/// A waiting URL, with what starting it needs.
#[derive(Debug, Clone, Queryable)]
struct Waiting {
    batch_id: String,
    position: i32,
    url: String,
    r#ref: Option<String>,
    known_comments: Option<i64>,
    token_id: Option<String>,
    session_id: Option<String>,
    max_comments: Option<i64>,
}

/// What one [`step`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No URL of the account waits.
    Idle,
    /// The next URL waits (for a slot, for the balance).
    Waits,
    /// The next URL was started: a new job, or one that already covered its post.
    Started { batch_id: String },
    /// The balance is gone and nothing can come back: the batch's waiting URLs were refused.
    Refused { batch_id: String },
}

/// Takes the account's next waiting URL (oldest batch first, cancelled batches left out) and,
/// in one transaction under the account's lock, does what the money rules say
/// ([`money::next_batch_step`]): start its job as `POST /analyze` would, leave it waiting, or
/// refuse the batch's waiting URLs.
pub async fn step(db: &Db, account_id: &str, trace: &str, now: i64) -> Result<Step> {
    let month = month_of(now);
    let job_id = super::new_id();
    let mut conn = db.conn().await?;
    let (step, created) = in_transaction!(&mut conn, |c| {
        lock_account!(c, account_id);
        let next: Option<Waiting> = batch_items::table
            .inner_join(batches::table.on(batches::id.eq(batch_items::batch_id)))
            .filter(batch_items::account_id.eq(account_id))
            .filter(batch_items::state.eq(WAITING))
            .filter(batches::cancelled_at.is_null())
            .order((batch_items::queued_at.asc(), batch_items::batch_id.asc(), batch_items::position.asc()))
            .select((
                batch_items::batch_id,
                batch_items::position,
                batch_items::url,
                batch_items::ref_,
                batch_items::known_comments,
                batches::token_id,
                batches::session_id,
                batches::max_comments,
            ))
            .first(c)
            .await
            .optional()?;
        let Some(item) = next else { return Ok((Step::Idle, None)) };
        let Some(r#ref) = item.r#ref.as_deref() else {
            mark_in!(c, &item, REFUSED, None, None, Some(("validation_error", "Not a post URL.")));
            return Ok((Step::Started { batch_id: item.batch_id.clone() }, None));
        };
        let account = account_in!(c, account_id, &month)?;
        let decided = money::next_batch_step(
            &account,
            &BatchItem {
                batch_id: &item.batch_id,
                known_comments: item.known_comments,
                max_comments: item.max_comments,
                session: item.session_id.is_some(),
            },
        );
        match decided {
            BatchStep::Wait => Ok((Step::Waits, None)),
            BatchStep::RefuseBatch => {
                refuse_rest_in!(c, &item.batch_id, "quota_exceeded", QUOTA_DETAIL);
                Ok((Step::Refused { batch_id: item.batch_id.clone() }, None))
            }
            BatchStep::Start => {
                let new = NewAnalyze {
                    account_id,
                    token_id: item.token_id.as_deref(),
                    session_id: item.session_id.as_deref(),
                    r#ref,
                    url: &item.url,
                    idempotency_key: None,
                    known_comments: item.known_comments,
                    refresh: false,
                    batch_id: Some(&item.batch_id),
                    max_comments: Cap::Set(item.max_comments),
                };
                let outcome = create_analyze_in!(c, &new, &job_id, &month, trace, now)?;
                match &outcome {
                    CreateOutcome::Created { job, .. } | CreateOutcome::Repeated(job) => {
                        mark_in!(c, &item, STARTED, Some(job.id.as_str()), None, None);
                    }
                    CreateOutcome::Deduplicated(job, dedup) => {
                        mark_in!(c, &item, STARTED, Some(job.id.as_str()), Some(dedup.as_str()), None);
                    }
                    // The rules let it start, so these do not happen; it waits for the next end.
                    CreateOutcome::ConcurrencyLimit | CreateOutcome::QuotaExceeded => return Ok((Step::Waits, None)),
                    CreateOutcome::PaymentRequired | CreateOutcome::IdempotencyConflict => {
                        let refused = ("payment_required", "This post could not be started.");
                        mark_in!(c, &item, REFUSED, None, None, Some(refused));
                    }
                }
                Ok((Step::Started { batch_id: item.batch_id.clone() }, Some(outcome)))
            }
        }
    })?;
    drop(conn);
    if let Some(outcome) = &created {
        jobs::created(db, outcome).await;
    }
    match &step {
        Step::Refused { batch_id } => db.changed(&[Change::Account(account_id), Change::Batch(batch_id)]).await,
        Step::Started { batch_id } => db.changed(&[Change::Batch(batch_id)]).await,
        Step::Idle | Step::Waits => {}
    }
    Ok(step)
}

/// What a URL refused for the balance says.
const QUOTA_DETAIL: &str = "The comment balance ran out before this post could start; nothing was charged for it.";

/// Inside a transaction: moves a waiting item on (conditionally: it may have moved already).
macro_rules! mark_in {
    ($c:ident, $item:expr, $state:expr, $job_id:expr, $dedup:expr, $error:expr) => {{
        let (item, job_id, dedup, error): (&Waiting, Option<&str>, Option<&str>, Option<(&str, &str)>) =
            ($item, $job_id, $dedup, $error);
        diesel::update(batch_items::table.find((&item.batch_id, item.position)))
            .filter(batch_items::state.eq(WAITING))
            .set((
                batch_items::state.eq($state),
                batch_items::job_id.eq(job_id),
                batch_items::deduplicated.eq(dedup),
                batch_items::error_code.eq(error.map(|e| e.0)),
                batch_items::error_detail.eq(error.map(|e| e.1)),
            ))
            .execute($c)
            .await?;
    }};
}
use mark_in;

/// Inside a transaction: refuses every waiting URL of the batch with `code`.
macro_rules! refuse_rest_in {
    ($c:ident, $batch_id:expr, $code:expr, $detail:expr) => {{
        diesel::update(batch_items::table.filter(batch_items::batch_id.eq($batch_id)))
            .filter(batch_items::state.eq(WAITING))
            .set((
                batch_items::state.eq(REFUSED),
                batch_items::error_code.eq($code),
                batch_items::error_detail.eq($detail),
            ))
            .execute($c)
            .await?;
    }};
}
use refuse_rest_in;

/// One URL of a batch as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Item {
    pub position: i32,
    pub url: String,
    pub r#ref: Option<String>,
    pub state: BatchItemState,
    pub job: Option<jobs::Job>,
    pub deduplicated: Option<String>,
    pub error: Option<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Batch {
    pub id: String,
    pub account_id: String,
    pub created_at: i64,
    pub cancelled_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub items: Vec<Item>,
}

impl Batch {
    /// How many URLs are in each state.
    pub fn counts(&self) -> Vec<(BatchItemState, u32)> {
        BatchItemState::ALL
            .into_iter()
            .map(|s| (s, u32::try_from(self.items.iter().filter(|i| i.state == s).count()).unwrap_or(u32::MAX)))
            .collect()
    }
}

type ItemRow = (i32, String, Option<String>, String, Option<String>, Option<String>, Option<String>, Option<String>);
/// `(id, account_id, created_at, cancelled_at, finished_at)` of a batch.
type HeadRow = (String, String, i64, Option<i64>, Option<i64>);

/// The account's batch, with each URL and its job as they are now.
pub async fn get(db: &Db, account_id: &str, batch_id: &str) -> Result<Option<Batch>> {
    read(db, Some(account_id), batch_id).await
}

/// The batch, whichever account it belongs to (for the copies kept of it).
pub async fn get_any(db: &Db, batch_id: &str) -> Result<Option<Batch>> {
    read(db, None, batch_id).await
}

async fn read(db: &Db, account_id: Option<&str>, batch_id: &str) -> Result<Option<Batch>> {
    let mut conn = db.conn().await?;
    let head: Option<HeadRow> = with_conn!(&mut conn, |c| {
        let mut q = batches::table.find(batch_id).into_boxed();
        if let Some(account_id) = account_id {
            q = q.filter(batches::account_id.eq(account_id));
        }
        q.select((batches::id, batches::account_id, batches::created_at, batches::cancelled_at, batches::finished_at))
            .first(c)
            .await
            .optional()
    })?;
    let Some((id, account_id, created_at, cancelled_at, finished_at)) = head else { return Ok(None) };
    let rows: Vec<ItemRow> = with_conn!(&mut conn, |c| {
        batch_items::table
            .filter(batch_items::batch_id.eq(&id))
            .order(batch_items::position.asc())
            .select((
                batch_items::position,
                batch_items::url,
                batch_items::ref_,
                batch_items::state,
                batch_items::job_id,
                batch_items::deduplicated,
                batch_items::error_code,
                batch_items::error_detail,
            ))
            .load(c)
            .await
    })?;
    let job_ids: Vec<String> = rows.iter().filter_map(|r| r.4.clone()).collect();
    let jobs: Vec<jobs::Job> = with_conn!(&mut conn, |c| {
        jobs_t::table.filter(jobs_t::id.eq_any(&job_ids)).select(jobs::Job::as_select()).load(c).await
    })?;
    let items = rows
        .into_iter()
        .map(|(position, url, r#ref, state, job_id, deduplicated, code, detail)| {
            let job = job_id.and_then(|id| jobs.iter().find(|j| j.id == id).cloned());
            let state = match (state.as_str(), &job) {
                (WAITING, _) => BatchItemState::Waiting,
                (CANCELLED, _) => BatchItemState::Cancelled,
                (STARTED, Some(j)) if j.status == JobStatus::Complete => BatchItemState::Complete,
                (STARTED, Some(j)) if j.status == JobStatus::Failed => BatchItemState::Failed,
                (STARTED, _) => BatchItemState::Running,
                _ => BatchItemState::Refused,
            };
            Item { position, url, r#ref, state, job, deduplicated, error: code.zip(detail) }
        })
        .collect();
    Ok(Some(Batch { id, account_id, created_at, cancelled_at, finished_at, items }))
}

/// Cancels the account's batch: its waiting URLs never start (nothing is charged for them);
/// jobs already started run to their end. A batch that has already ended stays what it was.
/// `None` when there is no such batch.
pub async fn cancel(db: &Db, account_id: &str, batch_id: &str, now: i64) -> Result<Option<()>> {
    let mut conn = db.conn().await?;
    let found = in_transaction!(&mut conn, |c| {
        let exists = batches::table
            .find(batch_id)
            .filter(batches::account_id.eq(account_id))
            .count()
            .get_result::<i64>(c)
            .await?;
        if exists == 0 {
            return Ok(false);
        }
        let cancelled = diesel::update(batches::table.find(batch_id))
            .filter(batches::cancelled_at.is_null())
            .filter(batches::finished_at.is_null())
            .set(batches::cancelled_at.eq(now))
            .execute(c)
            .await?;
        if cancelled == 0 {
            return Ok(true);
        }
        diesel::update(batch_items::table.filter(batch_items::batch_id.eq(batch_id)))
            .filter(batch_items::state.eq(WAITING))
            .set(batch_items::state.eq(CANCELLED))
            .execute(c)
            .await?;
        Ok(true)
    })?;
    drop(conn);
    if !found {
        return Ok(None);
    }
    db.changed(&[Change::Batch(batch_id)]).await;
    settle(db, batch_id, now).await?;
    Ok(Some(()))
}

/// Ends the batch when every URL has ended, writing its `batch.complete` event once.
pub async fn settle(db: &Db, batch_id: &str, now: i64) -> Result<()> {
    let mut conn = db.conn().await?;
    let finished_for = in_transaction!(&mut conn, |c| {
        let open: Option<String> = batches::table
            .find(batch_id)
            .filter(batches::finished_at.is_null())
            .select(batches::account_id)
            .first(c)
            .await
            .optional()?;
        let Some(account_id) = open else { return Ok(None) };
        let rows: Vec<(String, Option<String>)> = batch_items::table
            .filter(batch_items::batch_id.eq(batch_id))
            .select((batch_items::state, batch_items::job_id))
            .load(c)
            .await?;
        let job_ids: Vec<&str> = rows.iter().filter_map(|(_, j)| j.as_deref()).collect();
        let statuses: Vec<JobStatus> =
            jobs_t::table.filter(jobs_t::id.eq_any(&job_ids)).select(jobs_t::status).load(c).await?;
        if rows.iter().any(|(state, _)| state == WAITING) || statuses.iter().any(|s| s.is_running()) {
            return Ok(None);
        }
        let in_state =
            |state: &str| -> u32 { u32::try_from(rows.iter().filter(|(s, _)| s == state).count()).unwrap_or(u32::MAX) };
        let event = BatchEvent {
            event_type: BatchEventType::Complete,
            batch_id: batch_id.to_owned(),
            account_id: account_id.clone(),
            total: u32::try_from(rows.len()).unwrap_or(u32::MAX),
            complete: u32::try_from(statuses.iter().filter(|s| **s == JobStatus::Complete).count()).unwrap_or(0),
            failed: u32::try_from(statuses.iter().filter(|s| **s == JobStatus::Failed).count()).unwrap_or(0),
            refused: in_state(REFUSED),
            cancelled: in_state(CANCELLED),
        };
        let ended = diesel::update(batches::table.find(batch_id))
            .filter(batches::finished_at.is_null())
            .set(batches::finished_at.eq(now))
            .execute(c)
            .await?;
        if ended == 1 {
            outbox_in!(c, &Outgoing::event(&event), "{}", now);
        }
        Ok(Some(account_id))
    })?;
    drop(conn);
    if let Some(account_id) = finished_for {
        db.changed(&[Change::Account(&account_id), Change::Batch(batch_id)]).await;
    }
    Ok(())
}

/// Settles the open batches one of whose URLs was answered with `job_id`.
pub async fn settle_for_job(db: &Db, job_id: &str, now: i64) -> Result<()> {
    let open: Vec<String> = {
        let mut conn = db.conn().await?;
        with_conn!(&mut conn, |c| {
            batch_items::table
                .inner_join(batches::table.on(batches::id.eq(batch_items::batch_id)))
                .filter(batch_items::job_id.eq(job_id))
                .filter(batches::finished_at.is_null())
                .select(batch_items::batch_id)
                .distinct()
                .load(c)
                .await
        })?
    };
    for batch_id in open {
        settle(db, &batch_id, now).await?;
    }
    Ok(())
}

/// Settles open batches none of whose URLs still waits (the scheduler's safety net, should the
/// settling at a job's end have failed); answers how many it looked at.
pub async fn settle_open(db: &Db, now: i64, limit: i64) -> Result<usize> {
    let open: Vec<String> = {
        let mut conn = db.conn().await?;
        with_conn!(&mut conn, |c| {
            batches::table
                .filter(batches::finished_at.is_null())
                .filter(diesel::dsl::not(diesel::dsl::exists(
                    batch_items::table
                        .filter(batch_items::batch_id.eq(batches::id))
                        .filter(batch_items::state.eq(WAITING)),
                )))
                .select(batches::id)
                .order(batches::created_at.asc())
                .limit(limit)
                .load(c)
                .await
        })?
    };
    for batch_id in &open {
        settle(db, batch_id, now).await?;
    }
    Ok(open.len())
}

/// Accounts that have URLs waiting in a batch that is not cancelled (a scheduler tick starts
/// what it can for each).
pub async fn accounts_waiting(db: &Db, limit: i64) -> Result<Vec<String>> {
    let mut conn = db.conn().await?;
    Ok(with_conn!(&mut conn, |c| {
        batch_items::table
            .filter(batch_items::state.eq(WAITING))
            .select(batch_items::account_id)
            .distinct()
            .limit(limit)
            .load(c)
            .await
    })?)
}
