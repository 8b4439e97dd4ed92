//! Whether PostgreSQL can be reached, as this process last found it. A connection that could
//! not be opened, a connection the network dropped, or a request's read that got no answer in
//! time marks the database down: from then on no request tries it (each is answered at once,
//! from the kept copies or with 503), idle pooled connections are dropped (the partition may
//! have killed them), and one background probe tries it every `database.probe_interval_ms`
//! until it answers, which marks it up again. So an outage costs a request no waiting beyond
//! the first one that found it, bounded by `database.request_wait_ms`.
//!
//! SQLite is a local file: it is never marked down.

use crate::{Db, Result, StorageError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The state shared by a pool and all its clones.
#[derive(Debug, Default)]
pub(crate) struct Health {
    down: AtomicBool,
    probing: AtomicBool,
    /// A connection was given back broken: the next request marks the database down.
    suspect: AtomicBool,
}

impl Health {
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    pub(crate) fn suspect(&self) {
        self.suspect.store(true, Ordering::Release);
    }
}

impl Db {
    /// Whether the database is marked unreachable (requests are not trying it).
    pub fn is_down(&self) -> bool {
        self.health.is_down()
    }

    /// Refuses at once while the database is marked down (or a connection was just found
    /// dropped by the network, which marks it down).
    pub(crate) fn refuse_while_down(&self) -> Result<()> {
        if self.health.suspect.swap(false, Ordering::AcqRel) {
            self.mark_down("a pooled connection was dropped by the network");
        }
        if self.health.is_down() {
            return Err(StorageError::Unavailable(
                "the database is unreachable; not tried until it answers a probe".into(),
            ));
        }
        Ok(())
    }

    /// Marks the database down (PostgreSQL only): requests stop trying it, idle connections are
    /// dropped, and a probe starts.
    pub(crate) fn mark_down(&self, why: &str) {
        if !self.is_postgres() {
            return;
        }
        if !self.health.down.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                reason = why,
                "the database is unreachable: requests answer from kept copies or 503 until it is back"
            );
            cova_metrics::database_reachable(false);
            self.drop_idle();
        }
        self.start_probe();
    }

    fn start_probe(&self) {
        if self.health.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let db = self.clone();
        let every = self.probe_every;
        // Outside a runtime (a synchronous caller) nothing probes; the next request does.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.health.probing.store(false, Ordering::Release);
            self.health.down.store(false, Ordering::Release);
            return;
        };
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                match db.probe().await {
                    Ok(()) => {
                        db.health.down.store(false, Ordering::Release);
                        db.health.probing.store(false, Ordering::Release);
                        cova_metrics::database_reachable(true);
                        tracing::info!("the database answers again");
                        return;
                    }
                    Err(e) => tracing::debug!(error = %e, "the database still does not answer"),
                }
            }
        });
    }

    /// One connection and `SELECT 1`, within the connect and request bounds, past the mark.
    async fn probe(&self) -> Result<()> {
        let bound = self.connect_timeout + self.request_wait;
        tokio::time::timeout(bound, self.ping_unchecked())
            .await
            .map_err(|_| StorageError::Unavailable(format!("no answer within {} ms", bound.as_millis())))?
    }

    /// Runs a read of the request path within `database.request_wait_ms`: one that fails to
    /// reach the database, or gets no answer in time, marks it down. (On SQLite it just runs.)
    pub async fn bounded<T>(&self, read: impl Future<Output = Result<T>>) -> Result<T> {
        if !self.is_postgres() {
            return read.await;
        }
        self.refuse_while_down()?;
        match tokio::time::timeout(self.request_wait, read).await {
            Err(_) => {
                let why = format!("a read got no answer within {} ms", self.request_wait.as_millis());
                self.mark_down(&why);
                Err(StorageError::Unavailable(why))
            }
            Ok(Err(StorageError::Unavailable(why))) => {
                self.mark_down(&why);
                Err(StorageError::Unavailable(why))
            }
            Ok(other) => other,
        }
    }
}

pub(crate) fn shared() -> Arc<Health> {
    Arc::new(Health::default())
}
