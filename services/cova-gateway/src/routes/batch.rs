//! `POST /api/v1/analyze/batch`, `GET /api/v1/analyze/batch/{id}`,
//! `POST /api/v1/analyze/batch/{id}/cancel` and `POST /api/v1/analyze/batch/preview`: many posts
//! at once. Each valid URL becomes an analyze job as `POST /analyze` would start it, when the
//! money rules let it start; the answer lists each URL with its job or why it was refused. The
//! preview says what a list would cost before it starts.

use super::analyze::{idempotency_key, known_comment_count};
use super::views;
use crate::error::HttpResult;
use crate::input::{self, read_body};
use crate::metering::{self, Limit, Meter, authorized};
use crate::{AppState, backend_errors, lookup};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_auth::Scope;
use cova_domain::limits::{self, MAX_BATCH_URLS};
use cova_domain::money;
use cova_domain::time::rfc3339;
use cova_errors::ApiError;
use cova_platforms::{PostRef, parse_url};
use cova_storage::repo::batches::{self, Batch, Created, NewBatch, NewItem};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    urls: Vec<String>,
    max_comments: Option<input::Integer>,
}

/// The URLs of a batch request, as sent; refused as a whole only when the list itself is wrong.
fn urls_of(body: &BatchBody) -> Result<Vec<String>, ApiError> {
    if body.urls.is_empty() || body.urls.len() > MAX_BATCH_URLS {
        return Err(ApiError::validation(format!("`urls` must hold 1 to {MAX_BATCH_URLS} post URLs.")));
    }
    Ok(body.urls.clone())
}

/// A list's body: its URLs and the cap on each post's comments.
async fn list_body(state: &AppState, payload: web::Payload) -> Result<(Vec<String>, Option<i64>), ApiError> {
    let shape = r#"{"urls": ["<post URL>", "<post URL>"], "max_comments": 1000}"#;
    let body: BatchBody = input::json(&read_body(state, payload).await?, shape)?;
    Ok((urls_of(&body)?, input::max_comments(body.max_comments)?))
}

/// SHA-256 of the URL list and its cap: the same `Idempotency-Key` with another list is a
/// conflict.
fn digest(urls: &[String], max_comments: Option<i64>) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for url in urls {
        context.update(url.as_bytes());
        context.update(b"\n");
    }
    if let Some(cap) = max_comments {
        context.update(format!("max_comments={cap}").as_bytes());
    }
    hex::encode(context.finish().as_ref())
}

/// One URL of a list checked as `POST /analyze` checks its one: the URL as it is kept, and
/// its post (short links resolved) or why it is refused.
async fn checked_item(state: &AppState, raw: &str, meter: &mut Meter) -> (String, Result<PostRef, ApiError>) {
    match input::post_url("url", raw) {
        Err(e) => (input::shown_url(raw), Err(e)),
        Ok(url) => {
            let post = match parse_url(&url) {
                Ok(parsed) => lookup::resolve(state, parsed, meter, None).await,
                Err(e) => Err(e.to_api_error()),
            };
            (url, post)
        }
    }
}

pub async fn create(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let (principal, mut meter, ((urls, max_comments), key)) =
        authorized(&req, &state, Scope::AnalyzeWrite, async |_| {
            Ok((list_body(&state, payload).await?, idempotency_key(&req)?))
        })
        .await?;
    // Each URL checked like `POST /analyze` checks its one; a bad one is refused alone.
    let mut items = Vec::with_capacity(urls.len());
    for raw in &urls {
        let (url, post) = checked_item(&state, raw, &mut meter).await;
        // A count read for a preview (or any metadata lookup) in the last minutes sizes the item.
        let known_comments = match &post {
            Ok(post) => known_comment_count(&state, &post.to_string()).await,
            Err(_) => None,
        };
        let post = post.map(|p| p.to_string()).map_err(|e| (e.code.as_str().to_owned(), e.detail.clone()));
        items.push(NewItem { url, post, known_comments });
    }
    let db = &state.backends.db;
    let new = NewBatch {
        account_id: &principal.account_id,
        token_id: principal.token_id(),
        session_id: principal.session_id(),
        idempotency_key: key.as_deref(),
        request_digest: &digest(&urls, max_comments),
        items,
        max_comments,
    };
    let now = state.now();
    let (id, status) = match batches::create(db, new, now).await.map_err(|e| meter.fail(backend_errors::storage(e)))? {
        Created::New(id) => {
            let trace = cova_telemetry::current_trace_json();
            cova_runtime::flow::start_waiting(db, &principal.account_id, &trace, now)
                .await
                .map_err(|e| meter.fail(backend_errors::storage(e)))?;
            state.outbox.notify_one();
            (id, HttpResponse::Accepted())
        }
        Created::Repeated(id) => (id, HttpResponse::Ok()),
        Created::Conflict => {
            return Err(meter.fail(ApiError::of(cova_errors::ErrorCode::IdempotencyConflict)).into());
        }
    };
    let _ = meter.balance(&state, &principal).await;
    answer(&state, &principal.account_id, &id, meter, status).await
}

/// `POST /analyze/batch/preview`: what a list would cost before it starts. Each URL is checked
/// as the list would check it and its post's comment count read from its metadata, under the
/// metadata limit's rules (a cached answer is free; a lookup spends one of the account's
/// metadata requests, given back when it fails; once they are spent, the rest are not counted
/// and say why). Answers each post's count and what collecting it charges at most, the total,
/// and how many posts the balance covers whole, in list order.
pub async fn preview(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let (principal, mut meter, (urls, max_comments)) =
        authorized(&req, &state, Scope::AnalyzeWrite, async |_| list_body(&state, payload).await).await?;
    let usage = meter.balance(&state, &principal).await?;
    let spendable = metering::spendable(&principal, &usage).available.max(0);
    // The lookups' own limit headers stay off this answer, which spent the general limit.
    let mut lookups = Meter::default();
    let limit = Limit::metadata(&principal.account_id);
    let mut items: Vec<PreviewItem> = Vec::with_capacity(urls.len());
    let mut seen: Vec<(String, usize)> = Vec::new();
    for (position, raw) in urls.iter().enumerate() {
        let (url, post) = checked_item(&state, raw, &mut lookups).await;
        let mut item = PreviewItem {
            position,
            url,
            r#ref: None,
            comments: None,
            charge_at_most: None,
            same_as: None,
            covered: false,
            error: None,
        };
        match post {
            Err(e) => item.error = Some(PreviewError::of(&e)),
            Ok(post) => {
                let r#ref = post.to_string();
                if let Some((_, first)) = seen.iter().find(|(r, _)| *r == r#ref) {
                    // One job collects a post once, however often the list names it.
                    item.same_as = Some(*first);
                    item.comments = items[*first].comments;
                    item.charge_at_most = item.comments.map(|_| 0);
                } else {
                    seen.push((r#ref.clone(), position));
                    let member = uuid::Uuid::new_v4().to_string();
                    match lookup::shared_metadata(&state, &post, &mut lookups, &limit, &member).await {
                        Ok(metadata) => match metadata["metrics"]["comments"].as_i64() {
                            Some(count) => {
                                item.comments = Some(count);
                                item.charge_at_most = Some(money::charge_at_most(count, max_comments));
                            }
                            None => item.error = Some(PreviewError::uncounted()),
                        },
                        Err(e) => item.error = Some(PreviewError::of(&e)),
                    }
                }
                item.r#ref = Some(r#ref);
            }
        }
        items.push(item);
    }
    // Posts of unknown size are left out of what the balance covers.
    let counted: Vec<Option<i64>> = items.iter().filter(|i| i.charge_at_most.is_some()).map(|i| i.comments).collect();
    let covered = money::covered_whole(spendable, &counted, max_comments);
    let mut left = covered;
    for item in items.iter_mut().filter(|i| i.charge_at_most.is_some()) {
        if left == 0 {
            break;
        }
        item.covered = true;
        left -= 1;
    }
    let body = Preview {
        available: spendable,
        charge_at_most: items.iter().filter_map(|i| i.charge_at_most).sum(),
        counted: items.iter().filter(|i| i.charge_at_most.is_some() && i.same_as.is_none()).count(),
        covered_whole: items.iter().filter(|i| i.covered && i.same_as.is_none()).count(),
        max_comments,
        posts: items.iter().filter(|i| i.r#ref.is_some() && i.same_as.is_none()).count(),
        total_comments: items.iter().filter(|i| i.same_as.is_none()).filter_map(|i| i.comments).sum(),
        items,
    };
    Ok(meter.json(HttpResponse::Ok(), &body))
}

#[derive(Serialize)]
struct Preview {
    /// What the caller may spend now (a session's free allowance included).
    available: i64,
    charge_at_most: i64,
    counted: usize,
    covered_whole: usize,
    items: Vec<PreviewItem>,
    max_comments: Option<i64>,
    posts: usize,
    total_comments: i64,
}

#[derive(Serialize)]
struct PreviewItem {
    position: usize,
    url: String,
    r#ref: Option<String>,
    /// The post's comment count as the platform reports it.
    comments: Option<i64>,
    /// What collecting it charges at most (its count, capped by `max_comments`; 0 for a post
    /// the list already names).
    charge_at_most: Option<i64>,
    /// The position of the same post earlier in the list.
    same_as: Option<usize>,
    /// The balance covers it whole, with the posts before it.
    covered: bool,
    error: Option<PreviewError>,
}

#[derive(Serialize)]
struct PreviewError {
    code: &'static str,
    detail: String,
}

impl PreviewError {
    fn of(e: &ApiError) -> Self {
        let detail = match e.code {
            cova_errors::ErrorCode::RateLimited => format!(
                "Not counted: the account's metadata lookups ({} every {}) are spent for now. \
                 Its count can be read again later; collecting it does not need it.",
                limits::METADATA.limit,
                limits::in_words(limits::METADATA.period)
            ),
            _ => e.detail.clone(),
        };
        Self { code: e.code.as_str(), detail }
    }

    fn uncounted() -> Self {
        Self { code: "parse_error", detail: "The platform does not say how many comments this post has.".into() }
    }
}

pub async fn get(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let (principal, meter, ()) = authorized(&req, &state, Scope::AnalyzeWrite, async |_| Ok(())).await?;
    answer(&state, &principal.account_id, &path, meter, HttpResponse::Ok()).await
}

pub async fn cancel(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let (principal, meter, ()) = authorized(&req, &state, Scope::AnalyzeWrite, async |_| Ok(())).await?;
    let cancelled = batches::cancel(&state.backends.db, &principal.account_id, &path, state.now())
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    if cancelled.is_none() {
        return Err(meter.fail(ApiError::not_found("No such batch.")).into());
    }
    state.outbox.notify_one();
    answer(&state, &principal.account_id, &path, meter, HttpResponse::Ok()).await
}

async fn answer(
    state: &AppState,
    account_id: &str,
    id: &str,
    meter: Meter,
    status: actix_web::HttpResponseBuilder,
) -> HttpResult {
    // Read and copied; while the database does not answer, the copy (as last read or changed).
    let batch = state
        .backends
        .snapshots
        .batch(&state.backends.db, account_id, id)
        .await
        .map_err(|e| meter.fail(backend_errors::snapshot(e)))?
        .ok_or_else(|| meter.fail(ApiError::not_found("No such batch.")))?;
    Ok(meter.json(status, &view(&batch)))
}

/// A batch as the API shows it.
pub fn view(batch: &Batch) -> BatchView<'_> {
    let status = match (batch.finished_at, batch.cancelled_at) {
        (Some(_), None) => "complete",
        (_, Some(_)) => "cancelled",
        (None, None) => "running",
    };
    BatchView {
        batch_id: &batch.id,
        cancelled_at: batch.cancelled_at.map(rfc3339),
        counts: batch.counts().into_iter().map(|(state, n)| (state.as_str(), n)).collect(),
        created_at: rfc3339(batch.created_at),
        finished_at: batch.finished_at.map(rfc3339),
        items: batch
            .items
            .iter()
            .map(|item| ItemView {
                error: item.error.as_ref().map(|(code, detail)| ItemError { code, detail }),
                job: item.job.as_ref().map(|j| {
                    let dedup = item.deduplicated.as_deref().and_then(cova_domain::Dedup::parse);
                    views::job(j, dedup)
                }),
                position: item.position,
                r#ref: item.r#ref.as_deref(),
                state: item.state.as_str(),
                truncated_reason: item.job.as_ref().filter(|j| j.truncated).and_then(|j| j.truncated_reason.as_deref()),
                comments_off: item.job.as_ref().is_some_and(|j| j.comments_off),
                url: &item.url,
            })
            .collect(),
        status,
    }
}

#[derive(Serialize)]
pub struct BatchView<'a> {
    batch_id: &'a str,
    cancelled_at: Option<String>,
    counts: std::collections::BTreeMap<&'static str, u32>,
    created_at: String,
    finished_at: Option<String>,
    items: Vec<ItemView<'a>>,
    status: &'static str,
}

#[derive(Serialize)]
struct ItemView<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ItemError<'a>>,
    job: Option<views::JobView<'a>>,
    position: i32,
    r#ref: Option<&'a str>,
    state: &'static str,
    /// Why its post was cut short (`balance`, `max_comments`, `post_cap`, `visitor_view`,
    /// `platform_stopped`) once its job completed with fewer comments than the post has.
    truncated_reason: Option<&'a str>,
    /// Its job completed with nothing to collect: the post's author turned its comments off.
    comments_off: bool,
    url: &'a str,
}

#[derive(Serialize)]
struct ItemError<'a> {
    code: &'a str,
    detail: &'a str,
}
