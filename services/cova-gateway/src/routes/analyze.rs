//! `POST /api/v1/analyze` and `GET /api/v1/analyze/{job_id}`.

use super::{stream, views};
use crate::auth::authenticate;
use crate::error::HttpResult;
use crate::input::{analyze_body, read_body};
use crate::lookup;
use crate::metering::{Limit, Meter, before_limit};
use crate::{AppState, backend_errors};
use actix_web::http::header::ContentType;
use actix_web::{HttpRequest, HttpResponse, web};
use cova_auth::Scope;
use cova_cache::{Read, Reply};
use cova_domain::JobStatus;
use cova_domain::limits::MAX_COMMENTS_PER_POST;
use cova_domain::limits::MAX_RUNNING_ANALYSES;
use cova_errors::{ApiError, ErrorCode};
use cova_platforms::parse_url;
use cova_storage::repo::breakdown::{From, Query};
use cova_storage::repo::jobs::{self, Cap, CreateOutcome, NewAnalyze};
use serde::Deserialize;
use serde_json::json;

const IDEMPOTENCY_HEADER: &str = "idempotency-key";

pub fn idempotency_key(req: &HttpRequest) -> Result<Option<String>, ApiError> {
    let Some(value) = req.headers().get(IDEMPOTENCY_HEADER) else { return Ok(None) };
    let key = value.to_str().map_err(|_| ApiError::validation("Idempotency-Key must be visible ASCII."))?.trim();
    if key.is_empty() || key.len() > 255 || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ApiError::validation("Idempotency-Key must be 1 to 255 visible ASCII characters."));
    }
    Ok(Some(key.to_owned()))
}

/// Starts a comment collection, or returns the job that already covers the request.
pub async fn post_analyze(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let principal = authenticate(&req, &state).await?;
    let (url, max_comments, key, parsed) =
        before_limit(&state, &principal, &Limit::api(&state, &principal.account_id), async {
            principal.require(Scope::AnalyzeWrite)?;
            let (url, max_comments) = analyze_body(&read_body(&state, payload).await?)?;
            let key = idempotency_key(&req)?;
            let parsed = parse_url(&url).map_err(|e| e.to_api_error())?;
            Ok((url, max_comments, key, parsed))
        })
        .await?;
    // The request limit is spent before a short link makes cova contact the platform.
    let (mut meter, _) = Meter::api(&state, &principal).await?;
    let post = lookup::resolve(&state, parsed, &mut meter, None, &principal.account_id).await?;
    let r#ref = post.to_string();
    let known_comments = known_comment_count(&state, &r#ref).await;
    // The scraper's work joins this request's trace.
    let trace = cova_telemetry::current_trace_json();
    let outcome = jobs::create_analyze(
        &state.backends.db,
        NewAnalyze {
            account_id: &principal.account_id,
            token_id: principal.token_id(),
            session_id: principal.session_id(),
            r#ref: &r#ref,
            url: &url,
            idempotency_key: key.as_deref(),
            known_comments,
            refresh: false,
            batch_id: None,
            max_comments: Cap::Set(max_comments),
        },
        &trace,
        state.now(),
    )
    .await
    .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    created(&state, &principal, meter, outcome).await
}

/// The answer to a job request: 202 with a new job, 200 with the job that covers it, or why not.
pub async fn created(
    state: &AppState,
    principal: &crate::Principal,
    mut meter: Meter,
    outcome: CreateOutcome,
) -> HttpResult {
    match outcome {
        CreateOutcome::Created { job, reserved } => {
            state.outbox.notify_one();
            tracing::info!(job.id = %job.id, job.r#ref = %job.r#ref, reserved, "analyze job queued");
            // The balance changed: show what is left now.
            let _ = meter.balance(state, principal).await;
            Ok(meter.json(HttpResponse::Accepted(), &views::job(&job, None)))
        }
        CreateOutcome::Deduplicated(job, dedup) => Ok(meter.json(HttpResponse::Ok(), &views::job(&job, Some(dedup)))),
        CreateOutcome::Repeated(job) => Ok(meter.json(HttpResponse::Ok(), &views::job(&job, None))),
        CreateOutcome::IdempotencyConflict => Err(meter.fail(ApiError::of(ErrorCode::IdempotencyConflict)).into()),
        CreateOutcome::PaymentRequired => Err(meter
            .fail(ApiError::new(ErrorCode::PaymentRequired, "Refresh and watch need a comment pack this month."))
            .into()),
        CreateOutcome::QuotaExceeded => Err(meter.fail(ApiError::of(ErrorCode::QuotaExceeded)).into()),
        CreateOutcome::ConcurrencyLimit => {
            let detail = format!(
                "{MAX_RUNNING_ANALYSES} analyses are already running for this account; start this one when one has finished."
            );
            Err(meter.fail(ApiError::new(ErrorCode::ConcurrencyLimit, detail).with_retry_after(2)).into())
        }
    }
}

/// The comment count of the post when fresh metadata is cached (no platform request): the
/// job then holds what the post needs from the start.
pub async fn known_comment_count(state: &AppState, r#ref: &str) -> Option<i64> {
    let bytes = state.backends.cache.get(&lookup::metadata_key(r#ref)).await.ok()??;
    let metadata: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    metadata["metrics"]["comments"].as_i64()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultQuery {
    limit: Option<i64>,
    cursor: Option<String>,
}

/// The job; when complete, the result with comments and nested replies. `?limit=&cursor=`
/// page over top-level comments (each with all its replies); the default is everything.
pub async fn get_job(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let principal = authenticate(&req, &state).await?;
    let (limit, after) = before_limit(&state, &principal, &Limit::api(&state, &principal.account_id), async {
        principal.require(Scope::AnalyzeWrite)?;
        // Parsed here rather than by an extractor, so that a bad query is refused with the
        // limit headers like any other validation error.
        let query = web::Query::<ResultQuery>::from_query(req.query_string()).map_err(backend_errors::query)?;
        let limit = query.limit.unwrap_or(MAX_COMMENTS_PER_POST);
        if !(1..=MAX_COMMENTS_PER_POST).contains(&limit) {
            return Err(ApiError::validation(format!("`limit` must be between 1 and {MAX_COMMENTS_PER_POST}.")));
        }
        let after = match &query.cursor {
            None => None,
            Some(c) => Some(
                c.strip_prefix('p')
                    .and_then(|n| n.parse::<i64>().ok())
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| ApiError::validation("`cursor` is not one this API returned."))?,
            ),
        };
        Ok((limit, after))
    })
    .await?;
    // The limit, the account's state (quota headers) and the job's state (with whether its
    // comments are still the analysis': a later scrape, the analysis' expiry or its removal
    // releases them) in one cache round trip; the database only for what the cache lacks.
    // A complete job's first page is kept written, and read in the same trip.
    let job_key = cova_snapshots::job_key(&path);
    let page_key = after.is_none().then(|| cova_snapshots::first_page_key(&path));
    let mut reads = vec![Read::Stamped { key: &job_key }];
    reads.extend(page_key.as_deref().map(|key| Read::Plain { key }));
    let (meter, _, _, replies) = Meter::api_with(&state, &principal, &reads).await?;
    let mut replies = replies.into_iter();
    let (held_job, kept_page) = (replies.next(), replies.next());
    let db = &state.backends.db;
    let polled = match held_job {
        // Job ids are UUIDs: anything else is no job, and costs no read.
        _ if uuid::Uuid::parse_str(&path).is_err() => None,
        Some(Reply::Value(held)) => {
            state.backends.snapshots.job(db, held, &path).await.map_err(|e| meter.fail(backend_errors::snapshot(e)))?
        }
        _ => return Err(meter.fail(ApiError::internal()).into()),
    };
    let Some(jobs::Polled { job, current, .. }) = polled.filter(|p| p.job.account_id == principal.account_id) else {
        return Err(meter.fail(ApiError::not_found("No such job.")).into());
    };
    // AI jobs answer at /ai/jobs/{id}.
    if job.kind != cova_domain::JobKind::Analyze {
        return Err(meter.fail(ApiError::not_found("No such job.")).into());
    }
    let body = views::job(&job, None);
    if job.status != JobStatus::Complete {
        return Ok(meter.json(HttpResponse::Ok(), &body));
    }
    let query = Query { from: after.map(From::Position), limit, ..Query::default() };
    // The result's members, then its comments streamed from their stored bodies.
    let head = json!({
        "analysis_id": job.r#ref,
        "truncated": job.truncated,
        "truncated_reason": job.truncated_reason,
        "comments_off": job.comments_off,
        "comments_total": job.comments_collected,
        "comments_new": job.comments_new,
        "released": !current,
    });
    let prefix = format!("{},\"result\":{},\"comments\":[", stream::open_object(&body), stream::open_object(&head));
    let mut builder = HttpResponse::Ok();
    meter.apply(&mut builder);
    let suffix = move |written: stream::Written| {
        let next = written.last_position.filter(|_| written.top_level == limit).map(|p| format!("p{p}"));
        format!("],\"next_cursor\":{}}}}}", json!(next))
    };
    if page_key.is_some() && current {
        // The comments never change while current: the kept first page is the page when it
        // holds it (and the only way to answer while the database does not).
        let held = match kept_page {
            Some(Reply::Value(held)) => held,
            _ => None,
        };
        let first = state
            .backends
            .snapshots
            .first_page(db, held, &job.id)
            .await
            .map_err(|e| meter.fail(backend_errors::snapshot(e)))?;
        if let Some((comments, written)) = first.as_ref().and_then(|p| p.serve(limit)) {
            let mut answer = prefix.into_bytes();
            answer.extend_from_slice(&comments);
            answer.extend_from_slice(suffix(written).as_bytes());
            return Ok(builder.content_type(ContentType::json()).body(answer));
        }
    }
    stream::respond(db.clone(), current.then(|| job.id.clone()), query, prefix, suffix, builder)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)).into())
}
