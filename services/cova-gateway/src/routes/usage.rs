use crate::AppState;
use crate::auth::authenticate;
use crate::error::HttpResult;
use crate::metering::{Limit, Meter};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_cache::Reply;
use cova_domain::limits::{MAX_ACTIVE_TOKENS, MAX_COMMENTS_PER_POST, MAX_RUNNING_ANALYSES, METADATA};
use cova_domain::time::rfc3339;
use cova_errors::ApiError;
use cova_storage::repo::accounts;
use serde::Serialize;

/// `GET /api/v1/usage`: any valid token. The comment balance of the current month, and the
/// state of every limit that applies to the account.
pub async fn get_usage(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let principal = authenticate(&req, &state).await?;
    let metadata_limit = Limit::metadata(&principal.account_id);
    // The general limit, the account's state and the metadata window in one cache round trip.
    let (meter, usage, requests, replies) = Meter::api_with(&state, &principal, &[metadata_limit.read(false)]).await?;
    let Some(Reply::Decision(metadata)) = replies.into_iter().next() else {
        return Err(meter.fail(ApiError::internal()).into());
    };
    let accounts::Usage { account, balance, running } = usage;
    let body = UsageView {
        account: AccountView { email: &account.email, id: &account.id },
        comments: CommentsView {
            expires_at: rfc3339(balance.expires_at),
            limit: balance.granted,
            month: &balance.month,
            per_post_limit: MAX_COMMENTS_PER_POST,
            remaining: balance.available.max(0),
            reserved: balance.reserved,
            used: balance.spent,
        },
        concurrency: ConcurrencyView {
            available: (MAX_RUNNING_ANALYSES - running).max(0),
            limit: MAX_RUNNING_ANALYSES,
            running,
        },
        metadata: MetadataView {
            limit: metadata.limit,
            remaining: metadata.remaining,
            resets_in_seconds: metadata.reset_after.as_secs(),
            window_seconds: METADATA.period.as_secs(),
        },
        requests: RequestsView { limit: requests.limit, remaining: requests.remaining, window_seconds: 60 },
        tokens: TokensView { active: account.active_tokens, limit: MAX_ACTIVE_TOKENS },
    };
    Ok(meter.json(HttpResponse::Ok(), &body))
}

// The answer, serialized without an intermediate map; members in alphabetical order, as every
// other answer's.

#[derive(Serialize)]
struct UsageView<'a> {
    account: AccountView<'a>,
    comments: CommentsView<'a>,
    concurrency: ConcurrencyView,
    metadata: MetadataView,
    requests: RequestsView,
    tokens: TokensView,
}

#[derive(Serialize)]
struct AccountView<'a> {
    email: &'a str,
    id: &'a str,
}

#[derive(Serialize)]
struct CommentsView<'a> {
    expires_at: String,
    limit: i64,
    month: &'a str,
    per_post_limit: i64,
    remaining: i64,
    reserved: i64,
    used: i64,
}

#[derive(Serialize)]
struct ConcurrencyView {
    available: i64,
    limit: i64,
    running: i64,
}

#[derive(Serialize)]
struct MetadataView {
    limit: u32,
    remaining: u32,
    resets_in_seconds: u64,
    window_seconds: u64,
}

#[derive(Serialize)]
struct RequestsView {
    limit: u32,
    remaining: u32,
    window_seconds: u64,
}

#[derive(Serialize)]
struct TokensView {
    active: i32,
    limit: i32,
}
