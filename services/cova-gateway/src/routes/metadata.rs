//! `POST /api/v1/metadata`: free, synchronous post metadata, cached 5 minutes per ref and
//! limited to 10 per rolling 2 hours per account. Only the request that actually fetches
//! spends the limit (concurrent requests for one post share its fetch), a failed fetch gives
//! it back, and cache hits are free.

use crate::AppState;
use crate::auth::authenticate;
use crate::error::HttpResult;
use crate::input::{read_body, url_body};
use crate::lookup;
use crate::metering::{Limit, Meter, before_limit};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_auth::Scope;
use cova_platforms::parse_url;

pub async fn post_metadata(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
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
    let post = lookup::resolve(&state, parsed, &mut meter, Some(&limit)).await?;
    let member = uuid::Uuid::new_v4().to_string();
    let body = lookup::metadata(&state, &post, &mut meter, (&limit, &member), &principal.account_id).await?;
    Ok(meter.json(HttpResponse::Ok(), &body))
}
