use crate::auth::authenticate;
use crate::metering::{Meter, api_key, api_rate};
use crate::{AppState, backend_errors};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_errors::ApiError;
use cova_storage::clock::rfc3339;
use cova_storage::repo::{accounts, jobs, tokens};
use serde_json::json;

/// The limits of the interface specification.
pub const METADATA_LIMIT: u32 = 10;
pub const METADATA_WINDOW_S: u64 = 2 * 60 * 60;
pub const CONCURRENT_ANALYSES: i64 = 3;
pub const COMMENTS_PER_POST: i64 = 5_000;
/// Metadata answers are reused this long per ref.
pub const METADATA_CACHE: std::time::Duration = std::time::Duration::from_secs(5 * 60);

/// The cache key of the account's metadata limit (shared by tokens and the session).
pub fn metadata_key(account_id: &str) -> String {
    format!("meta:{account_id}")
}

pub fn metadata_rate() -> cova_cache::Rate {
    cova_cache::Rate::new(METADATA_LIMIT, std::time::Duration::from_secs(METADATA_WINDOW_S))
}

/// `GET /api/v1/usage`: any valid token. The comment balance of the current month, and the
/// state of every limit that applies to the account.
pub async fn get_usage(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let principal = authenticate(&req, &state).await?;
    let (meter, balance) = Meter::api(&state, &principal).await?;
    let db = &state.backends.db;
    let cache = &state.backends.cache;
    let (meta_key, api_key) = (metadata_key(&principal.account_id), api_key(&principal.account_id));
    let (account, running, metadata, requests) = tokio::join!(
        accounts::get(db, &principal.account_id),
        jobs::count_running(db, &principal.account_id),
        cache.rate_limit(&meta_key, metadata_rate(), 0),
        cache.rate_limit(&api_key, api_rate(&state), 0),
    );
    let fail = |e| meter.fail(e);
    let account = account.map_err(backend_errors::storage).map_err(fail)?;
    let running = running.map_err(backend_errors::storage).map_err(fail)?;
    let metadata = metadata.map_err(backend_errors::cache).map_err(fail)?;
    let requests = requests.map_err(backend_errors::cache).map_err(fail)?;
    let body = json!({
        "account": {"id": account.id, "email": account.email},
        "comments": {
            "month": balance.month,
            "limit": balance.granted,
            "used": balance.spent,
            "reserved": balance.reserved,
            "remaining": balance.available.max(0),
            "expires_at": rfc3339(balance.expires_at),
            "per_post_limit": COMMENTS_PER_POST,
        },
        "metadata": {
            "limit": metadata.limit,
            "remaining": metadata.remaining,
            "window_seconds": METADATA_WINDOW_S,
            "resets_in_seconds": metadata.reset_after.as_secs(),
        },
        "requests": {
            "limit": requests.limit,
            "remaining": requests.remaining,
            "window_seconds": 60,
        },
        "concurrency": {
            "limit": CONCURRENT_ANALYSES,
            "running": running,
            "available": (CONCURRENT_ANALYSES - running).max(0),
        },
        "tokens": {"limit": tokens::MAX_ACTIVE_TOKENS, "active": account.active_tokens},
    });
    Ok(meter.json(HttpResponse::Ok(), &body))
}
