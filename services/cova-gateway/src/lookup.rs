//! Reading a post on behalf of a request, shared by every endpoint that does it.
//!
//! - Short links are resolved only after the caller's limit has been checked (a refused
//!   caller never makes cova contact the platform), and their targets are remembered a day. A
//!   request waits at most [`LINK_WAIT`] for one; past it, it answers that the link is still
//!   being followed, and the link is followed on for the next request (see [`crate::later`]).
//! - A lookup that fails is free but counts towards the asker's failed lookups
//!   ([`FAILED_LOOKUPS`]); past them, lookups are refused with 429 until an hour has passed.
//! - Metadata is fetched once per post for every request that wants it at the same time, in
//!   this process or another replica: the first request takes a lock in the cache, spends the
//!   limit and fetches; the others wait for its answer, which they get free (`cached: true`).
//!   A success is kept 5 minutes; a failure a few seconds, so that concurrent callers share it.

use crate::later::{self, Known};
use crate::metering::{Limit, Meter};
use crate::{AppState, backend_errors};
use cova_cache::Op;
use cova_domain::limits::{FAILED_LOOKUPS, LINK_WAIT, METADATA_CACHE};
use cova_errors::{ApiError, ErrorCode};
use cova_platforms::{ParsedUrl, PostRef};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long a failed lookup answers for the post (long enough for concurrent callers).
const FAILURE_CACHE: Duration = Duration::from_secs(5);
/// A fetching request holds the lock at most this long (a crashed holder frees it then).
const LOCK_TTL: Duration = Duration::from_secs(30);
/// How often a request waiting for another replica's fetch looks at the cache.
const WAIT_POLL: Duration = Duration::from_millis(100);

/// Where a post's metadata is cached (also read by `POST /analyze` for the comment count).
pub fn metadata_key(r#ref: &str) -> String {
    format!("metadata:{ref}")
}

/// The post a parsed URL names for `asker`; a short link is followed over HTTP only when
/// `limit` still has room (checked, not spent) and the asker's failed lookups allow, or its
/// target is already known. Waits at most [`LINK_WAIT`] for it.
pub async fn resolve(
    state: &AppState,
    parsed: ParsedUrl,
    meter: &mut Meter,
    limit: Option<&Limit>,
    asker: &str,
) -> Result<PostRef, ApiError> {
    let link = match parsed {
        ParsedUrl::Post(post) => return Ok(post),
        ParsedUrl::ShortLink(link) => link,
    };
    match state.later.link(&link).await.map_err(|e| meter.fail(backend_errors::cache(e)))? {
        Known::Yes(post) => return Ok(post),
        Known::Failed(e) => return Err(meter.fail(e)),
        Known::Unknown => {}
    }
    if let Some(limit) = limit {
        meter.check(state, limit).await?;
    }
    failures_allow(state, meter, asker).await?;
    match state.later.follow(asker, &link).await.map_err(|e| meter.fail(backend_errors::cache(e)))? {
        Known::Yes(post) => Ok(post),
        Known::Failed(e) => Err(meter.fail(e)),
        Known::Unknown => Err(meter.fail(still_following())),
    }
}

/// A link not followed to its end within [`LINK_WAIT`]: it is followed on.
pub fn still_following() -> ApiError {
    ApiError::new(
        ErrorCode::Unavailable,
        format!(
            "The link is still being followed to its post (it took more than {} seconds): send the request again \
             in a few seconds, the post will be known then.",
            LINK_WAIT.as_secs()
        ),
    )
    .with_retry_after(LINK_WAIT.as_secs())
}

/// Refuses with 429 `rate_limited` while the asker's failed lookups are spent.
pub async fn failures_allow(state: &AppState, meter: &mut Meter, asker: &str) -> Result<(), ApiError> {
    let limit = Limit::failures(asker);
    let decision = limit.apply(state, Op::Peek).await.map_err(|e| meter.fail(backend_errors::cache(e)))?;
    if decision.remaining > 0 {
        return Ok(());
    }
    Err(meter.fail(too_many_failures(&decision)))
}

/// Why lookups are refused once [`FAILED_LOOKUPS`] are spent.
pub fn too_many_failures(decision: &cova_cache::Decision) -> ApiError {
    ApiError::new(
        ErrorCode::RateLimited,
        format!(
            "{} lookups of this account failed within {} (posts that cannot be read, links that lead nowhere); \
             lookups are refused until the oldest of them is {} old: check the links, then try again.",
            FAILED_LOOKUPS.limit,
            cova_domain::limits::in_words(FAILED_LOOKUPS.period),
            cova_domain::limits::in_words(FAILED_LOOKUPS.period)
        ),
    )
    .with_retry_after(decision.retry_after_secs())
}

/// The post's metadata as the API shows it to `account_id`, with `cached` set and `media`
/// naming cova's copies of the cover and the author's avatar (downloaded in the background).
/// Spends one unit of `limit` under `member` only when this request is the one that fetches;
/// a failed fetch gives it back.
pub async fn metadata(
    state: &AppState,
    post: &PostRef,
    meter: &mut Meter,
    (limit, member): (&Limit, &str),
    account_id: &str,
) -> Result<Value, ApiError> {
    let mut body = shared_metadata(state, post, meter, limit, member).await?;
    let now = state.now();
    match cova_media::catalog::attach_metadata(&state.backends.db, account_id, &post.to_string(), &mut body, now).await
    {
        // Downloaded in the background; the answer does not wait for them.
        Ok(pending) if !pending.is_empty() => {
            state.backends.media.prefetcher(state.config.media.fetch_concurrency).push(pending);
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "listing the post's images failed; the answer goes without them"),
    }
    Ok(body)
}

/// The metadata every account sees (cached per post).
pub async fn shared_metadata(
    state: &AppState,
    post: &PostRef,
    meter: &mut Meter,
    limit: &Limit,
    member: &str,
) -> Result<Value, ApiError> {
    let cache = &state.backends.cache;
    let key = metadata_key(&post.to_string());
    let (lock, failed) = (format!("{key}:lock"), format!("{key}:failed"));
    let wait_bound = Duration::from_millis(state.config.http.request_timeout_ms.saturating_sub(2_000).max(1_000));
    let deadline = Instant::now() + wait_bound;
    let local = state.inflight(&key);
    loop {
        // Registered before looking, so a fetch that ends in between still wakes this request.
        let woken = local.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if let Some(mut body) = cached_json(state, &key, meter).await? {
            let peek = limit.apply(state, Op::Peek).await.map_err(|e| meter.fail(backend_errors::cache(e)))?;
            meter.rate(&peek);
            set_cached(&mut body, true);
            return Ok(body);
        }
        if let Some(failure) = cached_json(state, &failed, meter).await? {
            if let Ok(peek) = limit.apply(state, Op::Peek).await {
                meter.rate(&peek);
            }
            return Err(meter.fail(stored_error(&failure)));
        }
        let leader =
            cache.set_nx(&lock, member.as_bytes(), LOCK_TTL).await.map_err(|e| meter.fail(backend_errors::cache(e)))?;
        // A fetch may have ended between the look above and taking the lock: look again.
        let ended = leader
            && (cached_json(state, &key, meter).await?.is_some()
                || cached_json(state, &failed, meter).await?.is_some());
        if ended {
            if let Err(e) = cache.delete(&lock).await {
                tracing::warn!(error = %e, "releasing a metadata lock failed; it expires by itself");
            }
            continue;
        }
        if leader {
            let outcome = fetch(state, post, meter, limit, member, &key, &failed).await;
            if let Err(e) = cache.delete(&lock).await {
                tracing::warn!(error = %e, "releasing a metadata lock failed; it expires by itself");
            }
            state.done_inflight(&key, &local);
            return outcome;
        }
        if Instant::now() >= deadline {
            return Err(meter.fail(ApiError::unavailable()));
        }
        tokio::select! {
            _ = woken => {}
            _ = tokio::time::sleep(WAIT_POLL) => {}
        }
    }
}

/// The fetch of the request holding the lock.
async fn fetch(
    state: &AppState,
    post: &PostRef,
    meter: &mut Meter,
    limit: &Limit,
    member: &str,
    key: &str,
    failed: &str,
) -> Result<Value, ApiError> {
    let cache = &state.backends.cache;
    let asker = cova_platforms::Demand::current().account().to_owned();
    failures_allow(state, meter, &asker).await?;
    meter.spend(state, limit, member).await?;
    match state.platforms.metadata(post).await {
        Ok(metadata) => {
            let mut body = serde_json::to_value(&metadata).map_err(|_| meter.fail(ApiError::internal()))?;
            if let Ok(bytes) = serde_json::to_vec(&body) {
                // A cache that fails here only costs a later lookup.
                if let Err(e) = cache.set(key, &bytes, METADATA_CACHE).await {
                    tracing::warn!(error = %e, "caching metadata failed");
                }
            }
            let comments = metadata.metrics.comments.and_then(|n| i64::try_from(n).ok());
            let count = cova_runtime::known_counts::Count {
                comments,
                comments_off: metadata.comments_off,
                read_at: state.now(),
            };
            cova_runtime::known_counts::remember(cache, &post.to_string(), count).await;
            set_cached(&mut body, false);
            Ok(body)
        }
        Err(e) => {
            // A failed lookup is free, and counted towards the asker's failed lookups.
            meter.refund(state, limit, member).await;
            if !matches!(e, cova_platforms::PlatformError::Abandoned(_)) {
                later::count_failure(cache, &asker).await;
            }
            let error = e.to_api_error();
            let stored = json!({"code": error.code.as_str(), "detail": error.detail});
            if let Err(e) = cache.set(failed, stored.to_string().as_bytes(), FAILURE_CACHE).await {
                tracing::warn!(error = %e, "caching a failed lookup failed");
            }
            Err(meter.fail(error))
        }
    }
}

async fn cached_json(state: &AppState, key: &str, meter: &Meter) -> Result<Option<Value>, ApiError> {
    let bytes = state.backends.cache.get(key).await.map_err(|e| meter.fail(backend_errors::cache(e)))?;
    Ok(bytes.and_then(|b| serde_json::from_slice(&b).ok()))
}

fn stored_error(failure: &Value) -> ApiError {
    let code = failure["code"].as_str().and_then(ErrorCode::parse).unwrap_or(ErrorCode::ParseError);
    let detail = failure["detail"].as_str().unwrap_or(code.default_message());
    let error = ApiError::new(code, detail);
    if code == ErrorCode::Unavailable { error.with_retry_after(30) } else { error }
}

fn set_cached(body: &mut Value, cached: bool) {
    if let Some(obj) = body.as_object_mut() {
        obj.insert("cached".into(), Value::Bool(cached));
    }
}

/// Requests of this process waiting for a fetch, by cache key: woken as soon as it ends
/// (requests of other replicas look at the cache every [`WAIT_POLL`]).
#[derive(Default)]
pub struct InFlight {
    waiting: std::sync::Mutex<std::collections::HashMap<String, Arc<Notify>>>,
}

impl AppState {
    fn inflight(&self, key: &str) -> Arc<Notify> {
        let mut waiting = self.inflight.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        waiting.entry(key.to_owned()).or_default().clone()
    }

    fn done_inflight(&self, key: &str, notify: &Arc<Notify>) {
        notify.notify_waiters();
        let mut waiting = self.inflight.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if waiting.get(key).is_some_and(|n| Arc::ptr_eq(n, notify)) {
            waiting.remove(key);
        }
    }
}
