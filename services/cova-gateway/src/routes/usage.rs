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
use serde_json::json;

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
    let body = json!({
        "account": {"id": account.id, "email": account.email},
        "comments": {
            "month": balance.month,
            "limit": balance.granted,
            "used": balance.spent,
            "reserved": balance.reserved,
            "remaining": balance.available.max(0),
            "expires_at": rfc3339(balance.expires_at),
            "per_post_limit": MAX_COMMENTS_PER_POST,
        },
        "metadata": {
            "limit": metadata.limit,
            "remaining": metadata.remaining,
            "window_seconds": METADATA.period.as_secs(),
            "resets_in_seconds": metadata.reset_after.as_secs(),
        },
        "requests": {
            "limit": requests.limit,
            "remaining": requests.remaining,
            "window_seconds": 60,
        },
        "concurrency": {
            "limit": MAX_RUNNING_ANALYSES,
            "running": running,
            "available": (MAX_RUNNING_ANALYSES - running).max(0),
        },
        "tokens": {"limit": MAX_ACTIVE_TOKENS, "active": account.active_tokens},
    });
    Ok(meter.json(HttpResponse::Ok(), &body))
}
