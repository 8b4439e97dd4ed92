//! TikTok's top-level comment list, walked by several cursor chains at once. The cursor is an
//! offset, so besides the chain from the top, `list_prefetch` more chains start at offsets spread
//! over the list (by the first page's `total`) and each follows the cursors its pages return, as
//! the single chain would. A chain ends where it meets the next: when one of its pages holds a
//! comment the next chain has read. That proves there is no gap between the two whatever the
//! list did meanwhile (an offset alone would not: comments posted at the top move every offset),
//! and costs at most the part of one page the two chains both read. Pages are handed out in list
//! order: the first chain's, then, once it has met the next, the next one's.
//!
//! A chain that starts past the end of the list reads one empty page and leaves the chain
//! before it to walk on to the next one, or to the end.

use super::comments::Envelope;
use crate::PlatformError;
use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Extra pages the last chain reads after `has_more: 0` came with comments and a moving cursor
/// while fewer comments than the reported total were seen (`has_more` can be 0 too early).
const EXTRA_TRIES_AFTER_HAS_MORE_0: u32 = 3;

/// One request for the top-level page at an offset.
pub(crate) type Fetch =
    Arc<dyn Fn(u64) -> Pin<Box<dyn Future<Output = Result<Envelope, PlatformError>> + Send>> + Send + Sync>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    Walking,
    /// A page of it holds a comment the next chain read: the rest is the next chain's.
    Met,
    /// It reached the end of the list (or a cursor that does not move).
    Ended,
}

struct Chain {
    start: u64,
    /// Pages read and not handed out yet.
    pages: VecDeque<Envelope>,
    /// Every comment id it read.
    ids: HashSet<String>,
    /// Its first page came back (possibly empty: a start past the end).
    read: bool,
    walk: Walk,
    task: Option<JoinHandle<()>>,
}

impl Chain {
    fn new(start: u64) -> Self {
        Self { start, pages: VecDeque::new(), ids: HashSet::new(), read: false, walk: Walk::Walking, task: None }
    }

    /// It read comments, so a chain before it can meet it.
    fn holds(&self) -> bool {
        !self.ids.is_empty()
    }

    fn shares(&self, ids: &[&str]) -> bool {
        ids.iter().any(|id| self.ids.contains(*id))
    }
}

struct State {
    chains: Vec<Chain>,
    /// The post's reported comment count (replies included: an upper bound of the list).
    total: Option<u64>,
    /// Top-level comments read by every chain so far.
    read: u64,
    failed: Option<PlatformError>,
    started: bool,
}

struct Inner {
    state: Mutex<State>,
    changed: Notify,
    fetch: Fetch,
    /// Chains walked at once, the first included.
    chains: usize,
    /// Offsets at or beyond this are never needed (the collection's budget).
    max: u64,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The top-level pages of one collection, in list order.
pub(crate) struct Chains {
    inner: Arc<Inner>,
}

impl Drop for Chains {
    fn drop(&mut self) {
        for chain in &mut self.inner.state().chains {
            if let Some(task) = chain.task.take() {
                task.abort();
            }
        }
    }
}

impl Chains {
    /// `chains` walked at once (at least 1), reading no further than offset `max` and its page.
    pub fn new(fetch: Fetch, chains: usize, max: u64) -> Self {
        let state = State { chains: Vec::new(), total: None, read: 0, failed: None, started: false };
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                changed: Notify::new(),
                fetch,
                chains: chains.max(1),
                max,
            }),
        }
    }

    pub fn reported_total(&self) -> Option<u64> {
        self.inner.state().total
    }

    /// The next page in list order; `None` once the list is read.
    pub async fn next(&self) -> Result<Option<Envelope>, PlatformError> {
        loop {
            // Registered before looking, so a page that arrives in between still wakes us.
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut s = self.inner.state();
                if let Some(e) = s.failed.take() {
                    return Err(e);
                }
                if !s.started {
                    s.started = true;
                    start(&self.inner, &mut s, 0);
                }
                let Some(head) = s.chains.first_mut() else { return Ok(None) };
                if let Some(page) = head.pages.pop_front() {
                    return Ok(Some(page));
                }
                if head.walk != Walk::Walking {
                    s.chains.remove(0);
                    continue;
                }
            }
            changed.await;
        }
    }
}

/// Adds a chain at `start` and its walk.
fn start(inner: &Arc<Inner>, s: &mut State, start: u64) {
    let mut chain = Chain::new(start);
    let walking = inner.clone();
    chain.task = Some(tokio::spawn(crate::demand::carried(tracing::Instrument::in_current_span(async move {
        walk(walking, start).await
    }))));
    let at = s.chains.partition_point(|c| c.start < start);
    s.chains.insert(at, chain);
}

/// Follows the cursors from `start` until the chain meets the next one or the list ends.
async fn walk(inner: Arc<Inner>, start: u64) {
    let mut cursor = start;
    let mut extra_tries = 0;
    loop {
        let page = (inner.fetch)(cursor).await;
        let mut s = inner.state();
        let Some(at) = s.chains.iter().position(|c| c.start == start) else { return };
        let env = match page {
            Ok(env) => env,
            Err(e) => {
                s.failed.get_or_insert(e);
                drop(s);
                inner.changed.notify_waiters();
                return;
            }
        };
        s.total = env.total.or(s.total);
        if s.chains[at].walk != Walk::Walking {
            // Met while this page was on its way: what it holds is the next chain's.
            return;
        }
        let got = env.comments.len() as u64;
        s.read += got;
        // A cursor that does not move means `got` comments further on.
        let next = env.cursor.filter(|c| *c > cursor).unwrap_or(cursor + got);
        let ids: Vec<&str> = env.comments.iter().map(|c| c.id.as_str()).collect();
        let first_page = !s.chains[at].read;
        // The chain before may have read past this start before this page came.
        if first_page
            && let Some(before) = s.chains[..at].iter_mut().rev().find(|c| c.holds() || !c.read)
            && before.walk == Walk::Walking
            && before.shares(&ids)
        {
            before.walk = Walk::Met;
        }
        let later = s.chains[at + 1..].iter().find(|c| c.holds() || !c.read);
        let met = later.is_some_and(|c| c.shares(&ids));
        let last = later.is_none();
        // has_more 0 is not trusted while pages bring comments and fewer than reported were read.
        let believe_the_end = extra_tries >= EXTRA_TRIES_AFTER_HAS_MORE_0 || s.total.is_some_and(|t| s.read >= t);
        let walk = if met {
            Walk::Met
        } else if got == 0 || next <= cursor {
            Walk::Ended
        } else if last && !env.has_more {
            if believe_the_end {
                Walk::Ended
            } else {
                extra_tries += 1;
                Walk::Walking
            }
        } else if last && next > inner.max {
            Walk::Ended
        } else {
            Walk::Walking
        };
        let chain = &mut s.chains[at];
        chain.read = true;
        chain.ids.extend(ids.iter().map(|id| (*id).to_owned()));
        chain.walk = walk;
        chain.pages.push_back(env);
        let walking = s.chains[at].walk == Walk::Walking;
        if first_page && start == 0 && got > 0 {
            spread(&inner, &mut s, got);
        }
        drop(s);
        inner.changed.notify_waiters();
        if !walking {
            return;
        }
        cursor = next;
    }
}

/// Pages each chain walks at least: a chain added costs at most one request (where it meets the
/// one before, or when it starts past the end), kept within 5% of the pages walked.
const MIN_PAGES_PER_CHAIN: u64 = 20;

/// After the first page: starts the other chains at offsets spread evenly over what the list
/// can hold (the reported total, which counts replies too, within the budget).
fn spread(inner: &Arc<Inner>, s: &mut State, page: u64) {
    let span = s.total.unwrap_or(0).min(inner.max);
    let chains = (inner.chains as u64).min(span / (MIN_PAGES_PER_CHAIN * page)).max(1);
    let step = span / chains;
    for j in 1..chains {
        start(inner, s, j * step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Comment;

    /// A list of `n` comments `c0…`, pages of `size` at any offset, the cursor at the end.
    fn list(n: u64, size: u64, moved: Arc<Mutex<u64>>) -> Fetch {
        Arc::new(move |offset| {
            let shift = *moved.lock().unwrap_or_else(PoisonError::into_inner);
            Box::pin(async move {
                tokio::task::yield_now().await;
                // `shift` comments were posted at the top: offset o now holds what o - shift held.
                let total = n + shift;
                let end = (offset + size).min(total);
                let comments = (offset..end)
                    .map(|o| {
                        let id = if o < shift { format!("new{o}") } else { format!("c{}", o - shift) };
                        Comment { id, ..Comment::default() }
                    })
                    .collect();
                Ok(Envelope {
                    status_code: 0,
                    status_msg: String::new(),
                    comments,
                    cursor: Some(end),
                    has_more: end < total,
                    total: Some(n),
                    complete_previews: Default::default(),
                })
            })
        })
    }

    async fn read_all(chains: &Chains) -> Vec<String> {
        let mut ids = Vec::new();
        while let Some(page) = chains.next().await.expect("reads") {
            ids.extend(page.comments.into_iter().map(|c| c.id));
        }
        ids
    }

    fn distinct_in_order(ids: &[String]) -> Vec<String> {
        let mut seen = HashSet::new();
        ids.iter().filter(|id| seen.insert(id.as_str())).cloned().collect()
    }

    #[tokio::test]
    async fn several_chains_hand_out_the_list_in_order() {
        for chains in [1, 2, 5] {
            let read = read_all(&Chains::new(list(5_000, 35, Arc::default()), chains, u64::MAX)).await;
            let want: Vec<String> = (0..5_000).map(|i| format!("c{i}")).collect();
            assert_eq!(distinct_in_order(&read), want, "{chains} chains");
            // Where chains meet, at most one page is read twice.
            assert!(read.len() <= 5_000 + 35 * (chains - 1), "{chains} chains read {}", read.len());
        }
    }

    #[tokio::test]
    async fn chains_starting_past_the_end_leave_the_rest_to_the_chain_before() {
        // The total counts replies: the list is much shorter than it says.
        let fetch: Fetch = {
            let inner = list(1_500, 35, Arc::default());
            Arc::new(move |offset| {
                let page = inner(offset);
                Box::pin(async move {
                    let mut env = page.await?;
                    env.total = Some(5_000);
                    Ok(env)
                })
            })
        };
        let read = read_all(&Chains::new(fetch, 5, u64::MAX)).await;
        let want: Vec<String> = (0..1_500).map(|i| format!("c{i}")).collect();
        assert_eq!(distinct_in_order(&read), want);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn comments_posted_at_the_top_meanwhile_lose_nothing() {
        let moved = Arc::new(Mutex::new(0));
        let chains = Chains::new(list(5_000, 35, moved.clone()), 5, u64::MAX);
        let mut read = Vec::new();
        for _ in 0..3 {
            let page = chains.next().await.expect("reads").expect("a page");
            read.extend(page.comments.into_iter().map(|c| c.id));
        }
        // Every offset moves down by 40 while the other chains are under way.
        *moved.lock().unwrap_or_else(PoisonError::into_inner) = 40;
        read.extend(read_all(&chains).await);
        let got: HashSet<&String> = read.iter().collect();
        let missing: Vec<String> = (0..5_000).map(|i| format!("c{i}")).filter(|id| !got.contains(id)).collect();
        assert!(missing.is_empty(), "{} lost, e.g. {:?}", missing.len(), missing.first());
    }
}
