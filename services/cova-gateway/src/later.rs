//! Lookups that go on after the request that wanted them was answered: the comment counts of a
//! list preview (its short and share links followed first), and a short link a request could
//! not wait for ([`LINK_WAIT`]). Each runs once per post or link at a time across every gateway
//! (a mark in the cache), as its account's interactive platform requests (so in its turn,
//! fairly with everyone else's), and leaves its answer in the cache for the next request: a
//! link's post for a day, a post's count for [`cova_domain::limits::KNOWN_COUNT`], a failure for
//! [`FAILED_LOOKUP_KEPT`]. A failure is free but counts towards the asker's
//! [`FAILED_LOOKUPS`], and gives back the preview lookup it spent. Each lookup looks at those
//! failures right before it asks the platform, and an asker has at most [`PER_PLATFORM`]
//! lookups under way per platform in a gateway: once its failures are spent, at most that many
//! more reach the platform.

use cova_cache::{Cache, CacheError, Op};
use cova_domain::Clock;
use cova_domain::limits::{FAILED_LOOKUP_KEPT, FAILED_LOOKUPS, LINK_WAIT, METADATA_CACHE, PREVIEW_LOOKUPS};
use cova_domain::pace::Class;
use cova_errors::{ApiError, ErrorCode};
use cova_platforms::{Demand, Platform, PlatformError, Platforms, PostRef, ShortHost, ShortLink};
use cova_runtime::known_counts::{self, Count};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Semaphore;

/// Lookups under way at once per gateway (each waits its turn in the platforms' queues).
const AT_ONCE: usize = 256;
/// Lookups of one asker under way at once per platform in a gateway.
pub const PER_PLATFORM: usize = 2;
/// How long a lookup is taken to be under way elsewhere, should its gateway stop midway.
const MARK: Duration = Duration::from_secs(10 * 60);
/// A transient failure (the platform did not answer) is said again only this long.
const TRANSIENT_KEPT: Duration = Duration::from_secs(30);
/// How a request waiting for a link looks at the cache.
const POLL: Duration = Duration::from_millis(50);
/// How long a short link's target is remembered.
pub const LINK_KEPT: Duration = Duration::from_secs(24 * 60 * 60);

/// What to look up.
#[derive(Debug, Clone)]
pub enum What {
    /// Where a short or share link leads.
    Link(ShortLink),
    /// A post's comment count.
    Count(PostRef),
    /// Where a link leads, then that post's count.
    LinkThenCount(ShortLink),
}

impl What {
    fn mark(&self) -> String {
        match self {
            What::Link(l) | What::LinkThenCount(l) => format!("looking:{}", link_key(l)),
            What::Count(p) => format!("looking:{}", known_counts::key(&p.to_string())),
        }
    }

    /// The platform it asks first.
    fn platform(&self) -> Platform {
        match self {
            What::Link(l) | What::LinkThenCount(l) => match l.host {
                ShortHost::InstagramShare => Platform::Instagram,
                _ => Platform::TikTok,
            },
            What::Count(p) => p.platform,
        }
    }
}

/// What is known of a link or a post.
#[derive(Debug)]
pub enum Known<T> {
    Yes(T),
    /// It was looked up lately and failed: the same answer again.
    Failed(ApiError),
    Unknown,
}

/// A preview lookup spent for this lookup, given back if it fails.
#[derive(Debug, Clone)]
pub struct Spent {
    pub key: String,
    pub member: String,
}

/// Where a short link's target is kept.
pub fn link_key(link: &ShortLink) -> String {
    format!("shortlink:{}", link.public_url())
}

fn failure_key(key: &str) -> String {
    format!("{key}:failed")
}

/// The limit key of an asker's failed lookups.
pub fn failures_key(asker: &str) -> String {
    format!("failed:{asker}")
}

/// The limit key of an account's preview lookups.
pub fn previews_key(account: &str) -> String {
    format!("preview:{account}")
}

/// A failure as kept in the cache: its code and detail.
fn stored(error: &ApiError) -> Vec<u8> {
    json!({"code": error.code.as_str(), "detail": error.detail}).to_string().into_bytes()
}

fn restored(bytes: &[u8]) -> ApiError {
    let value: serde_json::Value = serde_json::from_slice(bytes).unwrap_or_default();
    let code = value["code"].as_str().and_then(ErrorCode::parse).unwrap_or(ErrorCode::ParseError);
    let detail = value["detail"].as_str().unwrap_or(code.default_message());
    let error = ApiError::new(code, detail);
    if code == ErrorCode::Unavailable { error.with_retry_after(30) } else { error }
}

/// The lookups under way of one asker on one platform.
type Gate = Arc<Semaphore>;

/// The background lookups of one gateway; cheap to clone.
#[derive(Clone)]
pub struct Later {
    platforms: Platforms,
    cache: Cache,
    clock: Clock,
    at_once: Arc<Semaphore>,
    /// Per asker and platform, its lookups under way.
    per_asker: Arc<Mutex<HashMap<(String, Platform), Gate>>>,
    /// Per asker, whether its lookups wait behind people (`pace::lookup_class`): set by the
    /// failure that makes it so, so that its lookups already waiting move back at once.
    behind: Arc<Mutex<HashMap<String, Arc<AtomicBool>>>>,
}

impl Later {
    pub fn new(platforms: Platforms, cache: Cache, clock: Clock) -> Self {
        let at_once = Arc::new(Semaphore::new(AT_ONCE));
        Self { platforms, cache, clock, at_once, per_asker: Arc::default(), behind: Arc::default() }
    }

    fn behind(&self, asker: &str) -> Arc<AtomicBool> {
        let mut flags = self.behind.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if flags.len() > 10_000 {
            // Flags nobody holds are made again when needed.
            flags.retain(|_, f| Arc::strong_count(f) > 1);
        }
        flags.entry(asker.to_owned()).or_default().clone()
    }

    fn asker_gate(&self, asker: &str, platform: Platform) -> Gate {
        let mut gates = self.per_asker.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if gates.len() > 10_000 {
            // Idle gates are made again when needed.
            gates.retain(|_, g| g.available_permits() < PER_PLATFORM);
        }
        gates.entry((asker.to_owned(), platform)).or_insert_with(|| Arc::new(Semaphore::new(PER_PLATFORM))).clone()
    }

    async fn known<T>(&self, key: &str, parse: impl Fn(&[u8]) -> Option<T>) -> Result<Known<T>, CacheError> {
        if let Some(found) = self.cache.get(key).await?.as_deref().and_then(&parse) {
            return Ok(Known::Yes(found));
        }
        Ok(match self.cache.get(&failure_key(key)).await? {
            Some(failure) => Known::Failed(restored(&failure)),
            None => Known::Unknown,
        })
    }

    /// Where `link` leads, as far as is known.
    pub async fn link(&self, link: &ShortLink) -> Result<Known<PostRef>, CacheError> {
        self.known(&link_key(link), |b| std::str::from_utf8(b).ok()?.parse().ok()).await
    }

    /// The post's comment count, as far as is known: read in the last hour, or its metadata
    /// cached by a lookup of the last minutes.
    pub async fn count(&self, post: &PostRef) -> Result<Known<Count>, CacheError> {
        let r#ref = post.to_string();
        if let Some(count) = known_counts::known(&self.cache, &r#ref).await? {
            return Ok(Known::Yes(count));
        }
        let metadata = crate::lookup::metadata_key(&r#ref);
        if let Some(m) =
            self.cache.get(&metadata).await?.and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        {
            let read_at = self.clock.now_ms();
            return Ok(Known::Yes(Count {
                comments: m["metrics"]["comments"].as_i64(),
                comments_off: m["comments_off"].as_bool(),
                read_at,
            }));
        }
        Ok(match self.cache.get(&failure_key(&known_counts::key(&r#ref))).await? {
            Some(failure) => Known::Failed(restored(&failure)),
            None => Known::Unknown,
        })
    }

    /// Whether a lookup of this is under way (in any gateway).
    pub async fn under_way(&self, what: &What) -> Result<bool, CacheError> {
        Ok(self.cache.get(&what.mark()).await?.is_some())
    }

    /// Starts looking `what` up for `asker`, unless a lookup of it is under way already (then
    /// gives `spent` back and answers false).
    pub async fn start(&self, asker: &str, what: What, spent: Option<Spent>) -> Result<bool, CacheError> {
        let mark = what.mark();
        if !self.cache.set_nx(&mark, b"1", MARK).await? {
            if let Some(spent) = spent {
                self.give_back(&spent).await;
            }
            return Ok(false);
        }
        let (this, asker) = (self.clone(), asker.to_owned());
        let gate = self.asker_gate(&asker, what.platform());
        tokio::spawn(async move {
            let _turn = this.at_once.clone().acquire_owned().await;
            let _mine = gate.acquire_owned().await;
            // Nobody waits on this task; the asker's account does, fairly with everyone else.
            this.run(&asker, what, spent.as_ref()).await;
            if let Err(e) = this.cache.delete(&mark).await {
                tracing::debug!(error = %e, "clearing a lookup's mark failed; it expires by itself");
            }
        });
        Ok(true)
    }

    /// Where `link` leads, waiting up to [`LINK_WAIT`] for a lookup (started here if none is
    /// under way); [`Known::Unknown`] when it is still being followed.
    pub async fn follow(&self, asker: &str, link: &ShortLink) -> Result<Known<PostRef>, CacheError> {
        match self.link(link).await? {
            Known::Unknown => {}
            known => return Ok(known),
        }
        self.start(asker, What::Link(link.clone()), None).await?;
        let deadline = tokio::time::Instant::now() + LINK_WAIT;
        loop {
            tokio::time::sleep(POLL).await;
            match self.link(link).await? {
                Known::Unknown if tokio::time::Instant::now() < deadline => {}
                known => return Ok(known),
            }
        }
    }

    async fn run(&self, asker: &str, what: What, spent: Option<&Spent>) {
        let Some(failures) = self.failures(asker).await else {
            // Refused for this asker alone: nothing kept for the post or the link.
            if let Some(spent) = spent {
                self.give_back(spent).await;
            }
            return;
        };
        // An asker whose lookups keep failing waits behind people (`pace::lookup_class`).
        let behind = self.behind(asker);
        behind.store(cova_domain::pace::lookup_class(failures) == Class::Background, Ordering::Relaxed);
        let demand = Demand::interactive_until(asker, behind);
        demand.scope(self.look_up(asker, what, spent)).await;
    }

    async fn look_up(&self, asker: &str, what: What, spent: Option<&Spent>) {
        let count = !matches!(what, What::Link(_));
        let (post, count) = match what {
            What::Count(post) => (post, true),
            What::Link(link) | What::LinkThenCount(link) => {
                let key = link_key(&link);
                match self.platforms.resolve_short_link(&link).await {
                    Ok(post) => {
                        if let Err(e) = self.cache.set(&key, post.to_string().as_bytes(), LINK_KEPT).await {
                            tracing::debug!(error = %e, "remembering a short link failed");
                        }
                        (post, count)
                    }
                    Err(e) => return self.failed(asker, &key, &e, spent).await,
                }
            }
        };
        if !count || self.failures(asker).await.is_none() {
            if count && let Some(spent) = spent {
                self.give_back(spent).await;
            }
            return;
        }
        let r#ref = post.to_string();
        match self.platforms.metadata(&post).await {
            Ok(metadata) => {
                if let Ok(bytes) = serde_json::to_vec(&metadata) {
                    // Also what a `POST /metadata` or a collection of the post would read.
                    if let Err(e) = self.cache.set(&crate::lookup::metadata_key(&r#ref), &bytes, METADATA_CACHE).await {
                        tracing::debug!(error = %e, "caching metadata failed");
                    }
                }
                let comments = metadata.metrics.comments.and_then(|n| i64::try_from(n).ok());
                let count = Count { comments, comments_off: metadata.comments_off, read_at: self.clock.now_ms() };
                known_counts::remember(&self.cache, &r#ref, count).await;
            }
            Err(e) => self.failed(asker, &known_counts::key(&r#ref), &e, spent).await,
        }
    }

    /// A lookup failed: said again for a while, counted towards the asker's failed lookups,
    /// and free.
    async fn failed(&self, asker: &str, key: &str, e: &PlatformError, spent: Option<&Spent>) {
        if let Some(spent) = spent {
            self.give_back(spent).await;
        }
        if matches!(e, PlatformError::Abandoned(_)) {
            return;
        }
        let kept = if e.is_transient() { TRANSIENT_KEPT } else { FAILED_LOOKUP_KEPT };
        if let Err(e) = self.cache.set(&failure_key(key), &stored(&e.to_api_error()), kept).await {
            tracing::debug!(error = %e, "keeping a failed lookup failed");
        }
        count_failure(&self.cache, asker).await;
        // Past the bound, this asker's lookups still waiting go behind people's at once.
        let failures = self.failures(asker).await;
        if failures.is_none_or(|f| cova_domain::pace::lookup_class(f) == Class::Background) {
            self.behind(asker).store(true, Ordering::Relaxed);
        }
    }

    /// The asker's failed lookups lately, while they allow another lookup; `None` once they
    /// are spent (a cache that does not answer allows it: the platforms' queues still pace it).
    async fn failures(&self, asker: &str) -> Option<u32> {
        match self.cache.window(&failures_key(asker), FAILED_LOOKUPS, Op::Peek).await {
            Ok(d) if d.remaining == 0 => None,
            Ok(d) => Some(FAILED_LOOKUPS.limit.saturating_sub(d.remaining)),
            Err(_) => Some(0),
        }
    }

    async fn give_back(&self, spent: &Spent) {
        if let Err(e) = self.cache.window(&spent.key, PREVIEW_LOOKUPS, Op::Undo(&spent.member)).await {
            tracing::debug!(error = %e, "giving back a preview lookup failed");
        }
    }
}

/// Counts one failed lookup of `asker` (see [`FAILED_LOOKUPS`]).
pub async fn count_failure(cache: &Cache, asker: &str) {
    let member = uuid::Uuid::new_v4().to_string();
    if let Err(e) = cache.window(&failures_key(asker), FAILED_LOOKUPS, Op::Hit(&member)).await {
        tracing::debug!(error = %e, "counting a failed lookup failed");
    }
}
