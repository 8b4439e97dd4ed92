//! Snapshots: copies of the account, job and batch state that every authenticated request
//! reads (the quota headers, `/usage`, a job's or a batch's poll), kept in the cache so that the
//! request path reads no database. The storage layer announces each committed change
//! ([`cova_storage::Changes`]); [`Snapshots`] then refreshes the copy under a stamp of the cache
//! ([`cova_cache::Cache::stamp`]), so that a copy read before a change can never replace one
//! read after it, whatever order writers and readers finish in. A reader that finds no copy
//! reads the database and stores it.
//!
//! A job's copy is made the moment the job is created and renewed whenever it changes (of
//! either kind: an AI job's copy carries its result), and a complete job's first page of
//! comments is kept written ([`cova_storage::repo::breakdown::FirstPage`]): its comments never
//! change while they are the analysis' (a release deletes them, and a poll only serves the page
//! while the job's copy says its comments are current). A batch's copy is made when it is
//! created and renewed whenever one of its URLs moves on or one of its jobs ends.
//!
//! A copy outlives a change it missed only when its refresh failed (the cache did not answer
//! just then, or the writer died between its commit and the refresh), and then for at most its
//! freshness: [`ACCOUNT_TTL`], [`RUNNING_JOB_TTL`] or [`FINISHED_JOB_TTL`]. Copies are kept
//! longer than that ([`KEPT_FOR`], a finished result [`RESULT_KEPT_FOR`]) for one reason: while the database does not answer (or is
//! marked unreachable, [`cova_storage::Db::bounded`]), a copy older than its freshness is still
//! served (nothing can change without the database), so that polls and `/usage` go on
//! answering through a database outage, at once.
//!
//! Tokens are copied too ([`Snapshots::token`]), for the same reason: while the database does
//! not answer, a token is recognised from its copy. A revocation deletes the copy when it
//! commits; a copy lives [`TOKEN_KEPT_FOR`] and is renewed by each lookup of the token.

use cova_cache::Cache;
use cova_domain::time::{Clock, month_of};
use cova_domain::{JobKind, JobStatus};
use cova_storage::repo::accounts::{self, Usage};
use cova_storage::repo::batches::{self, Batch};
use cova_storage::repo::breakdown::{self, FirstPage};
use cova_storage::repo::jobs::{self, Polled};
use cova_storage::repo::tokens::{self, TokenRecord};
use cova_storage::{Account, Change, Changes, Db, StorageError};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long an account's copy is served without a refresh while the database answers.
pub const ACCOUNT_TTL: Duration = Duration::from_secs(10);
/// How long the copy of a queued or running job is served without a refresh, likewise.
pub const RUNNING_JOB_TTL: Duration = Duration::from_secs(10);
/// How long the copy of a finished job lives (it changes only when its comments are released).
pub const FINISHED_JOB_TTL: Duration = Duration::from_secs(600);
/// How long an account's, a running job's or a batch's copy is kept: served past its
/// freshness only while the database does not answer.
pub const KEPT_FOR: Duration = Duration::from_secs(600);
/// How long a finished job's copy and a complete job's first page are kept in a shared cache:
/// the result's own lifetime. A finished result changes only when its comments are released,
/// which renews its copy, so an outage can answer every result still kept; the cache's memory
/// policy evicts the oldest first when it runs short. In-process (embedded) copies keep
/// [`FINISHED_JOB_TTL`]: the embedded database never goes away.
pub const RESULT_KEPT_FOR: Duration = cova_domain::limits::LIBRARY_LIFETIME;
/// How long a token's copy is kept after its last lookup.
pub const TOKEN_KEPT_FOR: Duration = Duration::from_secs(60);

/// The cache key of an account's copy.
pub fn account_key(account_id: &str) -> String {
    format!("snap:account:{account_id}")
}

/// The cache key of a job's copy.
pub fn job_key(job_id: &str) -> String {
    format!("snap:job:{job_id}")
}

/// The cache key of a token's copy, by the token's SHA-256.
pub fn token_key(token_hash: &str) -> String {
    format!("snap:token:{token_hash}")
}

/// The cache key of a complete job's first page ([`FirstPage`]).
pub fn first_page_key(job_id: &str) -> String {
    format!("snap:first:{job_id}")
}

/// The cache key of a batch's copy.
pub fn batch_key(batch_id: &str) -> String {
    format!("snap:batch:{batch_id}")
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Cache(#[from] cova_cache::CacheError),
}

/// A copy and when it was read from the database (the clock's ms).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Kept<T> {
    read_at: i64,
    value: T,
}

/// A token and its account, as authentication needs them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenCopy {
    pub token: TokenRecord,
    pub account: Account,
}

/// Reads and refreshes the copies; also the listener of the database's committed changes.
#[derive(Clone)]
pub struct Snapshots {
    cache: Cache,
    clock: Clock,
}

impl Snapshots {
    pub fn new(cache: Cache, clock: Clock) -> Self {
        Self { cache, clock }
    }

    fn age(&self, read_at: i64) -> Duration {
        Duration::from_millis(u64::try_from(self.clock.now_ms() - read_at).unwrap_or(0))
    }

    /// The account's state (this month's balance, running analyses, tokens): `held` is what a
    /// cache read of [`account_key`] brought (a [`cova_cache::Read::Stamped`] in the request's
    /// batch); without a fresh copy the database is read and the copy stored. While the
    /// database does not answer, a kept copy of this month is served however old.
    pub async fn account(&self, db: &Db, held: Option<Vec<u8>>, account_id: &str) -> Result<Usage, SnapshotError> {
        let month = month_of(self.clock.now_ms());
        let kept = decode::<Kept<Usage>>(held.as_deref()).filter(|k| k.value.balance.month == month);
        if let Some(k) = kept.as_ref().filter(|k| self.age(k.read_at) <= ACCOUNT_TTL) {
            return Ok(k.value.clone());
        }
        let key = account_key(account_id);
        // A cache that does not answer costs only the copy: the database still does.
        let stamp = self.cache.current_stamp(&key).await.ok();
        match db.bounded(accounts::usage(db, account_id, self.clock.now_ms())).await {
            Ok(usage) => {
                if let Some(stamp) = stamp {
                    self.store(&key, stamp, &usage, KEPT_FOR).await;
                }
                Ok(usage)
            }
            Err(e) if e.is_unavailable() => kept.map(|k| k.value).ok_or(SnapshotError::Storage(e)),
            Err(e) => Err(e.into()),
        }
    }

    /// The job's state as a poll shows it, as [`Snapshots::account`]; `None` when there is no
    /// such job.
    pub async fn job(&self, db: &Db, held: Option<Vec<u8>>, job_id: &str) -> Result<Option<Polled>, SnapshotError> {
        let kept = decode::<Kept<Polled>>(held.as_deref());
        if let Some(k) = kept.as_ref().filter(|k| self.age(k.read_at) <= fresh_for(&k.value)) {
            return Ok(Some(k.value.clone()));
        }
        let key = job_key(job_id);
        let stamp = self.cache.current_stamp(&key).await.ok();
        match db.bounded(jobs::poll(db, job_id)).await {
            Ok(polled) => {
                if let (Some(polled), Some(stamp)) = (&polled, stamp) {
                    self.store(&key, stamp, polled, self.kept_for(polled)).await;
                }
                Ok(polled)
            }
            Err(e) if e.is_unavailable() => kept.map(|k| Some(k.value)).ok_or(SnapshotError::Storage(e)),
            Err(e) => Err(e.into()),
        }
    }

    /// The active token with this hash and its account: from the database, whose answer is
    /// copied; from the copy only while the database does not answer.
    pub async fn token(&self, db: &Db, token_hash: &str) -> Result<Option<TokenCopy>, SnapshotError> {
        let key = token_key(token_hash);
        match db.bounded(tokens::find_active_by_hash(db, token_hash)).await {
            Ok(found) => {
                let copy = found.map(|(token, account)| TokenCopy { token, account });
                match &copy {
                    Some(copy) => {
                        if let Ok(bytes) = postcard::to_allocvec(copy)
                            && let Err(e) = self.cache.set(&key, &bytes, TOKEN_KEPT_FOR).await
                        {
                            tracing::debug!(error = %e, "copying a token failed");
                        }
                    }
                    None => {
                        let _ = self.cache.delete(&key).await;
                    }
                }
                Ok(copy)
            }
            Err(e) if e.is_unavailable() => match self.cache.get(&key).await {
                Ok(held) => decode::<TokenCopy>(held.as_deref()).map(Some).ok_or(SnapshotError::Storage(e)),
                Err(_) => Err(SnapshotError::Storage(e)),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// The account's batch, read from the database (and copied); while the database does not
    /// answer, its copy, as it was when last read or changed. `None` when there is no such
    /// batch of the account.
    pub async fn batch(&self, db: &Db, account_id: &str, batch_id: &str) -> Result<Option<Batch>, SnapshotError> {
        let key = batch_key(batch_id);
        let stamp = self.cache.current_stamp(&key).await.ok();
        match db.bounded(batches::get(db, account_id, batch_id)).await {
            Ok(batch) => {
                if let (Some(batch), Some(stamp)) = (&batch, stamp) {
                    self.store(&key, stamp, batch, KEPT_FOR).await;
                }
                Ok(batch)
            }
            Err(e) if e.is_unavailable() => {
                let held = self.cache.get_stamped(&key).await.ok().flatten();
                let kept = decode::<Kept<Batch>>(held.as_deref()).ok_or(SnapshotError::Storage(e))?;
                Ok(Some(kept.value).filter(|b| b.account_id == account_id))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A complete job's first page from what a cache read of [`first_page_key`] brought, or
    /// (without one) read from the database and kept. `None` while the database does not
    /// answer and no page is kept.
    pub async fn first_page(
        &self,
        db: &Db,
        held: Option<Vec<u8>>,
        job_id: &str,
    ) -> Result<Option<FirstPage>, SnapshotError> {
        if let Some(page) = decode::<FirstPage>(held.as_deref()) {
            return Ok(Some(page));
        }
        match db.bounded(breakdown::first_page(db, job_id)).await {
            Ok(page) => {
                self.keep_first_page(job_id, &page).await;
                Ok(Some(page))
            }
            Err(e) if e.is_unavailable() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn keep_first_page(&self, job_id: &str, page: &FirstPage) {
        let Ok(bytes) = postcard::to_allocvec(page) else { return };
        if let Err(e) = self.cache.set(&first_page_key(job_id), &bytes, self.result_kept_for()).await {
            tracing::debug!(error = %e, "keeping a first page failed; the next poll reads it");
        }
    }

    async fn store<T: Serialize + Clone>(&self, key: &str, stamp: u64, value: &T, keep: Duration) {
        let kept = Kept { read_at: self.clock.now_ms(), value: value.clone() };
        let Ok(bytes) = postcard::to_allocvec(&kept) else { return };
        if let Err(e) = self.cache.put_stamped(key, stamp, &bytes, keep).await {
            tracing::debug!(error = %e, key, "storing a snapshot failed; the next read tries again");
        }
    }

    /// Refreshes the account's copy, if the cache holds one (or deletes a revoked token's).
    async fn refresh_account(&self, db: &Db, change: Change<'_>) -> Result<(), SnapshotError> {
        match change {
            Change::Account(id) => {
                let key = account_key(id);
                let (stamp, held) = self.cache.stamp(&key, KEPT_FOR).await?;
                if held {
                    // Nobody keeps a copy otherwise: the next reader stores one, read after this.
                    let usage = accounts::usage(db, id, self.clock.now_ms()).await?;
                    self.store(&key, stamp, &usage, KEPT_FOR).await;
                }
            }
            Change::TokenRevoked(hash) => self.cache.delete(&token_key(hash)).await?,
            Change::Job(_) | Change::Batch(_) => {}
        }
        Ok(())
    }

    /// Copies the jobs (every one, held or not: a poll must find a copy even when the database
    /// goes away right after the job was created), keeps the first page of those that just
    /// completed, and copies the batches that changed or whose job ended.
    async fn refresh_jobs(&self, db: &Db, job_ids: &[&str], batch_ids: &mut Vec<String>) -> Result<(), SnapshotError> {
        let mut stamps = Vec::with_capacity(job_ids.len());
        for id in job_ids {
            stamps.push((*id, self.cache.stamp(&job_key(id), KEPT_FOR).await?.0));
        }
        for polled in jobs::poll_many(db, job_ids).await? {
            let Some((_, stamp)) = stamps.iter().find(|(id, _)| *id == polled.job.id) else { continue };
            self.store(&job_key(&polled.job.id), *stamp, &polled, self.kept_for(&polled)).await;
            let job = &polled.job;
            if job.status == JobStatus::Complete && job.kind == JobKind::Analyze && polled.current {
                let kept = self.cache.get(&first_page_key(&job.id)).await.ok().flatten();
                if kept.is_none() {
                    self.keep_first_page(&job.id, &breakdown::first_page(db, &job.id).await?).await;
                }
            }
            if let Some(batch) = job.batch_id.as_ref().filter(|_| job.status.is_finished())
                && !batch_ids.contains(batch)
            {
                batch_ids.push(batch.clone());
            }
        }
        Ok(())
    }

    /// Copies a batch as it is now.
    async fn refresh_batch(&self, db: &Db, batch_id: &str) -> Result<(), SnapshotError> {
        let key = batch_key(batch_id);
        let (stamp, _) = self.cache.stamp(&key, KEPT_FOR).await?;
        if let Some(batch) = batches::get_any(db, batch_id).await? {
            self.store(&key, stamp, &batch, KEPT_FOR).await;
        }
        Ok(())
    }
}

/// Copies are postcard, not JSON: every authenticated request decodes one, and postcard
/// decodes several times faster. A copy that does not decode (one written by an older cova)
/// counts as missing.
fn decode<T: serde::de::DeserializeOwned>(held: Option<&[u8]>) -> Option<T> {
    held.and_then(|bytes| postcard::from_bytes(bytes).ok())
}

/// How long a job's copy is served without a refresh while the database answers.
fn fresh_for(polled: &Polled) -> Duration {
    if polled.job.status.is_finished() { FINISHED_JOB_TTL } else { RUNNING_JOB_TTL }
}

impl Snapshots {
    /// How long a finished result's copies are kept.
    fn result_kept_for(&self) -> Duration {
        if self.cache.is_memory() { FINISHED_JOB_TTL } else { RESULT_KEPT_FOR }
    }

    /// How long a job's copy is kept.
    fn kept_for(&self, polled: &Polled) -> Duration {
        if polled.job.status.is_finished() { self.result_kept_for() } else { KEPT_FOR }
    }
}

impl Changes for Snapshots {
    fn changed<'a>(&'a self, db: &'a Db, changes: &'a [Change<'a>]) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // The write is committed; a copy that fails to refresh catches up at its next
            // refresh or expiry.
            for change in changes {
                if let Err(e) = self.refresh_account(db, *change).await {
                    tracing::warn!(error = %e, ?change, "refreshing a snapshot failed");
                }
            }
            let job_ids: Vec<&str> =
                changes.iter().filter_map(|c| if let Change::Job(id) = c { Some(*id) } else { None }).collect();
            let mut batch_ids: Vec<String> = changes
                .iter()
                .filter_map(|c| if let Change::Batch(id) = c { Some((*id).to_owned()) } else { None })
                .collect();
            if !job_ids.is_empty()
                && let Err(e) = self.refresh_jobs(db, &job_ids, &mut batch_ids).await
            {
                tracing::warn!(error = %e, jobs = job_ids.len(), "copying jobs failed");
            }
            for batch_id in &batch_ids {
                if let Err(e) = self.refresh_batch(db, batch_id).await {
                    tracing::warn!(error = %e, batch.id = %batch_id, "copying a batch failed");
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cova_storage::repo::accounts::Account;
    use cova_storage::repo::balances::Balance;

    fn encoded<T: serde::Serialize>(value: &T) -> Vec<u8> {
        postcard::to_allocvec(value).expect("encodes")
    }

    #[test]
    fn copies_decode_to_what_was_stored() {
        let usage = Usage {
            account: Account {
                id: "a".into(),
                email: "é@example.com".into(),
                email_confirmed_at: Some(1),
                active_tokens: 2,
                free_comments_left: -3,
                created_at: 4,
                password_hash: None,
            },
            balance: Balance {
                month: "2026-11".into(),
                granted: 10_000,
                reserved: 5,
                spent: 6,
                available: 9_989,
                expires_at: 1_800_000_000_000,
            },
            running: 1,
        };
        assert_eq!(decode::<Usage>(Some(&encoded(&usage))), Some(usage.clone()));
        let kept = Kept { read_at: 7, value: usage };
        assert_eq!(decode::<Kept<Usage>>(Some(&encoded(&kept))), Some(kept));
        let polled = Polled {
            job: jobs::Job {
                id: "j".into(),
                account_id: "a".into(),
                token_id: None,
                kind: JobKind::Analyze,
                r#ref: "tiktok:1".into(),
                url: "https://www.tiktok.com/@a/video/1".into(),
                status: JobStatus::Failed,
                created_at: 1,
                started_at: Some(2),
                finished_at: None,
                comments_collected: 3,
                comments_expected: Some(4),
                truncated: true,
                truncated_reason: Some("balance".into()),
                comments_new: Some(3),
                batch_id: Some("b".into()),
                error_code: Some("parse_error".into()),
                error_detail: None,
                hold_stage: cova_domain::money::Stage::Waiting,
                waiting_since: Some(5),
                max_comments: Some(100),
                free_allowance: true,
                session_id: None,
                comments_off: false,
            },
            current: false,
            ai: None,
        };
        assert_eq!(decode::<Polled>(Some(&encoded(&polled))), Some(polled));
    }

    #[test]
    fn a_copy_that_does_not_decode_is_missing() {
        assert_eq!(decode::<Polled>(Some(b"{\"job\":{}}")), None);
        assert_eq!(decode::<Usage>(Some(&[])), None);
        assert_eq!(decode::<Usage>(None), None);
    }
}
