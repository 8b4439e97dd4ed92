//! Snapshots: copies of the account and job state that every authenticated request reads (the
//! quota headers, `/usage`, a job's poll), kept in the cache so that the request path reads no
//! database. The storage layer announces each committed change ([`cova_storage::Changes`]);
//! [`Snapshots`] then refreshes the copy under a stamp of the cache ([`cova_cache::Cache::stamp`]),
//! so that a copy read before a change can never replace one read after it, whatever order
//! writers and readers finish in. A reader that finds no copy reads the database and stores it.
//!
//! A complete job's first page (a poll's `?limit=` without a cursor) is kept too: its comments
//! never change while they are the analysis' (a release deletes them, and a poll only serves
//! the page while the job's copy says they are current), so the page is stored once rendered.
//!
//! A copy outlives a change it missed only when its refresh failed (the cache did not answer
//! just then, or the writer died between its commit and the refresh), and then for at most its
//! lifetime: [`ACCOUNT_TTL`], [`RUNNING_JOB_TTL`] or [`FINISHED_JOB_TTL`].

use cova_cache::Cache;
use cova_domain::time::{Clock, month_of};
use cova_storage::repo::accounts::{self, Usage};
use cova_storage::repo::jobs::{self, Polled};
use cova_storage::{Change, Changes, Db, StorageError};
use futures::future::BoxFuture;
use std::time::Duration;

/// How long an account's copy lives without a refresh.
pub const ACCOUNT_TTL: Duration = Duration::from_secs(10);
/// How long the copy of a queued or running job lives without a refresh.
pub const RUNNING_JOB_TTL: Duration = Duration::from_secs(10);
/// How long the copy of a finished job lives (it changes only when its comments are released).
pub const FINISHED_JOB_TTL: Duration = Duration::from_secs(600);

/// The cache key of an account's copy.
pub fn account_key(account_id: &str) -> String {
    format!("snap:account:{account_id}")
}

/// The cache key of a job's copy.
pub fn job_key(job_id: &str) -> String {
    format!("snap:job:{job_id}")
}

/// The largest `limit` whose first page of a complete job is kept: a poll's page, not a result.
pub const FIRST_PAGE_MAX_LIMIT: i64 = 10;
/// The largest first page kept, rendered (a comment with many replies can be long).
pub const FIRST_PAGE_MAX_BYTES: usize = 16 * 1024;

/// The cache key of a complete job's rendered first page of `limit` top-level comments, when
/// such a page is kept.
pub fn first_page_key(job_id: &str, limit: i64) -> Option<String> {
    (1..=FIRST_PAGE_MAX_LIMIT).contains(&limit).then(|| format!("snap:page:{job_id}:{limit}"))
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Cache(#[from] cova_cache::CacheError),
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

    /// The account's state (this month's balance, running analyses, tokens): `held` is what a
    /// cache read of [`account_key`] brought (a [`cova_cache::Read::Stamped`] in the request's
    /// batch); without a usable copy the database is read and the copy stored.
    pub async fn account(&self, db: &Db, held: Option<Vec<u8>>, account_id: &str) -> Result<Usage, SnapshotError> {
        let month = month_of(self.clock.now_ms());
        if let Some(usage) = decode::<Usage>(held.as_deref()).filter(|u| u.balance.month == month) {
            return Ok(usage);
        }
        let key = account_key(account_id);
        let stamp = self.cache.current_stamp(&key).await?;
        let usage = accounts::usage(db, account_id, self.clock.now_ms()).await?;
        self.store(&key, stamp, &usage, ACCOUNT_TTL).await;
        Ok(usage)
    }

    /// The job's state as a poll shows it, as [`Snapshots::account`]; `None` when there is no
    /// such job.
    pub async fn job(&self, db: &Db, held: Option<Vec<u8>>, job_id: &str) -> Result<Option<Polled>, SnapshotError> {
        if let Some(polled) = decode::<Polled>(held.as_deref()) {
            return Ok(Some(polled));
        }
        let key = job_key(job_id);
        let stamp = self.cache.current_stamp(&key).await?;
        let polled = jobs::poll(db, job_id).await?;
        if let Some(polled) = &polled {
            self.store(&key, stamp, polled, job_ttl(polled)).await;
        }
        Ok(polled)
    }

    /// Keeps a complete job's rendered first page (see [`first_page_key`]) for as long as
    /// its copy; a page too long to keep, or one that failed to store, is rendered again.
    pub async fn store_first_page(&self, job_id: &str, limit: i64, rendered: &[u8]) {
        let Some(key) = first_page_key(job_id, limit).filter(|_| rendered.len() <= FIRST_PAGE_MAX_BYTES) else {
            return;
        };
        if let Err(e) = self.cache.set(&key, rendered, FINISHED_JOB_TTL).await {
            tracing::debug!(error = %e, key, "storing a first page failed; the next poll renders it");
        }
    }

    async fn store<T: serde::Serialize>(&self, key: &str, stamp: u64, value: &T, ttl: Duration) {
        let Ok(bytes) = postcard::to_allocvec(value) else { return };
        if let Err(e) = self.cache.put_stamped(key, stamp, &bytes, ttl).await {
            tracing::debug!(error = %e, key, "storing a snapshot failed; the next read tries again");
        }
    }

    /// Refreshes the copy of what `change` changed, if the cache holds one.
    async fn refresh(&self, db: &Db, change: Change<'_>) -> Result<(), SnapshotError> {
        let key = match change {
            Change::Account(id) => account_key(id),
            Change::Job(id) => job_key(id),
        };
        let ttl = match change {
            Change::Account(_) => ACCOUNT_TTL,
            Change::Job(_) => RUNNING_JOB_TTL,
        };
        let (stamp, held) = self.cache.stamp(&key, ttl).await?;
        if !held {
            // Nobody keeps a copy: the next reader stores one, read after this change.
            return Ok(());
        }
        match change {
            Change::Account(id) => {
                let usage = accounts::usage(db, id, self.clock.now_ms()).await?;
                self.store(&key, stamp, &usage, ACCOUNT_TTL).await;
            }
            Change::Job(id) => {
                if let Some(polled) = jobs::poll(db, id).await? {
                    self.store(&key, stamp, &polled, job_ttl(&polled)).await;
                }
            }
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

fn job_ttl(polled: &Polled) -> Duration {
    if polled.job.status.is_finished() { FINISHED_JOB_TTL } else { RUNNING_JOB_TTL }
}

impl Changes for Snapshots {
    fn changed<'a>(&'a self, db: &'a Db, changes: &'a [Change<'a>]) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for change in changes {
                if let Err(e) = self.refresh(db, *change).await {
                    // The write is committed; the copy catches up at its next refresh or expiry.
                    tracing::warn!(error = %e, ?change, "refreshing a snapshot failed");
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cova_domain::{JobKind, JobStatus};
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
        assert_eq!(decode::<Usage>(Some(&encoded(&usage))), Some(usage));
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
                error_code: Some("parse_error".into()),
                error_detail: None,
            },
            current: false,
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
