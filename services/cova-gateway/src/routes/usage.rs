use crate::AppState;
use crate::auth::authenticate;
use crate::backend_errors;
use crate::error::HttpResult;
use crate::metering::{Limit, Meter};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_cache::Op;
use cova_domain::limits::{MAX_ACTIVE_TOKENS, MAX_COMMENTS_PER_POST, MAX_RUNNING_ANALYSES, METADATA};
use cova_domain::time::rfc3339;
use cova_storage::repo::accounts;
use serde_json::json;

/// `GET /api/v1/usage`: any valid token. The comment balance of the current month, and the
/// state of every limit that applies to the account.
pub async fn get_usage(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let principal = authenticate(&req, &state).await?;
    let (mut meter, requests) = Meter::api_balance_later(&state, &principal).await?;
    let metadata_limit = Limit::metadata(&principal.account_id);
    // One read of the database (account, balance, running analyses) beside the metadata window.
    let (usage, metadata) = tokio::join!(
        accounts::usage(&state.backends.db, &principal.account_id, state.backends.clock.now_ms()),
        metadata_limit.apply(&state, Op::Peek),
    );
    let accounts::Usage { account, balance, running } =
        usage.map_err(backend_errors::storage).map_err(|e| meter.fail(e))?;
    meter.record_balance(&principal, &balance);
    let metadata = metadata.map_err(backend_errors::cache).map_err(|e| meter.fail(e))?;
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
