//! `POST /api/v1/metadata`: free, synchronous post metadata, cached 5 minutes per ref and
//! limited to 10 per rolling 2 hours per account. Only the request that actually fetches
//! spends the limit (concurrent requests for one post share its fetch), a failed fetch gives
//! it back, and cache hits are free.

use super::sandbox::client_ip;
use crate::AppState;
use crate::auth::authenticate;
use crate::error::HttpResult;
use crate::input::{read_body, url_body};
use crate::lookup;
use crate::metering::Limiter;
use crate::metering::{Limit, Meter, before_limit};
use crate::session::{self, PAGE_TOKEN_HEADER};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_auth::Scope;
use cova_cache::Op;
use cova_domain::limits::METADATA_ANONYMOUS;
use cova_errors::{ApiError, ErrorCode};
use cova_platforms::parse_url;

pub async fn post_metadata(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    if let Some(token) = anonymous_page_token(&req, &state) {
        return anonymous(req, state, payload, token).await;
    }
    let principal = authenticate(&req, &state).await?;
    let limit = Limit::metadata(&principal.account_id);
    let parsed = before_limit(&state, &principal, &limit, async {
        principal.require(Scope::MetadataRead)?;
        let url = url_body(&read_body(&state, payload).await?)?;
        parse_url(&url).map_err(|e| e.to_api_error())
    })
    .await?;
    let mut meter = Meter::default();
    meter.balance(&state, &principal).await?;
    let post = lookup::resolve(&state, parsed, &mut meter, Some(&limit), &principal.account_id).await?;
    let member = uuid::Uuid::new_v4().to_string();
    let body = lookup::metadata(&state, &post, &mut meter, (&limit, &member), &principal.account_id).await?;
    Ok(meter.json(HttpResponse::Ok(), &body))
}

/// The page token of a request with no credential at all (neither a token nor the cookie).
fn anonymous_page_token(req: &HttpRequest, state: &AppState) -> Option<String> {
    if req.headers().contains_key(actix_web::http::header::AUTHORIZATION) || session::cookie_value(req, state).is_some()
    {
        return None;
    }
    req.headers().get(PAGE_TOKEN_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// A visitor of the workspace's own page, not signed in: 10 lookups per day per client IP,
/// only with the token the page was served with, only from the page's origin.
async fn anonymous(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload, token: String) -> HttpResult {
    let ip = client_ip(&req, &state.trusted_proxies).map_or_else(|| "unknown".to_owned(), |ip| ip.to_string());
    let from_page = req.headers().contains_key(actix_web::http::header::ORIGIN)
        || req.headers().get("sec-fetch-site").is_some_and(|v| v == "same-origin");
    if !from_page
        || !session::from_own_origin(&req, &state)
        || !session::page_token_valid(&state, token.trim(), &ip).await?
    {
        return Err(ApiError::new(
            ErrorCode::Unauthorized,
            "Without signing in, metadata is available on cova's own page only. Other clients need a Bearer token.",
        )
        .into());
    }
    // A visitor's platform requests wait their turn as its address's, and its failed lookups
    // are bounded as its address's.
    let asker = format!("ip:{ip}");
    cova_platforms::Demand::current().identify(&asker);
    let limit = Limit { key: format!("meta-anon:{ip}"), limiter: Limiter::Window(METADATA_ANONYMOUS) };
    let mut meter = Meter::default();
    let parsed =
        match async { parse_url(&url_body(&read_body(&state, payload).await?)?).map_err(|e| e.to_api_error()) }.await {
            Ok(parsed) => parsed,
            Err(e) => {
                if let Ok(d) = limit.apply(&state, Op::Peek).await {
                    meter.rate(&d);
                }
                return Err(meter.fail(e).into());
            }
        };
    let post = lookup::resolve(&state, parsed, &mut meter, Some(&limit), &asker).await?;
    let member = uuid::Uuid::new_v4().to_string();
    let body = lookup::shared_metadata(&state, &post, &mut meter, &limit, &member).await?;
    Ok(meter.json(HttpResponse::Ok(), &body))
}
