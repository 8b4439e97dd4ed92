//! Request limits and the `X-RateLimit-*` / `X-Quota-*` headers every authenticated answer carries.

use crate::auth::Principal;
use crate::{AppState, backend_errors};
use actix_web::HttpResponse;
use cova_cache::{Decision, Rate};
use cova_errors::{ApiError, ErrorCode};
use cova_storage::Balance;
use cova_storage::clock::now_ms;
use cova_storage::repo::balances;
use serde::Serialize;

/// The general per-account limit on authenticated endpoints without a limit of their own.
pub fn api_rate(state: &AppState) -> Rate {
    Rate::per_minute(state.config.limits.api_requests_per_minute)
}

pub fn api_key(account_id: &str) -> String {
    format!("api:{account_id}")
}

/// The request limit an endpoint spends from: its cache key and rate.
#[derive(Debug, Clone)]
pub struct Limit {
    pub key: String,
    pub rate: Rate,
}

impl Limit {
    /// The general limit, for endpoints without one of their own.
    pub fn api(state: &AppState, account_id: &str) -> Self {
        Self { key: api_key(account_id), rate: api_rate(state) }
    }
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

/// Headers gathered while a request is checked, attached to its answer whatever it is.
#[derive(Debug, Default, Clone)]
pub struct Meter {
    headers: Vec<(&'static str, String)>,
}

impl Meter {
    pub fn rate(&mut self, d: &Decision) {
        self.headers.push(("x-ratelimit-limit", d.limit.to_string()));
        self.headers.push(("x-ratelimit-remaining", d.remaining.to_string()));
    }

    pub fn quota(&mut self, b: &Balance) {
        self.headers.push(("x-quota-limit", b.granted.to_string()));
        self.headers.push(("x-quota-remaining", b.available.max(0).to_string()));
    }

    /// Adds the gathered headers to an error answer.
    pub fn fail(&self, mut e: ApiError) -> ApiError {
        e.headers.extend(self.headers.iter().cloned());
        e
    }

    pub fn json<T: Serialize>(&self, mut builder: actix_web::HttpResponseBuilder, body: &T) -> HttpResponse {
        for (name, value) in &self.headers {
            builder.insert_header((*name, value.as_str()));
        }
        builder.json(body)
    }

    /// Spends one unit of `rate` on `key`; a refusal is 429 `rate_limited` with `Retry-After`.
    pub async fn spend(&mut self, state: &AppState, key: &str, rate: Rate) -> Result<Decision, ApiError> {
        let decision =
            state.backends.cache.rate_limit(key, rate, 1).await.map_err(|e| self.fail(backend_errors::cache(e)))?;
        self.rate(&decision);
        if decision.allowed {
            Ok(decision)
        } else {
            Err(self.fail(
                ApiError::new(
                    ErrorCode::RateLimited,
                    format!("Request limit of {} per {} seconds exceeded.", rate.limit, rate.period.as_secs()),
                )
                .with_retry_after(decision.retry_after_secs()),
            ))
        }
    }

    /// Reads this month's comment balance and records the quota headers.
    pub async fn balance(&mut self, state: &AppState, principal: &Principal) -> Result<Balance, ApiError> {
        let balance = balances::current(&state.backends.db, &principal.account_id, now_ms())
            .await
            .map_err(|e| self.fail(backend_errors::storage(e)))?;
        self.quota(&balance);
        Ok(balance)
    }

    /// The common path: the quota headers (so that even a 429 carries them), then the
    /// account's general request limit.
    pub async fn api(state: &AppState, principal: &Principal) -> Result<(Self, Balance), ApiError> {
        let mut meter = Meter::default();
        let balance = meter.balance(state, principal).await?;
        let limit = Limit::api(state, &principal.account_id);
        meter.spend(state, &limit.key, limit.rate).await?;
        Ok((meter, balance))
    }

    /// The headers of an answer refused before its limit is spent: the limit's state, read
    /// without spending, and the balance. Best effort: a backend failing here leaves headers
    /// out rather than turning a 400 into a 503.
    async fn peek(state: &AppState, principal: &Principal, limit: &Limit) -> Self {
        let mut meter = Meter::default();
        let (balance, decision) = tokio::join!(
            balances::current(&state.backends.db, &principal.account_id, now_ms()),
            state.backends.cache.rate_limit(&limit.key, limit.rate, 0),
        );
        if let Ok(b) = balance {
            meter.quota(&b);
        }
        if let Ok(d) = decision {
            meter.rate(&d);
        }
        meter
    }
}
