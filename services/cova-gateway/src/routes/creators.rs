//! Creators: `/api/v1/creators/…` (scope `library:write`). A TikTok account or YouTube channel
//! is added by URL and followed: its new posts are found by listing it on an interval (or now,
//! by a refresh), kept in the library and collected like a batch's URLs. `ref` is
//! `tiktok:user:<id>`, `youtube:channel:<UC…>` or `instagram:user:<id>`.

use crate::auth::Principal;
use crate::error::HttpResult;
use crate::input::{self, read_body};
use crate::metering::{Meter, authorized};
use crate::{AppState, backend_errors};
use actix_web::{HttpRequest, HttpResponse, web};
use base64::Engine as _;
use cova_auth::Scope;
use cova_domain::library;
use cova_domain::limits::{
    CREATOR_BACKFILL_DAYS, CREATOR_FOLLOW_DAYS, CREATOR_INTERVAL_MIN, LIBRARY_PAGE_DEFAULT, LIBRARY_PAGE_MAX,
};
use cova_domain::time::{DAY_MS, rfc3339};
use cova_errors::{ApiError, ErrorCode};
use cova_storage::repo::creators::{self, Added, CreatorPost, CreatorRow, Following};
use serde::Deserialize;
use serde_json::{Value, json};

const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

async fn checked<T>(
    req: &HttpRequest,
    state: &AppState,
    checks: impl AsyncFnOnce(&Principal) -> Result<T, ApiError>,
) -> Result<(Principal, Meter, T), crate::error::HttpError> {
    authorized(req, state, Scope::LibraryWrite, checks).await
}

/// A creator ref as the API takes it: `tiktok:user:<digits>`, `youtube:channel:UC…` or
/// `instagram:user:<digits>`.
pub(crate) fn parse_ref(raw: &str) -> Result<String, ApiError> {
    input::text("ref", raw)?;
    let valid = match raw.split_once(':') {
        Some(("tiktok" | "instagram", rest)) => rest
            .strip_prefix("user:")
            .is_some_and(|id| !id.is_empty() && id.len() <= 24 && id.bytes().all(|b| b.is_ascii_digit())),
        Some(("youtube", rest)) => rest.strip_prefix("channel:").is_some_and(|id| {
            id.len() == 24
                && id.starts_with("UC")
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        }),
        _ => false,
    };
    if !valid {
        return Err(ApiError::validation(
            "`ref` must be a creator ref such as tiktok:user:<id>, youtube:channel:UC… or instagram:user:<id>, as POST /api/v1/creators answers it.",
        ));
    }
    Ok(raw.to_owned())
}

fn no_such_creator(r#ref: &str) -> ApiError {
    ApiError::not_found(format!("This account does not follow `{ref}`."))
}

async fn creator(state: &AppState, meter: &Meter, account_id: &str, r#ref: &str) -> Result<CreatorRow, ApiError> {
    creators::get(&state.backends.db, account_id, r#ref)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?
        .ok_or_else(|| meter.fail(no_such_creator(r#ref)))
}

/// The creator as the API shows it; its avatar is cova's copy (downloaded in the background).
async fn view(state: &AppState, row: &CreatorRow) -> Value {
    let profile: Value = serde_json::from_str(&row.profile).unwrap_or_default();
    let avatar = match profile["avatar_url"].as_str() {
        Some(source) => {
            let mut shown = json!({"author": {"avatar_url": source}});
            let db = &state.backends.db;
            match cova_media::catalog::attach_metadata(db, &row.account_id, &row.r#ref, &mut shown, state.now()).await {
                Ok(pending) => {
                    if !pending.is_empty() {
                        state.backends.media.prefetcher(state.config.media.fetch_concurrency).push(pending);
                    }
                    shown["media"][0]["url"].as_str().map(str::to_owned)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "listing a creator's avatar failed; the answer goes without it");
                    None
                }
            }
        }
        None => None,
    };
    let url = cova_creators::profile(row).map(|c| c.url());
    json!({
        "ref": row.r#ref,
        "platform": row.platform,
        "url": url,
        "handle": profile["handle"],
        "name": profile["name"],
        "avatar_url": avatar,
        "followers": profile["followers"],
        "posts": profile["posts"],
        "verified": profile["verified"],
        "added_at": rfc3339(row.created_at),
        "watch": watch(row),
    })
}

fn watch(row: &CreatorRow) -> Value {
    json!({
        "enabled": row.watch_enabled,
        "interval_min": row.watch_interval_min,
        "collect": row.collect_comments,
        "follow_days": row.follow_days,
        "backfill_days": (row.created_at - row.since_at).max(0) / DAY_MS,
        "next_run_at": row.next_run_at.filter(|_| row.watch_enabled).map(rfc3339),
        "last_run_at": row.last_run_at.map(rfc3339),
        "last_error": row.last_error,
    })
}

fn post(p: &CreatorPost) -> Value {
    json!({
        "ref": p.post_ref,
        "url": p.url,
        "title": p.title,
        "published_at": rfc3339(p.published_at),
        "pinned": p.pinned,
        "found_at": rfc3339(p.found_at),
        "batch_id": p.batch_id,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddBody {
    url: String,
}

/// `POST /creators {url}`: reads the profile and adds the creator (201), or answers the one
/// already added (200), found by its platform id whatever handle the URL names.
pub async fn add(req: HttpRequest, state: web::Data<AppState>, payload: web::Payload) -> HttpResult {
    let (principal, meter, url) = checked(&req, &state, async |_| {
        let body: AddBody = input::json(&read_body(&state, payload).await?, r#"{"url": "<creator URL>"}"#)?;
        let url = input::text("url", body.url.trim())?.to_owned();
        if url.is_empty() {
            return Err(ApiError::validation("`url` must not be empty."));
        }
        // Not a creator URL: refused before any request is spent on it.
        cova_platforms::parse_creator_url(&url).map_err(|e| e.to_api_error())?;
        Ok(url)
    })
    .await?;
    let limit = state.config.limits.creators_per_account;
    let added =
        cova_creators::add(&state.backends.db, &state.platforms, &principal.account_id, &url, limit, state.now())
            .await
            .map_err(|e| {
                meter.fail(match e {
                    cova_creators::CreatorError::Platform(e) => e.to_api_error(),
                    cova_creators::CreatorError::Storage(e) => backend_errors::storage(e),
                })
            })?;
    let (row, status) = match added {
        Added::New(row) => (row, HttpResponse::Created()),
        Added::Existing(row) => (row, HttpResponse::Ok()),
        Added::LimitReached => {
            return Err(meter
                .fail(ApiError::new(
                    ErrorCode::CreatorLimit,
                    format!("This account already follows {limit} creators, its maximum; remove one first."),
                ))
                .into());
        }
    };
    Ok(meter.json(status, &view(&state, &row).await))
}

/// `GET /creators`: the account's creators, the most recently added first.
pub async fn list(req: HttpRequest, state: web::Data<AppState>) -> HttpResult {
    let (principal, meter, ()) = checked(&req, &state, async |_| Ok(())).await?;
    let rows = creators::list(&state.backends.db, &principal.account_id)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let mut items = Vec::with_capacity(rows.len());
    for row in &rows {
        items.push(view(&state, row).await);
    }
    Ok(meter.json(HttpResponse::Ok(), &json!({"items": items})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PostsParams {
    limit: Option<i64>,
    cursor: Option<String>,
}

fn encode_cursor(p: &CreatorPost) -> String {
    BASE64.encode(format!("{}|{}", p.published_at, p.post_ref))
}

fn decode_cursor(raw: &str) -> Option<(i64, String)> {
    let text = String::from_utf8(BASE64.decode(raw).ok()?).ok()?;
    let (at, r#ref) = text.split_once('|')?;
    Some((at.parse().ok()?, r#ref.to_owned()))
}

/// `GET /creators/{ref}`: the creator with the posts found so far, newest first, cursor-paged.
pub async fn get(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let (principal, meter, (r#ref, limit, after)) = checked(&req, &state, async |_| {
        let r#ref = parse_ref(&path)?;
        let p = web::Query::<PostsParams>::from_query(req.query_string()).map_err(backend_errors::query)?.into_inner();
        let limit = p.limit.unwrap_or(LIBRARY_PAGE_DEFAULT);
        if !(1..=LIBRARY_PAGE_MAX).contains(&limit) {
            return Err(ApiError::validation(format!("`limit` must be between 1 and {LIBRARY_PAGE_MAX}.")));
        }
        let after = match &p.cursor {
            None => None,
            Some(c) => {
                Some(decode_cursor(c).ok_or_else(|| ApiError::validation("`cursor` is not one this API returned."))?)
            }
        };
        Ok((r#ref, limit, after))
    })
    .await?;
    let row = creator(&state, &meter, &principal.account_id, &r#ref).await?;
    let page = creators::posts(&state.backends.db, &principal.account_id, &r#ref, after, limit + 1)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    let more = page.len() as i64 > limit;
    let shown = &page[..page.len().min(limit as usize)];
    let mut body = view(&state, &row).await;
    body["found"] = json!({
        "items": shown.iter().map(post).collect::<Vec<_>>(),
        "next_cursor": if more { shown.last().map(encode_cursor) } else { None },
    });
    Ok(meter.json(HttpResponse::Ok(), &body))
}

/// `DELETE /creators/{ref}`: stops following; the posts it found stay in the library.
pub async fn remove(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let (principal, meter, r#ref) = checked(&req, &state, async |_| parse_ref(&path)).await?;
    let removed = creators::remove(&state.backends.db, &principal.account_id, &r#ref)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    if !removed {
        return Err(meter.fail(no_such_creator(&r#ref)).into());
    }
    Ok(meter.empty(HttpResponse::NoContent()))
}

/// `POST /creators/{ref}/refresh`: lists the creator now, a run of its own; answers what it
/// found and the batch collecting it.
pub async fn refresh(req: HttpRequest, state: web::Data<AppState>, path: web::Path<String>) -> HttpResult {
    let (principal, meter, r#ref) = checked(&req, &state, async |_| parse_ref(&path)).await?;
    let db = &state.backends.db;
    let now = state.now();
    let claimed = match creators::claim_now(db, &principal.account_id, &r#ref, now).await {
        Ok(Some(row)) => row,
        Ok(None) => return Err(meter.fail(ApiError::of(ErrorCode::RunInProgress)).into()),
        Err(cova_storage::StorageError::NotFound) => return Err(meter.fail(no_such_creator(&r#ref)).into()),
        Err(e) => return Err(meter.fail(backend_errors::storage(e)).into()),
    };
    let trace = cova_telemetry::current_trace_json();
    let run = cova_creators::run(db, &state.platforms, &claimed, cova_creators::Occasion::Asked, &trace, now)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?;
    if let Some(e) = run.error {
        return Err(meter.fail(e.to_api_error()).into());
    }
    let started = run.started;
    if !run.found.is_empty() {
        state.outbox.notify_one();
    }
    let body = json!({"ref": r#ref, "found": run.found, "batch_id": run.batch_id, "started": started});
    Ok(meter.json(HttpResponse::Ok(), &body))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WatchBody {
    enabled: bool,
    #[serde(default, deserialize_with = "input::optional_integer")]
    interval_min: Option<i64>,
    collect: Option<bool>,
    #[serde(default, deserialize_with = "input::optional_integer")]
    follow_days: Option<i64>,
    #[serde(default, deserialize_with = "input::optional_integer")]
    backfill_days: Option<i64>,
}

fn within(name: &str, value: Option<i64>, range: &std::ops::RangeInclusive<i64>, unit: &str) -> Result<(), ApiError> {
    match value {
        Some(v) if !range.contains(&v) => {
            Err(ApiError::validation(format!("`{name}` must be between {} and {} {unit}.", range.start(), range.end())))
        }
        _ => Ok(()),
    }
}

/// `PUT /creators/{ref}/watch`: follow the creator (list it every `interval_min`), collect its
/// new posts, watch each for `follow_days`; needs a comment pack this month to turn on.
pub async fn set_watch(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResult {
    let shape = r#"{"enabled": true, "interval_min": 360, "collect": true, "follow_days": 3, "backfill_days": 0}"#;
    let (principal, meter, (r#ref, body)) = checked(&req, &state, async |_| {
        let r#ref = parse_ref(&path)?;
        let body: WatchBody = input::json(&read_body(&state, payload).await?, shape)?;
        within("interval_min", body.interval_min, &CREATOR_INTERVAL_MIN, "minutes")?;
        within("follow_days", body.follow_days, &CREATOR_FOLLOW_DAYS, "days")?;
        within("backfill_days", body.backfill_days, &CREATOR_BACKFILL_DAYS, "days")?;
        Ok((r#ref, body))
    })
    .await?;
    let row = creator(&state, &meter, &principal.account_id, &r#ref).await?;
    let now = state.now();
    if body.enabled {
        meter
            .require_pack(&state, &principal.account_id, "Following creators needs a comment pack this month.")
            .await?;
    }
    // What the body leaves out keeps its value (at first: every 360 minutes, collect, 3 days).
    let following = Following {
        enabled: body.enabled,
        interval_min: body.interval_min.unwrap_or(i64::from(row.watch_interval_min)),
        collect: body.collect.unwrap_or(row.collect_comments),
        follow_days: body.follow_days.unwrap_or(i64::from(row.follow_days)),
        since_at: body.backfill_days.map_or(row.since_at, |days| row.created_at - days * DAY_MS),
    };
    // The first run comes at once, so a creator just followed shows its new posts soon.
    let next_run = body.enabled.then(|| {
        if row.last_run_at.is_some() {
            library::next_run_at(now, following.interval_min, rand::random::<f64>())
        } else {
            now
        }
    });
    let updated = creators::set_watch(&state.backends.db, &principal.account_id, &r#ref, following, next_run)
        .await
        .map_err(|e| meter.fail(backend_errors::storage(e)))?
        .ok_or_else(|| meter.fail(no_such_creator(&r#ref)))?;
    Ok(meter.json(HttpResponse::Ok(), &watch(&updated)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creator_refs() {
        assert!(parse_ref("tiktok:user:6800000000000000001").is_ok());
        assert!(parse_ref("youtube:channel:UCabcdefghijklmnopqrstuv").is_ok());
        assert!(parse_ref("instagram:user:5512").is_ok());
        for bad in ["tiktok:6800", "tiktok:user:", "tiktok:user:abc", "youtube:channel:UCshort", "youtube:abc", ""] {
            assert!(parse_ref(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cursors_round_trip() {
        let p = CreatorPost {
            post_ref: "tiktok:7".into(),
            url: String::new(),
            title: None,
            published_at: 1_700_000_000_000,
            pinned: false,
            found_at: 0,
            batch_id: None,
        };
        assert_eq!(decode_cursor(&encode_cursor(&p)), Some((1_700_000_000_000, "tiktok:7".into())));
        assert_eq!(decode_cursor("not a cursor"), None);
    }
}
