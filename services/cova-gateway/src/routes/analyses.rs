//! The library: `/api/v1/analyses/…` (scope `library:write`). An account's analysis of a post
//! is bookmarked, listed, opened with its breakdown, watched, refreshed, exported and removed
//! here; `ref` is `<platform>:<post id>`.

use super::analyze::created;
use super::views;
use crate::auth::{Principal, authenticate};
use crate::error::HttpResult;
use crate::input::{self, read_body, url_body};
use crate::lookup;
use crate::metering::{Limit, Meter, authorized, before_limit};
use crate::{AppState, backend_errors};
use actix_web::{HttpRequest, HttpResponse, web};
use base64::Engine as _;
use cova_auth::Scope;
use cova_domain::limits::{
    LIBRARY_PAGE_DEFAULT, LIBRARY_PAGE_MAX, MAX_COMMENTS_PER_POST, WATCH_INTERVAL_DEFAULT_MIN, WATCH_INTERVAL_MIN,
};
use cova_domain::{AnalysisStatus, library};
use cova_errors::ApiError;
use cova_platforms::{Metadata, PostRef, parse_url};
use cova_storage::repo::analyses::{self, Analysis, ListQuery, MetadataEntry};
use cova_storage::repo::breakdown::{From, Query, Sort};
use cova_storage::repo::jobs;
use serde::Deserialize;
use serde_json::{Value, json};

const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;
/// Longest search text.
const MAX_QUERY_LEN: usize = 200;

/// The library's scope, checked by [`authorized`] on every endpoint here.
async fn checked<T>(
    req: &HttpRequest,
    state: &AppState,
    checks: impl AsyncFnOnce(&Principal) -> Result<T, ApiError>,
) -> Result<(Principal, Meter, T), crate::error::HttpError> {
    authorized(req, state, Scope::LibraryWrite, checks).await
}

pub(crate) fn parse_ref(raw: &str) -> Result<PostRef, ApiError> {
    input::text("ref", raw)?;
    raw.parse::<PostRef>().map_err(|e| ApiError::validation(e.detail().to_owned()))
}

fn not_in_library(r#ref: &PostRef) -> ApiError {
    ApiError::not_found(format!("`{ref}` is not in this account's library."))
}

/// The account's library entry of `ref`, or 404.
async fn saved_entry(state: &AppState, meter: &Meter, account_id: &str, r#ref: &PostRef) -> Result<Analysis, ApiError> {
    analyses::get_saved(&state.backends.db, account_id, &r#ref.to_string())
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?
        .ok_or_else(|| meter.fail(not_in_library(r#ref)))
}

fn flag(name: &str, raw: Option<&str>) -> Result<Option<bool>, ApiError> {
    match raw {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(_) => Err(ApiError::validation(format!("`{name}` must be true or false."))),
    }
}

fn search(name: &str, raw: Option<&str>) -> Result<Option<String>, ApiError> {
    let Some(q) = raw.map(str::trim).filter(|q| !q.is_empty()) else { return Ok(None) };
    input::text(name, q)?;
    if q.chars().count() > MAX_QUERY_LEN {
        return Err(ApiError::validation(format!("`{name}` is longer than {MAX_QUERY_LEN} characters.")));
    }
    Ok(Some(cova_platforms::search_text([q])))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    limit: Option<i64>,
    cursor: Option<String>,
    platform: Option<String>,
    status: Option<String>,
    watched: Option<String>,
    q: Option<String>,
}

/// `GET /analyses/saved`: the library, newest first, cursor-paged and filterable.
pub async fn list(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, query) = checked(&req, &state, async |_| {
        let p = web::Query::<ListParams>::from_query(req.query_string()).map_err(backend_errors::query)?.into_inner();
        let limit = p.limit.unwrap_or(LIBRARY_PAGE_DEFAULT);
        if !(1..=LIBRARY_PAGE_MAX).contains(&limit) {
            return Err(ApiError::validation(format!("`limit` must be between 1 and {LIBRARY_PAGE_MAX}.")));
        }
        let platform = match p.platform.as_deref() {
            None => None,
            Some(name) => match cova_platforms::Platform::ALL.into_iter().find(|p| p.as_str() == name) {
                Some(p) => Some(p.as_str().to_owned()),
                None => return Err(ApiError::validation("`platform` must be tiktok, youtube or instagram.")),
            },
        };
        let status = match p.status.as_deref() {
            None => None,
            Some(s) => Some(
                AnalysisStatus::parse(s)
                    .ok_or_else(|| ApiError::validation("`status` must be ready, expired or metadata_only."))?,
            ),
        };
        let before = match &p.cursor {
            None => None,
            Some(c) => {
                Some(decode_cursor(c).ok_or_else(|| ApiError::validation("`cursor` is not one this API returned."))?)
            }
        };
        Ok(ListQuery {
            platform,
            status,
            watched: flag("watched", p.watched.as_deref())?,
            text: search("q", p.q.as_deref())?,
            before,
            limit,
        })
    })
    .await?;
    let entries = analyses::list(&state.backends.db, &principal.account_id, &query)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let next_cursor = (entries.len() as i64 == query.limit)
        .then(|| entries.last().and_then(|a| a.saved_at.map(|at| encode_cursor(at, &a.r#ref))))
        .flatten();
    let items: Vec<Value> = entries.iter().map(views::analysis).collect();
    Ok(meter.json(HttpResponse::Ok(), &json!({"items": items, "next_cursor": next_cursor})))
}

fn encode_cursor(saved_at: i64, r#ref: &str) -> String {
    BASE64.encode(format!("{saved_at}|{ref}"))
}

fn decode_cursor(cursor: &str) -> Option<(i64, String)> {
    let raw = String::from_utf8(BASE64.decode(cursor).ok()?).ok()?;
    let (at, r#ref) = raw.split_once('|')?;
    Some((at.parse().ok()?, r#ref.to_owned()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryParams {
    limit: Option<i64>,
    cursor: Option<String>,
    sort: Option<String>,
    q: Option<String>,
    new: Option<String>,
}

/// `GET /analyses/{ref}`: the entry and its breakdown.
pub async fn get(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let (principal, meter, (r#ref, params)) = checked(&req, &state, async |_| {
        let r#ref = parse_ref(&path)?;
        let p = web::Query::<EntryParams>::from_query(req.query_string()).map_err(backend_errors::query)?.into_inner();
        let limit = p.limit.unwrap_or(MAX_COMMENTS_PER_POST);
        if !(1..=MAX_COMMENTS_PER_POST).contains(&limit) {
            return Err(ApiError::validation(format!("`limit` must be between 1 and {MAX_COMMENTS_PER_POST}.")));
        }
        let sort = match p.sort.as_deref() {
            None | Some("platform") => Sort::Platform,
            Some("likes") => Sort::Likes,
            Some("newest") => Sort::Newest,
            Some(_) => return Err(ApiError::validation("`sort` must be platform, likes or newest.")),
        };
        let offset = match &p.cursor {
            None => 0,
            Some(c) => c
                .strip_prefix('o')
                .and_then(|n| n.parse::<i64>().ok())
                .filter(|n| *n >= 0)
                .ok_or_else(|| ApiError::validation("`cursor` is not one this API returned."))?,
        };
        let query = Query {
            sort,
            text: search("q", p.q.as_deref())?,
            seen_since: None,
            from: Some(From::Offset(offset)),
            limit,
        };
        Ok((r#ref, (query, flag("new", p.new.as_deref())?.unwrap_or(false))))
    })
    .await?;
    let (mut query, only_new) = params;
    let entry = saved_entry(&state, &meter, &principal.account_id, &r#ref).await?;
    if only_new {
        query.seen_since = entry.last_scraped_at;
    }
    let offset = match query.from {
        Some(From::Offset(n)) => n,
        _ => 0,
    };
    let limit = query.limit;
    let mut body = views::analysis(&entry);
    if let Some(obj) = body.as_object_mut() {
        let ready = entry.status == AnalysisStatus::Ready;
        obj.insert(
            "counts".into(),
            json!({
                "comments": if ready { entry.comment_count } else { 0 },
                "top_level": if ready { entry.top_level_count } else { 0 },
                "replies": if ready { entry.comment_count - entry.top_level_count } else { 0 },
                "new": if ready { entry.new_count } else { 0 },
            }),
        );
    }
    // The entry's members, then its comments streamed from their stored bodies.
    let mut builder = HttpResponse::Ok();
    meter.apply(&mut builder);
    let prefix = format!("{},\"comments\":[", super::stream::open_object(&body));
    let suffix = move |written: super::stream::Written| {
        let next = (written.top_level == limit).then(|| format!("o{}", offset + limit));
        format!("],\"next_cursor\":{}}}", json!(next))
    };
    super::stream::respond(
        state.backends.db.clone(),
        entry.breakdown_job().map(str::to_owned),
        query,
        prefix,
        suffix,
        builder,
    )
    .await
    .map_err(|e| meter.fail(backend_errors::storage(e)).into())
}

/// `POST /analyses/{ref}/save`: bookmarks the account's analysis of `ref`; saving twice is fine.
pub async fn save(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let (principal, meter, r#ref) = checked(&req, &state, async |_| parse_ref(&path)).await?;
    let db = &state.backends.db;
    let entering = analyses::get_saved(db, &principal.account_id, &r#ref.to_string())
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?
        .is_none();
    let saved = analyses::save(&state.backends.db, &principal.account_id, &r#ref.to_string(), state.now())
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?
        .ok_or_else(|| meter.fail(ApiError::not_found(format!("This account has no analysis of `{ref}`."))))?;
    // A post entering the library has its comments matched against the keywords once (a
    // comment already alerted for a keyword stays quiet); saving an entry already in the
    // library changes nothing, alerts included. The save stands if matching fails: the failure
    // is logged, and later collections match their new comments as usual.
    let all = cova_runtime::keyword_alerts::Comments::All;
    let raised = if entering {
        cova_runtime::keyword_alerts::raise(db, &principal.account_id, &saved.r#ref, all, state.now()).await
    } else {
        Ok(0)
    };
    match raised {
        Ok(0) => {}
        Ok(_) => state.outbox.notify_one(),
        Err(e) => tracing::warn!(error = %e, r#ref = %saved.r#ref, "keyword matching of a saved post failed"),
    }
    Ok(meter.json(HttpResponse::Ok(), &views::analysis(&saved)))
}

/// `DELETE /analyses/{ref}`: removes the entry, stops its watch and deletes its breakdown.
pub async fn delete(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let (principal, meter, r#ref) = checked(&req, &state, async |_| parse_ref(&path)).await?;
    let removed = analyses::remove(&state.backends.db, &principal.account_id, &r#ref.to_string())
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    if !removed {
        return Err(meter.fail(not_in_library(&r#ref)).into());
    }
    Ok(meter.empty(HttpResponse::NoContent()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WatchBody {
    enabled: bool,
    #[serde(default, deserialize_with = "input::optional_integer")]
    interval_min: Option<i64>,
}

/// `PUT /analyses/{ref}/watch {enabled, interval_min}`: re-scrape the entry at an interval.
pub async fn watch(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResult {
    let (principal, meter, (r#ref, body)) = checked(&req, &state, async |_| {
        let r#ref = parse_ref(&path)?;
        let body: WatchBody =
            input::json(&read_body(&state, payload).await?, r#"{"enabled": true, "interval_min": 360}"#)?;
        if let Some(i) = body.interval_min
            && !WATCH_INTERVAL_MIN.contains(&i)
        {
            return Err(ApiError::validation(format!(
                "`interval_min` must be between {} and {} minutes.",
                WATCH_INTERVAL_MIN.start(),
                WATCH_INTERVAL_MIN.end()
            )));
        }
        Ok((r#ref, body))
    })
    .await?;
    let entry = saved_entry(&state, &meter, &principal.account_id, &r#ref).await?;
    let now = state.now();
    if body.enabled {
        meter.require_pack(&state, &principal.account_id, "Watching needs a comment pack this month.").await?;
    }
    let interval =
        body.interval_min.unwrap_or(if entry.watch.enabled || entry.watch.interval_min != WATCH_INTERVAL_DEFAULT_MIN {
            entry.watch.interval_min
        } else {
            WATCH_INTERVAL_DEFAULT_MIN
        });
    let next_run = body.enabled.then(|| library::next_run_at(now, interval, rand::random::<f64>()));
    let updated = analyses::set_watch(
        &state.backends.db,
        &principal.account_id,
        &r#ref.to_string(),
        body.enabled,
        interval,
        next_run,
    )
    .await
    .map_err(|e| meter.fail(backend_errors::storage(e)))?
    .ok_or_else(|| meter.fail(not_in_library(&r#ref)))?;
    Ok(meter.json(HttpResponse::Ok(), &views::watch(&updated)))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RefreshBody {
    /// Absent: the cap of the last scrape; `null`: none; a number: this one.
    #[serde(default, deserialize_with = "input::present")]
    max_comments: Option<Option<input::Integer>>,
}

/// `POST /analyses/{ref}/refresh`: a full re-scrape now, as a job like `POST /analyze`; only
/// comments new to the analysis are charged. It takes the cap of the last scrape unless the
/// body names another (`{"max_comments": 500}`, or `null` for none).
pub async fn refresh(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResult {
    let (principal, meter, (r#ref, key, cap)) = checked(&req, &state, async |_| {
        let r#ref = parse_ref(&path)?;
        let key = super::analyze::idempotency_key(&req)?;
        let body = read_body(&state, payload).await?;
        let body: RefreshBody = if body.iter().all(u8::is_ascii_whitespace) {
            RefreshBody::default()
        } else {
            input::json(&body, r#"{"max_comments": 500}"#)?
        };
        let cap = match body.max_comments {
            None => jobs::Cap::Kept,
            Some(cap) => jobs::Cap::Set(input::max_comments(cap)?),
        };
        Ok((r#ref, key, cap))
    })
    .await?;
    let entry = saved_entry(&state, &meter, &principal.account_id, &r#ref).await?;
    let trace = cova_telemetry::current_trace_json();
    let outcome = jobs::create_analyze(
        &state.backends.db,
        jobs::NewAnalyze {
            account_id: &principal.account_id,
            token_id: principal.token_id(),
            session_id: principal.session_id(),
            r#ref: &entry.r#ref,
            url: &entry.url,
            idempotency_key: key.as_deref(),
            known_comments: None,
            refresh: true,
            batch_id: None,
            max_comments: cap,
        },
        &trace,
        state.now(),
    )
    .await
    .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    created(&state, &principal, meter, outcome).await
}

/// `GET /analyses/session`: the most recent analysis started by this browser session (or
/// this token).
pub async fn session(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, ()) = checked(&req, &state, async |_| Ok(())).await?;
    let db = &state.backends.db;
    let none = || ApiError::not_found("No analysis was started with this credential yet.");
    let job = jobs::latest_started_by(db, &principal.account_id, principal.started_by())
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?
        .ok_or_else(|| meter.fail(none()))?;
    let entry = analyses::get(db, &principal.account_id, &job.r#ref)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let mut body = entry.as_ref().map_or_else(|| json!({"ref": job.r#ref, "url": job.url}), views::analysis);
    if let Some(obj) = body.as_object_mut() {
        obj.insert("job".into(), json!(views::job(&job, None)));
    }
    Ok(meter.json(HttpResponse::Ok(), &body))
}

/// `POST /analyses/save-metadata {url}`: looks the post up exactly like `POST /metadata`
/// (same limit, cache, free failures) and saves an entry with its metadata only.
pub async fn save_metadata(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let principal = authenticate(&req, &state).await?;
    let limit = Limit::metadata(&principal.account_id);
    let parsed = before_limit(&state, &principal, &limit, async {
        principal.require(Scope::LibraryWrite)?;
        let url = url_body(&read_body(&state, payload).await?)?;
        parse_url(&url).map_err(|e| e.to_api_error())
    })
    .await?;
    let mut meter = Meter::default();
    meter.balance(&state, &principal).await?;
    let post = lookup::resolve(&state, parsed, &mut meter, Some(&limit), &principal.account_id).await?;
    let member = uuid::Uuid::new_v4().to_string();
    let mut body = lookup::metadata(&state, &post, &mut meter, (&limit, &member), &principal.account_id).await?;
    let cached = body.as_object_mut().and_then(|o| o.remove("cached")).unwrap_or(Value::Bool(false));
    let metadata: Metadata = serde_json::from_value(body.clone()).map_err(|_| meter.fail(ApiError::internal()))?;
    let entry = analyses::save_metadata(
        &state.backends.db,
        MetadataEntry {
            account_id: &principal.account_id,
            r#ref: &post.to_string(),
            url: &metadata.url,
            platform: post.platform.as_str(),
            metadata: &body.to_string(),
            search: &metadata.search_text(),
        },
        state.now(),
    )
    .await
    .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let mut out = views::analysis(&entry);
    if let Some(obj) = out.as_object_mut() {
        obj.insert("cached".into(), cached);
    }
    Ok(meter.json(HttpResponse::Ok(), &out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip() {
        let c = encode_cursor(1_700_000_000_123, "tiktok:7000000000000000012");
        assert_eq!(decode_cursor(&c), Some((1_700_000_000_123, "tiktok:7000000000000000012".to_owned())));
        assert_eq!(decode_cursor("not-a-cursor"), None);
    }
}
