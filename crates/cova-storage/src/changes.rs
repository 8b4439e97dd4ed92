//! Committed changes, announced to whoever keeps copies of database state elsewhere (the
//! account and job snapshots in the cache that the request path reads). Every storage function
//! that changes what a copy holds calls [`Db::changed`] once its transaction has committed, and
//! waits for it: the caller's next read of the copy sees the change. The function's own
//! connection goes back to the pool first: the listener reads with one of its own, and holding
//! both would let concurrent writers empty the pool and wait on each other.

use crate::Db;
use futures::future::BoxFuture;
use std::sync::Arc;

/// What a committed transaction changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change<'a> {
    /// The account's balance of the month, its running analyses, its tokens or its row.
    Account(&'a str),
    /// The job's row, or whether its comments are still its analysis' breakdown.
    Job(&'a str),
    /// The token with this hash was revoked: no copy of it may authenticate any more.
    TokenRevoked(&'a str),
    /// The batch was created, or one of its URLs started, was refused or cancelled, or it ended.
    Batch(&'a str),
}

/// Keeps copies up to date; must not fail the write that was already committed (a copy it
/// cannot update is its own problem, bounded by the copy's lifetime).
pub trait Changes: Send + Sync {
    fn changed<'a>(&'a self, db: &'a Db, changes: &'a [Change<'a>]) -> BoxFuture<'a, ()>;
}

/// Where a pool and all its clones announce changes; empty until [`Db::listen`].
pub(crate) type Listener = Arc<std::sync::RwLock<Option<Arc<dyn Changes>>>>;

impl Db {
    /// Announces the committed changes of this pool and of every clone of it to `changes`
    /// (replacing an earlier listener).
    pub fn listen(&self, changes: Arc<dyn Changes>) {
        let mut slot = self.changes.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = Some(changes);
    }

    /// Announces committed changes (nothing without a listener).
    pub async fn changed(&self, changes: &[Change<'_>]) {
        let listener = self.changes.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if let Some(listener) = listener
            && !changes.is_empty()
        {
            listener.changed(self, changes).await;
        }
    }
}
