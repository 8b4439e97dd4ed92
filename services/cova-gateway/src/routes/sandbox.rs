//! `POST /api/v1/sandbox/metadata` and `/sandbox/analyze`: fixtures with exactly the live
//! shapes (they are the same types, serialised the same way), no token, no quota, no platform
//! access; limited per client IP to 5 per minute and 30 per hour.

use super::views;
use crate::error::HttpResult;
use crate::input::{read_body, url_body};
use crate::metering::Meter;
use crate::{AppState, backend_errors};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_cache::{Op, Window};
use cova_domain::limits::{SANDBOX_PER_HOUR, SANDBOX_PER_MINUTE};
use cova_domain::{JobKind, JobStatus};
use cova_errors::{ApiError, ErrorCode};
use cova_platforms::{Comment, Metadata, ParsedUrl, parse_url};
use cova_storage::repo::jobs::Job;
use serde_json::{Value, json};
use std::net::IpAddr;
use std::sync::OnceLock;

struct Fixtures {
    metadata: Metadata,
    comments: Vec<Comment>,
}

/// Parsed once; a broken fixture is a build defect that the tests catch.
fn fixtures() -> Option<&'static Fixtures> {
    static FIXTURES: OnceLock<Option<Fixtures>> = OnceLock::new();
    FIXTURES
        .get_or_init(|| {
            let metadata = serde_json::from_str(include_str!("../../fixtures/sandbox-metadata.json")).ok()?;
            let comments = serde_json::from_str(include_str!("../../fixtures/sandbox-comments.json")).ok()?;
            Some(Fixtures { metadata, comments })
        })
        .as_ref()
}

/// The caller's address: the socket peer, or the nearest untrusted hop of `X-Forwarded-For`
/// when the peer is a configured trusted proxy.
pub fn client_ip(req: &HttpRequest, trusted: &[IpAddr]) -> Option<IpAddr> {
    let peer = req.peer_addr()?.ip();
    if !trusted.contains(&peer) {
        return Some(peer);
    }
    let forwarded = req.headers().get("x-forwarded-for").and_then(|v| v.to_str().ok()).unwrap_or("");
    forwarded
        .split(',')
        .rev()
        .filter_map(|hop| hop.trim().parse::<IpAddr>().ok())
        .find(|ip| !trusted.contains(ip))
        .or(Some(peer))
}

/// Spends one request of both per-IP windows (5 in any minute, 30 in any hour); the headers
/// show the tighter one.
async fn limit(req: &HttpRequest, state: &AppState) -> Result<Meter, ApiError> {
    let ip = client_ip(req, &state.trusted_proxies).map_or_else(|| "unknown".to_owned(), |ip| ip.to_string());
    let cache = &state.backends.cache;
    let (minute_key, hour_key) = (format!("sandbox:m:{ip}"), format!("sandbox:h:{ip}"));
    let member = uuid::Uuid::new_v4().to_string();
    let minute =
        cache.window(&minute_key, SANDBOX_PER_MINUTE, Op::Hit(&member)).await.map_err(backend_errors::cache)?;
    let mut meter = Meter::default();
    if !minute.allowed {
        meter.rate(&minute);
        return Err(meter.fail(rate_limited(&minute, SANDBOX_PER_MINUTE)));
    }
    let hour = cache.window(&hour_key, SANDBOX_PER_HOUR, Op::Hit(&member)).await.map_err(backend_errors::cache)?;
    if !hour.allowed {
        // The minute entry was not used after all.
        let _ = cache.window(&minute_key, SANDBOX_PER_MINUTE, Op::Undo(&member)).await;
        meter.rate(&hour);
        return Err(meter.fail(rate_limited(&hour, SANDBOX_PER_HOUR)));
    }
    meter.rate(if hour.remaining < minute.remaining { &hour } else { &minute });
    Ok(meter)
}

fn rate_limited(d: &cova_cache::Decision, window: Window) -> ApiError {
    ApiError::new(
        ErrorCode::RateLimited,
        format!("The sandbox allows {} requests per {} seconds per IP address.", window.limit, window.period.as_secs()),
    )
    .with_retry_after(d.retry_after_secs())
}

/// The ref and URL the caller asked about (no network: short links keep the fixture's).
fn requested(url: &str, fixture: &Metadata) -> Result<(String, String), ApiError> {
    match parse_url(url).map_err(|e| e.to_api_error())? {
        ParsedUrl::Post(post) => Ok((post.to_string(), post.canonical_url())),
        ParsedUrl::ShortLink(_) => Ok((fixture.post_ref.to_string(), fixture.url.clone())),
    }
}

pub async fn metadata(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let url = url_body(&read_body(&state, payload).await?)?;
    let fx = fixtures().ok_or_else(ApiError::internal)?;
    let (r#ref, canonical) = requested(&url, &fx.metadata)?;
    let meter = limit(&req, &state).await?;
    let mut body = serde_json::to_value(&fx.metadata).map_err(|_| ApiError::internal())?;
    if let Some(obj) = body.as_object_mut() {
        obj.insert("ref".into(), json!(r#ref));
        obj.insert("url".into(), json!(canonical));
        obj.insert("platform".into(), json!(r#ref.split(':').next().unwrap_or_default()));
        obj.insert("cached".into(), Value::Bool(false));
    }
    Ok(meter.json(HttpResponse::Ok(), &body))
}

pub async fn analyze(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let url = url_body(&read_body(&state, payload).await?)?;
    let fx = fixtures().ok_or_else(ApiError::internal)?;
    let (r#ref, _) = requested(&url, &fx.metadata)?;
    let meter = limit(&req, &state).await?;
    let total: usize = fx.comments.iter().map(|c| 1 + c.replies.len()).sum();
    let now = state.now();
    let job = Job {
        id: format!("sandbox-{}", r#ref.replace(':', "-")),
        account_id: String::new(),
        token_id: None,
        kind: JobKind::Analyze,
        r#ref: r#ref.clone(),
        url,
        status: JobStatus::Complete,
        created_at: now,
        started_at: Some(now),
        finished_at: Some(now),
        comments_collected: total as i64,
        comments_expected: Some(total as i64),
        truncated: false,
        truncated_reason: None,
        comments_new: Some(total as i64),
        batch_id: None,
        error_code: None,
        error_detail: None,
        hold_stage: cova_domain::money::Stage::Sized,
        waiting_since: None,
        max_comments: None,
        free_allowance: false,
        session_id: None,
        comments_off: false,
    };
    let mut body = json!(views::job(&job, None));
    let mut comments = serde_json::to_value(&fx.comments).map_err(|_| ApiError::internal())?;
    // As a live result: every comment says when it was first collected.
    let seen = json!(cova_domain::time::rfc3339(now));
    for comment in comments.as_array_mut().into_iter().flatten() {
        for reply in comment["replies"].as_array_mut().into_iter().flatten() {
            reply["first_seen_at"] = seen.clone();
        }
        comment["first_seen_at"] = seen.clone();
    }
    if let Some(obj) = body.as_object_mut() {
        obj.insert(
            "result".into(),
            json!({
                "analysis_id": r#ref,
                "truncated": false,
                "truncated_reason": null,
                "comments_off": false,
                "comments_total": total,
                "comments_new": total,
                "comments": comments,
                "next_cursor": null,
                "released": false,
            }),
        );
    }
    Ok(meter.json(HttpResponse::Ok(), &body))
}
