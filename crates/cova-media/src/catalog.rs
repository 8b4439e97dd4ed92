//! What ties images to accounts: the images a scrape or a metadata read lists are registered
//! for the account (each gets an unguessable id and cova's own URL, written into the comments
//! and the metadata), downloaded into the store, and purged with the breakdown.

use crate::{FetchError, Fetcher, MediaError, MediaStore, Stored};
use cova_domain::Clock;
use cova_platforms::{Comment, Media as Item};
use cova_storage::repo::media::{self as rows, Listed, Registered};
use cova_storage::{Db, StorageError};
use futures::StreamExt;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// Where cova serves an image.
pub const FILE_PATH: &str = "/api/v1/media/file";

/// cova's URL of the image `id`.
pub fn file_url(id: &str) -> String {
    format!("{FILE_PATH}?id={id}")
}

pub const COVER: &str = "cover";
pub const AVATAR: &str = "avatar";
pub const IMAGE: &str = "image";

/// An image whose bytes cova does not have yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub id: String,
    pub source_url: String,
}

/// Where an image sits in a post, which finds the same image again on a re-scrape.
fn avatar_slot(author_id: &str) -> String {
    format!("avatar:{author_id}")
}

fn image_slot(comment_id: &str, k: usize) -> String {
    format!("image:{comment_id}:{k}")
}

/// The post author's avatar.
const AUTHOR_SLOT: &str = "author";

fn dimension(v: Option<u32>) -> Option<i32> {
    v.and_then(|v| i32::try_from(v).ok())
}

fn item(registered: &Registered, kind: &str, source_url: &str, width: Option<u32>, height: Option<u32>) -> Item {
    Item {
        id: Some(registered.id.clone()),
        url: file_url(&registered.id),
        kind: Some(kind.to_owned()),
        width,
        height,
        source_url: Some(source_url.to_owned()),
    }
}

/// Registers without repeating a slot (an author with several comments on a page).
async fn register(
    db: &Db,
    account_id: &str,
    r#ref: &str,
    mut listed: Vec<Listed>,
    now: i64,
) -> Result<HashMap<String, Registered>, StorageError> {
    let mut seen = HashSet::new();
    listed.retain(|l| !l.source_url.is_empty() && seen.insert(l.slot.clone()));
    rows::register(db, account_id, r#ref, &listed, now, cova_domain::library::expires_at(now)).await
}

/// Lists the comment images and author avatars of a page of comments for the account and
/// points them at cova. Returns the comment images to download now (avatars are fetched when
/// first asked for).
pub async fn attach_comments(
    db: &Db,
    account_id: &str,
    r#ref: &str,
    comments: &mut [Comment],
    now: i64,
) -> Result<Vec<Pending>, StorageError> {
    let mut listed = Vec::new();
    for c in comments.iter() {
        if let Some(url) = c.author.avatar_url.as_ref().filter(|_| !c.author.id.is_empty()) {
            listed.push(Listed {
                slot: avatar_slot(&c.author.id),
                kind: AVATAR,
                source_url: url.clone(),
                width: None,
                height: None,
            });
        }
        for (k, m) in c.media.iter().enumerate() {
            listed.push(Listed {
                slot: image_slot(&c.id, k),
                kind: IMAGE,
                source_url: m.url.clone(),
                width: dimension(m.width),
                height: dimension(m.height),
            });
        }
    }
    if listed.is_empty() {
        return Ok(Vec::new());
    }
    let registered = register(db, account_id, r#ref, listed, now).await?;
    let mut pending = Vec::new();
    for c in comments.iter_mut() {
        if let (Some(url), Some(r)) = (c.author.avatar_url.as_ref(), registered.get(&avatar_slot(&c.author.id))) {
            c.author.avatar = Some(item(r, AVATAR, url, None, None));
        }
        for (k, m) in c.media.iter_mut().enumerate() {
            let Some(r) = registered.get(&image_slot(&c.id, k)) else { continue };
            let source = m.source_url.take().unwrap_or_else(|| m.url.clone());
            if !r.fetched {
                pending.push(Pending { id: r.id.clone(), source_url: source.clone() });
            }
            *m = item(r, IMAGE, &source, m.width, m.height);
        }
    }
    Ok(pending)
}

/// Lists the cover and the author's avatar of a post's metadata (as the API shows it) for the
/// account, adding `media` to it. Returns the images to download.
pub async fn attach_metadata(
    db: &Db,
    account_id: &str,
    r#ref: &str,
    metadata: &mut Value,
    now: i64,
) -> Result<Vec<Pending>, StorageError> {
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
    let cover_url = text(&metadata["cover"]["url"]).or_else(|| text(&metadata["cover"]["urls"][0]));
    let size = |k: &str| metadata["cover"][k].as_u64().and_then(|v| u32::try_from(v).ok());
    let (width, height) = (size("width"), size("height"));
    let avatar_url = text(&metadata["author"]["avatar_url"]);
    let mut listed = Vec::new();
    if let Some(url) = &cover_url {
        let (w, h) = (dimension(width), dimension(height));
        listed.push(Listed { slot: COVER.into(), kind: COVER, source_url: url.clone(), width: w, height: h });
    }
    if let Some(url) = &avatar_url {
        listed.push(Listed {
            slot: AUTHOR_SLOT.into(),
            kind: AVATAR,
            source_url: url.clone(),
            width: None,
            height: None,
        });
    }
    let registered = register(db, account_id, r#ref, listed, now).await?;
    let mut media = Vec::new();
    let mut pending = Vec::new();
    for (slot, kind, url, w, h) in
        [(COVER, COVER, cover_url, width, height), (AUTHOR_SLOT, AVATAR, avatar_url, None, None)]
    {
        let (Some(url), Some(r)) = (url, registered.get(slot)) else { continue };
        if !r.fetched {
            pending.push(Pending { id: r.id.clone(), source_url: url.clone() });
        }
        media.push(item(r, kind, &url, w, h));
    }
    if let Some(obj) = metadata.as_object_mut() {
        obj.insert("media".into(), serde_json::to_value(media).unwrap_or_default());
    }
    Ok(pending)
}

/// Why an image could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum KeepError {
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error(transparent)]
    Store(#[from] MediaError),
    #[error(transparent)]
    Database(#[from] StorageError),
}

/// Downloads images into the store and records them.
#[derive(Clone)]
pub struct Media {
    store: MediaStore,
    fetcher: Arc<Fetcher>,
    db: Db,
    clock: Clock,
}

impl Media {
    pub fn new(store: MediaStore, fetcher: Fetcher, db: Db, clock: Clock) -> Self {
        Self { store, fetcher: Arc::new(fetcher), db, clock }
    }

    /// The same downloads recorded on another clock.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    pub fn store(&self) -> &MediaStore {
        &self.store
    }

    /// Downloads the image `id` from `source_url` and keeps it; a failed download is recorded
    /// on the image (and its bytes, if any, forgotten: the caller found them gone).
    pub async fn fetch(&self, id: &str, source_url: &str) -> Result<Stored, KeepError> {
        let bytes = match self.fetcher.fetch(source_url).await {
            Ok(bytes) => bytes,
            Err(e) => {
                rows::set_failure(&self.db, id, &e.to_string()).await?;
                return Err(e.into());
            }
        };
        self.keep(id, bytes).await
    }

    /// Keeps `bytes` as the image `id`. The row names the bytes before they are stored: a
    /// janitor that looks for their users now finds this row and leaves them, and one that
    /// deleted them a moment before is undone by the store below (see [`purge_expired`]).
    pub async fn keep(&self, id: &str, bytes: bytes::Bytes) -> Result<Stored, KeepError> {
        let prepared = self.store.prepare(bytes)?;
        let stored = &prepared.stored;
        let size = i64::try_from(stored.size).unwrap_or(i64::MAX);
        rows::set_content(&self.db, id, &stored.key, stored.image.content_type(), size, self.clock.now_ms()).await?;
        match self.store.keep(prepared).await {
            Ok(stored) => Ok(stored),
            Err(e) => {
                rows::set_failure(&self.db, id, &e.to_string()).await?;
                Err(e.into())
            }
        }
    }

    /// Downloads images in the background, `concurrency` at a time, as they are listed. Dropped
    /// without [`Prefetcher::finish`], the downloads listed so far still run to their end.
    pub fn prefetcher(&self, concurrency: usize) -> Prefetcher {
        let (tx, rx) = futures::channel::mpsc::unbounded::<Pending>();
        let media = self.clone();
        let task = tokio::spawn(async move {
            rx.for_each_concurrent(concurrency.max(1), |p| {
                let media = media.clone();
                async move {
                    if let Err(e) = media.fetch(&p.id, &p.source_url).await {
                        tracing::debug!(media.id = %p.id, error = %e, "an image was not downloaded; it is retried when asked for");
                    }
                }
            })
            .await;
        });
        Prefetcher { tx, task }
    }
}

/// Images being downloaded while a job collects.
pub struct Prefetcher {
    tx: futures::channel::mpsc::UnboundedSender<Pending>,
    task: tokio::task::JoinHandle<()>,
}

impl Prefetcher {
    pub fn push(&self, pending: Vec<Pending>) {
        for p in pending {
            // The receiver lives as long as the task; a closed one only skips the download.
            let _ = self.tx.unbounded_send(p);
        }
    }

    /// Waits up to `wait` for the downloads listed so far; the rest are abandoned (they are
    /// fetched when first asked for).
    pub async fn finish(self, wait: Duration) {
        let Prefetcher { tx, mut task } = self;
        drop(tx);
        if tokio::time::timeout(wait, &mut task).await.is_err() {
            tracing::info!("image downloads outlasted the wait; the rest are fetched on demand");
            task.abort();
        }
    }
}

/// The janitor's step: deletes up to `limit` images whose lifetime is over, and their bytes
/// when no living image shares them. Bytes that cannot be deleted now keep their rows for the
/// next round. Returns how many images were deleted.
pub async fn purge_expired(db: &Db, store: &MediaStore, now: i64, limit: i64) -> Result<usize, KeepError> {
    let due = rows::due(db, now, limit).await?;
    let keys: HashSet<&str> = due.iter().filter_map(|(_, k)| k.as_deref()).collect();
    let mut kept_back = HashSet::new();
    for key in keys {
        if rows::key_in_use(db, key, now).await? {
            continue;
        }
        if let Err(e) = store.delete(key).await {
            tracing::warn!(error = %e, "deleting an expired image failed; it is retried");
            kept_back.insert(key);
            continue;
        }
        // A scrape may have named these bytes between the look and the delete: its image
        // forgets them and is downloaded again when first asked for (a scrape naming them
        // after the delete stores them again itself).
        if rows::key_in_use(db, key, now).await? {
            rows::forget_content(db, key).await?;
        }
    }
    let ids: Vec<String> = due
        .iter()
        .filter(|(_, k)| k.as_deref().is_none_or(|k| !kept_back.contains(k)))
        .map(|(id, _)| id.clone())
        .collect();
    Ok(rows::delete_expired(db, &ids, now).await?)
}
