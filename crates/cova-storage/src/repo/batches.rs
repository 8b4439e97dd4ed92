//! Batches: many post URLs at once, stored with each URL's state. What moves a list forward
//! (start a URL's job when the money rules say so, refuse the rest when the balance is gone,
//! end the batch once every URL has ended) is `cova_runtime::flow`'s; this module loads and
//! writes what it needs: the account's next waiting URL, a URL started or refused, a batch's
//! state for its end, and the end itself with its `batch.complete` event.

use super::jobs;
use crate::schema::{batch_items, batches, jobs as jobs_t};
use crate::{Change, Db, Result, Tx};
use cova_domain::{BatchItemState, JobStatus};
use diesel::prelude::*;

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
    /// A new batch; its URLs wait for `cova_runtime::flow::advance`.
    New(String),
    /// The same `Idempotency-Key` created this batch before, for the same URLs.
    Repeated(String),
    /// The same `Idempotency-Key` was used for another request.
    Conflict,
}

/// Records a batch and its URLs (valid ones waiting, others refused), once per key.
pub async fn create(db: &Db, new: NewBatch<'_>, now: i64) -> Result<Created> {
    let id = super::new_id();
    let mut t = db.begin().await?;
    let created = create_in(&mut t.tx(), &new, &id, now).await?;
    t.commit().await?;
    if let Created::New(id) = &created {
        db.changed(&[Change::Batch(id)]).await;
    }
    Ok(created)
}

async fn create_in(tx: &mut Tx<'_>, new: &NewBatch<'_>, id: &str, now: i64) -> Result<Created> {
    if let Some(key) = new.idempotency_key {
        let earlier = tx
            .first::<(String, String), _>(
                batches::table
                    .filter(batches::account_id.eq(new.account_id))
                    .filter(batches::idempotency_key.eq(key))
                    .filter(batches::created_at.gt(now - cova_domain::limits::ms(cova_domain::limits::IDEMPOTENCY)))
                    .select((batches::id, batches::request_digest)),
            )
            .await
            .optional()?;
        match earlier {
            Some((earlier, digest)) if digest == new.request_digest => return Ok(Created::Repeated(earlier)),
            Some(_) => return Ok(Created::Conflict),
            // A key older than a day is forgotten: the new batch takes it over.
            None => {
                tx.execute(
                    diesel::update(batches::table)
                        .filter(batches::account_id.eq(new.account_id))
                        .filter(batches::idempotency_key.eq(key))
                        .set(batches::idempotency_key.eq(None::<String>)),
                )
                .await?;
            }
        }
    }
    tx.execute(diesel::insert_into(batches::table).values((
        batches::id.eq(id),
        batches::account_id.eq(new.account_id),
        batches::token_id.eq(new.token_id),
        batches::session_id.eq(new.session_id),
        batches::idempotency_key.eq(new.idempotency_key),
        batches::request_digest.eq(new.request_digest),
        batches::created_at.eq(now),
        batches::max_comments.eq(new.max_comments),
    )))
    .await?;
    for (position, item) in new.items.iter().enumerate() {
        let (r#ref, state, code, detail) = match &item.post {
            Ok(r#ref) => (Some(r#ref.as_str()), WAITING, None, None),
            Err((code, detail)) => (None, REFUSED, Some(code.as_str()), Some(detail.as_str())),
        };
        tx.execute(diesel::insert_into(batch_items::table).values((
            batch_items::batch_id.eq(id),
            batch_items::position.eq(i32::try_from(position).unwrap_or(i32::MAX)),
            batch_items::account_id.eq(new.account_id),
            batch_items::url.eq(&item.url),
            batch_items::ref_.eq(r#ref),
            batch_items::state.eq(state),
            batch_items::error_code.eq(code),
            batch_items::error_detail.eq(detail),
            batch_items::queued_at.eq(now),
            batch_items::known_comments.eq(item.known_comments),
        )))
        .await?;
    }
    Ok(Created::New(id.to_owned()))
}

/// A waiting URL, with what starting it needs.
#[derive(Debug, Clone, Queryable)]
pub struct Waiting {
    pub batch_id: String,
    pub position: i32,
    pub url: String,
    /// `None`: the URL names no post (it is refused when its turn comes).
    pub r#ref: Option<String>,
    pub known_comments: Option<i64>,
    pub token_id: Option<String>,
    pub session_id: Option<String>,
    pub max_comments: Option<i64>,
}

/// The account's next waiting URL: oldest batch first, cancelled batches left out.
pub async fn next_waiting(tx: &mut Tx<'_>, account_id: &str) -> Result<Option<Waiting>> {
    let query = batch_items::table
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
        ));
    Ok(tx.first(query).await.optional()?)
}

/// What became of a waiting URL.
#[derive(Debug, Clone, Copy)]
pub enum Moved<'a> {
    /// Its job started (or an existing job covered its post: `deduplicated` says how).
    Started { job_id: &'a str, deduplicated: Option<&'a str> },
    /// It was refused: `(code, detail)`.
    Refused(&'a str, &'a str),
}

/// Moves a waiting URL on (conditionally: it may have moved already).
pub async fn mark(tx: &mut Tx<'_>, item: &Waiting, moved: Moved<'_>) -> Result<()> {
    let (state, job_id, dedup, error) = match moved {
        Moved::Started { job_id, deduplicated } => (STARTED, Some(job_id), deduplicated, None),
        Moved::Refused(code, detail) => (REFUSED, None, None, Some((code, detail))),
    };
    tx.execute(
        diesel::update(batch_items::table.find((&item.batch_id, item.position)))
            .filter(batch_items::state.eq(WAITING))
            .set((
                batch_items::state.eq(state),
                batch_items::job_id.eq(job_id),
                batch_items::deduplicated.eq(dedup),
                batch_items::error_code.eq(error.map(|e| e.0)),
                batch_items::error_detail.eq(error.map(|e| e.1)),
            )),
    )
    .await?;
    Ok(())
}

/// Refuses every waiting URL of the batch with `(code, detail)`.
pub async fn refuse_rest(tx: &mut Tx<'_>, batch_id: &str, (code, detail): (&str, &str)) -> Result<()> {
    tx.execute(
        diesel::update(batch_items::table.filter(batch_items::batch_id.eq(batch_id)))
            .filter(batch_items::state.eq(WAITING))
            .set((
                batch_items::state.eq(REFUSED),
                batch_items::error_code.eq(code),
                batch_items::error_detail.eq(detail),
            )),
    )
    .await?;
    Ok(())
}

/// An open batch as its end is judged: its account and each URL's state with its job's status.
#[derive(Debug, Clone)]
pub struct Open {
    pub account_id: String,
    pub items: Vec<BatchItemState>,
    /// The statuses of the jobs its URLs started.
    pub statuses: Vec<JobStatus>,
}

/// The batch, while it has not ended.
pub async fn open(tx: &mut Tx<'_>, batch_id: &str) -> Result<Option<Open>> {
    let query = batches::table.find(batch_id).filter(batches::finished_at.is_null()).select(batches::account_id);
    let Some(account_id) = tx.first::<String, _>(query).await.optional()? else { return Ok(None) };
    let rows: Vec<(String, Option<String>)> = tx
        .load(
            batch_items::table
                .filter(batch_items::batch_id.eq(batch_id))
                .select((batch_items::state, batch_items::job_id)),
        )
        .await?;
    let job_ids: Vec<&str> = rows.iter().filter_map(|(_, j)| j.as_deref()).collect();
    let statuses: Vec<JobStatus> =
        tx.load(jobs_t::table.filter(jobs_t::id.eq_any(&job_ids)).select(jobs_t::status)).await?;
    let items = rows
        .iter()
        .map(|(state, _)| match state.as_str() {
            WAITING => BatchItemState::Waiting,
            CANCELLED => BatchItemState::Cancelled,
            REFUSED => BatchItemState::Refused,
            _ => BatchItemState::Running,
        })
        .collect();
    Ok(Some(Open { account_id, items, statuses }))
}

/// Marks the batch ended; false when it had ended already.
pub async fn finish(tx: &mut Tx<'_>, batch_id: &str, now: i64) -> Result<bool> {
    let ended = tx
        .execute(
            diesel::update(batches::table.find(batch_id))
                .filter(batches::finished_at.is_null())
                .set(batches::finished_at.eq(now)),
        )
        .await?;
    Ok(ended == 1)
}

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
    let mut tx = conn.tx();
    let head = batches::table.find(batch_id).select((
        batches::id,
        batches::account_id,
        batches::created_at,
        batches::cancelled_at,
        batches::finished_at,
    ));
    let head: Option<HeadRow> = tx.first(head).await.optional()?;
    let Some((id, owner, created_at, cancelled_at, finished_at)) = head else { return Ok(None) };
    if account_id.is_some_and(|a| a != owner) {
        return Ok(None);
    }
    let account_id = owner;
    let rows: Vec<ItemRow> = tx
        .load(batch_items::table.filter(batch_items::batch_id.eq(&id)).order(batch_items::position.asc()).select((
            batch_items::position,
            batch_items::url,
            batch_items::ref_,
            batch_items::state,
            batch_items::job_id,
            batch_items::deduplicated,
            batch_items::error_code,
            batch_items::error_detail,
        )))
        .await?;
    let job_ids: Vec<String> = rows.iter().filter_map(|r| r.4.clone()).collect();
    let jobs: Vec<jobs::Job> = tx.load_as(jobs_t::table.filter(jobs_t::id.eq_any(&job_ids))).await?;
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
    let mut t = db.begin().await?;
    let found = cancel_in(&mut t.tx(), account_id, batch_id, now).await?;
    t.commit().await?;
    if !found {
        return Ok(None);
    }
    db.changed(&[Change::Batch(batch_id)]).await;
    Ok(Some(()))
}

async fn cancel_in(tx: &mut Tx<'_>, account_id: &str, batch_id: &str, now: i64) -> Result<bool> {
    let exists = tx
        .get_result::<i64, _>(batches::table.find(batch_id).filter(batches::account_id.eq(account_id)).count())
        .await?;
    if exists == 0 {
        return Ok(false);
    }
    let cancelled = tx
        .execute(
            diesel::update(batches::table.find(batch_id))
                .filter(batches::cancelled_at.is_null())
                .filter(batches::finished_at.is_null())
                .set(batches::cancelled_at.eq(now)),
        )
        .await?;
    if cancelled > 0 {
        tx.execute(
            diesel::update(batch_items::table.filter(batch_items::batch_id.eq(batch_id)))
                .filter(batch_items::state.eq(WAITING))
                .set(batch_items::state.eq(CANCELLED)),
        )
        .await?;
    }
    Ok(true)
}

/// The open batches one of whose URLs was answered with `job_id`.
pub async fn open_for_job(db: &Db, job_id: &str) -> Result<Vec<String>> {
    let query = batch_items::table
        .inner_join(batches::table.on(batches::id.eq(batch_items::batch_id)))
        .filter(batch_items::job_id.eq(job_id))
        .filter(batches::finished_at.is_null())
        .select(batch_items::batch_id)
        .distinct();
    Ok(db.conn().await?.tx().load(query).await?)
}

/// Open batches none of whose URLs still waits, oldest first.
pub async fn open_without_waiting(db: &Db, limit: i64) -> Result<Vec<String>> {
    let query = batches::table
        .filter(batches::finished_at.is_null())
        .filter(diesel::dsl::not(diesel::dsl::exists(
            batch_items::table.filter(batch_items::batch_id.eq(batches::id)).filter(batch_items::state.eq(WAITING)),
        )))
        .select(batches::id)
        .order(batches::created_at.asc())
        .limit(limit);
    Ok(db.conn().await?.tx().load(query).await?)
}

/// Accounts that have URLs waiting in a batch that is not cancelled (a scheduler tick starts
/// what it can for each).
pub async fn accounts_waiting(db: &Db, limit: i64) -> Result<Vec<String>> {
    let query = batch_items::table
        .filter(batch_items::state.eq(WAITING))
        .select(batch_items::account_id)
        .distinct()
        .limit(limit);
    Ok(db.conn().await?.tx().load(query).await?)
}
