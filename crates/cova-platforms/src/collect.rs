//! The platform-independent collection engine: a sequential top-level cursor chain, reply
//! listings fetched concurrently (bounded) while top-level pages keep streaming, a shared
//! budget of `max` comments, dedup by id, and pages streamed to the caller's sink.

use crate::{CollectOutcome, Comment, CommentSink, PlatformError};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

/// One page of top-level comments.
pub(crate) struct TopPage {
    pub comments: Vec<Comment>,
    /// Parents whose replies must be listed separately, with the replies already complete
    /// in the page (YouTube embeds them when few).
    pub reply_jobs: Vec<ReplyJob>,
    /// The listing is known to be exhausted.
    pub done: bool,
}

pub(crate) struct ReplyJob {
    pub parent_id: String,
    /// Complete replies already in hand; when `None` they are listed with [`CommentSource::reply_page`].
    pub inline: Option<Vec<Comment>>,
}

pub(crate) struct ReplyPage {
    pub comments: Vec<Comment>,
    /// Cursor of the next page; `None` when the listing is exhausted.
    pub next: Option<String>,
}

#[async_trait::async_trait]
pub(crate) trait CommentSource: Send + Sync + 'static {
    /// The next top-level page; `None` once the listing is exhausted. Called sequentially.
    async fn next_page(&self) -> Result<Option<TopPage>, PlatformError>;
    /// One page of the replies of `parent_id`, starting at `cursor` (`None` = first page).
    async fn reply_page(&self, parent_id: &str, cursor: Option<String>) -> Result<ReplyPage, PlatformError>;
    fn reported_total(&self) -> Option<u64>;
    /// The post's comments are off (found out while listing them).
    fn comments_off(&self) -> bool {
        false
    }
    /// The listing stopped while the platform still said there were more.
    fn cut_short(&self) -> bool {
        false
    }
}

struct Shared {
    remaining: AtomicU32,
    collected: AtomicU32,
    truncated: AtomicBool,
    seen: Mutex<HashSet<String>>,
}

impl Shared {
    /// Keeps the unseen comments and claims budget for as many of them as it allows.
    fn admit(&self, batch: Vec<Comment>) -> Vec<Comment> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let mut fresh: Vec<Comment> = batch.into_iter().filter(|c| seen.insert(c.id.clone())).collect();
        let want = u32::try_from(fresh.len()).unwrap_or(u32::MAX);
        let granted = self
            .remaining
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |r| Some(r - r.min(want)))
            .map(|before| before.min(want))
            .unwrap_or(0);
        if granted < want {
            self.truncated.store(true, Ordering::SeqCst);
            // Comments beyond the budget must not count as seen, or a later probe would miss them.
            for c in &fresh[granted as usize..] {
                seen.remove(&c.id);
            }
            fresh.truncate(granted as usize);
        }
        self.collected.fetch_add(granted, Ordering::SeqCst);
        fresh
    }

    fn exhausted(&self) -> bool {
        self.remaining.load(Ordering::SeqCst) == 0
    }

    fn is_truncated(&self) -> bool {
        self.truncated.load(Ordering::SeqCst)
    }

    fn has_unseen(&self, batch: &[Comment]) -> bool {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        batch.iter().any(|c| !seen.contains(&c.id))
    }
}

fn sink_gone() -> PlatformError {
    PlatformError::Unavailable("the comment sink stopped accepting pages".into())
}

/// Collects up to `max` comments from `source`, streaming batches to `sink`.
pub(crate) async fn collect(
    source: Arc<dyn CommentSource>,
    max: u32,
    reply_parallelism: usize,
    sink: &mut (dyn CommentSink + Send),
) -> Result<CollectOutcome, PlatformError> {
    let shared = Arc::new(Shared {
        remaining: AtomicU32::new(max),
        collected: AtomicU32::new(0),
        truncated: AtomicBool::new(false),
        seen: Mutex::new(HashSet::new()),
    });
    let (tx, mut rx) = mpsc::channel::<Vec<Comment>>(32);

    let producer = {
        let shared = shared.clone();
        let source = source.clone();
        async move {
            let permits = Arc::new(Semaphore::new(reply_parallelism.max(1)));
            let mut tasks: JoinSet<Result<(), PlatformError>> = JoinSet::new();
            let mut done = false;
            while !done {
                if shared.exhausted() {
                    // Budget spent: one probe tells a post of exactly `max` comments from a truncated one.
                    if !shared.is_truncated()
                        && let Some(page) = source.next_page().await?
                        && shared.has_unseen(&page.comments)
                    {
                        shared.truncated.store(true, Ordering::SeqCst);
                    }
                    break;
                }
                let Some(page) = source.next_page().await? else {
                    break;
                };
                done = page.done;
                let admitted = shared.admit(page.comments);
                let parents: HashSet<String> = admitted.iter().map(|c| c.id.clone()).collect();
                if !admitted.is_empty() && tx.send(admitted).await.is_err() {
                    return Err(sink_gone());
                }
                for job in page.reply_jobs.into_iter().filter(|j| parents.contains(&j.parent_id)) {
                    if let Some(inline) = job.inline {
                        let batch = shared.admit(inline);
                        if !batch.is_empty() && tx.send(batch).await.is_err() {
                            return Err(sink_gone());
                        }
                        continue;
                    }
                    let (source, shared, tx, permits) = (source.clone(), shared.clone(), tx.clone(), permits.clone());
                    // In the job's span and for its asker, so reply requests stay in the job's
                    // trace and wait their turn as the job's.
                    let replies = async move {
                        let _permit = permits.acquire_owned().await.map_err(|_| sink_gone())?;
                        collect_replies(&*source, &shared, &tx, &job.parent_id).await
                    };
                    tasks.spawn(crate::demand::carried(tracing::Instrument::in_current_span(replies)));
                }
                // Surface reply failures early instead of after the whole top-level chain.
                while let Some(res) = tasks.try_join_next() {
                    flatten(res)?;
                }
            }
            while let Some(res) = tasks.join_next().await {
                flatten(res)?;
            }
            Ok::<(), PlatformError>(())
        }
    };
    let consumer = async move {
        while let Some(batch) = rx.recv().await {
            sink.page(batch).await?;
        }
        Ok::<(), PlatformError>(())
    };
    let (produced, consumed) = tokio::join!(producer, consumer);
    consumed?;
    produced?;
    Ok(CollectOutcome {
        collected: shared.collected.load(Ordering::SeqCst),
        truncated: shared.truncated.load(Ordering::SeqCst),
        partial: false,
        reported_total: source.reported_total(),
        comments_off: source.comments_off(),
        cut_short: source.cut_short(),
    })
}

fn flatten(res: Result<Result<(), PlatformError>, tokio::task::JoinError>) -> Result<(), PlatformError> {
    res.map_err(|e| PlatformError::Unavailable(format!("reply collection task failed: {e}")))?
}

async fn collect_replies(
    source: &dyn CommentSource,
    shared: &Shared,
    tx: &mpsc::Sender<Vec<Comment>>,
    parent_id: &str,
) -> Result<(), PlatformError> {
    let mut cursor = None;
    loop {
        if shared.exhausted() && shared.is_truncated() {
            return Ok(());
        }
        let page = source.reply_page(parent_id, cursor.take()).await?;
        if shared.exhausted() {
            if shared.has_unseen(&page.comments) {
                shared.truncated.store(true, Ordering::SeqCst);
            }
            return Ok(());
        }
        let batch = shared.admit(page.comments);
        if !batch.is_empty() && tx.send(batch).await.is_err() {
            return Err(sink_gone());
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(()),
        }
    }
}
