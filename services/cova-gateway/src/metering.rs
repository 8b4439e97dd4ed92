//! Request limits and the `X-RateLimit-*` / `X-Quota-*` headers every authenticated answer
//! carries. The specification's "N per window" limits are sliding windows (no more than N in
//! any window); the general per-account request limit is a smoothing GCRA.
//!
//! While the shared cache does not answer, the common path goes on ([`Fallback`]): the general
//! limit is counted in this process, conservatively, and the account's state is read from the
//! database. Only what cannot be counted without the cache (the specification's windows) is
//! refused meanwhile, with 503.

use crate::auth::Principal;
use crate::{AppState, backend_errors};
use actix_web::HttpResponse;
use cova_cache::{Decision, Op, Rate, Read, Reply, Window};
use cova_domain::{limits, money};
use cova_errors::{ApiError, ErrorCode};
use cova_storage::Balance;
use cova_storage::repo::accounts::Usage;
use serde::Serialize;

/// How a limit counts.
#[derive(Debug, Clone, Copy)]
pub enum Limiter {
    /// Smoothing: a steady rate with bursts (the general requests per minute).
    Smooth(Rate),
    /// At most `limit` in any window of `period` (the specification's limits).
    Window(Window),
}

impl Limiter {
    fn describe(&self) -> String {
        match self {
            Limiter::Smooth(r) => format!("{} per {} seconds", r.limit, r.period.as_secs()),
            Limiter::Window(w) => format!("{} per {} seconds", w.limit, w.period.as_secs()),
        }
    }
}

/// The limit an endpoint spends from: its cache key and how it counts.
#[derive(Debug, Clone)]
pub struct Limit {
    pub key: String,
    pub limiter: Limiter,
}

impl Limit {
    /// The general limit, for endpoints without one of their own.
    pub fn api(state: &AppState, account_id: &str) -> Self {
        Self { key: format!("api:{account_id}"), limiter: Limiter::Smooth(api_rate(state)) }
    }

    /// Metadata lookups: 10 per rolling 2 hours per account (tokens and the session share it).
    pub fn metadata(account_id: &str) -> Self {
        Self { key: format!("meta:{account_id}"), limiter: Limiter::Window(limits::METADATA) }
    }

    /// Failed lookups of an asker (an account, or a visitor's address): free, but bounded.
    pub fn failures(asker: &str) -> Self {
        Self { key: crate::later::failures_key(asker), limiter: Limiter::Window(limits::FAILED_LOOKUPS) }
    }

    /// List previews' lookups of an account, apart from the metadata limit.
    pub fn previews(account_id: &str) -> Self {
        Self { key: crate::later::previews_key(account_id), limiter: Limiter::Window(limits::PREVIEW_LOOKUPS) }
    }

    /// A read of this limit in a cache batch: spending one unit, or only looking.
    pub fn read(&self, spend: bool) -> Read<'_> {
        match self.limiter {
            Limiter::Window(window) => {
                Read::Window { key: &self.key, window, op: if spend { Op::Hit("") } else { Op::Peek } }
            }
            Limiter::Smooth(rate) => Read::Rate { key: &self.key, rate, cost: u32::from(spend) },
        }
    }

    /// Applies `op`: `Hit(member)` spends one (the member names the entry a later `Undo`
    /// gives back), `Peek` only reads.
    pub async fn apply(&self, state: &AppState, op: Op<'_>) -> Result<Decision, cova_cache::CacheError> {
        let cache = &state.backends.cache;
        match self.limiter {
            Limiter::Window(w) => cache.window(&self.key, w, op).await,
            Limiter::Smooth(r) => match op {
                Op::Hit(_) => cache.rate_limit(&self.key, r, 1).await,
                Op::Peek => cache.rate_limit(&self.key, r, 0).await,
                Op::Undo(_) => cache.refund(&self.key, r, 1).await,
            },
        }
    }
}

/// Limits counted in this process alone while the shared cache does not answer. Every answer
/// the cache gives for an account's general limit is noted (its theoretical arrival time, the
/// GCRA state); during an outage the limit goes on from there in this process: exactly as the
/// cache would have counted with one gateway, and with `limits.gateways` gateways each goes on
/// at its share of the rate and of what was left, so that together they admit no more than the
/// shared limit would. An account not seen before the outage starts with one request left
/// (then its steady rate). The specification's windows are not counted here: they are refused.
pub struct Fallback {
    gateways: u32,
    /// Per limit key (hashed): the TAT last seen from the cache or counted here, and whether
    /// it was counted here (and the cache has not been told yet).
    tats: std::sync::Mutex<std::collections::HashMap<u64, Noted>>,
}

#[derive(Debug, Clone, Copy)]
struct Noted {
    tat: std::time::Instant,
    counted_here: bool,
}

/// Beyond this many keys the notes are cleared rather than grown.
const MAX_NOTED: usize = 100_000;

fn key_hash(key: &str) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static STATE: std::sync::LazyLock<std::collections::hash_map::RandomState> =
        std::sync::LazyLock::new(std::collections::hash_map::RandomState::new);
    let mut h = STATE.build_hasher();
    h.write(key.as_bytes());
    h.finish()
}

impl Fallback {
    pub fn new(gateways: u32) -> Self {
        Self { gateways: gateways.max(1), tats: Default::default() }
    }

    /// Notes the cache's decision for `key` (the TAT is `reset_after` from now). When this
    /// process counted the key further while the cache was away, returns how far ahead its
    /// count is, for the cache to be told (so that what was admitted meanwhile is not admitted
    /// again once the cache is back).
    pub fn observe(&self, key: &str, decision: &Decision) -> Option<std::time::Duration> {
        let now = std::time::Instant::now();
        let seen = now + decision.reset_after;
        let Ok(mut tats) = self.tats.lock() else { return None };
        if tats.len() >= MAX_NOTED {
            tats.clear();
        }
        let hash = key_hash(key);
        let ahead = tats.get(&hash).filter(|n| n.counted_here && n.tat > seen).map(|n| n.tat.duration_since(now));
        tats.insert(hash, Noted { tat: ahead.map_or(seen, |a| now + a), counted_here: false });
        ahead
    }

    /// GCRA for `cost` units of `rate` on `key`, counted here: one unit every
    /// `gateways × period / limit`, with the burst's tolerance, from the noted TAT.
    fn decide(&self, key: &str, rate: Rate, cost: u32) -> Decision {
        self.count(key, rate, cost, true)
    }

    /// As [`Fallback::decide`], for the first request the cache answers after an outage: this
    /// process' count still rules it (the cache is then told where the count is).
    fn decide_on_return(&self, key: &str, rate: Rate, cost: u32) -> Decision {
        self.count(key, rate, cost, false)
    }

    fn count(&self, key: &str, rate: Rate, cost: u32, during_outage: bool) -> Decision {
        let now = std::time::Instant::now();
        let interval = (rate.period / rate.limit.max(1)).saturating_mul(self.gateways);
        let tolerance = rate.period;
        let Ok(mut tats) = self.tats.lock() else {
            return Decision {
                allowed: false,
                limit: rate.limit,
                remaining: 0,
                retry_after: interval,
                reset_after: tolerance,
            };
        };
        // Not seen before the outage: assume the burst is spent but for one request.
        let spent = tolerance.saturating_sub(interval);
        let noted = tats.entry(key_hash(key)).or_insert(Noted { tat: now + spent, counted_here: true });
        noted.counted_here = during_outage;
        let tat = &mut noted.tat;
        let start = (*tat).max(now);
        let remaining = |tat: std::time::Instant| {
            let used = tat.saturating_duration_since(now);
            let left = tolerance.saturating_sub(used).as_micros() / interval.as_micros().max(1);
            u32::try_from(left).unwrap_or(u32::MAX).min(rate.limit)
        };
        let next = start + interval * cost;
        if next <= now + tolerance {
            *tat = if cost == 0 { start } else { next };
            Decision {
                allowed: true,
                limit: rate.limit,
                remaining: remaining(*tat),
                retry_after: std::time::Duration::ZERO,
                reset_after: tat.saturating_duration_since(now),
            }
        } else {
            Decision {
                allowed: false,
                limit: rate.limit,
                remaining: remaining(start),
                retry_after: next.saturating_duration_since(now + tolerance),
                reset_after: start.saturating_duration_since(now),
            }
        }
    }

    /// The answers a batch would have had: rates from this process' count, windows as spent
    /// (they are refused anyway), values as absent.
    fn batch(&self, reads: &[Read<'_>]) -> Vec<Reply> {
        reads
            .iter()
            .map(|read| match *read {
                Read::Rate { key, rate, cost } => Reply::Decision(self.decide(key, rate, cost)),
                Read::Window { window, .. } => Reply::Decision(Decision {
                    allowed: false,
                    limit: window.limit,
                    remaining: 0,
                    retry_after: std::time::Duration::from_secs(1),
                    reset_after: std::time::Duration::from_secs(1),
                }),
                Read::Stamped { .. } | Read::Plain { .. } => Reply::Value(None),
            })
            .collect()
    }
}

/// The cache's answers to `reads` (its decisions on rates noted for an outage), or, while it
/// does not answer, the fallback's.
pub async fn cache_batch(state: &AppState, reads: &[Read<'_>]) -> Vec<Reply> {
    match state.backends.cache.batch(reads).await {
        Ok(mut replies) => {
            if !state.backends.cache.is_memory() {
                for (read, reply) in reads.iter().zip(replies.iter_mut()) {
                    if let (Read::Rate { key, rate, cost }, Reply::Decision(decision)) = (read, &mut *reply)
                        && state.fallback.observe(key, decision).is_some()
                    {
                        // The first answer after an outage: this process' count decides, and
                        // the cache is told where it stands.
                        let local = state.fallback.decide_on_return(key, *rate, *cost);
                        if let Err(e) = state.backends.cache.raise_rate(key, local.reset_after).await {
                            tracing::debug!(error = %e, "handing a limit counted here back to the cache failed");
                        }
                        *reply = Reply::Decision(local);
                    }
                }
            }
            replies
        }
        Err(e) => {
            tracing::debug!(error = %e, "the cache did not answer; limits counted by this gateway alone");
            state.fallback.batch(reads)
        }
    }
}

/// What the caller may spend (`cova_domain::money::quota`): the month's balance, plus the free
/// allowance for a session.
pub fn spendable(principal: &Principal, usage: &Usage) -> Balance {
    let balance = &usage.balance;
    let free_left = usage.account.free_comments_left;
    let quota = money::quota(balance.granted, balance.available, free_left, principal.session_id().is_some());
    Balance { granted: quota.limit, available: quota.available, ..balance.clone() }
}

/// The general per-account request rate.
pub fn api_rate(state: &AppState) -> Rate {
    Rate::per_minute(state.config.limits.api_requests_per_minute)
}

/// Runs an endpoint's checks that come before its limit is spent (scope, then request
/// validation). A refusal still carries the limit headers, as every authenticated answer
/// does, and spends nothing.
pub async fn before_limit<T>(
    state: &AppState,
    principal: &Principal,
    limit: &Limit,
    checks: impl Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    match checks.await {
        Ok(value) => Ok(value),
        Err(e) => Err(Meter::peek(state, principal, limit).await.fail(e)),
    }
}

/// The common start of an endpoint on the general request limit: authenticates, runs the
/// scope check and the endpoint's validation (`checks`) before spending the limit, then spends
/// it. Every refusal carries the limit and quota headers.
pub async fn authorized<T>(
    req: &actix_web::HttpRequest,
    state: &AppState,
    scope: cova_auth::Scope,
    checks: impl AsyncFnOnce(&Principal) -> Result<T, ApiError>,
) -> Result<(Principal, Meter, T), crate::error::HttpError> {
    let principal = crate::auth::authenticate(req, state).await?;
    let value = before_limit(state, &principal, &Limit::api(state, &principal.account_id), async {
        principal.require(scope)?;
        checks(&principal).await
    })
    .await?;
    let (meter, _) = Meter::api(state, &principal).await?;
    Ok((principal, meter, value))
}

/// As [`authorized`] for endpoints any credential may call (no scope of their own).
pub async fn authorized_any<T>(
    req: &actix_web::HttpRequest,
    state: &AppState,
    checks: impl AsyncFnOnce(&Principal) -> Result<T, ApiError>,
) -> Result<(Principal, Meter, T), crate::error::HttpError> {
    let principal = crate::auth::authenticate(req, state).await?;
    let value = before_limit(state, &principal, &Limit::api(state, &principal.account_id), checks(&principal)).await?;
    let (meter, _) = Meter::api(state, &principal).await?;
    Ok((principal, meter, value))
}

/// Headers gathered while a request is checked, attached to its answer whatever it is.
#[derive(Debug, Default, Clone)]
pub struct Meter {
    headers: Vec<(&'static str, String)>,
}

impl Meter {
    pub fn rate(&mut self, d: &Decision) {
        self.headers.retain(|(n, _)| !n.starts_with("x-ratelimit-"));
        self.headers.push(("x-ratelimit-limit", d.limit.to_string()));
        self.headers.push(("x-ratelimit-remaining", d.remaining.to_string()));
    }

    pub fn quota(&mut self, b: &Balance) {
        self.headers.retain(|(n, _)| !n.starts_with("x-quota-"));
        self.headers.push(("x-quota-limit", b.granted.to_string()));
        self.headers.push(("x-quota-remaining", b.available.max(0).to_string()));
    }

    /// Adds the gathered headers to an error answer.
    pub fn fail(&self, mut e: ApiError) -> ApiError {
        e.headers.extend(self.headers.iter().cloned());
        e
    }

    /// Adds the gathered headers to an answer being built.
    pub fn apply(&self, builder: &mut actix_web::HttpResponseBuilder) {
        for (name, value) in &self.headers {
            builder.insert_header((*name, value.as_str()));
        }
    }

    pub fn json<T: Serialize>(&self, mut builder: actix_web::HttpResponseBuilder, body: &T) -> HttpResponse {
        self.apply(&mut builder);
        builder.json(body)
    }

    /// Spends one unit of `limit` under `member`; a refusal is 429 `rate_limited` with
    /// `Retry-After`.
    pub async fn spend(&mut self, state: &AppState, limit: &Limit, member: &str) -> Result<Decision, ApiError> {
        let decision = limit.apply(state, Op::Hit(member)).await.map_err(|e| self.fail(backend_errors::cache(e)))?;
        self.rate(&decision);
        if decision.allowed { Ok(decision) } else { Err(self.fail(Self::limited(limit, &decision))) }
    }

    /// Gives back the unit spent under `member` (a request that turned out to be free).
    pub async fn refund(&mut self, state: &AppState, limit: &Limit, member: &str) {
        match limit.apply(state, Op::Undo(member)).await {
            Ok(d) => self.rate(&d),
            Err(e) => tracing::warn!(error = %e, "giving back a spent request failed"),
        }
    }

    /// Reads the limit without spending; refuses with 429 when nothing is left, so that work
    /// which would have to spend (a platform request) is not even started.
    pub async fn check(&mut self, state: &AppState, limit: &Limit) -> Result<Decision, ApiError> {
        let decision = limit.apply(state, Op::Peek).await.map_err(|e| self.fail(backend_errors::cache(e)))?;
        self.rate(&decision);
        if decision.remaining == 0 {
            return Err(self.fail(Self::limited(limit, &decision)));
        }
        Ok(decision)
    }

    fn limited(limit: &Limit, decision: &Decision) -> ApiError {
        ApiError::new(ErrorCode::RateLimited, format!("Request limit of {} exceeded.", limit.limiter.describe()))
            .with_retry_after(decision.retry_after_secs())
    }

    /// Refuses with 402 `payment_required` (saying `detail`) unless the account bought a comment
    /// pack this month: what the paid features (watches, followed creators, keywords) need.
    pub async fn require_pack(&self, state: &AppState, account_id: &str, detail: &str) -> Result<(), ApiError> {
        let balance = cova_storage::repo::balances::current(&state.backends.db, account_id, state.now())
            .await
            .map_err(|e| self.fail(backend_errors::storage(e)))?;
        let paid = money::pack_bought(balance.granted);
        if paid { Ok(()) } else { Err(self.fail(ApiError::new(cova_errors::ErrorCode::PaymentRequired, detail))) }
    }

    /// Reads the account's state (its cached copy; the database only without one) and records
    /// the quota headers (for a session, the free allowance it may spend counts in).
    pub async fn balance(&mut self, state: &AppState, principal: &Principal) -> Result<Usage, ApiError> {
        let key = cova_snapshots::account_key(&principal.account_id);
        // Without the cache, the database has the account's state.
        let held = state.backends.cache.get_stamped(&key).await.unwrap_or(None);
        self.account(state, principal, held).await
    }

    /// The account's state from what a cache read brought, with its quota headers.
    async fn account(
        &mut self,
        state: &AppState,
        principal: &Principal,
        held: Option<Vec<u8>>,
    ) -> Result<Usage, ApiError> {
        let usage = state
            .backends
            .snapshots
            .account(&state.backends.db, held, &principal.account_id)
            .await
            .map_err(|e| self.fail(backend_errors::snapshot(e)))?;
        self.quota(&spendable(principal, &usage));
        Ok(usage)
    }

    /// The common path: spends the account's general request limit and reads the account's
    /// state (for the quota headers, which even a 429 carries) in one cache round trip.
    pub async fn api(state: &AppState, principal: &Principal) -> Result<(Self, Usage), ApiError> {
        let (meter, usage, _, _) = Self::api_with(state, principal, &[]).await?;
        Ok((meter, usage))
    }

    /// As [`Meter::api`], with the endpoint's own cache reads (`extra`) in the same round
    /// trip; their replies come back in order, after the limit's decision.
    pub async fn api_with(
        state: &AppState,
        principal: &Principal,
        extra: &[Read<'_>],
    ) -> Result<(Self, Usage, Decision, Vec<Reply>), ApiError> {
        let mut meter = Meter::default();
        let limit = Limit::api(state, &principal.account_id);
        let account_key = cova_snapshots::account_key(&principal.account_id);
        let mut reads = vec![limit.read(true), Read::Stamped { key: &account_key }];
        reads.extend_from_slice(extra);
        let mut replies = cache_batch(state, &reads).await.into_iter();
        let (Some(Reply::Decision(decision)), Some(Reply::Value(held))) = (replies.next(), replies.next()) else {
            return Err(meter.fail(ApiError::internal()));
        };
        meter.rate(&decision);
        let usage = meter.account(state, principal, held).await?;
        if !decision.allowed {
            return Err(meter.fail(Self::limited(&limit, &decision)));
        }
        Ok((meter, usage, decision, replies.collect()))
    }

    /// The headers of an answer refused before its limit is spent: the limit's state, read
    /// without spending, and the balance, in one cache round trip. Best effort: a backend
    /// failing here leaves headers out rather than turning a 400 into a 503.
    pub async fn peek(state: &AppState, principal: &Principal, limit: &Limit) -> Self {
        let mut meter = Meter::default();
        let account_key = cova_snapshots::account_key(&principal.account_id);
        let mut replies =
            cache_batch(state, &[limit.read(false), Read::Stamped { key: &account_key }]).await.into_iter();
        if let Some(Reply::Decision(decision)) = replies.next() {
            meter.rate(&decision);
        }
        if let Some(Reply::Value(held)) = replies.next() {
            let _ = meter.account(state, principal, held).await;
        }
        meter
    }
}

impl Meter {
    /// An answer without a body (204), with the gathered headers.
    pub fn empty(&self, mut builder: actix_web::HttpResponseBuilder) -> HttpResponse {
        self.apply(&mut builder);
        builder.finish()
    }

    /// A streamed answer, with the gathered headers.
    pub fn stream<S>(&self, mut builder: actix_web::HttpResponseBuilder, body: S) -> HttpResponse
    where
        S: futures::Stream<Item = Result<actix_web::web::Bytes, actix_web::Error>> + 'static,
    {
        self.apply(&mut builder);
        builder.streaming(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn decision(remaining: u32, reset_after: Duration) -> Decision {
        Decision { allowed: true, limit: 10, remaining, retry_after: Duration::ZERO, reset_after }
    }

    #[test]
    fn during_an_outage_the_limit_goes_on_from_what_the_cache_last_said() {
        let rate = Rate::new(10, Duration::from_secs(10));
        let fallback = Fallback::new(1);
        // The cache said: 3 left (7 s of the 10 s tolerance used).
        assert_eq!(fallback.observe("api:a", &decision(3, Duration::from_secs(7))), None);
        let admitted = (0..10).filter(|_| fallback.decide("api:a", rate, 1).allowed).count();
        assert_eq!(admitted, 3, "the 3 that were left, no fresh burst");
        // Never seen: one request, then only the steady rate from now.
        assert!(fallback.decide("api:b", rate, 1).allowed);
        assert!(!fallback.decide("api:b", rate, 1).allowed);
        // Two gateways: each goes on with half of what was left.
        let shared = Fallback::new(2);
        shared.observe("api:a", &decision(4, Duration::from_secs(6)));
        let admitted = (0..10).filter(|_| shared.decide("api:a", rate, 1).allowed).count();
        assert_eq!(admitted, 2);
    }

    #[test]
    fn what_was_counted_during_an_outage_is_handed_back_once() {
        let rate = Rate::new(10, Duration::from_secs(10));
        let fallback = Fallback::new(1);
        fallback.observe("api:a", &decision(10, Duration::ZERO));
        for _ in 0..4 {
            assert!(fallback.decide("api:a", rate, 1).allowed);
        }
        // The cache is back and knows nothing of those 4: the count here is ahead of it.
        let ahead = fallback.observe("api:a", &decision(9, Duration::from_secs(1))).expect("ahead");
        assert!(ahead > Duration::from_millis(3_900), "{ahead:?}");
        assert_eq!(fallback.observe("api:a", &decision(5, Duration::from_secs(5))), None, "told once");
    }
}
