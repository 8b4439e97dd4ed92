//! `POST /api/v1/metadata`: free, synchronous post metadata, cached 5 minutes per ref and
//! limited to 10 per rolling 2 hours per account. The limit is spent before the lookup (so
//! parallel requests cannot exceed it) and given back when the lookup fails; cache hits are free.

use super::body::{platform_error, url_body};
use super::usage::{METADATA_CACHE, metadata_key, metadata_rate};
use crate::auth::authenticate;
use crate::metering::{Limit, Meter, before_limit};
use crate::{AppState, backend_errors};
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse, web};
use cova_auth::Scope;
use cova_errors::ApiError;
use serde_json::Value;

/// Where a post's metadata is cached (also read by `POST /analyze` for the comment count).
pub fn cache_key(r#ref: &str) -> String {
    format!("metadata:{ref}")
}

pub async fn post_metadata(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: Bytes,
) -> Result<HttpResponse, ApiError> {
    let principal = authenticate(&req, &state).await?;
    let limit = Limit { key: metadata_key(&principal.account_id), rate: metadata_rate() };
    let post = before_limit(&state, &principal, &limit, async {
        principal.require(Scope::MetadataRead)?;
        let url = url_body(&body)?;
        state.platforms.resolve(&url).await.map_err(platform_error)
    })
    .await?;
    let mut meter = Meter::default();
    meter.balance(&state, &principal).await?;
    let cache = &state.backends.cache;
    let cache_key = cache_key(&post.to_string());

    let cached = cache.get(&cache_key).await.map_err(|e| meter.fail(backend_errors::cache(e)))?;
    if let Some(mut body) = cached.and_then(|b| serde_json::from_slice::<Value>(&b).ok()) {
        let peek =
            cache.rate_limit(&limit.key, limit.rate, 0).await.map_err(|e| meter.fail(backend_errors::cache(e)))?;
        meter.rate(&peek);
        if let Some(obj) = body.as_object_mut() {
            obj.insert("cached".into(), Value::Bool(true));
        }
        return Ok(meter.json(HttpResponse::Ok(), &body));
    }

    meter.spend(&state, &limit.key, limit.rate).await?;
    let metadata = match state.platforms.metadata(&post).await {
        Ok(m) => m,
        Err(e) => {
            // A failed lookup is free: give the unit back (later headers replace earlier ones).
            if let Ok(d) = cache.refund(&limit.key, limit.rate, 1).await {
                meter.rate(&d);
            }
            return Err(meter.fail(platform_error(e)));
        }
    };
    let mut body = serde_json::to_value(&metadata).map_err(|_| meter.fail(ApiError::internal()))?;
    if let Ok(bytes) = serde_json::to_vec(&body) {
        // A cache that fails here only costs a later lookup.
        if let Err(e) = cache.set(&cache_key, &bytes, METADATA_CACHE).await {
            tracing::warn!(error = %e, "caching metadata failed");
        }
    }
    if let Some(obj) = body.as_object_mut() {
        obj.insert("cached".into(), Value::Bool(false));
    }
    Ok(meter.json(HttpResponse::Ok(), &body))
}
