//! `GET /api/v1/analyze` and `GET /api/v1/ai/jobs`: the history of the account's jobs, newest
//! first, paged with a cursor; each job links its result while the result lives.

use super::views;
use crate::error::HttpResult;
use crate::metering::authorized;
use crate::{AppState, backend_errors};
use actix_web::{HttpRequest, HttpResponse, web};
use cova_auth::Scope;
use cova_domain::time::parse_rfc3339;
use cova_domain::{JobKind, JobStatus};
use cova_errors::ApiError;
use cova_storage::repo::jobs::{self, Job, JobFilter};
use cova_storage::repo::{ai, analyses};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Jobs in one page, by default and at most.
const PAGE: i64 = 50;
const MAX_PAGE: i64 = 500;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryQuery {
    limit: Option<i64>,
    cursor: Option<String>,
    status: Option<String>,
    r#ref: Option<String>,
    created_after: Option<String>,
    created_before: Option<String>,
    batch: Option<String>,
}

/// The checked query: filters, the page's start and its size.
struct Checked {
    status: Option<JobStatus>,
    r#ref: Option<String>,
    created_after: Option<i64>,
    created_before: Option<i64>,
    batch: Option<String>,
    before: Option<(i64, String)>,
    limit: i64,
}

fn check(req: &HttpRequest, kind: JobKind) -> Result<Checked, ApiError> {
    let q = web::Query::<HistoryQuery>::from_query(req.query_string()).map_err(backend_errors::query)?.into_inner();
    let limit = q.limit.unwrap_or(PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::validation(format!("`limit` must be between 1 and {MAX_PAGE}.")));
    }
    let time = |field: &str, v: Option<String>| -> Result<Option<i64>, ApiError> {
        v.map(|t| {
            parse_rfc3339(&t).ok_or_else(|| {
                ApiError::validation(format!("`{field}` must be an RFC 3339 time such as 2026-11-01T00:00:00Z."))
            })
        })
        .transpose()
    };
    let status = q
        .status
        .map(|s| {
            JobStatus::parse(&s)
                .ok_or_else(|| ApiError::validation("`status` must be one of queued, in_progress, complete, failed."))
        })
        .transpose()?;
    if kind == JobKind::Ai && q.batch.is_some() {
        return Err(ApiError::validation("`batch` filters analyze jobs only."));
    }
    // A filter that can name nothing is a mistake of the caller, not an empty page.
    if let Some(r#ref) = &q.r#ref {
        crate::input::text("ref", r#ref)?;
        r#ref.parse::<cova_platforms::PostRef>().map_err(|e| {
            ApiError::validation(format!(
                "`ref` must be a post's ref such as tiktok:7000000000000000012: {}",
                e.detail()
            ))
        })?;
    }
    if let Some(batch) = &q.batch
        && uuid::Uuid::parse_str(batch).is_err()
    {
        return Err(ApiError::validation("`batch` must be the `batch_id` of a batch."));
    }
    let before = q
        .cursor
        .map(|c| {
            c.split_once('.')
                .and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id.to_owned())))
                .filter(|(_, id)| uuid::Uuid::parse_str(id).is_ok())
                .ok_or_else(|| ApiError::validation("`cursor` is not one this API returned."))
        })
        .transpose()?;
    Ok(Checked {
        status,
        r#ref: q.r#ref,
        created_after: time("created_after", q.created_after)?,
        created_before: time("created_before", q.created_before)?,
        batch: q.batch,
        before,
        limit,
    })
}

pub async fn analyze_jobs(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    list(req, state, JobKind::Analyze, Scope::AnalyzeWrite).await
}

pub async fn ai_jobs(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    list(req, state, JobKind::Ai, Scope::AiWrite).await
}

async fn list(req: HttpRequest, state: web::Data<AppState>, kind: JobKind, scope: Scope) -> HttpResult {
    let (principal, meter, query) = authorized(&req, &state, scope, async |_| check(&req, kind)).await?;
    let filter = JobFilter {
        status: query.status,
        r#ref: query.r#ref.as_deref(),
        created_after: query.created_after,
        created_before: query.created_before,
        batch_id: query.batch.as_deref(),
    };
    // One more than asked: whether there is a next page.
    let mut found = jobs::list(&state.backends.db, &principal.account_id, kind, &filter, query.before, query.limit + 1)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let more = found.len() as i64 > query.limit;
    found.truncate(usize::try_from(query.limit).unwrap_or(0));
    let next_cursor = found.last().filter(|_| more).map(|(j, _)| format!("{}.{}", j.created_at, j.id));
    let items: Vec<Value> = match kind {
        JobKind::Analyze => {
            let mut refs: Vec<&str> = found.iter().map(|(j, _)| j.r#ref.as_str()).collect();
            refs.sort_unstable();
            refs.dedup();
            let posts = analyses::metadata_of(&state.backends.db, &principal.account_id, &refs)
                .await
                .map_err(|e| meter.fail(backend_errors::storage(e)))?;
            found
                .iter()
                .map(|(job, current)| {
                    let metadata = posts.iter().find(|(r, _)| *r == job.r#ref).map(|(_, m)| m.as_str());
                    analyze_item(job, *current, metadata)
                })
                .collect()
        }
        JobKind::Ai => {
            let ids: Vec<&str> = found.iter().map(|(j, _)| j.id.as_str()).collect();
            let heads =
                ai::heads(&state.backends.db, &ids).await.map_err(|e| meter.fail(backend_errors::storage(e)))?;
            found
                .iter()
                .map(|(job, current)| {
                    let head = heads.iter().find(|h| h.job_id == job.id);
                    let mut v = views::ai_job(job, head, None);
                    if let Some(obj) = v.as_object_mut() {
                        obj.remove("result");
                        obj.insert(
                            "links".into(),
                            json!(current.then(|| json!({"result": format!("/api/v1/ai/jobs/{}", job.id)}))),
                        );
                    }
                    v
                })
                .collect()
        }
    };
    Ok(meter.json(HttpResponse::Ok(), &Page { items, next_cursor }))
}

/// The post a job collected, as a list names it: its title and author, from the account's
/// analysis of the post; `null` before the post was first read.
fn post_of(metadata: Option<&str>) -> Value {
    let Some(m) = metadata.and_then(|m| serde_json::from_str::<Value>(m).ok()) else { return Value::Null };
    json!({
        "title": cova_domain::export::post_title(&m),
        "author": {"handle": m["author"]["handle"], "name": m["author"]["name"]},
    })
}

/// An analyze job of the history, with its post and the links to its result while it lives.
fn analyze_item(job: &Job, current: bool, metadata: Option<&str>) -> Value {
    let links = current.then(|| Links {
        result: format!("/api/v1/analyze/{}", job.id),
        export: format!("/api/v1/analyze/{}/export?format=csv", job.id),
    });
    json!(Item {
        batch_id: job.batch_id.as_deref(),
        comments_new: job.comments_new,
        comments_off: job.comments_off,
        job: views::job(job, None),
        links,
        post: post_of(metadata),
        truncated: job.truncated,
        truncated_reason: job.truncated_reason.as_deref(),
    })
}

#[derive(Serialize)]
struct Page {
    items: Vec<Value>,
    next_cursor: Option<String>,
}

#[derive(Serialize)]
struct Item<'a> {
    batch_id: Option<&'a str>,
    comments_new: Option<i64>,
    /// The post's author turned its comments off.
    comments_off: bool,
    #[serde(flatten)]
    job: views::JobView<'a>,
    /// While the result lives (14 days after its scrape, or until a newer scrape replaces it).
    links: Option<Links>,
    post: Value,
    truncated: bool,
    truncated_reason: Option<&'a str>,
}

#[derive(Serialize)]
struct Links {
    result: String,
    export: String,
}
