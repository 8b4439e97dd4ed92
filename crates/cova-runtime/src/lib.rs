//! What every cova role runs on: the backends (database, cache, queue) connected from the
//! configuration by URL scheme, the worker runtime that every queue-consuming role is a
//! handler of, the job step every job-running role is a runner of, and the outbox relay that
//! connects database writes to the queue.

pub mod flow;
pub mod job;
mod journal;
pub mod keyword_alerts;
pub mod known_counts;
pub mod outbox;
pub mod periodic;
pub mod sentiment;
pub mod spike_alerts;
pub mod worker;

pub use flow::Flow;
pub use job::{Claimed, JobError, JobRunner, JobSettings, JobStep};
pub use periodic::{Periodic, Progress};
pub use worker::{Delivered, Handler, Outcome, Source};

use cova_cache::Cache;
use cova_config::{Config, redact_url};
use cova_domain::Clock;
use cova_media::{Fetcher, Media, MediaStore};
use cova_queue::Queue;
use cova_snapshots::Snapshots;
use cova_storage::Db;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("database ({url}): {source}")]
    Database { url: String, source: cova_storage::StorageError },
    #[error("cache ({url}): {source}")]
    Cache { url: String, source: cova_cache::CacheError },
    #[error("queue ({url}): {source}")]
    Queue { url: String, source: cova_queue::QueueError },
    #[error("media (media.url = {url}): {message}")]
    Media { url: String, message: String },
}

/// Handles on the database, cache and queue, and the clock the product rules run on; cheap
/// to clone.
#[derive(Clone)]
pub struct Backends {
    pub db: Db,
    pub cache: Cache,
    pub queue: Queue,
    /// The media store, and the downloads that fill it (in memory, unused, for a process
    /// whose roles never touch images).
    pub media: Media,
    /// Whether `media` is the configured store (and readiness probes it).
    media_opened: bool,
    /// How far the process' loops have got (passes, settled messages).
    pub progress: Progress,
    /// The copies of account and job state the request path reads, refreshed by every
    /// committed change of `db`.
    pub snapshots: Snapshots,
    pub clock: Clock,
}

/// Result of one readiness probe per backend.
#[derive(Debug, Clone)]
pub struct Readiness {
    pub checks: Vec<(&'static str, Result<(), String>)>,
}

/// How long one readiness probe of a backend may take before it counts as down.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

impl Readiness {
    pub fn ready(&self) -> bool {
        self.checks.iter().all(|(_, r)| r.is_ok())
    }

    /// The backends that did not answer, as `/readyz` says it: `queue unavailable, …`.
    pub fn down(&self) -> String {
        let down: Vec<String> =
            self.checks.iter().filter(|(_, r)| r.is_err()).map(|(name, _)| format!("{name} unavailable")).collect();
        down.join(", ")
    }
}

impl Backends {
    /// Builds the pools and clients. Nothing here needs a backend to be up: a backend that is
    /// down makes requests answer 503 until it returns (the pools reconnect by themselves).
    pub async fn connect(cfg: &Config) -> Result<Self, StartError> {
        Self::connect_opening(cfg, true).await
    }

    /// As [`Backends::connect`], opening the media store only when `media` (the roles of the
    /// process keep or serve images): the others never read `media.*`.
    pub async fn connect_opening(cfg: &Config, open_media: bool) -> Result<Self, StartError> {
        let db = Db::connect(&cfg.database)
            .map_err(|source| StartError::Database { url: redact_url(&cfg.database.url), source })?;
        let cache = Cache::connect(&cfg.cache)
            .map_err(|source| StartError::Cache { url: redact_url(&cfg.cache.url), source })?;
        let queue = Queue::connect_with(&cfg.queue, cova_messages::roles::ALL, cova_messages::event_queues::ALL)
            .await
            .map_err(|source| StartError::Queue { url: redact_url(&cfg.queue.url), source })?
            // The in-process queue keeps its messages in the database (a broker keeps its own).
            .with_journal(Arc::new(journal::DbJournal::new(db.clone())));
        let media_error = |message: String| StartError::Media { url: redact_url(&cfg.media.url), message };
        let (store, fetcher) = if open_media {
            let store = MediaStore::from_config(&cfg.media).map_err(|e| media_error(e.to_string()))?;
            (store, Fetcher::new(&cfg.media).map_err(media_error)?)
        } else {
            let unused = cova_config::MediaConfig { cdn_hosts: Vec::new(), ..cova_config::MediaConfig::default() };
            (MediaStore::unused(), Fetcher::new(&unused).map_err(media_error)?)
        };
        let clock = Clock::system();
        let media = Media::new(store, fetcher, db.clone(), clock.clone());
        let snapshots = Snapshots::new(cache.clone(), clock.clone());
        db.listen(Arc::new(snapshots.clone()));
        Ok(Self { db, cache, queue, media, media_opened: open_media, progress: Progress::default(), snapshots, clock })
    }

    /// Makes the committed changes of `db`, opened by a one-shot command such as `cova admin`,
    /// refresh the copies in a shared cache. An embedded cache lives in the serving process,
    /// whose copies catch up within their lifetime ([`cova_snapshots::ACCOUNT_TTL`]).
    pub fn refresh_shared_snapshots(db: &Db, cfg: &Config) -> Result<(), StartError> {
        if matches!(cova_config::CacheBackend::parse(&cfg.cache.url), Ok(cova_config::CacheBackend::Redis(_))) {
            let cache = Cache::connect(&cfg.cache)
                .map_err(|source| StartError::Cache { url: redact_url(&cfg.cache.url), source })?;
            db.listen(Arc::new(Snapshots::new(cache, Clock::system())));
        }
        Ok(())
    }

    /// The same backends on another clock (tests move time by hand).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.media = self.media.with_clock(clock.clone());
        self.snapshots = Snapshots::new(self.cache.clone(), clock.clone());
        self.db.listen(Arc::new(self.snapshots.clone()));
        self.clock = clock;
        self
    }

    /// Probes every backend at once, each bounded by `timeout`.
    pub async fn readiness(&self, timeout: Duration) -> Readiness {
        let bound = |r: Option<Result<(), String>>| r.unwrap_or_else(|| Err("timed out".into()));
        let (db, cache, queue, media) = tokio::join!(
            tokio::time::timeout(timeout, self.db.ping()),
            tokio::time::timeout(timeout, self.cache.ping()),
            tokio::time::timeout(timeout, self.queue.ping()),
            tokio::time::timeout(timeout, self.media.store().ping()),
        );
        let mut checks = vec![
            ("database", bound(db.ok().map(|r| r.map_err(|e| e.to_string())))),
            ("cache", bound(cache.ok().map(|r| r.map_err(|e| e.to_string())))),
            ("queue", bound(queue.ok().map(|r| r.map_err(|e| e.to_string())))),
        ];
        if self.media_opened {
            checks.push(("media", bound(media.ok().map(|r| r.map_err(|e| e.to_string())))));
        }
        Readiness { checks }
    }
}
