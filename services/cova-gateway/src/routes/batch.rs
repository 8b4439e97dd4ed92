//! `POST /api/v1/analyze/batch`, `GET /api/v1/analyze/batch/{id}` and
//! `POST /api/v1/analyze/batch/{id}/cancel`: many posts at once. Each valid URL becomes an analyze
//! job as `POST /analyze` would start it, when the account has a free slot; the answer lists each
//! URL with its job or why it was refused.

use super::analyze::idempotency_key;
use super::views;
use crate::error::HttpResult;
use crate::input::{self, read_body};
use crate::metering::{Meter, authorized};
use crate::{AppState, backend_errors, lookup};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_auth::Scope;
use cova_domain::limits::MAX_BATCH_URLS;
use cova_domain::time::rfc3339;
use cova_errors::ApiError;
use cova_platforms::parse_url;
use cova_storage::repo::batches::{self, Batch, Created, NewBatch, NewItem};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    urls: Vec<String>,
}

/// The URLs of a batch request, trimmed; refused as a whole only when the list itself is wrong.
fn urls_of(body: &BatchBody) -> Result<Vec<String>, ApiError> {
    if body.urls.is_empty() || body.urls.len() > MAX_BATCH_URLS {
        return Err(ApiError::validation(format!("`urls` must hold 1 to {MAX_BATCH_URLS} post URLs.")));
    }
    Ok(body.urls.iter().map(|u| u.trim().to_owned()).collect())
}

/// SHA-256 of the URL list: the same `Idempotency-Key` with another list is a conflict.
fn digest(urls: &[String]) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for url in urls {
        context.update(url.as_bytes());
        context.update(b"\n");
    }
    hex::encode(context.finish().as_ref())
}

pub async fn create(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let (principal, mut meter, (urls, key)) = authorized(&req, &state, Scope::AnalyzeWrite, async |_| {
        let body: BatchBody =
            input::json(&read_body(&state, payload).await?, r#"{"urls": ["<post URL>", "<post URL>"]}"#)?;
        Ok((urls_of(&body)?, idempotency_key(&req)?))
    })
    .await?;
    // Each URL checked like `POST /analyze` checks its one; a bad one is refused alone.
    let mut items = Vec::with_capacity(urls.len());
    for url in &urls {
        let post = match input::text("url", url).and_then(|u| parse_url(u).map_err(|e| e.to_api_error())) {
            Ok(parsed) => lookup::resolve(&state, parsed, &mut meter, None).await.map(|p| p.to_string()),
            Err(e) => Err(e),
        };
        items
            .push(NewItem { url: url.clone(), post: post.map_err(|e| (e.code.as_str().to_owned(), e.detail.clone())) });
    }
    let db = &state.backends.db;
    let new = NewBatch {
        account_id: &principal.account_id,
        token_id: principal.token_id(),
        session_id: principal.session_id(),
        idempotency_key: key.as_deref(),
        request_digest: &digest(&urls),
        items,
    };
    let now = state.now();
    let (id, status) = match batches::create(db, new, now).await.map_err(|e| meter.fail(backend_errors::storage(e)))? {
        Created::New(id) => {
            let trace = cova_telemetry::current_trace_json();
            batches::start_waiting(db, &principal.account_id, &trace, now)
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
    let batch = batches::get(&state.backends.db, account_id, id)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?
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
    url: &'a str,
}

#[derive(Serialize)]
struct ItemError<'a> {
    code: &'a str,
    detail: &'a str,
}
